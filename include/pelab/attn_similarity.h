/* pelab/attn_similarity.h — how alike two models' attention is (the NoPE paper, Kazemnejad et al.
 * 2023, §5.2): on the same sequences, the Jensen–Shannon divergence between the attention
 * distributions of a head of one model and a head of the other, layer by layer
 * (src/eval/attn_similarity.c; 'pelab analyze attn-similarity' runs it over many runs).
 */
#ifndef PELAB_ATTN_SIMILARITY_H
#define PELAB_ATTN_SIMILARITY_H

#include "pelab/real.h"

/* JSD(p, q) = ½ KL(p ‖ m) + ½ KL(q ‖ m), m = (p + q)/2, in nats (0 log 0 = 0): 0 for equal
 * distributions, ln 2 for disjoint ones. p and q hold n probabilities each. */
double pelab_jsd(const pelab_real *p, const pelab_real *q, int n);

/* One layer's head-pair divergences: a (B,Ha,T,T) and b (B,Hb,T,T) attention probabilities (row t:
 * query t over keys 0..t) of two models on the same B sequences, row r's first len[r] tokens real;
 * out[i·Hb + j] = the mean over rows r and queries t < len[r] of JSD(a[r,i,t,0..t], b[r,j,t,0..t]). */
void pelab_attn_head_divergence(const pelab_real *a, int Ha, const pelab_real *b, int Hb, int B, int T,
                                const int *len, double *out);

#endif
