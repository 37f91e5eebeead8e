/* The float build's exponential (kernels/cpu/vmath.h, and its vectors in kernels/cpu/vexp.h)
 * against libm's double exp, at every SIMD level this CPU runs (simd.h; PELAB_SIMD caps them):
 *   - pelab_vexp and pelab_vexp_prob applied by a loop compiled for the level (what the loss,
 *     GELU and the attention kernels' plain loops run), and at AVX-512 and AVX2 the vectors of
 *     vexp.h (what the tiled attention's rows run);
 *   - relative error at most 2^-23 on every 389th float of [ln FLT_MIN, 88] (PELAB_VEXP_MIN …
 *     PELAB_VEXP_MAX, by their bits: every binade alike), which holds the softmax's range x ≤ 0;
 *   - the edges: 0 below PELAB_VEXP_MIN and at −∞ (never a subnormal), e^88 above 88 and at +∞,
 *     NaN for NaN, 1 at ±0 and at a subnormal x; pelab_vexp_prob 0 below −69, the same bits as
 *     pelab_vexp from −69 to 0;
 *   - every form gives the same bits on every input, with subnormals flushed (FTZ and DAZ, as
 *     pelab's threads run) and kept.
 * Built twice: in float (build/tests/test_vexp_f32, where all of the above runs) and in double,
 * whose exponential is libm's (only the edges there). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/vexp.h"
#include "kernels/cpu/vmath.h"
#if defined(__x86_64__) || defined(__SSE__)
#include <xmmintrin.h>
#endif

#ifdef PELAB_DOUBLE

int main(void) {
    CHECK(pelab_vexp(-INFINITY) == 0 && pelab_vexp_prob(-INFINITY) == 0, "e^-inf is not 0");
    CHECK(isnan(pelab_vexp(NAN)) && isnan(pelab_vexp_prob(NAN)), "e^NaN is not NaN");
    CHECK(pelab_vexp(0) == 1 && fabs(pelab_vexp(-1) - 0.36787944117144233) < 1e-16, "e^0, e^-1");
    printf("  double build: libm's exp (the float exponential: test_vexp_f32)\n");
    return check_report("test_vexp");
}

#else

#ifdef PELAB_VEXP_VECTORS
/* vexp.h's vectors: out = e^x, unmasked (which 2) or pelab_vexp_prob (3); n a multiple of 16 */
PELAB_TARGET_AVX512 static void vectors_avx512(float *out, const float *x, long n, int which) {
    for (long i = 0; i < n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        _mm512_storeu_ps(out + i, which == 2 ? pelab_vexp16_unmasked(v) : pelab_vexp16_prob(v));
    }
}
PELAB_TARGET_AVX2 static void vectors_avx2(float *out, const float *x, long n, int which) {
    for (long i = 0; i < n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        _mm256_storeu_ps(out + i, which == 2 ? pelab_vexp8_unmasked(v) : pelab_vexp8_prob(v));
    }
}
#endif

/* The forms of the exponential at one level: out[i] = e^x[i] by pelab_vexp (which 0) or
 * pelab_vexp_prob (1) in a loop compiled for the level, or by vexp.h's vectors (2 unmasked, 3
 * prob; AVX-512 and AVX2). */
static PELAB_ALWAYS_INLINE void apply_body(enum pelab_simd_level level, float *restrict out,
                                           const float *restrict x, long n, int which) {
#ifdef PELAB_VEXP_VECTORS
    if (level == PELAB_SIMD_AVX512 && which >= 2) {
        vectors_avx512(out, x, n, which);
        return;
    }
    if (level == PELAB_SIMD_AVX2 && which >= 2) {
        vectors_avx2(out, x, n, which);
        return;
    }
#endif
    if (which == 1) {
        for (long i = 0; i < n; i++) out[i] = pelab_vexp_prob(x[i]);
    } else {
        for (long i = 0; i < n; i++) out[i] = pelab_vexp(x[i]);
    }
}
PELAB_SIMD_KERNEL_LEVEL(apply, (float *out, const float *x, long n, int which), (out, x, n, which))

