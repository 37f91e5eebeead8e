/* The rotary encodings' frequencies and scales, through the posenc interface (double build):
 *  - every RoPE length-extension method is plain RoPE at scale 1 (dynamic NTK: up to L_train),
 *    and a scale given with `none` changes nothing — bit for bit;
 *  - the frequencies θ'_i each method turns with, read back from a unit vector rotated at
 *    position 1, equal values computed by hand: YaRN's blend and attention factor, NTK's base,
 *    dynamic NTK's base beyond L_train, Resonance RoPE's rounding; PI divides positions by s;
 *  - settings that make no sense are usage errors naming the option;
 *  - rope2d's --rope2d-extend interpolate on a grid of 2G is rope2d at half the coordinates;
 *  - xPos's q'(t)·k'(s) equals Σ_c ζ_c^((t−s)/γ_s)·(RoPE's pair score), at large positions too.
 */
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "lib/tmpdir.h"
#include "pelab/posenc.h"
#include "pelab/status.h"

enum { D = 16, H = 2, d = 8, P = d / 2, NT = 6 };
#define TWO_PI 6.283185307179586

struct qk {
    struct pelab_posenc pe;
    struct pelab_params params;
    double q[NT * D], k[NT * D];   /* (1,T,H,d) */
    double qo[H * NT * d], ko[H * NT * d]; /* (1,H,T,d) */
};

/* The encoding `pe` with options kv (NULL-terminated pairs), training context max_seq and
 * positions of `layout` (NULL: 1-D, causal); random q and k. Returns the init status (the struct is
 * freed on failure). */
static int setup_nd(struct qk *s, const char *pe, const char *const *kv, int max_seq,
                    const struct pelab_pe_layout *layout) {
    memset(s, 0, sizeof *s);
    struct pelab_opts o = {0};
    for (; kv && kv[0]; kv += 2) pelab_opts_set(&o, kv[0], kv[1]);
    int rc = pelab_posenc_init_nd(&s->pe, pe, &o, &s->params, D, H, 1, max_seq, layout);
    s->pe.ctx = test_ctx();
    if (rc) {
        pelab_posenc_free(&s->pe);
        pelab_params_free(&s->params);
        return rc;
    }
    PELAB_ASSERT(pelab_params_alloc(&s->params) == PELAB_OK);
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 21);
    for (int i = 0; i < NT * D; i++) s->q[i] = pelab_rng_normal(&rng), s->k[i] = pelab_rng_normal(&rng);
    return PELAB_OK;
}

static int setup(struct qk *s, const char *pe, const char *const *kv, int max_seq) {
    return setup_nd(s, pe, kv, max_seq, NULL);
}

static void done(struct qk *s) {
    pelab_posenc_free(&s->pe);
    pelab_params_free(&s->params);
}

static void run(struct qk *s, const int32_t *pos) {
    PELAB_ASSERT(pelab_posenc_prepare(&s->pe, pos, 1, NT) == PELAB_OK);
    pelab_posenc_qk_forward(&s->pe, 0, s->qo, s->ko, s->q, s->k, D, pos, 1, NT);
}

/* --- scale 1 ------------------------------------------------------------------------------------ */

/* Runs `kv` and plain RoPE on the same q, k and positions: 1 when qo and ko are bit-identical. */
static int same_as_rope(const char *const *kv, const int32_t *pos, int max_seq) {
    static struct qk a, b;
    PELAB_ASSERT(setup(&a, "rope", kv, max_seq) == PELAB_OK);
    PELAB_ASSERT(setup(&b, "rope", NULL, max_seq) == PELAB_OK);
    run(&a, pos);
    run(&b, pos);
    int same = memcmp(a.qo, b.qo, sizeof a.qo) == 0 && memcmp(a.ko, b.ko, sizeof a.ko) == 0;
    done(&a);
    done(&b);
    return same;
}

