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
 *   llama3       λ_i = 2π/θ_i; θ'_i = θ_i when λ_i < L_train/high, θ_i/s when λ_i > L_train/low, and
 *                between, with g = (L_train/λ_i − low)/(high − low), θ'_i = (1 − g)·θ_i/s + g·θ_i
 *                (Llama 3.1, Meta 2024: `apply_scaling` of the llama-models reference code; low 1,
 *                high 4, s 8 there).
 *   longrope     θ'_i = θ_i / λ_i with per-pair factors λ read from a file: its short set for a
 *                pass within L_train, its long set beyond; logits × (1 + ln s / ln L_train) for
 *                s > 1 (Ding et al. 2024, "LongRoPE: Extending LLM Context Window Beyond 2 Million
 *                Tokens", as Phi-3 and Hugging Face's `longrope` apply it: no start tokens kept
 *                uninterpolated). The factors are searched for a model, not derived: pelab reads
 *                them.
 *   resonance    θ_i → 2π / round(2π/θ_i): every wavelength a whole number of positions (Wang et
 *                al. 2024, "Resonance RoPE"); a training option, applied to the frequencies the
 *                method starts from (after NTK's base change, before YaRN's blend).
 *
 * Partial RoPE (--rope-fraction f, as GPT-J's rotary_dim and GPT-NeoX's rotary_pct) spreads the
 * frequencies over r = 2⌊f·d/2⌋ instead of d, θ_i = base^(−2i/r) for the first r/2 pairs, and
 * leaves the rest unrotated; every method then reads r where it reads d. p-RoPE (--rope-p p,
 * Barbero et al. 2024, "Round and Round We Go! What makes Rotary Positional Encodings useful?")
 * keeps the ⌊p·r/2⌋ fastest pairs rotating and leaves the slower ones unrotated (θ = 0):
 * p = 0 is NoPE, p = 1 RoPE.
 *
 * At s = 1, pi, ntk, yarn and llama3 are RoPE bit for bit (yarn skips its blend, whose value is then θ_i
 * anyway). dynamic-ntk at s = 1 is RoPE up to L_train and, beyond, still stretches the base by
 * (L/L_train)^(d/(d−2)): that is its formula. With d = 2 the only frequency is base⁰ = 1, so the
 * NTK methods leave it as it is.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/json.h"
#include "pelab/status.h"
#include "posenc/rotary.h"

#define TWO_PI 6.283185307179586

const struct pelab_optdef pelab_rope_scaling_options[] = {
    {"rope-scaling", PELAB_OPT_CHOICE, "none", 0, 0, "none|pi|ntk|dynamic-ntk|yarn|llama3|longrope",
     "length extension of a RoPE run at evaluation: position interpolation, NTK-aware base, "
     "dynamic NTK, YaRN, Llama 3.1's, LongRoPE's factors"},
    {"rope-scale", PELAB_OPT_REAL, "1", 0, 1e6, NULL,
     "scale factor s, e.g. evaluation length / training length; at least 1 with a method"},
    {"rope-original-len", PELAB_OPT_INT, "0", 0, 1e9, NULL,
     "L_train of dynamic-ntk, yarn, llama3 and longrope (0: the run's training context)"},
    {"yarn-beta-fast", PELAB_OPT_REAL, "32", 1e-6, 1e9, NULL,
     "YaRN: pairs turning more than this often over L_train keep their frequency"},
    {"yarn-beta-slow", PELAB_OPT_REAL, "1", 1e-6, 1e9, NULL,
     "YaRN: pairs turning less than this often over L_train are interpolated by s"},
    {"llama3-low-freq-factor", PELAB_OPT_REAL, "1", 1e-6, 1e9, NULL,
     "Llama 3.1: wavelengths above L_train / this are interpolated by s"},
    {"llama3-high-freq-factor", PELAB_OPT_REAL, "4", 1e-6, 1e9, NULL,
     "Llama 3.1: wavelengths below L_train / this keep their frequency"},
    {"longrope-factors", PELAB_OPT_STR, "", 0, 0, NULL,
     "LongRoPE: a JSON file with \"short_factor\" and \"long_factor\", one factor per rotated pair "
     "each (at its top level or under \"rope_scaling\", as a Phi-3 config.json has them); or "
     "geometric:S,L, synthetic sets rising from 1 at the fastest pair to S (short) and L (long)"},
    {0},
};

static const char *const method_names[] = {"none", "pi", "ntk", "dynamic-ntk", "yarn", "llama3", "longrope"};

/* Whether --rope-scaling `method` reads the option `name`: rope-scale with any method but none,
 * rope-original-len with dynamic-ntk, yarn, llama3 and longrope, yarn-beta-* with yarn, llama3-*
 * with llama3, longrope-* with longrope; 1 for any other name. */
