/* src/posenc/pe_seqpe.h — private to SeqPE's encoding: its state, which pe_seqpe.c (the encoding
 * at its sites: the table of positions, EMBED and QK) and seqpe_train.c (what training adds:
 * shifted starts and the regularisers' loss terms) share, and what each gives the other. */
#ifndef PELAB_POSENC_PE_SEQPE_H
#define PELAB_POSENC_PE_SEQPE_H

#include "pelab/options.h"
#include "pelab/posenc.h"
#include "posenc/seqpe.h"

/* The encoding's options (pe_seqpe.c), which seqpe_train.c reads its own from. */
extern const struct pelab_optdef pelab_seqpe_options[];

struct pelab_seqpe {
    int mode, shared;
    struct pelab_seqpe_encoder enc;
    int *proj;            /* (N,) parameter index of each layer's W^p (all equal when shared);
                             NULL in input mode */
    int n_proj;           /* distinct W^p: 1 shared, N per layer, 0 input */
    /* the table of this pass's distinct positions */
    struct pelab_seqpe_acts acts; /* encoder activations; acts.out (U,D) is E */
    int32_t *upos;        /* (U,n) in lexicographic order */
    int U;
    int32_t *row;         /* (B,T) each token's row */
    int32_t *scratch;     /* (2·B·T) */
    long tok_cap;         /* tokens room in upos (times n), row, scratch */
    pelab_real *pqk;      /* (n_proj, U, 2D) [pq; pk] of each row */
    pelab_real *dE;       /* (U,D) backward: ∂loss/∂E, summed over sites and layers */
    pelab_real *dpqk;     /* (U,2D) backward scratch of one layer */
    long row_cap;         /* rows room in pqk, dE, dpqk */
    pelab_real *snap;     /* the encoding's parameter values the table was computed with */
    int have_table;
    /* training only: shifted starts and the regularisers */
    double shift_prob, alpha, beta;
    struct pelab_seqpe_reg_style style; /* the profile as resolved, with: */
    int final_norm;               /* RMSNorm before W_out */
    int shift_by_step;            /* shifted starts per micro-batch, which then has no L_OOD */
    int pool_size;                /* 0: any offset; else the offsets in pool (pool_size, n) */
    int32_t *pool;
    int main_shifted;             /* whether train_positions shifted this micro-batch */
    struct pelab_seqpe_reg reg;   /* this micro-batch's draw */
    struct pelab_seqpe_acts reg_acts;
    int32_t *reg_all, *reg_uniq, *reg_row, *reg_scratch; /* (N,n), (N,n), (N,), (2N,) */
    pelab_real *reg_dE;           /* (N,D) α·∂L_δ/∂E + β·∂L_OOD/∂E of the draw's distinct positions */
    pelab_real *reg_dout;         /* (N,D) the same times aux_backward's scale */
};

/* seqpe_train.c. The training options into s (weights, Lmax, which the digits must hold, the
 * draws' sizes, the pool of shifted starts): extent is the coordinates of the training context,
 * 0 .. extent − 1 (T for sequences, G + 1 for a G × G grid with the class token at 0); D the
 * model's width. PELAB_OK, PELAB_ERR_USAGE naming the option, or PELAB_ERR_RUNTIME. */
int pelab_seqpe_train_init(struct pelab_seqpe *s, const struct pelab_opts *opts, int extent, int D);
/* Frees what pelab_seqpe_train_init allocated. */
void pelab_seqpe_train_free(struct pelab_seqpe *s);
/* The ops table's training hooks (pelab/posenc.h): train_positions, aux_names, aux_forward,
 * aux_backward. */
void pelab_seqpe_train_positions(struct pelab_posenc *pe, int32_t *pos, int B, int T, uint64_t key);
extern const char *const pelab_seqpe_aux_names[];
int pelab_seqpe_aux_forward(struct pelab_posenc *pe, uint64_t key, double *terms, double *total);
void pelab_seqpe_aux_backward(struct pelab_posenc *pe, pelab_real scale);

#endif
