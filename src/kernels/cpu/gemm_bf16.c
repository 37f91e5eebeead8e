/* The precision of the matrix products (pelab/precision.h) and the bf16 product itself:
 *
 *   C (M,N) = alpha · bf16(op(A)) · bf16(op(B)) + beta · C,   accumulated and written in float32
 *
 * bf16(x) rounds a float32 to the nearest bf16 (ties to even): the top 16 bits of its pattern,
 * 8 significant bits, relative error at most 2^-9. Each operand is rounded into a packed bf16 copy
 * (same layout, rows contiguous) and oneDNN's matmul primitive (bf16 × bf16 → f32) multiplies the
 * copies, with op() given to it as strides, alpha as its output scale and beta as a sum post-op.
 *
 * Why the copies: oneDNN 2.6 (Debian 12) accepts the fpmath_mode bf16 attribute on an f32 matmul
 * but still computes it in float32 on the CPU (measured here: the same brg:avx512_core kernel and
 * the same 5e-6 error as the strict mode on a 256x384x512 product), so the rounding has to be
 * done by hand. The rounding loop serves the double test build too, where oneDNN (no f64 on the
 * CPU) writes a float32 scratch that is then added into C.
 *
 * Per thread (oneDNN streams and the memory objects bound to user pointers must not be shared by
 * threads running at once): a stream, an LRU cache of primitives keyed by shape, transposes, ldc,
 * alpha and beta, and the bf16 buffers, grown to the largest product seen and reused, so a warm
 * training step allocates nothing here. All of it is freed when the thread ends. The engine is
 * one for the process: oneDNN's CPU engine stands for the machine, and creating one is costly.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/cpu/tile_bf16.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"
#include "pelab/ctx.h"
#include "pelab/status.h"

int pelab_precision_parse(const char *name, enum pelab_precision *p) {
    if (strcmp(name, "fp32") == 0) *p = PELAB_PRECISION_FP32;
    else if (strcmp(name, "bf16") == 0) *p = PELAB_PRECISION_BF16;
    else return pelab_fail(PELAB_ERR_USAGE, "--precision %s: expected fp32 or bf16", name);
    return PELAB_OK;
}

const char *pelab_precision_name(enum pelab_precision p) {
    return p == PELAB_PRECISION_BF16 ? "bf16" : "fp32";
}

/* Set by pelab_precision_check when bf16 runs on oneDNN's emulation (never without oneDNN): what
 * oneDNN found of the CPU, the process's as the CPU is. */
static _Atomic int bf16_emulated;

static void say_emulated(void) {
    fprintf(stderr, "pelab: --precision bf16 on oneDNN's emulation (PELAB_BF16_EMULATION=1 on a CPU "
                    "without AVX512-BF16): bf16's arithmetic, not its speed\n");
}

int pelab_bf16_emulated(void) {
    return pelab_precision_check(PELAB_PRECISION_BF16) == PELAB_OK && bf16_emulated;
}

int pelab_precision_set(struct pelab_ctx *ctx, enum pelab_precision p) {
    int rc = pelab_precision_check(p);
    if (rc) return rc;
    ctx->precision = p;
    if (p == PELAB_PRECISION_BF16 && bf16_emulated) { /* said once per process */
        static pthread_once_t said = PTHREAD_ONCE_INIT;
        pthread_once(&said, say_emulated);
    }
    return PELAB_OK;
}

#ifndef PELAB_DNNL

int pelab_precision_check(enum pelab_precision p) {
    if (p == PELAB_PRECISION_FP32) return PELAB_OK;
    return pelab_fail(PELAB_ERR_USAGE, "--precision bf16: this pelab was built without oneDNN "
                      "(install libdnnl-dev, e.g. with 'make deps', and rebuild)");
}

int pelab_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, pelab_real alpha,
                    const pelab_real *A, int lda, const pelab_real *B, int ldb, pelab_real beta,
                    pelab_real *C, int ldc) {
    return pelab_fail(PELAB_ERR_RUNTIME, "bf16 matrix product: this pelab was built without oneDNN");
}