static int method_reads(const char *method, const char *name) {
    if (strcmp(name, "rope-scale") == 0) return strcmp(method, "none") != 0;
    if (strcmp(name, "rope-original-len") == 0)
        return strcmp(method, "dynamic-ntk") == 0 || strcmp(method, "yarn") == 0 ||
               strcmp(method, "llama3") == 0 || strcmp(method, "longrope") == 0;
    if (strncmp(name, "yarn-", 5) == 0) return strcmp(method, "yarn") == 0;
    if (strncmp(name, "llama3-", 7) == 0) return strcmp(method, "llama3") == 0;
    if (strncmp(name, "longrope-", 9) == 0) return strcmp(method, "longrope") == 0;
    return 1;
}

static int scaling_reads(const struct pelab_opts *opts, const char *name) {
    const char *method = pelab_opts_get(opts, "rope-scaling");
    return method_reads(method ? method : "none", name);
}

const struct pelab_pe_fine_tune pelab_rope_fine_tune = {
    .reads = scaling_reads,
    .source_context = "rope-original-len",
};

int pelab_rope_scaling_check(const struct pelab_opts *given, const struct pelab_opts *settings) {
    if (!pelab_opts_get(given, "rope-scale")) return PELAB_OK;
    const char *scale = pelab_opts_get(settings, "rope-scale"), *method = pelab_opts_get(settings, "rope-scaling");
    if (scale && (!method || strcmp(method, "none") == 0))
        return pelab_fail(PELAB_ERR_USAGE, "--rope-scale %s does nothing without a length extension: give "
                          "--rope-scaling pi, ntk, dynamic-ntk, yarn, llama3 or longrope with it", scale);
    return PELAB_OK;
}

/* One factor set, `key` of obj, into out (n,): n positive numbers. */
static int read_factor_set(const struct pelab_json *obj, const char *key, const char *path, int n, double *out) {
    const struct pelab_json *a = pelab_json_get(obj, key);
    if (!a || a->type != PELAB_JSON_ARRAY)
        return pelab_fail(PELAB_ERR_USAGE, "--longrope-factors %s: no \"%s\" array", path, key);
    if (a->count != n)
        return pelab_fail(PELAB_ERR_USAGE, "--longrope-factors %s: \"%s\" has %d factors; this run "
                          "rotates %d pairs per head", path, key, a->count, n);
    for (int i = 0; i < n; i++) {
        if (a->items[i]->type != PELAB_JSON_NUMBER || !(a->items[i]->number > 0))
            return pelab_fail(PELAB_ERR_USAGE, "--longrope-factors %s: \"%s\"[%d] is not a positive "
                              "number", path, key, i);
        out[i] = a->items[i]->number;
    }
    return PELAB_OK;
}

/* The synthetic sets of `geometric:S,L` into short and long (n,): λ_i = S^(i/(n−1)) and
 * L^(i/(n−1)), rising from 1 at the fastest pair to S and L at the slowest (λ_0 = 1 when n = 1). */
static int geometric_factors(const char *spec, int n, double *short_f, double *long_f) {
    char *end;
    const double S = strtod(spec, &end);
    const double L = *end == ',' ? strtod(end + 1, &end) : NAN;
    if (*end || !(S >= 1) || !(L >= 1) || !isfinite(S) || !isfinite(L))
        return pelab_fail(PELAB_ERR_USAGE, "--longrope-factors geometric:%s: give geometric:S,L with "
                          "S and L finite and at least 1", spec);
    for (int i = 0; i < n; i++) {
        const double e = n > 1 ? (double)i / (n - 1) : 0;
        short_f[i] = pow(S, e), long_f[i] = pow(L, e);
    }
    return PELAB_OK;
}

/* LongRoPE's two sets: from the file at `value` (at its top level or under "rope_scaling"), or
 * the synthetic ones of `geometric:S,L`. A file that cannot be read keeps the reader's status
 * (runtime: I/O, corrupt, out of memory). */
static int read_longrope_factors(struct pelab_rope_freqs *f, const char *value) {
    if (!*value)
        return pelab_fail(PELAB_ERR_USAGE, "--rope-scaling longrope needs --longrope-factors FILE "
                          "or geometric:S,L");
    const int n = f->rot_d / 2;
    f->short_factors = malloc((size_t)n * sizeof *f->short_factors);
    f->long_factors = malloc((size_t)n * sizeof *f->long_factors);
    if (!f->short_factors || !f->long_factors) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    if (strncmp(value, "geometric:", 10) == 0)
        return geometric_factors(value + 10, n, f->short_factors, f->long_factors);
    struct pelab_json *j;
    int rc = pelab_json_load(value, &j);
    if (rc) return pelab_fail_context(rc, "--longrope-factors");
    const struct pelab_json *obj = pelab_json_get(j, "rope_scaling") ? pelab_json_get(j, "rope_scaling") : j;
    rc = read_factor_set(obj, "short_factor", value, n, f->short_factors);
    if (!rc) rc = read_factor_set(obj, "long_factor", value, n, f->long_factors);
    pelab_json_free(j);
    return rc;
}

void pelab_rope_freqs_free(struct pelab_rope_freqs *f) {
    free(f->short_factors);
    free(f->long_factors);
    f->short_factors = f->long_factors = NULL;
}

