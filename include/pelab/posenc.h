/* pelab/posenc.h — the positional-encoding interface.
 *
 * An encoding acts at one or more sites. Three have places of their own, and functions of their
 * own in the table below:
 *   EMBED  adds e(p) to the token embedding                    (learned, sinusoidal, seqpe input)
 *   QK     transforms each head's query and key before q·k      (rope, pope, xpos, seqpe attn-*)
 *   BIAS   adds bias(h, t, s) to the attention logits           (alibi, t5, fire)
 * The others act inside each block through buffers the encoding computes per layer and the
 * attention kernels read, and are data (src/posenc/site.h): each declares its buffers with their
 * shapes, what the encoding's hooks read, and what the kernels do with the buffers; an encoding
 * lists each such site it acts at with its two hooks there (`layer_sites` below). Built in:
 *   KEY    adds kb(h, s), which it computes from the layer's input, to every logit of key s (fox)
 *   COUNT  counts positions by the content (cope): p(t, s) = Σ_{u=s..t} σ(S⁰[t, u]), S⁰ the logits
 *          as the other terms make them, and adds z_t(p(t, s)): its logits of the counted
 *          positions 0..P−1 from query t, linear between integers, p clamped at P − 1
 * Positions are always an explicit int32 array of shape (B, T, n) — n = pe->pos_dims coordinates
 * per token: 1 for text, 2 (row, column) for image patches — so shifted or offset positions cost
 * nothing. Where a function below says pos (B,T), read (B,T,n); a 1-D encoding (the default,
 * ops->dims 0) only ever sees n = 1. A QK encoding may change the per-head query/key width (PoPE makes it 2d) while
 * values keep width d. A BIAS encoding is evaluated on tiles of (query positions × key
 * positions), so attention kernels never need a T×T buffer from it. KEY is the site of an encoding that
 * reads the tokens: its values come from the block's normed input x (what q, k, v are computed
 * from), one per (token, head), and any bias a(t) + b(s) of such values is one, since a query's
 * own term a(t) cancels in its softmax. COUNT is the site of positions the content counts (CoPE):
 * the kernels form the gates and their running sums over keys; the encoding gives, per query, the
 * logits z_t of the P integer positions (pe->count_max), from the queries after QK.
 *
 * To add an encoding: write src/posenc/pe_<name>.c defining one `const struct pelab_posenc_ops`,
 * and list it in src/posenc/posenc.c. Its parameters are declared by name in the model's
 * parameter table, which gives them gradients, optimizer state and checkpoint names. The table
 * also states the encoding's contract (`contract` below), and tests/test_contract.c checks every
 * registered encoding against it with no test edited. To add a site inside the blocks: declare a
 * `struct pelab_pe_site_decl` (src/attn/site_key.c is the smallest), nothing else: docs/POSENC.md,
 * "Adding an encoding" and "Adding a site".
 */
#ifndef PELAB_POSENC_H
#define PELAB_POSENC_H

#include <stddef.h>
#include <stdint.h>
#include "pelab/options.h"
#include "pelab/params.h"
#include "pelab/real.h"
#include "pelab/rng.h"

/* The sites' bits (ops->sites, pe->sites). A site declared outside src/ (a test's) takes a bit
 * above these. */
enum pelab_pe_site {
    PELAB_SITE_EMBED = 1 << 0,
    PELAB_SITE_QK = 1 << 1,
    PELAB_SITE_BIAS = 1 << 2,
    PELAB_SITE_KEY = 1 << 3,
    PELAB_SITE_COUNT = 1 << 4
};

struct pelab_posenc;
struct pelab_ctx;
struct pelab_pe_fine_tune;
struct pelab_pe_site_decl; /* a site inside the blocks, declared (src/posenc/site.h) */
struct pelab_pe_site_io; /* what an encoding's hooks there read and write (the same header) */

/* An encoding's part at one site inside the blocks: the site, and the encoding's two hooks there,
 * for one layer of a batch. forward assigns the site's OUT buffers (io->out) from what the site
 * reads (io->in); backward adds to io->din and to the encoding's parameters' gradients from the
 * gradients of those buffers (io->dout). */
struct pelab_pe_site_hooks {
    const struct pelab_pe_site_decl *site;
    void (*forward)(struct pelab_posenc *pe, int layer, const struct pelab_pe_site_io *io);
    void (*backward)(struct pelab_posenc *pe, int layer, const struct pelab_pe_site_io *io);
};

