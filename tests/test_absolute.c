/* The absolute encodings through the posenc interface and the model (double build):
 *  - sinusoidal adds σ·sin/cos(p·base^(−2i/D)) to columns 2i/2i+1, odd widths and large positions
 *    included, σ = --sin-scale (0.02 by default); a run's config.json without sin-scale reads as
 *    σ = 1, what runs recorded before the option were made with, and one with it as recorded;
 *  - learned adds row p of its table `pos_emb.weight` (Tmax, D), no weight decay, init N(0, 0.02);
 *  - a position beyond the table is a usage error naming the position and --ape-extend, in the
 *    encoding and through the model's forward; with --ape-extend interpolate the table is
 *    resampled linearly to the pass's length, checked against values computed here;
 *  - --ape-max-len below the training context is a usage error.
 */
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "pelab/model.h"
#include "pelab/posenc.h"
#include "pelab/status.h"
#include "pelab/train.h"

enum { NMAX = 32 };

struct emb {
    struct pelab_posenc pe;
    struct pelab_params params;
    int n;
    double out[NMAX * 16];
};

static int setup(struct emb *s, const char *pe, int D, int max_seq, const char *k1, const char *v1,
                 const char *k2, const char *v2) {
    memset(s, 0, sizeof *s);
    struct pelab_opts o = {0};
    if (k1) pelab_opts_set(&o, k1, v1);
    if (k2) pelab_opts_set(&o, k2, v2);
    int rc = pelab_posenc_init(&s->pe, pe, &o, &s->params, D, 1, 1, max_seq);
    s->pe.ctx = test_ctx();
    if (rc) {
        pelab_posenc_free(&s->pe);
        pelab_params_free(&s->params);
        return rc;
    }
    PELAB_ASSERT(pelab_params_alloc(&s->params) == PELAB_OK);
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 4);
    if (s->pe.ops->init_params) s->pe.ops->init_params(&s->pe, &rng);
    return PELAB_OK;
}

static void done(struct emb *s) {
    pelab_posenc_free(&s->pe);
    pelab_params_free(&s->params);
}

/* e(pos) for n positions into s->out (n, D); the prepare status. */
static int embed(struct emb *s, const int32_t *pos, int n) {
    PELAB_ASSERT(n <= NMAX);
    memset(s->out, 0, sizeof s->out);
    int rc = pelab_posenc_prepare(&s->pe, pos, 1, n);
    if (!rc) s->pe.ops->embed_forward(&s->pe, s->out, pos, 1, n);
    return rc;
}

/* scale_text NULL: the default σ, 0.02 */
static void check_sinusoidal(int D, const char *base_text, double base, const char *scale_text) {
    static struct emb s;
    PELAB_ASSERT(setup(&s, "sinusoidal", D, 8, base_text ? "sin-base" : NULL, base_text,
                       scale_text ? "sin-scale" : NULL, scale_text) == PELAB_OK);
    CHECK(s.params.count == 0, "sinusoidal has no parameters");
    const double sigma = scale_text ? atof(scale_text) : 0.02;
    const int32_t pos[6] = {0, 1, 7, 100, 5000, 1234567};
    PELAB_ASSERT(embed(&s, pos, 6) == PELAB_OK);
    double worst = 0;
    for (int t = 0; t < 6; t++)
        for (int j = 0; j < D; j++) {
            double a = pos[t] * pow(base, -2.0 * (j / 2) / D);
            worst = fmax(worst, fabs(s.out[t * D + j] - sigma * (j % 2 ? cos(a) : sin(a))));
        }
    CHECK(worst < 1e-12 * sigma, "sinusoidal D=%d base %g σ %g: differs from σ·sin/cos by %.3g", D, base,
          sigma, worst);
    printf("  sinusoidal D=%-3d base %-6g σ %-5g formula agrees to %.3g\n", D, base, sigma, worst);
    done(&s);
}

/* A run's config.json read back: sin-scale as recorded, or 1 when the run predates the option
 * (what it was made with), while the default for a new run is 0.02; no other encoding's
 * settings gain a key. */