int pelab_gemm_bf16_backward(pelab_real *dinp, pelab_real *dw, const pelab_real *dout, const pelab_real *inp,
                             const pelab_real *w, int N, int C, int OC, pelab_real beta) {
    return pelab_fail(PELAB_ERR_RUNTIME, "bf16 matrix product: this pelab was built without oneDNN");
}

const char *pelab_bf16_kernels(void) { return "none"; }

#else

#include <dnnl.h>

/* Rows r0..r1 of pack(): pelab_to_bf16 is branch-free, so each row's loop is one vector of
 * integer additions and selects at the CPU's SIMD level (16 lanes on AVX-512): the rounding runs
 * at the speed of memory, where the build's baseline SSE2 took about a quarter of a bf16
 * training step's products on AMX (perf, configuration C). */
static PELAB_ALWAYS_INLINE void pack_rows_body(uint16_t *dst, const pelab_real *src, long r0, long r1,
                                               long cols, long ld) {
    for (long r = r0; r < r1; r++) {
        const pelab_real *s = src + r * ld;
        uint16_t *d = dst + r * cols;
        for (long c = 0; c < cols; c++) d[c] = pelab_to_bf16((float)s[c]);
    }
}
PELAB_SIMD_KERNEL(pack_rows, (uint16_t *dst, const pelab_real *src, long r0, long r1, long cols, long ld),
                  (dst, src, r0, r1, cols, ld))

/* dst (rows, cols), rows contiguous = bf16 of src (rows, cols) with row stride ld. */
static void pack(uint16_t *dst, const pelab_real *src, long rows, long cols, long ld) {
    void (*const rows_fn)(uint16_t *, const pelab_real *, long, long, long, long) = pelab_simd_fn(pack_rows);
#pragma omp parallel if (rows * cols >= (1L << 15))
    {
        long r0, r1;
        pelab_thread_slice(rows, &r0, &r1);
        rows_fn(dst, src, r0, r1, cols, ld);
    }
}

struct entry {
    int trans_a, trans_b, M, N, K, ldc;
    float alpha, beta;
    unsigned long used; /* LRU tick; 0: empty */
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, dst; /* bound to the buffers at each call */
};

enum { CACHE = 48 }; /* distinct products of a training step: 3 per linear layer shape */