static void check_scale_one(void) {
    const int32_t beyond[NT] = {0, 3, 17, 64, 300, 5000}; /* L_train is 32 below */
    const int32_t within[NT] = {0, 1, 2, 9, 20, 31};
    const char *const methods[] = {"none", "pi", "ntk", "yarn"};
    for (int i = 0; i < 4; i++) {
        const char *kv[] = {"rope-scaling", methods[i], "rope-scale", "1", NULL};
        CHECK(same_as_rope(kv, beyond, 32), "--rope-scaling %s at scale 1 differs from RoPE", methods[i]);
    }
    const char *none4[] = {"rope-scaling", "none", "rope-scale", "4", NULL};
    CHECK(same_as_rope(none4, beyond, 32), "a scale given with none changed RoPE");
    const char *dyn[] = {"rope-scaling", "dynamic-ntk", "rope-scale", "1", NULL};
    CHECK(same_as_rope(dyn, within, 32), "dynamic-ntk at scale 1 within L_train differs from RoPE");
    const char *dyn4[] = {"rope-scaling", "dynamic-ntk", "rope-scale", "4", NULL};
    CHECK(same_as_rope(dyn4, within, 32), "dynamic-ntk within L_train differs from RoPE");
    const char *yarn_half[] = {"rope-scaling", "yarn", "rope-scale", "1", "rope-layout", "half", NULL};
    static struct qk a, b;
    const char *half[] = {"rope-layout", "half", NULL};
    PELAB_ASSERT(setup(&a, "rope", yarn_half, 32) == PELAB_OK && setup(&b, "rope", half, 32) == PELAB_OK);
    run(&a, beyond);
    run(&b, beyond);
    CHECK(memcmp(a.qo, b.qo, sizeof a.qo) == 0, "yarn at scale 1, half layout, differs from RoPE");
    done(&a);
    done(&b);
}

/* --- the frequencies, read back -------------------------------------------------------------- */

/* Rotates the unit vector (1, 0) of every pair at position 1 (token 0; the other tokens sit at
 * `others`, which set the pass's length): theta[c] = the angle of pair c, *amp its length. */
static void probe(const char *const *kv, int max_seq, const int32_t *others, double *theta, double *amp) {
    static struct qk s;
    PELAB_ASSERT(setup(&s, "rope", kv, max_seq) == PELAB_OK);
    memset(s.q, 0, sizeof s.q);
    for (int c = 0; c < P; c++) s.q[2 * c] = 1; /* interleaved: pair c is (2c, 2c+1) */
    int32_t pos[NT] = {1};
    for (int i = 1; i < NT; i++) pos[i] = others ? others[i - 1] : i + 1;
    run(&s, pos);
    for (int c = 0; c < P; c++) {
        double x = s.qo[2 * c], y = s.qo[2 * c + 1];
        theta[c] = atan2(y, x);
        amp[c] = hypot(x, y);
    }
    done(&s);
}

static void expect_theta(const char *what, const double *got, const double *want, const double *amp,
                         double want_amp) {
    for (int c = 0; c < P; c++) {
        CHECK(fabs(got[c] - want[c]) <= 1e-14 * want[c], "%s: θ'_%d = %.17g, expected %.17g", what, c,
              got[c], want[c]);
        CHECK(fabs(amp[c] - want_amp) <= 1e-14, "%s: amplitude %.17g, expected %.17g", what, amp[c], want_amp);
    }
    printf("  %-34s θ' = %.6g %.6g %.6g %.6g, amplitude %.6g\n", what, got[0], got[1], got[2], got[3], amp[0]);
}

static void expect_usage(const char *const *kv, const char *option);