static void check_sinusoidal_record(void) {
    static const char *const configs[][2] = {
        {"{\"pelab-version\": \"0.1.0\", \"training\": {\"task\": \"copy\"}, "
         "\"model\": {\"pe\": \"sinusoidal\"}, \"encoding\": {\"sin-base\": 10000}, \"task\": {}}",
         "1"},
        {"{\"pelab-version\": \"0.2.0\", \"training\": {\"task\": \"copy\"}, "
         "\"model\": {\"pe\": \"sinusoidal\"}, \"encoding\": {\"sin-base\": 10000, \"sin-scale\": 0.02}, "
         "\"task\": {}}",
         "0.02"},
        {"{\"pelab-version\": \"0.2.0\", \"training\": {\"task\": \"copy\"}, "
         "\"model\": {\"pe\": \"sinusoidal\"}, \"encoding\": {\"sin-base\": 10000, \"sin-scale\": 0.5}, "
         "\"task\": {}}",
         "0.5"},
        {"{\"pelab-version\": \"0.1.0\", \"training\": {\"task\": \"copy\"}, "
         "\"model\": {\"pe\": \"rope\"}, \"encoding\": {}, \"task\": {}}",
         NULL},
    };
    for (size_t i = 0; i < sizeof configs / sizeof *configs; i++) {
        static struct pelab_opts o;
        int rc = pelab_config_parse("config.json", configs[i][0], strlen(configs[i][0]), &o);
        CHECK(rc == PELAB_OK, "config %zu: %s", i, pelab_last_error());
        const char *got = pelab_opts_get(&o, "sin-scale");
        CHECK(configs[i][1] ? got && strcmp(got, configs[i][1]) == 0 : got == NULL,
              "config %zu: sin-scale read back as %s, want %s", i, got ? got : "(none)",
              configs[i][1] ? configs[i][1] : "(none)");
    }
    const struct pelab_optdef *d = pelab_optdef_find(pelab_posenc_find("sinusoidal")->options, "sin-scale");
    CHECK(d && strcmp(d->def, "0.02") == 0, "a new run's sin-scale defaults to 0.02");
}

static void check_learned_lookup(void) {
    static struct emb s;
    PELAB_ASSERT(setup(&s, "learned", 6, 8, "ape-max-len", "12", NULL, NULL) == PELAB_OK);
    int id = pelab_params_find(&s.params, "pos_emb.weight");
    CHECK(id >= 0 && s.params.list[id].shape[0] == 12 && s.params.list[id].shape[1] == 6,
          "learned declares pos_emb.weight (12, 6)");
    CHECK(id >= 0 && s.params.list[id].decay == 0, "the table has no weight decay");
    const double *P = pelab_params_data(&s.params, id);
    const int32_t pos[5] = {0, 11, 3, 3, 7};
    PELAB_ASSERT(embed(&s, pos, 5) == PELAB_OK);
    int same = 1;
    for (int t = 0; t < 5; t++) same &= memcmp(s.out + t * 6, P + pos[t] * 6, 6 * sizeof *P) == 0;
    CHECK(same, "learned adds row p of its table");
    done(&s);

    /* init N(0, 0.02): the sample standard deviation of a larger table */
    PELAB_ASSERT(setup(&s, "learned", 16, 512, NULL, NULL, NULL, NULL) == PELAB_OK);
    const double *W = pelab_params_data(&s.params, 0);
    double sum = 0, sq = 0;
    for (int i = 0; i < 512 * 16; i++) sum += W[i], sq += W[i] * W[i];
    double mean = sum / (512 * 16), sd = sqrt(sq / (512 * 16) - mean * mean);
    CHECK(fabs(sd - 0.02) < 0.001 && fabs(mean) < 0.001, "init: mean %g, sd %g (want 0, 0.02)", mean, sd);
    done(&s);
}

static void check_learned_beyond(void) {
    static struct emb s;
    PELAB_ASSERT(setup(&s, "learned", 4, 8, NULL, NULL, NULL, NULL) == PELAB_OK);
    const int32_t fits[3] = {0, 7, 2}, beyond[3] = {0, 8, 2}, negative[2] = {3, -1};
    CHECK(embed(&s, fits, 3) == PELAB_OK, "positions 0..7 fit a table of 8");
    int rc = embed(&s, beyond, 3);
    CHECK(rc == PELAB_ERR_USAGE && strstr(pelab_last_error(), "position 8") &&
              strstr(pelab_last_error(), "--ape-extend") && strstr(pelab_last_error(), "--ape-max-len"),
          "beyond the table: usage error naming the position and the options; got %d: %s", rc,
          pelab_last_error());
    CHECK(embed(&s, negative, 2) == PELAB_ERR_USAGE && strstr(pelab_last_error(), "-1"),
          "a negative position is refused: %s", pelab_last_error());
    done(&s);
    CHECK(setup(&s, "learned", 4, 8, "ape-max-len", "5", NULL, NULL) == PELAB_ERR_USAGE &&
              strstr(pelab_last_error(), "--ape-max-len"),
          "--ape-max-len below the training context: %s", pelab_last_error());
}