struct thread_state {
    dnnl_stream_t stream;
    struct entry cache[CACHE];
    unsigned long tick;
    uint16_t *a, *b; /* packed bf16 op(A) and op(B) as stored */
    size_t a_cap, b_cap;
#ifdef PELAB_DOUBLE
    float *c; /* the product in float32, added into the double C */
    size_t c_cap;
#endif
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t thread_key;
static dnnl_engine_t engine;
static dnnl_status_t engine_status = dnnl_runtime_error;

static void entry_free(struct entry *e) {
    if (e->prim) dnnl_primitive_destroy(e->prim);
    if (e->src) dnnl_memory_destroy(e->src);
    if (e->wei) dnnl_memory_destroy(e->wei);
    if (e->dst) dnnl_memory_destroy(e->dst);
    memset(e, 0, sizeof *e);
}

static void thread_state_free(void *p) {
    struct thread_state *x = p;
    if (!x) return;
    for (int i = 0; i < CACHE; i++) entry_free(&x->cache[i]);
    if (x->stream) dnnl_stream_destroy(x->stream);
    free(x->a);
    free(x->b);
#ifdef PELAB_DOUBLE
    free(x->c);
#endif
    free(x);
}

static void init_once(void) {
    engine_status = dnnl_engine_create(&engine, dnnl_cpu, 0);
    if (pthread_key_create(&thread_key, thread_state_free) != 0 && engine_status == dnnl_success) {
        dnnl_engine_destroy(engine);
        engine_status = dnnl_out_of_memory;
    }
}

static const char *isa_name(dnnl_cpu_isa_t isa) {
    switch (isa) {
    case dnnl_cpu_isa_sse41: return "SSE4.1";
    case dnnl_cpu_isa_avx: return "AVX";
    case dnnl_cpu_isa_avx2: return "AVX2";
    case dnnl_cpu_isa_avx2_vnni: return "AVX2-VNNI";
    case dnnl_cpu_isa_avx512_mic: return "AVX-512 (Xeon Phi)";
    case dnnl_cpu_isa_avx512_mic_4ops: return "AVX-512 (Xeon Phi, 4ops)";
    case dnnl_cpu_isa_avx512_core: return "AVX-512";
    case dnnl_cpu_isa_avx512_core_vnni: return "AVX-512 with VNNI";
    case dnnl_cpu_isa_avx512_core_bf16: return "AVX-512 with BF16";
    case dnnl_cpu_isa_avx512_core_amx: return "AVX-512 with AMX";
    default: return "no vector extension it uses";
    }
}

const char *pelab_dnnl_isa(void) { return isa_name(dnnl_get_effective_cpu_isa()); }

static int has_isa(dnnl_cpu_isa_t isa, dnnl_cpu_isa_t want) {
    return ((unsigned)isa & (unsigned)want) == (unsigned)want;
}

int pelab_precision_check(enum pelab_precision p) {
    if (p == PELAB_PRECISION_FP32) return PELAB_OK;
    /* What oneDNN will dispatch to: the CPU's instructions, capped by ONEDNN_MAX_CPU_ISA. Without
     * AVX512-BF16, oneDNN's AVX-512 kernels emulate the bf16 products (operands rounded to bf16,
     * float32 accumulation, slower than float32): allowed only when asked for, to test bf16 arithmetic on
     * such a CPU, never as a silent stand-in for the instructions. */
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    if (!has_isa(isa, dnnl_cpu_isa_avx512_core_bf16)) {
        const char *emulate = getenv("PELAB_BF16_EMULATION");
        if (!emulate || strcmp(emulate, "1") != 0 || !has_isa(isa, dnnl_cpu_isa_avx512_core))
            return pelab_fail(PELAB_ERR_USAGE, "--precision bf16 needs a CPU with AVX512-BF16 instructions; "
                              "oneDNN finds %s here%s", isa_name(isa),
                              has_isa(isa, dnnl_cpu_isa_avx512_core)
                                  ? " (PELAB_BF16_EMULATION=1 runs its slower emulation)" : "");
        bf16_emulated = 1;
    }
    pthread_once(&once, init_once);
    if (engine_status != dnnl_success)
        return pelab_fail(PELAB_ERR_RUNTIME, "--precision bf16: oneDNN could not create its CPU engine "
                          "(status %d)", (int)engine_status);
    return PELAB_OK;
}

const char *pelab_bf16_kernels(void) {
    static char text[128];
    if (pelab_precision_check(PELAB_PRECISION_BF16) != PELAB_OK) {
        pelab_clear_error();
        return "none";
    }
    snprintf(text, sizeof text, "linear layers: oneDNN on %s%s; attention tiles: %s",
             isa_name(dnnl_get_effective_cpu_isa()), bf16_emulated ? " (emulated bf16)" : "",
             pelab_tile_bf16_isa_name(pelab_tile_bf16_isa()));
    return text;
}

static struct thread_state *thread_state_get(void) {
    pthread_once(&once, init_once);
    if (engine_status != dnnl_success) return NULL;
    struct thread_state *x = pthread_getspecific(thread_key);
    if (x) return x;
    x = calloc(1, sizeof *x);
    if (!x) return NULL;
    if (dnnl_stream_create(&x->stream, engine, dnnl_stream_default_flags) != dnnl_success ||
        pthread_setspecific(thread_key, x) != 0) {
        thread_state_free(x);
        return NULL;
    }
    return x;
}

/* Grows *buf to n elements of `size` bytes (64-byte aligned), keeping nothing of the old one. */
static int reserve(void **buf, size_t *cap, size_t n, size_t size) {
    if (n <= *cap) return 0;
    free(*buf);
    *cap = 0;
    *buf = aligned_alloc(64, (n * size + 63) / 64 * 64);
    if (!*buf) return -1;
    *cap = n;
    return 0;
}

/* A 2-D memory descriptor of dims (r, c) with the given row and column strides. */
static dnnl_status_t md2(dnnl_memory_desc_t *md, long r, long c, dnnl_data_type_t t, long rs, long cs) {
    dnnl_dims_t dims = {r, c}, strides = {rs, cs};
    return dnnl_memory_desc_init_by_strides(md, 2, dims, t, strides);
}

/* The primitive for this product, from the cache or created (evicting the least recently used). */
static int lookup(struct thread_state *x, struct entry **out, int ta, int tb, int M, int N, int K, int ldc,
                  float alpha, float beta) {
    struct entry *e = NULL, *victim = &x->cache[0];
    for (int i = 0; i < CACHE; i++) {
        struct entry *c = &x->cache[i];
        if (c->used && c->trans_a == ta && c->trans_b == tb && c->M == M && c->N == N && c->K == K &&
            c->ldc == ldc && c->alpha == alpha && c->beta == beta) {
            e = c;
            break;
        }
        if (c->used < victim->used) victim = c;
    }
    if (e) {
        e->used = ++x->tick;
        *out = e;
        return PELAB_OK;
    }
    entry_free(victim);
    e = victim;
    /* op(A) (M,K): packed A is (M,K), or (K,M) when transposed; op(B) (K,N) likewise. */
    dnnl_memory_desc_t a, b, c;
    dnnl_matmul_desc_t mm;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t ops = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = md2(&a, M, K, dnnl_bf16, ta ? 1 : K, ta ? M : 1);
    if (s == dnnl_success) s = md2(&b, K, N, dnnl_bf16, tb ? 1 : N, tb ? K : 1);
    if (s == dnnl_success) s = md2(&c, M, N, dnnl_f32, ldc, 1);
    if (s == dnnl_success) s = dnnl_matmul_desc_init(&mm, &a, &b, NULL, &c);
    if (s == dnnl_success) s = dnnl_primitive_attr_create(&attr);
    if (s == dnnl_success && alpha != 1) s = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha);
    if (s == dnnl_success && beta != 0) {
        s = dnnl_post_ops_create(&ops);
        if (s == dnnl_success) s = dnnl_post_ops_append_sum(ops, beta);
        if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(attr, ops);
    }
    if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &mm, attr, engine, NULL);
    if (s == dnnl_success) s = dnnl_primitive_create(&e->prim, pd);
    if (s == dnnl_success) s = dnnl_memory_create(&e->src, &a, engine, DNNL_MEMORY_NONE);
    if (s == dnnl_success) s = dnnl_memory_create(&e->wei, &b, engine, DNNL_MEMORY_NONE);
    if (s == dnnl_success) s = dnnl_memory_create(&e->dst, &c, engine, DNNL_MEMORY_NONE);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (ops) dnnl_post_ops_destroy(ops);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) {
        entry_free(e);
        return pelab_fail(PELAB_ERR_RUNTIME, "bf16 matrix product %dx%dx%d: oneDNN could not create "
                          "its matmul (status %d)", M, N, K, (int)s);
    }
    *e = (struct entry){ta, tb, M, N, K, ldc, alpha, beta, ++x->tick, e->prim, e->src, e->wei, e->dst};
    *out = e;
    return PELAB_OK;
}

