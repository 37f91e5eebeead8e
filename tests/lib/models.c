/* The one list of encoding test cases, and the model-level tests' models (models.h). */
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "models.h"
#include "pelab/rng.h"
#include "pelab/status.h"

/* c->opts from c->text: "pe", name, then the n_kv pairs. */
static void relink(struct pe_case *c) {
    c->opts[0] = "pe", c->opts[1] = c->ops->name;
    for (int i = 0; i < c->n_kv; i++) c->opts[2 + 2 * i] = c->text[i][0], c->opts[3 + 2 * i] = c->text[i][1];
    c->opts[2 + 2 * c->n_kv] = NULL;
}

void pe_case_set(struct pe_case *c, const char *key, const char *value) {
    int i = 0;
    while (i < c->n_kv && strcmp(c->text[i][0], key) != 0) i++;
    CHECK(i < PE_CASE_KV_MAX && strlen(key) < 64 && strlen(value) < 64, "%s: no room for %s = %s", c->label,
          key, value);
    if (i == PE_CASE_KV_MAX || strlen(key) >= 64 || strlen(value) >= 64) return;
    snprintf(c->text[i][0], 64, "%s", key);
    snprintf(c->text[i][1], 64, "%s", value);
    if (i == c->n_kv) c->n_kv++;
    relink(c);
}

const char *pe_case_get(const struct pe_case *c, const char *key) {
    for (int i = 0; i < c->n_kv; i++)
        if (strcmp(c->text[i][0], key) == 0) return c->text[i][1];
    return NULL;
}

/* The words "key=value" of settings set as c's options (keep: not those c sets already). 0 when a
 * word is not key=value. */
static int parse(struct pe_case *c, const char *settings, int keep) {
    for (const char *p = settings; *p;) {
        while (*p == ' ') p++;
        if (!*p) break;
        const char *end = strchr(p, ' '), *eq = strchr(p, '=');
        if (!end) end = p + strlen(p);
        if (!eq || eq > end || eq - p >= 64 || end - eq - 1 >= 64) return 0;
        char key[64], value[64];
        snprintf(key, sizeof key, "%.*s", (int)(eq - p), p);
        snprintf(value, sizeof value, "%.*s", (int)(end - eq - 1), eq + 1);
        if (!keep || !pe_case_get(c, key)) pe_case_set(c, key, value);
        p = end;
    }
    return 1;
}

void pe_case_small(struct pe_case *c) {
    if (c->ops->contract.small)
        CHECK(parse(c, c->ops->contract.small, 1), "%s: contract.small '%s' is not 'key=value ...'",
              c->ops->name, c->ops->contract.small);
}

int for_each_pe_case(const struct pe_walk *w, pe_case_fn fn, void *ctx) {
    static const unsigned order[] = {PE_TEXT, PE_IMAGE, PE_RASTER};
    int n = 0;
    for (int li = 0; li < 3; li++) {
        if (!(w->layouts & order[li])) continue;
        const struct pelab_pe_layout lay = {order[li] == PE_IMAGE ? 2 : 1, order[li] != PE_TEXT,
                                            order[li] == PE_IMAGE ? w->grid : 0};
        for (const struct pelab_posenc_ops *const *e = pelab_posenc_all(); *e; e++) {
            if (w->only && strcmp(w->only, (*e)->name) != 0) continue;
            if (!pelab_posenc_serves(*e, lay.dims)) continue;
            if (order[li] == PE_RASTER && !((*e)->contract.promises & PELAB_PE_BIDIRECTIONAL)) continue;
            for (int k = -1; k < PELAB_PE_VARIANTS_MAX && (k < 0 || (*e)->contract.variants[k]); k++) {
                if (k >= 0 && (w->defaults_only & order[li])) break;
                struct pe_case c;
                memset(&c, 0, sizeof c);
                c.ops = *e;
                c.layout = lay;
                c.settings = k < 0 ? "" : (*e)->contract.variants[k];
                snprintf(c.label, sizeof c.label, "%s%s%s%s", (*e)->name, *c.settings ? " " : "", c.settings,
                         lay.dims == 2 ? " [2-D]" : lay.bidirectional ? " [bidirectional]" : "");
                relink(&c);
                if (!parse(&c, c.settings, 0)) {
                    CHECK(0, "%s: contract variant '%s' is not 'key=value ...'", (*e)->name, c.settings);
                    continue;
                }
                fn(&c, ctx);
                n++;
            }
        }
    }
    return n;
}

int pe_case_init(struct pelab_posenc *pe, struct pelab_params *params, const struct pe_case *c, int D,
                 int H, int layers, int max_seq) {
    struct pelab_opts o = {0};
    for (const char *const *kv = c->opts + 2; kv[0]; kv += 2) pelab_opts_set(&o, kv[0], kv[1]);
    memset(pe, 0, sizeof *pe);
    const int rc = pelab_posenc_init_nd(pe, c->ops->name, &o, params, D, H, layers, max_seq, &c->layout);
    pe->ctx = test_ctx(); /* an encoding alone computes in the tests' context */
    return rc;
}

int pe_extent_free(const struct pelab_posenc *pe, const char *label, long len, const char *what) {
    if (!pe->ops->cache_check || pe->ops->cache_check(pe, len) == PELAB_OK) return 1;
    printf("  %s, %s: follows the pass's extent, not its property (%s)\n", label, what, pelab_last_error());
    return 0;
}

void pe_place(int32_t *out, int q, const struct pelab_pe_layout *layout) {
    if (layout->dims == 1) out[0] = q;
    else out[0] = 1 + q / layout->grid, out[1] = 1 + q % layout->grid;
}

void pe_case_fit(struct pe_case *c, int max_seq, int reach) {
    const char *option = c->ops->contract.reach;
    if (!option || pe_case_get(c, option)) return;
    struct pelab_posenc pe;
    struct pelab_params params = {0};
    int32_t pos[2] = {0, 0};
    pe_place(pos, reach - 1, &c->layout);
    /* a shape or setting it refuses is the test's to report */
    const int refused = pe_case_init(&pe, &params, c, 8, 2, 1, max_seq) == PELAB_OK &&
                        pelab_params_alloc(&params) == PELAB_OK &&
                        pelab_posenc_prepare(&pe, pos, 1, 1) == PELAB_ERR_USAGE;
    pelab_posenc_free(&pe);
    pelab_params_free(&params);
    if (!refused) return;
    char value[32];
    snprintf(value, sizeof value, "%d", reach);
    pe_case_set(c, option, value);
}

int test_model(struct pelab_model *m, const char *const *a, const char *const *b, int vocab,
               int max_seq, const struct pelab_model_io *io, uint64_t seed, double spread) {
    static const char *const small[] = {"d-model", "16", "heads", "2", "layers", "2", NULL};
    const char *const *lists[] = {small, a, b};
    struct pelab_opts o = {0};
    for (int l = 0; l < 3; l++)
        for (const char *const *kv = lists[l]; kv && kv[0]; kv += 2) pelab_opts_set(&o, kv[0], kv[1]);
    int rc = pelab_model_init_io(m, &o, vocab, max_seq, io);
    if (rc) return rc;
    pelab_model_init_weights(m, seed);
    struct pelab_rng rng;
    pelab_rng_seed(&rng, seed + 1);
    for (size_t i = 0; i < m->params.total; i++)
        m->params.data[i] += (pelab_real)(spread * pelab_rng_normal(&rng));
    return PELAB_OK;
}