static void check_frequencies(void) {
    double th[P], amp[P];
    /* d = 8, base 10000: θ_i = 10^(−i) */
    const double plain[P] = {1, 0.1, 0.01, 0.001};
    probe(NULL, 32, NULL, th, amp);
    expect_theta("rope", th, plain, amp, 1);

    /* YaRN, L_train 2048, s 4, β 32 and 1, by hand:
     *   corr(32) = 8·ln(2048/(2π·32)) / (2 ln 10000) = 8·2.320996/18.420681 = 1.00800 → lo = 1
     *   corr(1)  = 8·ln(2048/(2π))    / (2 ln 10000) = 8·5.786741/18.420681 = 2.51315 → hi = 3
     *   ramp = clamp((i − 1)/2, 0, 1) = 0, 0, 0.5, 1;  keep = 1, 1, 0.5, 0
     *   θ' = 1, 0.1, (0.01/4)·0.5 + 0.01·0.5 = 0.00625, 0.001/4 = 0.00025
     *   amplitude 0.1·ln 4 + 1 on q and k: logits × (0.1 ln 4 + 1)² */
    const char *yarn[] = {"rope-scaling", "yarn", "rope-scale", "4", "rope-original-len", "2048", NULL};
    const double yarn_theta[P] = {1, 0.1, 0.00625, 0.00025};
    probe(yarn, 32, NULL, th, amp);
    expect_theta("yarn s=4 L_train=2048", th, yarn_theta, amp, 1.1386294361119891);

    /* NTK, s 4: base' = 10000·4^(8/6), so θ'_i = 10^(−i)·4^(−i/3) */
    const char *ntk[] = {"rope-scaling", "ntk", "rope-scale", "4", NULL};
    const double ntk_theta[P] = {1, 0.1 * 0.6299605249474366, 0.01 * 0.39685026299204984, 0.001 / 4};
    probe(ntk, 32, NULL, th, amp);
    expect_theta("ntk s=4", th, ntk_theta, amp, 1);

    /* dynamic NTK, s 2, L_train 16, the pass's longest position 63: L = 64,
     * base' = 10000·(2·64/16 − 1)^(8/6) = 10000·7^(4/3): θ'_i = 10^(−i)·7^(−i/3) */
    const char *dyn[] = {"rope-scaling", "dynamic-ntk", "rope-scale", "2", "rope-original-len", "16", NULL};
    const int32_t long_pass[NT - 1] = {2, 30, 40, 63, 5};
    const double dyn_theta[P] = {1, 0.1 * 0.5227579585747102, 0.01 * 0.27327588325319846, 0.001 / 7};
    probe(dyn, 32, long_pass, th, amp);
    expect_theta("dynamic-ntk s=2 L=64 L_train=16", th, dyn_theta, amp, 1);
    const int32_t short_pass[NT - 1] = {2, 3, 4, 15, 5};
    probe(dyn, 32, short_pass, th, amp);
    expect_theta("dynamic-ntk s=2 L=16 L_train=16", th, plain, amp, 1);

    /* PI, s 4: position 1 → 1/4 */
    const char *pi[] = {"rope-scaling", "pi", "rope-scale", "4", NULL};
    const double pi_theta[P] = {0.25, 0.025, 0.0025, 0.00025};
    probe(pi, 32, NULL, th, amp);
    expect_theta("pi s=4 (position 1 -> 1/4)", th, pi_theta, amp, 1);

    /* Resonance: 2π/θ = 6.28, 62.8, 628.3, 6283.2 → wavelengths 6, 63, 628, 6283 */
    const char *res[] = {"rope-resonance", "on", NULL};
    const double res_theta[P] = {TWO_PI / 6, TWO_PI / 63, TWO_PI / 628, TWO_PI / 6283};
    probe(res, 32, NULL, th, amp);
    expect_theta("resonance", th, res_theta, amp, 1);

    /* Llama 3.1, s 8, L_train 64, low 1, high 8: wavelengths 2π/θ = 6.28 (< 64/8: kept), 62.8
     * (between 8 and 64: g = (64/62.83 − 1)/7 = 0.0026559, θ' = (1 − g)·0.1/8 + g·0.1), 628 and
     * 6283 (> 64: θ/8) */
    const char *llama3[] = {"rope-scaling", "llama3", "rope-scale", "8", "rope-original-len", "64",
                            "llama3-high-freq-factor", "8", NULL};
    const double llama3_theta[P] = {1, 0.012732395447351628, 0.00125, 0.000125};
    probe(llama3, 32, NULL, th, amp);
    expect_theta("llama3 s=8 L_train=64 high=8", th, llama3_theta, amp, 1);

    /* partial RoPE, f = 0.5: r = 4, θ_c = 10000^(−2c/4) = 1, 0.01 for the first two pairs, the
     * other two unrotated; with NTK s 4 the base over r: 10000·4^(4/2), θ_1 = 160000^(−1/2) */
    const char *partial[] = {"rope-fraction", "0.5", NULL};
    const double partial_theta[P] = {1, 0.01, 0, 0};
    probe(partial, 32, NULL, th, amp);
    expect_theta("partial f=0.5", th, partial_theta, amp, 1);
    const char *partial_ntk[] = {"rope-fraction", "0.5", "rope-scaling", "ntk", "rope-scale", "4", NULL};
    const double partial_ntk_theta[P] = {1, 0.0025, 0, 0};
    probe(partial_ntk, 32, NULL, th, amp);
    expect_theta("partial f=0.5, ntk s=4 over r", th, partial_ntk_theta, amp, 1);

    /* a method's amplitude reaches the rotated pairs alone: YaRN's 0.1 ln 4 + 1 on the first two
     * of partial RoPE's, 1 on the two it leaves as they are */
    const char *partial_yarn[] = {"rope-fraction", "0.5", "rope-scaling", "yarn", "rope-scale", "4",
                                  "rope-original-len", "2048", NULL};
    probe(partial_yarn, 32, NULL, th, amp);
    CHECK(fabs(amp[0] - 1.1386294361119891) < 1e-14 && fabs(amp[1] - 1.1386294361119891) < 1e-14 &&
              amp[2] == 1 && amp[3] == 1 && th[2] == 0 && th[3] == 0,
          "partial + yarn: amplitudes %.17g %.17g %.17g %.17g", amp[0], amp[1], amp[2], amp[3]);

    /* p-RoPE, p = 0.5: the two fastest pairs turn at RoPE's θ, the two slowest not at all */
    const char *prope[] = {"rope-p", "0.5", NULL};
    const double prope_theta[P] = {1, 0.1, 0, 0};
    probe(prope, 32, NULL, th, amp);
    expect_theta("p-RoPE p=0.5", th, prope_theta, amp, 1);

    /* LongRoPE, s 4, L_train 16, short factors 1 2 4 8 and long 1 10 100 1000 (under
     * "rope_scaling", as a Phi-3 config.json has them): θ/λ for the set of the pass's length,
     * amplitude √(1 + ln 4 / ln 16) = √1.5 */
    char path[4096];
    snprintf(path, sizeof path, "%s/factors.json", tmpdir_create("pelab-longrope"));
    FILE *f = fopen(path, "w");
    PELAB_ASSERT(f);
    fputs("{\"rope_scaling\": {\"short_factor\": [1, 2, 4, 8], \"long_factor\": [1, 10, 100, 1000]}}", f);
    fclose(f);
    const char *lr[] = {"rope-scaling", "longrope", "rope-scale", "4", "rope-original-len", "16",
                        "longrope-factors", path, NULL};
    const double lr_short[P] = {1, 0.05, 0.0025, 0.000125}, lr_long[P] = {1, 0.01, 0.0001, 0.000001};
    probe(lr, 32, short_pass, th, amp);
    expect_theta("longrope s=4 L=16 (short factors)", th, lr_short, amp, sqrt(1.5));
    probe(lr, 32, long_pass, th, amp);
    expect_theta("longrope s=4 L=64 (long factors)", th, lr_long, amp, sqrt(1.5));
    f = fopen(path, "w");
    fputs("{\"short_factor\": [1, 2, 4], \"long_factor\": [1, 10, 100, 1000]}", f);
    fclose(f);
    expect_usage(lr, "\"short_factor\" has 3 factors; this run rotates 4 pairs per head");
    f = fopen(path, "w");
    fputs("{\"short_factor\": [1, 2, 4, 8], \"long_factor\": [1, 10, -1, 1000]}", f);
    fclose(f);
    expect_usage(lr, "\"long_factor\"[2] is not a positive number");
    remove(path);
    static struct qk unread;
    int rc = setup(&unread, "rope", lr, 32);
    CHECK(rc == PELAB_ERR_RUNTIME && strstr(pelab_last_error(), "--longrope-factors: ") &&
              strstr(pelab_last_error(), "cannot open"),
          "a factor file that is gone: expected a runtime error naming it, got %d: %s", rc, pelab_last_error());
    tmpdir_remove();

    /* geometric:8,1000 over 4 pairs: λ = 8^(i/3) = 1 2 4 8 and 1000^(i/3) = 1 10 100 1000, the
     * file's sets above */
    const char *geo[] = {"rope-scaling", "longrope", "rope-scale", "4", "rope-original-len", "16",
                         "longrope-factors", "geometric:8,1000", NULL};
    probe(geo, 32, short_pass, th, amp);
    expect_theta("longrope geometric:8,1000 (short)", th, lr_short, amp, sqrt(1.5));
    probe(geo, 32, long_pass, th, amp);
    expect_theta("longrope geometric:8,1000 (long)", th, lr_long, amp, sqrt(1.5));
    const char *bad[] = {"8", "8,", "8,0.5", "8,1000,2", "nan,2", "2,inf", NULL};
    for (int i = 0; bad[i]; i++) {
        char spec[32];
        snprintf(spec, sizeof spec, "geometric:%s", bad[i]);
        geo[7] = spec;
        expect_usage(geo, "give geometric:S,L");
    }
}

