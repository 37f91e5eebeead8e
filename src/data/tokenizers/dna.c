/* dna — the Nucleotide Transformer's 6-mer tokenizer (Dalla-Torre et al., 2023, "The Nucleotide
 * Transformer"; instadeepai/nucleotide-transformer, NucleotidesKmersTokenizer with k = 6).
 *
 * The sequence is cut at every N; each piece is read as non-overlapping 6-mers from its start,
 * and the 0..5 bases left at its end become single-nucleotide tokens; one N token stands between
 * pieces. Ids, in the Nucleotide Transformer's vocabulary order (vocab 4107):
 *
 *     0 <unk>  1 <pad>  2 <mask>  3 <cls>
 *     4 + k    the 6-mer with digits k = d0·4^5 + … + d5 over the order A=0, T=1, C=2, G=3
 *              (itertools.product("ATCG", repeat=6): AAAAAA 4, AAAAAT 5, …, GGGGGG 4099)
 *     4100 A  4101 T  4102 C  4103 G  4104 N
 *     4105 <eos>  4106 <bos>
 *
 * pelab's own choices: lower-case bases (soft-masked FASTA) read as upper case, the IUPAC
 * ambiguity codes R Y S W K M B D H V read as N, and white space (FASTA line breaks) is skipped;
 * any other byte is an error naming its offset. <eos> is the end-of-document id, <pad> padding.
 */
#include <stdio.h>
#include <string.h>
#include "data/tokenizers/tokenizers.h"
#include "pelab/status.h"

#define K 6
#define KMER0 4           /* id of AAAAAA */
#define SINGLE0 4100      /* id of A; then T, C, G, N */
#define ID_N 4104
#define ID_EOS 4105
#define VOCAB 4107

static const char BASES[] = "ATCG";
static const char *const SPECIAL[] = {"<unk>", "<pad>", "<mask>", "<cls>"};

/* 0..3 for A T C G, 4 for N and the ambiguity codes, -1 for white space, -2 for anything else. */
static int base_code(unsigned char c) {
    switch (c) {
    case 'A': case 'a': return 0;
    case 'T': case 't': return 1;
    case 'C': case 'c': return 2;
    case 'G': case 'g': return 3;
    case ' ': case '\t': case '\n': case '\r': case '\v': case '\f': return -1;
    default:
        return c < 128 && strchr("NRYSWKMBDHVnryswkmbdhv", c) && c ? 4 : -2;
    }
}

static int dna_load(struct pelab_tokenizer *tk, const char *vocab_dir) {
    static const char layout[] = "dna: nucleotide-transformer 6-mer, ATCG order, vocab 4107";
    tk->vocab = VOCAB;
    tk->pad = 1;
    tk->eod = ID_EOS;
    tk->vocab_hash = pelab_fnv64(PELAB_FNV64_INIT, layout, sizeof layout - 1);
    return PELAB_OK;
}

/* Flushes the bases of an unfinished 6-mer as single-nucleotide tokens. */
static int flush(int *pending, int n, struct pelab_tokens *out) {
    for (int i = 0; i < n; i++) {
        int rc = pelab_tokens_push(out, SINGLE0 + pending[i]);
        if (rc) return rc;
    }
    return PELAB_OK;
}

static int dna_encode(const struct pelab_tokenizer *tk, const char *text, size_t n,
                      const char *what, struct pelab_tokens *out) {
    int pending[K], np = 0, rc = PELAB_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        int c = base_code((unsigned char)text[i]);
        if (c == -1) continue;
        if (c == -2)
            return pelab_fail(PELAB_ERR_RUNTIME, "%s: byte %zu: 0x%02x is not a nucleotide "
                              "(A C G T N or an IUPAC code)", what, i, (unsigned char)text[i]);
        if (c == 4) { /* N ends the piece */
            rc = flush(pending, np, out);
            np = 0;
            if (!rc) rc = pelab_tokens_push(out, ID_N);
            continue;
        }
        pending[np++] = c;
        if (np == K) {
            int k = 0;
            for (int j = 0; j < K; j++) k = 4 * k + pending[j];
            rc = pelab_tokens_push(out, KMER0 + k);
            np = 0;
        }
    }
    return rc ? rc : flush(pending, np, out);
}

static int dna_decode(const struct pelab_tokenizer *tk, const int32_t *ids, size_t n,
                      struct pelab_bytes *out) {
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        char buf[K];
        int rc;
        if (id >= KMER0 && id < KMER0 + 4096) {
            for (int j = K - 1, k = id - KMER0; j >= 0; j--, k /= 4) buf[j] = BASES[k % 4];
            rc = pelab_bytes_append(out, buf, K);
        } else if (id >= SINGLE0 && id <= ID_N) {
            rc = pelab_bytes_append(out, &"ATCGN"[id - SINGLE0], 1);
        } else if (id >= 0 && id < KMER0) {
            rc = pelab_bytes_append(out, SPECIAL[id], strlen(SPECIAL[id]));
        } else if (id == ID_EOS || id == ID_EOS + 1) {
            const char *s = id == ID_EOS ? "<eos>" : "<bos>";
            rc = pelab_bytes_append(out, s, strlen(s));
        } else {
            return pelab_fail(PELAB_ERR_RUNTIME, "token %zu: id %d is outside the dna vocabulary "
                              "(0..%d)", i, (int)id, VOCAB - 1);
        }
        if (rc) return rc;
    }
    return PELAB_OK;
}

const struct pelab_tokenizer_ops pelab_tokenizer_dna = {
    .name = "dna",
    .summary = "Nucleotide Transformer 6-mers, single bases at piece ends, N (vocab 4107)",
    .files = NULL,
    .load = dna_load,
    .encode = dna_encode,
    .decode = dna_decode,
};