/* C = alpha · a · b + beta · C from the packed operands x->a (op(A) as stored) and x->b. */
static int product(struct thread_state *x, int trans_a, int trans_b, int M, int N, int K, pelab_real alpha,
                   pelab_real beta, pelab_real *C, int ldc) {
    struct entry *e;
    int rc;
#ifdef PELAB_DOUBLE
    if (reserve((void **)&x->c, &x->c_cap, (size_t)M * N, sizeof *x->c))
        return pelab_fail(PELAB_ERR_RUNTIME, "bf16 matrix product %dx%dx%d: out of memory", M, N, K);
    if ((rc = lookup(x, &e, trans_a, trans_b, M, N, K, N, 1, 0))) return rc;
    void *dst = x->c;
#else
    if ((rc = lookup(x, &e, trans_a, trans_b, M, N, K, ldc, alpha, beta))) return rc;
    void *dst = C;
#endif
    dnnl_status_t s = dnnl_memory_set_data_handle_v2(e->src, x->a, x->stream);
    if (s == dnnl_success) s = dnnl_memory_set_data_handle_v2(e->wei, x->b, x->stream);
    if (s == dnnl_success) s = dnnl_memory_set_data_handle_v2(e->dst, dst, x->stream);
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, e->src}, {DNNL_ARG_WEIGHTS, e->wei}, {DNNL_ARG_DST, e->dst}};
    if (s == dnnl_success) s = dnnl_primitive_execute(e->prim, x->stream, 3, args);
    if (s == dnnl_success) s = dnnl_stream_wait(x->stream);
    if (s != dnnl_success)
        return pelab_fail(PELAB_ERR_RUNTIME, "bf16 matrix product %dx%dx%d: oneDNN failed (status %d)",
                          M, N, K, (int)s);