/* PI at position m is RoPE at m/s, bit for bit where m/s is a whole number. */
static void check_pi_positions(void) {
    static struct qk a, b;
    const char *pi[] = {"rope-scaling", "pi", "rope-scale", "4", NULL};
    PELAB_ASSERT(setup(&a, "rope", pi, 32) == PELAB_OK && setup(&b, "rope", NULL, 32) == PELAB_OK);
    const int32_t m[NT] = {0, 4, 8, 40, 400, 40000}, m_over_s[NT] = {0, 1, 2, 10, 100, 10000};
    run(&a, m);
    run(&b, m_over_s);
    CHECK(memcmp(a.qo, b.qo, sizeof a.qo) == 0 && memcmp(a.ko, b.ko, sizeof a.ko) == 0,
          "pi s=4 at m differs from RoPE at m/4");
    done(&a);
    done(&b);
}

/* rope2d --rope2d-extend interpolate: a sequence of largest coordinate G' > G (the training grid)
 * turns by its coordinates times G/G', so on a grid of 2G coordinate 2x is plain rope2d's x, bit
 * for bit; on a grid within G nothing changes. */
static void check_rope2d_interpolate(void) {
    enum { G = 4 };
    const struct pelab_pe_layout grid = {2, 1, G};
    const char *interpolate[] = {"rope2d-extend", "interpolate", NULL};
    static struct qk a, b;
    PELAB_ASSERT(setup_nd(&a, "rope2d", interpolate, 1 + G * G, &grid) == PELAB_OK &&
                 setup_nd(&b, "rope2d", NULL, 1 + G * G, &grid) == PELAB_OK);
    /* (row, column) of NT tokens: the class token, then cells; the first grid reaches 2G = 8 */
    const int32_t wide[NT * 2] = {0, 0, 2, 2, 2, 8, 8, 4, 6, 6, 8, 8}, half[NT * 2] = {0, 0, 1, 1, 1, 4, 4, 2, 3, 3, 4, 4};
    run(&a, wide);
    run(&b, half);
    CHECK(memcmp(a.qo, b.qo, sizeof a.qo) == 0 && memcmp(a.ko, b.ko, sizeof a.ko) == 0,
          "rope2d interpolate on a grid of 8 at 2x differs from rope2d at x (training grid 4)");
    /* within the training grid interpolate is plain rope2d */
    run(&a, half);
    CHECK(memcmp(a.qo, b.qo, sizeof a.qo) == 0 && memcmp(a.ko, b.ko, sizeof a.ko) == 0,
          "rope2d interpolate within the training grid differs from rope2d");
    done(&a);
    done(&b);
}

