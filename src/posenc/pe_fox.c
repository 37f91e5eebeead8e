/* fox — the Forgetting Transformer's forget gate (Lin, Nikishin, He and Courville, ICLR 2025,
 * "Forgetting Transformer: Softmax Attention with a Forget Gate"): a decay of the logits that the
 * tokens themselves decide, a data-dependent ALiBi.
 *
 *   f_t = σ(w_h·x_t + b_h)             per head h; x_t the block's normed input (what q, k, v read)
 *   logit(t, s) = scale·q_t·k_s + Σ_{l=s+1..t} ln f_l  =  scale·q_t·k_s + c_t − c_s,
 *   c_t = Σ_{l≤t} ln f_l               (c decreases: a key loses weight with every token after it)
 *
 * c_t is the same for every key of query t and cancels in its softmax, so the encoding is the KEY
 * site's kb_s = −c_s (attn/site_key.c): one running sum per (sequence, head), in double, then rounded.
 * With a KV cache the sum continues from the last cached position's kb. Positions are never read:
 * the model is the same at any offset (PELAB_PE_RELATIVE), and causal only (a decay runs one way).
 *
 * --fox-gate data is the paper's gate (their "full"; w, b learned); bias is their data-independent
 * gate f_h = σ(b_h), a learned ALiBi slope per head. The paper's output gate and QK-norm ("FoX
 * Pro") are not here: they act on values and on q, k, not on positions.
 *
 * Initialisation: w ~ N(0, 0.02), b = --fox-bias-init (0), so f = σ(0) = 1/2 at first — the
 * authors' default. In their code (github.com/zhixuan-lin/forgetting-transformer, commit 883f260,
 * src/forgetting_transformer/model/forgetting_transformer/modeling_forgetting_transformer.py) the
 * "full" gate is nn.Linear(hidden_size, num_heads, bias=True) (line 206), whose weight both
 * initialisers draw from N(0, initializer_range) with the bias zeroed (lines 270–275, the layer's;
 * 641–651, the model's, which runs last), initializer_range = 0.02
 * (configs/model/forgetting_transformer.py:21). Their other bias init, fgate_bias_init (decay times
 * τ log-spaced in [T_min, T_max], b = −ln(e^{1/τ} − 1), lines 221–230), is off by default
 * (configs/model/forgetting_transformer.py:37), refused with the full gate (line 205), and meant
 * for the data-independent and fixed gates; their data-independent gate starts at b = 0 too
 * (line 208). --fox-bias-init 3 (f ≈ 0.95: a slow decay at first) is the option's other use.
 *
 * backward, per (sequence, head), from dkb = ∂L/∂kb:
 *   ∂L/∂ln f_l = −Σ_{s≥l} dkb_s (a suffix sum);  ∂L/∂z_l = ∂L/∂ln f_l · σ(−z_l)
 *   dw_h += ∂L/∂z_l · x_l;  db_h += ∂L/∂z_l;  dx_l += ∂L/∂z_l · w_h
 * Serial in (b, h): B·T·H·D multiply-adds, the size of one of q's columns' products.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "kernels/cpu/vmath.h"
#include "pelab/posenc.h"
#include "pelab/status.h"
#include "posenc/site.h"

static const struct pelab_optdef fox_options[] = {
    {"fox-gate", PELAB_OPT_CHOICE, "data", 0, 0, "data|bias",
     "forget gate σ(w·x + b) from each token (the paper's), or σ(b) per head alone"},
    {"fox-bias-init", PELAB_OPT_REAL, "0", -20, 20, NULL, "the gate's bias b at initialisation (f = σ(b))"},
    {0},
};

struct fox {
    int data;          /* f from the token (w·x + b), or from b alone */
    double bias_init;
    int *w, *b;        /* (N,) parameter indices per layer: w (H, D) (−1 when not data), b (H,) */
};

static int fox_init(struct pelab_posenc *pe, const struct pelab_opts *opts, struct pelab_params *params) {
    struct fox *f = calloc(1, sizeof *f);
    if (!f) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    pe->state = f;
    f->data = pelab_opt_choice(opts, fox_options, "fox-gate") == 0;
    f->bias_init = pelab_opt_real(opts, fox_options, "fox-bias-init");
    f->w = malloc((size_t)pe->n_layers * sizeof *f->w);
    f->b = malloc((size_t)pe->n_layers * sizeof *f->b);
    if (!f->w || !f->b) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    for (int l = 0; l < pe->n_layers; l++) {
        char name[PELAB_PARAM_NAME_MAX];
        int64_t wshape[2] = {pe->H, pe->D}, bshape[1] = {pe->H};
        f->w[l] = -1;
        if (f->data) {
            snprintf(name, sizeof name, "blocks.%d.attn.fox.gate.weight", l);
            f->w[l] = pelab_params_declare(params, name, 2, wshape, 1); /* decayed, as the paper's code does a projection */
        }
        snprintf(name, sizeof name, "blocks.%d.attn.fox.gate.bias", l);
        f->b[l] = pelab_params_declare(params, name, 1, bshape, 0);
    }
    return PELAB_OK;
}