/* What an encoding promises beyond the interface, in its table's `contract`. */
enum pelab_pe_promise {
    /* Outputs depend on positions only through their differences t − s: shifting every position
     * of a sequence by the same amount leaves the model's outputs unchanged. */
    PELAB_PE_RELATIVE = 1 << 0,
    /* Also valid without the causal mask (a bidirectional model: the image task). The model
     * refuses a causal-only encoding on a bidirectional task, and the contract test checks an
     * encoding that sets it without the mask too (gradients, tiled kernel against reference). */
    PELAB_PE_BIDIRECTIONAL = 1 << 1,
};

#define PELAB_PE_VARIANTS_MAX 16

struct pelab_pe_contract {
    unsigned promises; /* PELAB_PE_* bits; 0: absolute and causal-only */
    /* Settings of its options under which every test of encodings runs it, besides its defaults
     * (tests/lib/models.h): each a string "key=value key=value", NULL-terminated (at most
     * PELAB_PE_VARIANTS_MAX). One for each option that chooses a different computation (a site, a
     * layout, a parameterisation, a method), and for each range of a numeric option where another
     * branch of its formula applies. */
    const char *const variants[PELAB_PE_VARIANTS_MAX + 1];
    /* Optional: the option that sets how many positions it represents (a table's length), for an
     * encoding that refuses positions past it (by default the training length). A test whose
     * positions run further sets it for a case that would refuse them. */
    const char *reach;
    /* Optional: a setting "key=value ..." that makes it cheaper to run without choosing another
     * computation (the sizes of its own networks and samples), for tests that run every case many
     * times (gradient checks, the PyTorch twin); a case's own settings win, so a variant that sets
     * such a size keeps the full one under test. */
    const char *small;
};

#define PELAB_PE_AUX_MAX 4 /* loss terms an encoding may add (aux_names) */

/* The rows of the query and key tiles the tiled attention kernel hands an encoding (bias_tile, the
 * sites' tile hooks) unless its caller chooses another tile: an encoding may keep a tile's work on
 * the stack (FIRE's table of distances). Here, below the kernels, so that encodings need not
 * reach up into them for it. */
#define PELAB_PE_TILE 64

/* The positions' shape a model gives its encoding (pelab_posenc_init_nd). */
struct pelab_pe_layout {
    int dims;          /* n: coordinates per position, 1 or 2 */
    int bidirectional; /* attention without the causal mask */
    int grid;          /* n = 2: side G of the training grid (coordinates 1..G; learned2d's table) */
};

struct pelab_posenc_ops {
    const char *name;
    const char *summary; /* one line: what it is and where it comes from */
    unsigned sites;      /* PELAB_SITE_* bits: every site it may act at (pe->sites: where it does) */
    /* Position dimensionalities it serves, as bits 1 << n: 0 means 1-D only (1 << 1). A 2-D
     * encoding lists 1 << 2; nope, which reads no position, lists both. */
    unsigned dims;
    const struct pelab_optdef *options; /* its own options, NULL-name terminated; may be NULL */
    /* Optional: options that change how a trained model is evaluated, not what it learns (RoPE's
     * length extension, the learned table's interpolation). `eval` and `sample` accept them for a
     * run of this encoding; training refuses them and config.json never records them. init reads
     * them from the same opts as `options`. */
    const struct pelab_optdef *eval_options;
    struct pelab_pe_contract contract;
    /* Optional: for each option added after runs of the encoding were recorded whose default is
     * not what those runs did, "key=value" with the value they were made with; NULL-terminated.
     * Reading a run's config.json back sets each key it lacks to that value
     * (pelab_run_read_config), so such a run evaluates and resumes as it was trained. */
    const char *const *unrecorded;

    /* Reads its options (already checked against `options`), validates them against the model
     * shape in `pe`, sets pe->qk_dim when it acts at QK, declares its parameters in `params`
     * (with decay 0, but for a projection of the tokens such as FoX's gate: decayed as q, k are). Returns PELAB_OK or PELAB_ERR_USAGE naming the option at fault. pe->sites
     * starts as `sites`; an encoding whose options choose its site (SeqPE's --seqpe-mode) clears
     * the bits of the sites it does not use: callers dispatch on pe->sites, never on which
     * functions the table has. */
    int (*init)(struct pelab_posenc *pe, const struct pelab_opts *opts, struct pelab_params *params);
    void (*free)(struct pelab_posenc *pe);
    /* Writes initial values of its parameters. */
    void (*init_params)(struct pelab_posenc *pe, struct pelab_rng *rng);

