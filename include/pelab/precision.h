/* pelab/precision.h — the arithmetic of the matrix products: float32, or bf16 operands with float32
 * accumulation (mixed precision on CPUs with AVX512-BF16, through oneDNN).
 *
 * The precision is a property of a context (pelab/ctx.h): every matrix product run in it uses it
 * (pelab_gemm, and through it every linear layer of a model that holds the context, forward and
 * backward, and the tiled attention kernel's tiles). pelab_ctx_init makes it PELAB_PRECISION_FP32.
 * pelab_train_in() and pelab_train_resume_in() set their context's from --precision for the run
 * and restore the caller's on return.
 *
 * In bf16 mode only the operands of the products are rounded (to nearest even, to bf16's 8
 * significant bits); the products accumulate and are written in float32 (pelab_real in the double
 * test build). That holds for the linear layers (through oneDNN) and for the tiled attention
 * kernel's score, value and gradient products (src/kernels/cpu/tile_bf16.h). Weights, gradients,
 * optimizer state, norms, softmax, loss, the encodings' trigonometry and biases stay in
 * pelab_real, as do the reference attention kernel (--attention ref, the oracle) and the KV-cached
 * generation's one-query attention. Checkpoints are unchanged: a run trained in one precision is evaluated in either.
 */
#ifndef PELAB_PRECISION_H
#define PELAB_PRECISION_H

struct pelab_ctx;

enum pelab_precision {
    PELAB_PRECISION_FP32, /* the default; the products' bits are those of the float32 build */
    PELAB_PRECISION_BF16  /* bf16 operands, float32 accumulation and output */
};

/* The --precision row of every option table that takes it (training's, eval's, sample's), an
 * initialiser of struct pelab_optdef (pelab/options.h); its choices are the enum's, in order. */
#define PELAB_OPT_ROW_PRECISION                                                                      \
    {"precision", PELAB_OPT_CHOICE, "fp32", 0, 0, "fp32|bf16",                                       \
     "matrix products (the linear layers' and attention's): fp32, or bf16 operands with float32 "    \
     "accumulation (CPUs with AVX512-BF16, a build with oneDNN); weights, gradients, optimizer, "    \
     "norms, softmax, loss and encodings stay float32; a run trained in either precision is "        \
     "evaluated in either"}

/* "fp32" or "bf16" into *p; PELAB_ERR_USAGE otherwise. */
int pelab_precision_parse(const char *name, enum pelab_precision *p);

/* "fp32" or "bf16". */
const char *pelab_precision_name(enum pelab_precision p);

/* PELAB_OK when `p` can run here. bf16 needs a build with oneDNN and a CPU with AVX512-BF16, as
 * oneDNN detects it (its ONEDNN_MAX_CPU_ISA environment variable can hide the instructions, e.g.
 * ONEDNN_MAX_CPU_ISA=AVX512_CORE, which is how the tests simulate a CPU without them); otherwise
 * PELAB_ERR_USAGE with a one-line message saying which is missing. With the environment variable
 * PELAB_BF16_EMULATION=1, an AVX-512 CPU without AVX512-BF16 runs bf16 on oneDNN's emulation
 * (operands rounded to bf16, float32 accumulation, the attention tiles on their portable loops;
 * slower than float32; the tests use it there), said on stderr by the first pelab_precision_set
 * to bf16 (once per process: the notice is about the CPU). */
int pelab_precision_check(enum pelab_precision p);

/* 1 when bf16 runs here on oneDNN's emulation (PELAB_BF16_EMULATION=1, above), else 0 (it runs
 * pelab_precision_check: where bf16 cannot run, the last error is its message). */
int pelab_bf16_emulated(void);

/* The instructions bf16's products run on here, e.g. "linear layers: oneDNN on AVX-512 with AMX;
 * attention tiles: AMX-BF16" (oneDNN's dispatch and tile_bf16.h's), for --version and the
 * benchmarks; "none" where bf16 cannot run. */
const char *pelab_bf16_kernels(void);

/* Checks `p` (pelab_precision_check) and makes it ctx's precision; on failure ctx is unchanged. */
int pelab_precision_set(struct pelab_ctx *ctx, enum pelab_precision p);

/* bf16's products against float32's here: float32's time of one 4096x512x512 product over bf16's
 * (> 1: bf16 is faster), on the thread count in force; measured once per CPU, bf16 kernels and
 * thread count and kept in $XDG_CACHE_HOME/pelab/bf16-probe (src/kernels/cpu/bf16_probe.c). 0 where
 * bf16 cannot run. */
double pelab_bf16_speedup(void);

/* When ctx's precision is bf16 (not emulated) and bf16 is slower than float32 here
 * (pelab_bf16_speedup below 1): one notice line on stderr saying so, once per process (it is
 * about the CPU, as the probe is). */
void pelab_bf16_advise(const struct pelab_ctx *ctx);

#endif
