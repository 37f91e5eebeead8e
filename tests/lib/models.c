/* The model-level tests' models and registry walk (models.h). */
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "models.h"
#include "pelab/rng.h"
#include "pelab/status.h"

/* c->settings parsed into c->opts after "pe", name. 0 when a word is not key=value. */
static int parse(struct pe_case *c) {
    int n = 0;
    c->opts[0] = "pe", c->opts[1] = c->ops->name;
    for (const char *p = c->settings; *p;) {
        while (*p == ' ') p++;
        if (!*p) break;
        const char *end = strchr(p, ' '), *eq = strchr(p, '=');
        if (!end) end = p + strlen(p);
        if (!eq || eq > end || n == PE_CASE_KV_MAX || eq - p >= 64 || end - eq - 1 >= 64) return 0;
        snprintf(c->text[n][0], 64, "%.*s", (int)(eq - p), p);
        snprintf(c->text[n][1], 64, "%.*s", (int)(end - eq - 1), eq + 1);
        c->opts[2 + 2 * n] = c->text[n][0], c->opts[3 + 2 * n] = c->text[n][1];
        n++;
        p = end;
    }
    c->opts[2 + 2 * n] = NULL;
    return 1;
}

int pe_cases(struct pe_case *out, int max, const struct pelab_pe_layout *lay, int defaults_only,
             const char *only) {
    int n = 0;
    for (const struct pelab_posenc_ops *const *e = pelab_posenc_all(); *e; e++) {
        if (only && strcmp(only, (*e)->name) != 0) continue;
        if (!pelab_posenc_serves(*e, lay->dims)) continue;
        if (lay->bidirectional && !((*e)->contract.promises & PELAB_PE_BIDIRECTIONAL)) continue;
        for (int k = -1; k < PELAB_PE_VARIANTS_MAX && (k < 0 || (*e)->contract.variants[k]); k++) {
            if (defaults_only && k >= 0) break;
            CHECK(n < max, "more cases than the test holds (%d)", max);
            if (n == max) return n;
            struct pe_case *c = &out[n];
            memset(c, 0, sizeof *c);
            c->ops = *e;
            c->layout = *lay;
            c->settings = k < 0 ? "" : (*e)->contract.variants[k];
            snprintf(c->label, sizeof c->label, "%s%s%s%s", (*e)->name, *c->settings ? " " : "",
                     c->settings, lay->dims == 2 ? " [2-D]" : lay->bidirectional ? " [bidirectional]" : "");
            CHECK(parse(c), "%s: contract variant '%s' is not 'key=value ...'", (*e)->name, c->settings);
            n++;
        }
    }
    return n;
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