    /* Optional. Called once per forward pass, before any layer, with that pass's positions: work
     * that depends only on positions (cos/sin tables, SeqPE's embeddings) is done here once and
     * shared by every layer and by the backward pass. A position the encoding cannot represent
     * (beyond a learned table) is refused here: PELAB_ERR_USAGE naming the position and the
     * option that would allow it. */
    int (*prepare)(struct pelab_posenc *pe, const int32_t *pos, int B, int T);

    /* EMBED.  out (B,T,D) += e(pos);  backward: parameter grads += from dout (B,T,D) (none for an
     * encoding without parameters). */
    void (*embed_forward)(struct pelab_posenc *pe, pelab_real *out, const int32_t *pos, int B, int T);
    void (*embed_backward)(struct pelab_posenc *pe, const pelab_real *dout, const int32_t *pos,
                           int B, int T);

    /* QK, for one layer.  q, k: (B,T,H,d) with row stride `ld` between tokens (they sit inside
     * the fused qkv buffer);  qo, ko: (B,H,T,qk_dim), contiguous.
     * backward: dq, dk (B,T,H,d, stride ld) are assigned; parameter grads +=. */
    void (*qk_forward)(struct pelab_posenc *pe, int layer, pelab_real *qo, pelab_real *ko,
                       const pelab_real *q, const pelab_real *k, int ld, const int32_t *pos,
                       int B, int T);
    void (*qk_backward)(struct pelab_posenc *pe, int layer, pelab_real *dq, pelab_real *dk,
                        const pelab_real *dqo, const pelab_real *dko, const pelab_real *q,
                        const pelab_real *k, int ld, const int32_t *pos, int B, int T);

    /* Optional. Called once at the end of each backward pass of the model, after every site's
     * backward (EMBED's last): an encoding whose sites share one network of positions (SeqPE's
     * encoder, whose embeddings feed every layer) backpropagates into that network here, once,
     * from what the site backwards gathered. */
    void (*backward_end)(struct pelab_posenc *pe);

    /* Optional, for analyses: the encoding's own vector of each position, e_p ∈ R^D (SeqPE's
     * encoder output), out (n, D). PELAB_ERR_USAGE for a position it cannot represent. */
    int (*position_vectors)(struct pelab_posenc *pe, const int32_t *pos, int n, pelab_real *out);

    /* Optional, training only: the training loop calls these, evaluation never does. */
    /* Rewrites the positions (B,T) of one training micro-batch in place, as a function of `key`
     * alone so that a resumed run repeats it (SeqPE starts some sequences at a shifted position). */
    void (*train_positions)(struct pelab_posenc *pe, int32_t *pos, int B, int T, uint64_t key);
    /* Loss terms of the encoding's own, added to the task's loss (SeqPE's regularisers).
     * aux_names: the terms' names, NULL-terminated, at most PELAB_PE_AUX_MAX; log.jsonl records
     * each term's mean under its name. aux_forward, called once per micro-batch after the model's
     * backward, draws whatever it needs from `key` alone, sets terms[i] to each term's value (NaN
     * for a term its options switch off) and *total to what the objective adds (their weighted
     * sum); PELAB_OK, or PELAB_ERR_RUNTIME (out of memory). aux_backward then adds
     * scale·∂total/∂θ to the parameters' gradients. */
    const char *const *aux_names;
    int (*aux_forward)(struct pelab_posenc *pe, uint64_t key, double *terms, double *total);
    void (*aux_backward)(struct pelab_posenc *pe, pelab_real scale);

    /* BIAS, for one layer and head.  out (nq, nk): out[i][j] = bias(pos_q[i], pos_k[j]), assigned;
     * pos_q (nq, n), pos_k (nk, n).
     * backward: parameter grads += from dout (nq, nk) into `grad`, an array laid out as the
     * encoding's own range of the parameter table's gradients (pelab_posenc_grad gives one
     * parameter's part). In a causal model, entries with key j after query i are masked by the
     * caller; they are computed but receive zero gradient. Both may run on several threads at once: bias_tile
     * writes only `out`, and each thread passes bias_tile_backward its own `grad` (the reference
     * kernel calls it serially in (b, h) order with the table's gradients; the tiled kernel gives
     * each thread an array of pelab_posenc_grad_count reals and sums them in thread order).
     * Neither writes anything else of the encoding's, except that bias_tile_backward may leave
     * sums for backward_end to finish in scratch of its own kept per thread (by the OpenMP thread
     * number of the caller's team: FIRE's upstream gradient summed per distance, so that its MLP's
     * backward runs once per distance of a pass rather than once per distance of each tile). */
    void (*bias_tile)(struct pelab_posenc *pe, int layer, int h, pelab_real *out,
                      const int32_t *pos_q, int nq, const int32_t *pos_k, int nk);
    void (*bias_tile_backward)(struct pelab_posenc *pe, int layer, int h, pelab_real *grad,
                               const pelab_real *dout, const int32_t *pos_q, int nq,
                               const int32_t *pos_k, int nk);