#ifdef PELAB_DOUBLE
    for (long i = 0; i < M; i++)
        for (long j = 0; j < N; j++) {
            double p = alpha * (double)x->c[i * N + j];
            C[i * ldc + j] = beta == 0 ? p : p + beta * C[i * ldc + j];
        }
#endif
    return PELAB_OK;
}

/* The thread's context with room for packed operands of na and nb elements. */
static int ready(struct thread_state **out, size_t na, size_t nb, int M, int N, int K) {
    struct thread_state *x = thread_state_get();
    if (!x) return pelab_fail(PELAB_ERR_RUNTIME, "bf16 matrix product: out of memory or no oneDNN engine");
    if (reserve((void **)&x->a, &x->a_cap, na, sizeof *x->a) ||
        reserve((void **)&x->b, &x->b_cap, nb, sizeof *x->b))
        return pelab_fail(PELAB_ERR_RUNTIME, "bf16 matrix product %dx%dx%d: out of memory", M, N, K);
    *out = x;
    return PELAB_OK;
}

int pelab_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, pelab_real alpha,
                    const pelab_real *A, int lda, const pelab_real *B, int ldb, pelab_real beta,
                    pelab_real *C, int ldc) {
    if (M <= 0 || N <= 0) return PELAB_OK;
    if (K <= 0) {
        pelab_gemm_scale_only(C, M, N, ldc, beta);
        return PELAB_OK;
    }
    struct thread_state *x;
    int rc = ready(&x, (size_t)M * K, (size_t)K * N, M, N, K);
    if (rc) return rc;
    /* stored A: (M,K), or (K,M) when transposed; stored B: (K,N), or (N,K) */
    pack(x->a, A, trans_a ? K : M, trans_a ? M : K, lda);
    pack(x->b, B, trans_b ? N : K, trans_b ? K : N, ldb);
    return product(x, trans_a, trans_b, M, N, K, alpha, beta, C, ldc);
}

int pelab_gemm_bf16_backward(pelab_real *dinp, pelab_real *dw, const pelab_real *dout, const pelab_real *inp,
                             const pelab_real *w, int N, int C, int OC, pelab_real beta) {
    if (N <= 0 || C <= 0 || OC <= 0) { /* a product with nothing to sum, as the two gemms would */
        int rc = pelab_gemm_bf16(0, 0, N, C, OC, 1, dout, OC, w, C, beta, dinp, C);
        return rc ? rc : pelab_gemm_bf16(1, 0, OC, C, N, 1, dout, OC, inp, C, 1, dw, C);
    }
    struct thread_state *x;
    const size_t nb = (size_t)C * (OC > N ? OC : N);
    int rc = ready(&x, (size_t)N * OC, nb, N, C, OC);
    if (rc) return rc;
    pack(x->a, dout, N, OC, OC); /* (N,OC), for both products: as it is, then transposed */
    pack(x->b, w, OC, C, C);
    if ((rc = product(x, 0, 0, N, C, OC, 1, beta, dinp, C))) return rc;
    pack(x->b, inp, N, C, C);
    return product(x, 1, 0, OC, C, N, 1, 1, dw, C);
}

#endif