/* --- options ------------------------------------------------------------------------------------ */

static void expect_usage(const char *const *kv, const char *option) {
    static struct qk s;
    int rc = setup(&s, "rope", kv, 32);
    CHECK(rc == PELAB_ERR_USAGE && strstr(pelab_last_error(), option),
          "expected a usage error naming %s, got %d: %s", option, rc, pelab_last_error());
    if (!rc) done(&s);
}

static void check_options(void) {
    expect_usage((const char *const[]){"rope-scaling", "yarn", "rope-scale", "0.5", NULL}, "--rope-scale");
    expect_usage((const char *const[]){"rope-scaling", "pi", "rope-scale", "0.99", NULL}, "--rope-scale");
    expect_usage((const char *const[]){"rope-scale", "0", NULL}, "--rope-scale");
    expect_usage((const char *const[]){"rope-scaling", "ntk", "yarn-beta-fast", "16", NULL}, "--yarn-beta-fast");
    expect_usage((const char *const[]){"rope-scaling", "pi", "rope-original-len", "64", NULL}, "--rope-original-len");
    expect_usage((const char *const[]){"rope-scaling", "yarn", "yarn-beta-fast", "1", "yarn-beta-slow", "2", NULL},
                 "--yarn-beta-fast");
    expect_usage((const char *const[]){"rope-scaling", "rope-2", NULL}, "--rope-scaling");
    expect_usage((const char *const[]){"rope-scaling", "longrope", NULL}, "--rope-scaling longrope needs --longrope-factors");
    expect_usage((const char *const[]){"rope-scaling", "yarn", "longrope-factors", "x.json", NULL},
                 "--longrope-factors applies only with --rope-scaling longrope");
    expect_usage((const char *const[]){"rope-fraction", "0.2", NULL}, "--rope-fraction 0.2 rotates no pair");
    expect_usage((const char *const[]){"rope-scaling", "yarn", "llama3-low-freq-factor", "2", NULL},
                 "--llama3-low-freq-factor applies only with --rope-scaling llama3");
    expect_usage((const char *const[]){"rope-scaling", "llama3", "llama3-low-freq-factor", "4", NULL},
                 "--llama3-high-freq-factor 4 must be above");
    static struct qk s;
    CHECK(setup(&s, "rope", (const char *const[]){"rope-scale", "0.5", NULL}, 32) == PELAB_OK,
          "a scale below 1 with none is ignored: %s", pelab_last_error());
    done(&s);
}