static void fox_free(struct pelab_posenc *pe) {
    struct fox *f = pe->state;
    if (!f) return;
    free(f->w);
    free(f->b);
    free(f);
}

static void fox_init_params(struct pelab_posenc *pe, struct pelab_rng *rng) {
    const struct fox *f = pe->state;
    for (int l = 0; l < pe->n_layers; l++) {
        if (f->data) {
            pelab_real *w = pelab_params_data(pe->params, f->w[l]);
            for (long i = 0; i < (long)pe->H * pe->D; i++) w[i] = (pelab_real)(0.02 * pelab_rng_normal(rng));
        }
        pelab_real *b = pelab_params_data(pe->params, f->b[l]);
        for (int h = 0; h < pe->H; h++) b[h] = (pelab_real)f->bias_init;
    }
}

/* z = w_h·x_t + b_h, the gate's logit (b_h alone without w) */
static double gate_logit(const struct fox *f, const struct pelab_posenc *pe, int layer, int h, const pelab_real *xt) {
    double z = pelab_params_data(pe->params, f->b[layer])[h];
    if (f->data) z += pelab_vdot(pelab_params_data(pe->params, f->w[layer]) + (long)h * pe->D, xt, pe->D);
    return z;
}

static double log_sigmoid(double z) { return z >= 0 ? -log1p(exp(-z)) : z - log1p(exp(z)); }

/* KEY: kb (B,H,T) = −c from x (B,T,D): c_t = c_prev + Σ_{l≤t} ln f_l, c_prev = −prev[b,h] (0
 * without a cache) */
static void fox_key_forward(struct pelab_posenc *pe, int layer, const struct pelab_pe_site_io *io) {
    const struct fox *f = pe->state;
    const int H = pe->H, D = pe->D, B = io->B, T = io->T;
    const pelab_real *x = io->in, *prev = io->prev[0];
    pelab_real *kb = io->out[0];
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            double c = prev ? -(double)prev[(long)b * H + h] : 0;
            pelab_real *k = kb + ((long)b * H + h) * T;
            for (int t = 0; t < T; t++) {
                c += log_sigmoid(gate_logit(f, pe, layer, h, x + ((long)b * T + t) * D));
                k[t] = (pelab_real)-c;
            }
        }
}

/* dx (B,T,D) += and the gate's gradients += from dkb (B,H,T) */
static void fox_key_backward(struct pelab_posenc *pe, int layer, const struct pelab_pe_site_io *io) {
    const struct fox *f = pe->state;
    const int H = pe->H, D = pe->D, B = io->B, T = io->T;
    const pelab_real *x = io->in, *dkb = io->dout[0];
    pelab_real *dx = io->din;
    const pelab_real *w = f->data ? pelab_params_data(pe->params, f->w[layer]) : NULL;
    pelab_real *dw = f->data ? pelab_params_grad(pe->params, f->w[layer]) : NULL;
    pelab_real *db = pelab_params_grad(pe->params, f->b[layer]);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const pelab_real *g = dkb + ((long)b * H + h) * T;
            double dlogf = 0; /* ∂L/∂ln f_t = −Σ_{s≥t} dkb_s */
            for (int t = T - 1; t >= 0; t--) {
                const pelab_real *xt = x + ((long)b * T + t) * D;
                dlogf -= g[t];
                const double z = gate_logit(f, pe, layer, h, xt);
                const pelab_real dz = (pelab_real)(dlogf / (1 + exp(z))); /* · σ(−z) */
                db[h] += dz;
                if (!w) continue;
                pelab_real *dwh = dw + (long)h * D, *dxt = dx + ((long)b * T + t) * D;
                const pelab_real *wh = w + (long)h * D;
                for (int c = 0; c < D; c++) {
                    dwh[c] += dz * xt[c];
                    dxt[c] += dz * wh[c];
                }
            }
        }
}

const struct pelab_posenc_ops pelab_pe_fox = {
    .name = "fox",
    .display = "FoX",
    .summary = "forget gate per head and token, a data-dependent decay of the logits (Lin et al. 2025)",
    .sites = PELAB_SITE_KEY,
    .contract = {PELAB_PE_RELATIVE, {"fox-gate=bias fox-bias-init=1.5", NULL}},
    .options = fox_options,
    .init = fox_init,
    .free = fox_free,
    .init_params = fox_init_params,
    .layer_sites = (const struct pelab_pe_site_hooks[]){{&pelab_site_key, fox_key_forward, fox_key_backward}, {0}},
};