int pelab_rope_freqs_read(struct pelab_rope_freqs *f, const struct pelab_opts *opts, int max_seq) {
    const struct pelab_optdef *S = pelab_rope_scaling_options;
    f->method = (enum pelab_rope_method)pelab_opt_choice(opts, S, "rope-scaling");
    f->scale = pelab_opt_real(opts, S, "rope-scale");
    long original = pelab_opt_int(opts, S, "rope-original-len");
    f->original_len = original ? (int)original : max_seq;
    f->beta_fast = pelab_opt_real(opts, S, "yarn-beta-fast");
    f->beta_slow = pelab_opt_real(opts, S, "yarn-beta-slow");
    f->low_factor = pelab_opt_real(opts, S, "llama3-low-freq-factor");
    f->high_factor = pelab_opt_real(opts, S, "llama3-high-freq-factor");
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
    const char *llama3_opt = pelab_opts_get(opts, "llama3-low-freq-factor")    ? "llama3-low-freq-factor"
                             : pelab_opts_get(opts, "llama3-high-freq-factor") ? "llama3-high-freq-factor"
                                                                               : NULL;
    if (llama3_opt && f->method != PELAB_ROPE_LLAMA3)
        return pelab_fail(PELAB_ERR_USAGE, "--%s applies only with --rope-scaling llama3 (not %s)",
                          llama3_opt, name);
    if (pelab_opts_get(opts, "longrope-factors") && f->method != PELAB_ROPE_LONGROPE)
        return pelab_fail(PELAB_ERR_USAGE, "--longrope-factors applies only with --rope-scaling "
                          "longrope (not %s)", name);
    if (original && f->method != PELAB_ROPE_DYNAMIC_NTK && f->method != PELAB_ROPE_YARN &&
        f->method != PELAB_ROPE_LLAMA3 && f->method != PELAB_ROPE_LONGROPE)
        return pelab_fail(PELAB_ERR_USAGE,
                          "--rope-original-len applies only with --rope-scaling dynamic-ntk, yarn, "
                          "llama3 or longrope (not %s)",
                          name);
    if (f->method == PELAB_ROPE_LLAMA3 && !(f->high_factor > f->low_factor))
        return pelab_fail(PELAB_ERR_USAGE, "--llama3-high-freq-factor %g must be above "
                          "--llama3-low-freq-factor %g", f->high_factor, f->low_factor);
    if (f->method == PELAB_ROPE_YARN && !(f->beta_fast > f->beta_slow))
        return pelab_fail(PELAB_ERR_USAGE, "--yarn-beta-fast %g must be above --yarn-beta-slow %g",
                          f->beta_fast, f->beta_slow);
    if (f->method == PELAB_ROPE_LONGROPE)
        return read_longrope_factors(f, pelab_opt_str(opts, S, "longrope-factors"));
    return PELAB_OK;
}

int pelab_rope_freqs_dynamic(const struct pelab_rope_freqs *f) {
    return f->method == PELAB_ROPE_DYNAMIC_NTK || f->method == PELAB_ROPE_LONGROPE;
}

double pelab_rope_pos_div(const struct pelab_rope_freqs *f) {
    return f->method == PELAB_ROPE_PI ? f->scale : 1;
}

double pelab_rope_amplitude(const struct pelab_rope_freqs *f) {
    if (f->method == PELAB_ROPE_YARN) return 0.1 * log(f->scale) + 1;
    if (f->method == PELAB_ROPE_LONGROPE && f->scale > 1 && f->original_len > 1)
        return sqrt(1 + log(f->scale) / log(f->original_len));
    return 1;
}

/* YaRN's blend of θ (rot_d/2,) in place. */
static void yarn_blend(const struct pelab_rope_freqs *f, double *theta) {
    const int d = f->rot_d;
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

/* Llama 3.1's blend of θ (rot_d/2,) in place, by wavelength. */
static void llama3_blend(const struct pelab_rope_freqs *f, double *theta) {
    const double s = f->scale, L = f->original_len, lo = f->low_factor, hi = f->high_factor;
    for (int i = 0; i < f->rot_d / 2; i++) {
        const double wavelength = TWO_PI / theta[i];
        if (wavelength < L / hi) continue;
        if (wavelength > L / lo) {
            theta[i] /= s;
            continue;
        }
        const double g = (L / wavelength - lo) / (hi - lo);
        theta[i] = (1 - g) * theta[i] / s + g * theta[i];
    }
}

void pelab_rope_frequencies(const struct pelab_rope_freqs *f, long L, double *theta) {
    const int d = f->rot_d;
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
    if (f->method == PELAB_ROPE_LLAMA3 && s != 1) llama3_blend(f, theta);
    if (f->method == PELAB_ROPE_LONGROPE) {
        const double *lambda = L > f->original_len ? f->long_factors : f->short_factors;
        for (int c = 0; c < d / 2; c++) theta[c] /= lambda[c];
    }
    for (int c = f->kept; c < f->d / 2; c++) theta[c] = 0; /* unrotated */
}