/* --- xPos --------------------------------------------------------------------------------------- */

static void check_xpos(const char *const *kv, double scale_base, double gamma, const int32_t *pos) {
    static struct qk s;
    PELAB_ASSERT(setup(&s, "xpos", kv, 32) == PELAB_OK);
    run(&s, pos);
    double worst = 0;
    for (int h = 0; h < H; h++)
        for (int t = 0; t < NT; t++)
            for (int u = 0; u < NT; u++) {
                double got = 0, ref = 0;
                for (int c = 0; c < d; c++) got += s.qo[(h * NT + t) * d + c] * s.ko[(h * NT + u) * d + c];
                for (int c = 0; c < P; c++) {
                    const double *q = s.q + t * D + h * d + 2 * c, *k = s.k + u * D + h * d + 2 * c;
                    double rel = (double)pos[t] - pos[u], a = rel * pow(10000.0, -2.0 * c / d);
                    double zeta = (2.0 * c / d + gamma) / (1 + gamma);
                    ref += pow(zeta, rel / scale_base) *
                           ((q[0] * k[0] + q[1] * k[1]) * cos(a) + (q[0] * k[1] - q[1] * k[0]) * sin(a));
                }
                worst = fmax(worst, fabs(got - ref) / fmax(1, fabs(ref)));
            }
    CHECK(worst < 1e-10, "xpos γ_s=%g: q'·k' differs from Σ ζ^((t−s)/γ_s)·RoPE by %.3g", scale_base, worst);
    printf("  xpos γ_s=%-6g γ=%-4g positions from %-7d closed form agrees to %.3g\n", scale_base, gamma,
           pos[0], worst);
    done(&s);
}

int main(void) {
    check_scale_one();
    check_frequencies();
    check_pi_positions();
    check_rope2d_interpolate();
    check_options();
    const int32_t near[NT] = {0, 1, 5, 17, 300, 900};
    const int32_t far[NT] = {1000000, 1000001, 1000005, 1000017, 1000300, 1000900};
    check_xpos(NULL, 512, 0.4, near);
    check_xpos(NULL, 512, 0.4, far);
    check_xpos((const char *const[]){"xpos-scale-base", "64", "xpos-gamma", "0.2", NULL}, 64, 0.2, far);
    return check_report("test_rotary");
}
