/* RoPE's frequencies: the trained ones, Resonance RoPE's rounding, and the length-extension
 * methods applied to a trained model at evaluation (SPEC §3). s is the scale, d the head width,
 * θ_i = base^(−2i/d) for pair i = 0..d/2−1, L_train the training context.
 *
 *   none         θ_i                                   (a scale given with none is ignored)
 *   pi           position m → m/s                      (Chen et al. 2023, position interpolation)
 *   ntk          base' = base · s^(d/(d−2))            (bloc97 2023, "NTK-aware scaled RoPE")
 *   dynamic-ntk  base' = base · (s·L/L_train − (s−1))^(d/(d−2)) when the pass's length L
 *                (largest position + 1) exceeds L_train; unchanged otherwise
 *   yarn         corr(r) = d·ln(L_train/(2πr)) / (2 ln base);
 *                lo = max(0, ⌊corr(β_fast)⌋), hi = min(d−1, ⌈corr(β_slow)⌉);
 *                ramp_i = clamp((i − lo)/(hi − lo), 0, 1), keep_i = 1 − ramp_i;
 *                θ'_i = (θ_i/s)(1 − keep_i) + θ_i·keep_i; logits × (0.1 ln s + 1)²
 *                (Peng et al. 2023). As the reference implementation, hi = lo becomes lo + 0.001.
 *                The logit factor is applied as an amplitude 0.1 ln s + 1 on both q and k, so
 *                the attention kernel does not change.
 *   resonance    θ_i → 2π / round(2π/θ_i): every wavelength a whole number of positions (Wang et
 *                al. 2024, "Resonance RoPE"); a training option, applied to the frequencies the
 *                method starts from (after NTK's base change, before YaRN's blend).
 *
 * At s = 1, pi, ntk and yarn are RoPE bit for bit (yarn skips its blend, whose value is then θ_i
 * anyway). dynamic-ntk at s = 1 is RoPE up to L_train and, beyond, still stretches the base by
 * (L/L_train)^(d/(d−2)): that is its formula. With d = 2 the only frequency is base⁰ = 1, so the
 * NTK methods leave it as it is.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>
#include "pelab/status.h"
#include "posenc/rotary.h"

#define TWO_PI 6.283185307179586

const struct pelab_optdef pelab_rope_scaling_options[] = {
    {"rope-scaling", PELAB_OPT_CHOICE, "none", 0, 0, "none|pi|ntk|dynamic-ntk|yarn",
     "length extension of a RoPE run at evaluation: position interpolation, NTK-aware base, "
     "dynamic NTK, YaRN"},
    {"rope-scale", PELAB_OPT_REAL, "1", 0, 1e6, NULL,
     "scale factor s, e.g. evaluation length / training length; at least 1 with a method"},
    {"rope-original-len", PELAB_OPT_INT, "0", 0, 1e9, NULL,
     "L_train of dynamic-ntk and yarn (0: the run's training context)"},
    {"yarn-beta-fast", PELAB_OPT_REAL, "32", 1e-6, 1e9, NULL,
     "YaRN: pairs turning more than this often over L_train keep their frequency"},
    {"yarn-beta-slow", PELAB_OPT_REAL, "1", 1e-6, 1e9, NULL,
     "YaRN: pairs turning less than this often over L_train are interpolated by s"},
    {0},
};

static const char *const method_names[] = {"none", "pi", "ntk", "dynamic-ntk", "yarn"};

int pelab_rope_scaling_uses(const char *method, const char *name) {
    if (strcmp(name, "rope-scale") == 0) return strcmp(method, "none") != 0;
    if (strcmp(name, "rope-original-len") == 0)
        return strcmp(method, "dynamic-ntk") == 0 || strcmp(method, "yarn") == 0;
    if (strncmp(name, "yarn-", 5) == 0) return strcmp(method, "yarn") == 0;
    return 1;
}

int pelab_rope_scale_check(const struct pelab_opts *opts) {
    const char *scale = pelab_opts_get(opts, "rope-scale"), *method = pelab_opts_get(opts, "rope-scaling");
    if (scale && (!method || strcmp(method, "none") == 0))
        return pelab_fail(PELAB_ERR_USAGE, "--rope-scale %s does nothing without a length extension: give "
                          "--rope-scaling pi, ntk, dynamic-ntk or yarn with it", scale);
    return PELAB_OK;
}

int pelab_rope_freqs_read(struct pelab_rope_freqs *f, const struct pelab_opts *opts, int max_seq) {
    const struct pelab_optdef *S = pelab_rope_scaling_options;
    f->method = (enum pelab_rope_method)pelab_opt_choice(opts, S, "rope-scaling");
    f->scale = pelab_opt_real(opts, S, "rope-scale");
    long original = pelab_opt_int(opts, S, "rope-original-len");
    f->original_len = original ? (int)original : max_seq;
    f->beta_fast = pelab_opt_real(opts, S, "yarn-beta-fast");
    f->beta_slow = pelab_opt_real(opts, S, "yarn-beta-slow");
    const char *name = method_names[f->method];
    if (!(f->scale > 0))
        return pelab_fail(PELAB_ERR_USAGE, "--rope-scale %g: the scale must be positive", f->scale);
    if (f->method != PELAB_ROPE_NONE && f->scale < 1)
        return pelab_fail(PELAB_ERR_USAGE,
                          "--rope-scale %g: --rope-scaling %s extends the context s times, so s "
                          "must be at least 1",
                          f->scale, name);
    if (f->method == PELAB_ROPE_NONE) f->scale = 1;
    const char *yarn_opt = pelab_opts_get(opts, "yarn-beta-fast")   ? "yarn-beta-fast"
                           : pelab_opts_get(opts, "yarn-beta-slow") ? "yarn-beta-slow"
                                                                    : NULL;
    if (yarn_opt && f->method != PELAB_ROPE_YARN)
        return pelab_fail(PELAB_ERR_USAGE, "--%s applies only with --rope-scaling yarn (not %s)",
                          yarn_opt, name);
    if (original && f->method != PELAB_ROPE_DYNAMIC_NTK && f->method != PELAB_ROPE_YARN)
        return pelab_fail(PELAB_ERR_USAGE,
                          "--rope-original-len applies only with --rope-scaling dynamic-ntk or "
                          "yarn (not %s)",
                          name);
    if (f->method == PELAB_ROPE_YARN && !(f->beta_fast > f->beta_slow))
        return pelab_fail(PELAB_ERR_USAGE, "--yarn-beta-fast %g must be above --yarn-beta-slow %g",
                          f->beta_fast, f->beta_slow);
    return PELAB_OK;
}

int pelab_rope_freqs_dynamic(const struct pelab_rope_freqs *f) {
    return f->method == PELAB_ROPE_DYNAMIC_NTK;
}

double pelab_rope_pos_div(const struct pelab_rope_freqs *f) {
    return f->method == PELAB_ROPE_PI ? f->scale : 1;
}

double pelab_rope_amplitude(const struct pelab_rope_freqs *f) {
    return f->method == PELAB_ROPE_YARN ? 0.1 * log(f->scale) + 1 : 1;
}

/* YaRN's blend of θ (d/2,) in place. */
static void yarn_blend(const struct pelab_rope_freqs *f, double *theta) {
    const int d = f->d;
    const double s = f->scale, lnb = log(f->base), L = f->original_len;
    double corr_fast = d * log(L / (TWO_PI * f->beta_fast)) / (2 * lnb);
    double corr_slow = d * log(L / (TWO_PI * f->beta_slow)) / (2 * lnb);
    double lo = fmax(0, floor(corr_fast)), hi = fmin(d - 1, ceil(corr_slow));
    if (hi == lo) hi += 0.001;
    for (int i = 0; i < d / 2; i++) {
        double ramp = fmin(1, fmax(0, (i - lo) / (hi - lo))), keep = 1 - ramp;
        theta[i] = (theta[i] / s) * (1 - keep) + theta[i] * keep;
    }
}

void pelab_rope_frequencies(const struct pelab_rope_freqs *f, long L, double *theta) {
    const int d = f->d;
    const double s = f->scale;
    double base = f->base;
    if (d > 2 && f->method == PELAB_ROPE_NTK)
        base = f->base * pow(s, (double)d / (d - 2));
    if (d > 2 && f->method == PELAB_ROPE_DYNAMIC_NTK && L > f->original_len)
        base = f->base * pow(s * (double)L / f->original_len - (s - 1), (double)d / (d - 2));
    for (int c = 0; c < d / 2; c++) {
        theta[c] = pow(base, -2.0 * c / d);
        if (f->resonance) theta[c] = TWO_PI / round(TWO_PI / theta[c]);
    }
    if (f->method == PELAB_ROPE_YARN && s != 1) yarn_blend(f, theta);
}