/* With interpolate, a pass of length L' > Tmax reads the table at x = p·(Tmax−1)/(L'−1). */
static void check_learned_interpolate(void) {
    static struct emb s;
    PELAB_ASSERT(setup(&s, "learned", 3, 8, "ape-extend", "interpolate", NULL, NULL) == PELAB_OK);
    const double *P = pelab_params_data(&s.params, 0);
    int32_t pos[NMAX];
    /* L' = 15: x = p/2, rows for even p, midpoints for odd p */
    for (int p = 0; p < 15; p++) pos[p] = p;
    PELAB_ASSERT(embed(&s, pos, 15) == PELAB_OK);
    double worst = 0;
    for (int p = 0; p < 15; p++)
        for (int j = 0; j < 3; j++) {
            double want = p % 2 ? 0.5 * (P[(p / 2) * 3 + j] + P[(p / 2 + 1) * 3 + j]) : P[(p / 2) * 3 + j];
            worst = fmax(worst, fabs(s.out[p * 3 + j] - want));
        }
    CHECK(worst < 1e-16, "interpolated to 15 positions: off by %.3g", worst);
    /* L' = 20 (positions out of order, one repeated): x = p·7/19 */
    const int32_t some[6] = {19, 0, 5, 5, 13, 1};
    PELAB_ASSERT(embed(&s, some, 6) == PELAB_OK);
    worst = 0;
    for (int t = 0; t < 6; t++) {
        double x = some[t] * 7.0 / 19.0, f = x - floor(x);
        int i = (int)floor(x);
        for (int j = 0; j < 3; j++) {
            double want = i == 7 ? P[7 * 3 + j] : (1 - f) * P[i * 3 + j] + f * P[(i + 1) * 3 + j];
            worst = fmax(worst, fabs(s.out[t * 3 + j] - want));
        }
    }
    CHECK(worst < 1e-16, "interpolated to 20 positions: off by %.3g", worst);
    /* a pass that fits reads the table directly */
    const int32_t fits[3] = {7, 0, 4};
    PELAB_ASSERT(embed(&s, fits, 3) == PELAB_OK);
    CHECK(memcmp(s.out + 3, P, 3 * sizeof *P) == 0 && memcmp(s.out, P + 21, 3 * sizeof *P) == 0,
          "interpolate within the table is a plain lookup");
    done(&s);
}

/* Through the model: the forward refuses, reports, and computes nothing; interpolate works. */
static void check_model(void) {
    enum { B = 2, T = 6, V = 9 };
    const int32_t tokens[B * T] = {1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 2, 3};
    const int32_t pos[B * T] = {0, 1, 2, 3, 4, 5, 3, 4, 5, 6, 7, 8};
    for (int interp = 0; interp < 2; interp++) {
        struct pelab_opts o = {0};
        pelab_opts_set(&o, "pe", "learned");
        pelab_opts_set(&o, "d-model", "8");
        pelab_opts_set(&o, "heads", "2");
        pelab_opts_set(&o, "layers", "1");
        if (interp) pelab_opts_set(&o, "ape-extend", "interpolate");
        struct pelab_model m;
        PELAB_ASSERT(pelab_model_init(&m, &o, V, T) == PELAB_OK);
        pelab_model_init_weights(&m, 1);
        pelab_model_forward(&m, tokens, tokens, pos, B, T);
        double loss = m.loss;
        if (interp)
            CHECK(m.status == PELAB_OK && isfinite(loss), "interpolate: status %d, loss %g", m.status, loss);
        else
            CHECK(m.status == PELAB_ERR_USAGE && isnan(loss) && strstr(pelab_last_error(), "position 8"),
                  "beyond the table through the model: status %d, loss %g, '%s'", m.status, loss,
                  pelab_last_error());
        pelab_model_free(&m);
    }
}

int main(void) {
    check_sinusoidal(16, NULL, 10000, NULL);
    check_sinusoidal(7, NULL, 10000, "1");
    check_sinusoidal(10, "500", 500, "0.3");
    check_sinusoidal_record();
    check_learned_lookup();
    check_learned_beyond();
    check_learned_interpolate();
    check_model();
    return check_report("test_absolute");
}
