/* Randomised positions (Ruoss et al. 2023, "Randomized Positional Encodings Boost Length
 * Generalization of Transformers"): a sequence of k tokens reads, instead of 0..k-1, a sorted
 * random subset of k distinct positions of [0, N), N far above any length trained on, so that the
 * positions an encoding meets on longer inputs at test time are ones it trained on; only their
 * order carries meaning. Ruoss et al. draw one subset per batch, in training and evaluation alike;
 * here each sequence draws its own, from hash(key, first + its row): in training the key is the
 * micro-step's and first 0 (fresh draws at every step, as SeqPE's shifted starts; another
 * --batch/--accum split draws others), in evaluation the key is fixed and first the example's
 * index, so that an example reads the same positions whatever batch it falls in.
 *
 * Selection sampling (Knuth, TAOCP vol. 2, 3.4.2, Algorithm S): position i of 0..N-1 is taken with
 * probability (k - taken)/(N - i), which yields every k-subset with equal probability, in order.
 * The row's padding (past its last token that is not `pad`) repeats its last position: causal
 * attention never lets a real token see it, and every encoding takes it.
 */
#include "pelab/posenc.h"
#include "pelab/rng.h"
#include "pelab/status.h"

int pelab_random_positions(int32_t *pos, const int32_t *tokens, int B, int T, int pad, int N, uint64_t key,
                           uint64_t first) {
    for (int r = 0; r < B; r++) {
        const int32_t *tok = tokens + (size_t)r * T;
        int32_t *p = pos + (size_t)r * T;
        int k = T;
        while (k > 1 && tok[k - 1] == pad) k--;
        if (k > N)
            return pelab_fail(PELAB_ERR_USAGE, "--random-positions %d holds no %d distinct positions (N "
                              "must be at least the longest sequence read)", N, k);
        struct pelab_rng rng;
        pelab_rng_seed(&rng, pelab_hash64(key ^ pelab_hash64(first + (uint64_t)r)));
        int taken = 0;
        for (int i = 0; taken < k; i++)
            if (pelab_rng_below(&rng, (uint64_t)(N - i)) < (uint64_t)(k - taken)) p[taken++] = i;
        for (int t = k; t < T; t++) p[t] = p[k - 1];
    }
    return PELAB_OK;
}