    /* The sites inside the blocks it may act at (src/posenc/site.h: KEY, COUNT, or one of its
     * own), each with its hooks; ended by an entry whose site is NULL. Each site's bit is in
     * `sites`; init may clear it. KEY: io->out[0] = kb (B,H,T) from x, io->prev[0] in generation
     * (each sequence's kb at its last cached position) for a running sum to continue; COUNT:
     * io->out[0] = z (B,H,T,P) from the queries after QK, P = pe->count_max set by init. */
    const struct pelab_pe_site_hooks *layer_sites;

    /* Optional, for the frequency-usage analysis (pelab/freq.h): QK encodings whose query/key
     * components turn at frequencies. freqs returns their number F and, when theta is not
     * NULL, writes θ_c (F,) in radians per position, as the last pass used them (the trained
     * ones unless an evaluation-time option changes them). freq_norms writes out (F,): the
     * magnitude that frequency c carries in one head vector x (d,) of a query or key as projected,
     * before the encoding — RoPE: the norm of pair c, which its rotation keeps; PoPE: μ_c. */
    int (*freqs)(const struct pelab_posenc *pe, double *theta);
    void (*freq_norms)(const struct pelab_posenc *pe, double *out, const pelab_real *x);

    /* Optional, for generation with a KV cache (pelab/kv_cache.h), which keeps each layer's keys
     * after QK and calls prepare and the sites on the new tokens alone: PELAB_OK when what
     * earlier passes computed for positions 0..len-1 stays what one pass over all of them would
     * compute, else PELAB_ERR_USAGE saying why (an evaluation-time option that rescales every
     * position with the pass's length: dynamic NTK, the learned table's interpolation). NULL: it
     * always does. */
    int (*cache_check)(const struct pelab_posenc *pe, long len);

    /* Optional: writes into opts the value it chose for each of its options left automatic (0:
     * SeqPE's digits, coordinates, encoder width and heads, L_max), so that what a new run records
     * is what it runs and a reader of config.json needs none of pelab's rules. PELAB_OK, or
     * PELAB_ERR_USAGE when opts is full. */
    int (*resolve)(const struct pelab_posenc *pe, struct pelab_opts *opts);

    /* Optional: PELAB_ERR_USAGE for an option of `eval_options` in `given` (those given anew, to
     * an evaluation or a fine-tune) that does nothing in `settings` (what the run will use):
     * RoPE's --rope-scale without a method. A run that recorded such a setting before the check
     * existed still opens, as only what is given anew is checked. */
    int (*eval_check)(const struct pelab_opts *given, const struct pelab_opts *settings);
    /* Optional: evaluation-time options that are also settings of a fine-tune (--init-from),
     * which trains with them, records them and evaluates with them (struct pelab_pe_fine_tune).
     * NULL: training refuses every option of `eval_options`. */
    const struct pelab_pe_fine_tune *fine_tune;

    /* Optional, for analyses (analyze bias, analyze probe): a learned phase bias of the keys,
     * score(t, s) = Σ_c m_c cos((t − s)·θ_c − δ_c) with θ_c as `freqs` gives them (PoPE's δ).
     * Writes delta (H, F) of `layer` as the forward pass uses it (clamped as it clamps it);
     * PELAB_OK, or PELAB_ERR_USAGE saying why the run has none (an option switched it off). */
    int (*phase_bias)(const struct pelab_posenc *pe, int layer, double *delta);
    /* With freq_norms (required then): the name analyses give the magnitude it measures of a
     * frequency ("pair norm", "μ_c"). */
    const char *freq_label;
    /* Optional: the encoding's name as tables and figures print it ("RoPE"); NULL: `name`.
     * `pelab help encodings --json` lists it (lab/scripts/encodings.json, which tables.py reads). */
    const char *display;
};