/* the forms a level runs: 0 pelab_vexp, 1 pelab_vexp_prob (loops compiled for the level); 2, 3
 * the vectors of vexp.h, unmasked and prob (AVX-512 and AVX2) */
static int forms(enum pelab_simd_level l) {
#ifdef PELAB_VEXP_VECTORS
    if (l != PELAB_SIMD_PORTABLE) return 4;
#endif
    return 2;
}

static uint32_t bits(float x) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}
static float of_bits(uint32_t b) {
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

enum { STEP = 389, CHUNK = 1 << 20 };
static const float edges[] = {-INFINITY, -1e30f, -1000.0f, -104.0f, -88.0f, -87.6f, -87.34f, PELAB_VEXP_MIN,
                              -87.0f, -69.5f, -69.01f, -69.0f, -68.99f, -1e-40f, -0.0f, 0.0f, 1e-40f,
                              88.0f, 88.01f, 88.5f, 89.0f, 1e30f, INFINITY, NAN};

/* Input i of the sweep: every STEP-th float from PELAB_VEXP_MIN down to −0 (by their bits), then
 * from +0 up to 88, then the edges; false past the last. */
static int input(long i, float *x) {
    const long neg = (long)(bits(PELAB_VEXP_MIN) - 0x80000000u) / STEP + 1, pos = (long)bits(PELAB_VEXP_MAX) / STEP + 1;
    if (i < neg) *x = of_bits(bits(PELAB_VEXP_MIN) - (uint32_t)(i * STEP));
    else if (i < neg + pos) *x = of_bits((uint32_t)((i - neg) * STEP));
    else if (i < neg + pos + (long)(sizeof edges / sizeof *edges)) *x = edges[i - neg - pos];
    else return 0;
    return 1;
}

struct tally {
    double worst; float at;                 /* the largest relative error and its input */
    long differ; float first, got, want;    /* results with other bits than the scalar function's */
    long wrong; float bad, bad_got;         /* results off the edges' values (0, e^88, NaN, normal) */
};

/* Form `which`'s results got on x (n) against exp, the edges, and want (the scalar function's). */
static void check_form(struct tally *t, int which, const float *x, const float *got, const float *want, long n) {
    const int prob = which == 1 || which == 3;
    for (long i = 0; i < n; i++) {
        const float v = x[i];
        if (which == 2 && !(v >= PELAB_VEXP_MIN && v <= PELAB_VEXP_MAX)) continue; /* defined there only */
        if (prob && v > PELAB_VEXP_MAX) continue; /* nor is the probability's above 88 */
        if (bits(got[i]) != bits(want[i]) && !(isnan(got[i]) && isnan(want[i]))) {
            if (!t->differ) t->first = v, t->got = got[i], t->want = want[i];
            t->differ++;
        }
        int ok;
        if (isnan(v)) ok = isnan(got[i]);
        else if (prob && v < PELAB_VEXP_PROB_MIN) ok = bits(got[i]) == 0;
        else if (prob && v > 0) ok = 1; /* not a probability's numerator */
        else if (v < PELAB_VEXP_MIN) ok = bits(got[i]) == 0;
        else if (v > PELAB_VEXP_MAX) ok = bits(got[i]) == PELAB_VEXP_MAX_BITS;
        else {
            const double e = exp((double)v), rel = fabs((double)got[i] - e) / e;
            if (!(rel <= t->worst)) t->worst = rel, t->at = v;
            ok = got[i] >= 0x1p-126f; /* never below float's normal range */
        }
        if (!ok && !t->wrong++) t->bad = v, t->bad_got = got[i];
    }
}

/* x86's flush-to-zero and denormals-are-zero bits set (on) or cleared; the old control word. */
static unsigned set_flush(int on) {
#if defined(__x86_64__) || defined(__SSE__)
    const unsigned old = _mm_getcsr(), ftz_daz = 0x8040;
    _mm_setcsr(on ? old | ftz_daz : old & ~ftz_daz);
    return old;
#else
    (void)on;
    return 0;
#endif
}
static void restore_flush(unsigned old) {
#if defined(__x86_64__) || defined(__SSE__)
    _mm_setcsr(old);
#else
    (void)old;
#endif
}

int main(void) {
    float *x = malloc(CHUNK * sizeof *x), *got = malloc(CHUNK * sizeof *got), *want[3];
    for (int k = 0; k < 3; k++) want[k] = malloc(CHUNK * sizeof *want[k]);
    if (!x || !got || !want[0] || !want[1] || !want[2]) return 1;
    struct tally tally[2][PELAB_SIMD_LEVELS][4];
    memset(tally, 0, sizeof tally);
    long total = 0;
    for (int flush = 0; flush < 2; flush++) {
        const unsigned old = set_flush(flush);
        for (long i0 = 0;; i0 += CHUNK) {
            long n = 0;
            while (n < CHUNK && input(i0 + n, &x[n])) n++;
            if (n == 0) break;
            const long padded = (n + 15) / 16 * 16;
            for (long i = n; i < padded; i++) x[i] = 0;
            /* the scalar functions, compiled for the build's target: the bits every form must give */
            for (long i = 0; i < padded; i++) {
                want[0][i] = pelab_vexp(x[i]);
                want[1][i] = pelab_vexp_prob(x[i]);
                want[2][i] = pelab_vexp_unmasked(x[i]);
            }
            for (int l = 0; l < PELAB_SIMD_LEVELS; l++) {
                if (!pelab_simd_supported((enum pelab_simd_level)l)) continue;
                pelab_simd_force((enum pelab_simd_level)l);
                for (int which = 0; which < forms((enum pelab_simd_level)l); which++) {
                    pelab_simd_fn(apply)(got, x, padded, which);
                    check_form(&tally[flush][l][which], which, x, got, want[which == 3 ? 1 : which], n);
                }
            }
            if (!flush) total += n;
        }
        restore_flush(old);
    }
    printf("  %ld inputs: every %dth float of [%g, %g] and the edges\n", total, STEP, PELAB_VEXP_MIN, PELAB_VEXP_MAX);
    static const char *const form_names[] = {"pelab_vexp", "pelab_vexp_prob", "vector unmasked", "vector prob"};
    int levels = 0;
    for (int l = 0; l < PELAB_SIMD_LEVELS; l++) {
        const char *name = pelab_simd_name((enum pelab_simd_level)l);
        if (!pelab_simd_supported((enum pelab_simd_level)l)) {
            printf("  %-8s not supported here: skipped\n", name);
            continue;
        }
        levels++;
        for (int flush = 0; flush < 2; flush++)
            for (int which = 0; which < forms((enum pelab_simd_level)l); which++) {
                const struct tally *t = &tally[flush][l][which];
                const char *mode = flush ? "subnormals flushed" : "subnormals kept";
                CHECK(t->worst <= 0x1p-23, "%s %s (%s): relative error %.3g (%.2f x 2^-23) at e^%.9g", name,
                      form_names[which], mode, t->worst, t->worst / 0x1p-23, t->at);
                CHECK(t->wrong == 0, "%s %s (%s): %ld results off the edges' values (0 below %g or -69, e^88 above 88, "
                      "NaN for NaN, else normal), first e^%.9g = %.9g", name, form_names[which], mode, t->wrong,
                      PELAB_VEXP_MIN, t->bad, t->bad_got);
                CHECK(t->differ == 0, "%s %s (%s): %ld results differ from the scalar function's bits, first e^%.9g = %.9g "
                      "(want %.9g)", name, form_names[which], mode, t->differ, t->first, t->got, t->want);
                if (!flush && which == 0)
                    printf("  %-8s max relative error %.3g (%.2f x 2^-23) at e^%.9g\n", name, t->worst,
                           t->worst / 0x1p-23, t->at);
            }
    }
    CHECK(levels > 0, "no SIMD level ran");
    free(x), free(got), free(want[0]), free(want[1]), free(want[2]);
    return check_report("test_vexp_f32");
}

#endif