/* The evaluation-time options of an encoding that a fine-tune trains with (ops->fine_tune). The
 * first option of `eval_options` chooses the method (RoPE's --rope-scaling), the others are the
 * method's settings. A fine-tune of a fine-tuned run keeps the source's unless the method is
 * given anew; then the source's settings the new method does not read are left out. */
struct pelab_pe_fine_tune {
    /* Whether the settings in opts read option `name` of eval_options (RoPE: --rope-original-len
     * only with dynamic-ntk, yarn, llama3 and longrope; without a method, none of the methods'
     * settings). */
    int (*reads)(const struct pelab_opts *opts, const char *name);
    /* The option of eval_options that measures from the training context, which a fine-tune
     * sets to the source run's context when its settings read it and it is not given (RoPE's
     * --rope-original-len: L_train is the context the source learned, not the new --seq-len);
     * NULL: none. */
    const char *source_context;
};

struct pelab_posenc {
    const struct pelab_posenc_ops *ops;
    /* Model shape, set by the model before init. */
    int D, H, d, n_layers;
    int max_seq;   /* training context length */
    int pos_dims;  /* n: coordinates per position (pelab_pe_layout) */
    int bidirectional; /* the model attends without the causal mask */
    int grid;      /* 2-D: side of the training grid */
    int qk_dim;    /* per-head query/key width after QK (d unless the encoding changes it) */
    int count_max; /* P, letter P of site buffers' shapes: COUNT's counted positions 0..P−1 (p
                      clamped at P − 1) */
    unsigned sites;/* PELAB_SITE_* bits it acts at: ops->sites, narrowed by init to its options' */
    struct pelab_params *params;
    /* The context its matrix products run in (pelab/ctx.h: SeqPE's encoder and projections,
     * CoPE's logits), its model's: set by the model after init (pelab_posenc_init clears it). */
    struct pelab_ctx *ctx;
    /* Its parameters are params->list[param_first .. param_end), set by pelab_posenc_init: declared
     * one after another, so their values (and gradients) are one contiguous range, which lets an
     * attention kernel give each thread its own array of the BIAS gradients. */
    int param_first, param_end;
    void *state;   /* the encoding's own */
    /* Set by a KV cache around its passes (0 otherwise): an encoding that measures positions from
     * a reference of its own choosing per pass (xPos centres each row) takes cache_ref instead,
     * so that keys cached by earlier passes and the queries of later ones share it. */
    int has_cache_ref;
    int64_t cache_ref;
};

/* The registry. */
const struct pelab_posenc_ops *pelab_posenc_find(const char *name);
/* All registered encodings, NULL-terminated. */
const struct pelab_posenc_ops *const *pelab_posenc_all(void);
/* Adds an encoding defined outside src/posenc/ (a test's, or a program's) to the registry, after
 * the built-in ones: PELAB_OK, or PELAB_ERR_USAGE when its name is taken or the registry is full. */
int pelab_posenc_register(const struct pelab_posenc_ops *ops);

/* Creates the encoding `name` for a model of the given shape; checks and reads its options (its
 * table and its evaluation-time table). PELAB_ERR_USAGE for an unknown name (the message lists the
 * known ones). */
int pelab_posenc_init(struct pelab_posenc *pe, const char *name, const struct pelab_opts *opts,
                      struct pelab_params *params, int D, int H, int n_layers, int max_seq);
/* The same for positions of the given layout (NULL: 1-D, causal). PELAB_ERR_USAGE, one line, when
 * the encoding does not serve the layout: a 1-D encoding on 2-D positions (the message names the
 * 2-D encodings and --positions raster), a 2-D one on 1-D positions, a causal-only one on a
 * bidirectional model. */
int pelab_posenc_init_nd(struct pelab_posenc *pe, const char *name, const struct pelab_opts *opts,
                         struct pelab_params *params, int D, int H, int n_layers, int max_seq,
                         const struct pelab_pe_layout *layout);
/* 1 when the encoding serves positions of n coordinates. */
int pelab_posenc_serves(const struct pelab_posenc_ops *ops, int n);
void pelab_posenc_free(struct pelab_posenc *pe);

/* For encodings of 2-D positions: the side G' of one sequence's grid, its largest coordinate (at
 * least 1); pos (T, 2). */
int pelab_posenc_grid_side(const int32_t *pos, int T);

/* For encodings: tables cos/sin (ntok, n) of the angles pos[i]·theta[c], formed in double so
 * large positions keep their precision. The buffers grow as needed (*cap counts elements of
 * each). PELAB_ERR_RUNTIME when out of memory. */
int pelab_posenc_angles(pelab_real **cos, pelab_real **sin, long *cap, const int32_t *pos,
                        long ntok, const double *theta, int n);
/* The same for positions (ntok, dims): angle c of token i is pos[i·dims + axis[c]]·theta[c]
 * (axis NULL: coordinate 0 for every c). */
int pelab_posenc_angles_nd(pelab_real **cos, pelab_real **sin, long *cap, const int32_t *pos, long ntok,
                           int dims, const int *axis, const double *theta, int n);

/* The value runs of `ops` recorded without its option `name` were made with (ops->unrecorded),
 * or NULL when the table gives none (such a run's absent option is the default). */
const char *pelab_posenc_unrecorded(const struct pelab_posenc_ops *ops, const char *name);

/* The encoding, if any, whose evaluation-time table defines option `name`, else NULL. */
const struct pelab_posenc_ops *pelab_posenc_eval_option_owner(const char *name);

/* Whether evaluation-time option `name` is also a setting of a fine-tune (--init-from): an option
 * of an encoding with a `fine_tune` table (RoPE's length extension), which the fine-tuned run
 * trains with, records and evaluates with. */
int pelab_posenc_fine_tune_option(const char *name);

/* Every registered encoding's eval_check of the options `given` anew against `settings`: the
 * first PELAB_ERR_USAGE, else PELAB_OK. */
int pelab_posenc_eval_check(const struct pelab_opts *given, const struct pelab_opts *settings);

/* The name tables and figures print: ops->display, else ops->name. */
const char *pelab_posenc_display(const struct pelab_posenc_ops *ops);

/* The encoding's gradients as one range: pelab_posenc_grad_count reals of the parameter table's
 * gradients from pelab_posenc_table_grad(pe) on. */
size_t pelab_posenc_grad_count(const struct pelab_posenc *pe);
pelab_real *pelab_posenc_table_grad(const struct pelab_posenc *pe);
/* Parameter `param`'s part of `grad`, an array laid out as the encoding's gradient range. */
pelab_real *pelab_posenc_grad(const struct pelab_posenc *pe, pelab_real *grad, int param);

/* The names of the sites in `sites` (PELAB_SITE_* bits), each followed by a space: "EMBED QK ". */
void pelab_posenc_site_names(unsigned sites, char *out, size_t size);

/* The model's calls: they run the encoding's site functions, or the identity where it does not
 * act at that site (QK: q, k are copied into (B,H,T,d) layout; EMBED: nothing). The sites inside
 * the blocks have theirs in src/posenc/site.h. */
void pelab_posenc_embed_forward(struct pelab_posenc *pe, pelab_real *out, const int32_t *pos, int B, int T);
void pelab_posenc_embed_backward(struct pelab_posenc *pe, const pelab_real *dout, const int32_t *pos,
                                 int B, int T);
int pelab_posenc_prepare(struct pelab_posenc *pe, const int32_t *pos, int B, int T);
/* ops->backward_end where the encoding has one: every caller of the site backwards (the model, a
 * test of one attention kernel) calls it once after them, or the gradients may be incomplete. */
void pelab_posenc_backward_end(struct pelab_posenc *pe);
/* --random-positions N (posenc/random_positions.c): the positions (B,T) of rows of `tokens` become,
 * row r, a sorted random subset of [0, N) as long as the row before its `pad` padding (which
 * repeats the last one), drawn from hash(key, first + r). PELAB_ERR_USAGE when a row is longer
 * than N. */
#define PELAB_EVAL_POSITIONS_KEY 0xE7A1B05170D5EEDull /* the key of their draws at evaluation */
int pelab_random_positions(int32_t *pos, const int32_t *tokens, int B, int T, int pad, int N, uint64_t key,
                           uint64_t first);
/* The encoding's automatic options as it resolved them, into opts (ops->resolve; nothing for an
 * encoding without automatic options). */
int pelab_posenc_resolve(const struct pelab_posenc *pe, struct pelab_opts *opts);
void pelab_posenc_qk_forward(struct pelab_posenc *pe, int layer, pelab_real *qo, pelab_real *ko,
                             const pelab_real *q, const pelab_real *k, int ld, const int32_t *pos,
                             int B, int T);
void pelab_posenc_qk_backward(struct pelab_posenc *pe, int layer, pelab_real *dq, pelab_real *dk,
                              const pelab_real *dqo, const pelab_real *dko, const pelab_real *q,
                              const pelab_real *k, int ld, const int32_t *pos, int B, int T);

#endif
