/* DNA from Debian's smalt-examples (the test data of the SMALT read mapper), as FASTA files the
 * fetch script decompresses into sources/NAME/:
 *
 *   dna-human  hs37chrXtrunc.fa: human chromosome X (GRCh37), truncated to 70.0 Mb
 *   dna-pfal   genome_1.fa: Plasmodium falciparum, chromosomes MAL1..MAL14 (23.3 Mb), the
 *              out-of-distribution genome: every document is in the test split
 *
 * Each sequence is cut into documents of CHUNK bases (the last one of a sequence shorter),
 * id "<sequence>:<start>-<end>" (0-based, end exclusive). Bases are upper-cased and the IUPAC
 * ambiguity codes become N; a document more than half N (centromeres, telomeres, gaps) is left
 * out. CHUNK = 120,000 bases is 20,000 6-mer tokens: room for evaluating at 10x and more of a
 * 1000-token training length.
 */
#include <stdlib.h>
#include <string.h>
#include "data/datasets/datasets.h"
#include "pelab/status.h"

#define CHUNK 120000

static char base_of(char c) {
    switch (c) {
    case 'A': case 'a': return 'A';
    case 'C': case 'c': return 'C';
    case 'G': case 'g': return 'G';
    case 'T': case 't': return 'T';
    default: return strchr("NRYSWKMBDHVnryswkmbdhv", c) && c ? 'N' : 0;
    }
}

/* Adds the chunks of one sequence (name, bases seq[0..n-1]). */
static int add_sequence(const char *name, const char *seq, size_t n, int split, struct pelab_docs *docs) {
    for (size_t start = 0; start < n; start += CHUNK) {
        size_t len = n - start < CHUNK ? n - start : CHUNK, ns = 0;
        for (size_t i = 0; i < len; i++) ns += seq[start + i] == 'N';
        if (2 * ns > len) continue;
        char *text = malloc(len);
        if (!text) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for %s", name);
        memcpy(text, seq + start, len);
        char id[160];
        snprintf(id, sizeof id, "%.100s:%zu-%zu", name, start, start + len);
        int rc = pelab_docs_add(docs, id, text, len, split);
        if (rc) return rc;
    }
    return PELAB_OK;
}

/* Reads every sequence of a FASTA file: ">name description" lines, then bases over any number of
 * lines. The sequence's name is the header's first word. */
static int fasta_build(const char *src, const char *file, int split, struct pelab_docs *docs) {
    char *raw;
    size_t len;
    int rc = pelab_read_source(src, file, &raw, &len);
    if (rc) return rc;
    char name[128] = "";
    size_t seq = 0, n = 0; /* bases are compacted in place from raw + seq */
    int have = 0;
    long lineno = 0;
    for (size_t i = 0; i < len && !rc;) {
        const char *nl = memchr(raw + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - raw) : len;
        lineno++;
        if (raw[i] == '>') {
            if (have) rc = add_sequence(name, raw + seq, n, split, docs);
            size_t k = i + 1, w = 0;
            while (k < end && raw[k] != ' ' && raw[k] != '\t' && raw[k] != '\r' && w + 1 < sizeof name)
                name[w++] = raw[k++];
            name[w] = '\0';
            if (!w) rc = pelab_fail(PELAB_ERR_RUNTIME, "%s/%s: line %ld: a sequence without a name", src, file, lineno);
            have = 1;
            seq = end; /* bases of this sequence overwrite the bytes from here on */
            n = 0;
        } else {
            if (!have && end > i)
                rc = pelab_fail(PELAB_ERR_RUNTIME, "%s/%s: line %ld: bases before the first '>' header", src, file, lineno);
            for (size_t k = i; k < end && !rc; k++) {
                if (raw[k] == '\r' || raw[k] == ' ') continue;
                char b = base_of(raw[k]);
                if (!b)
                    rc = pelab_fail(PELAB_ERR_RUNTIME, "%s/%s: line %ld: '%c' is not a nucleotide", src, file, lineno, raw[k]);
                raw[seq + n++] = b;
            }
        }
        i = end + 1;
    }
    if (!rc && have) rc = add_sequence(name, raw + seq, n, split, docs);
    if (!rc && !have) rc = pelab_fail(PELAB_ERR_RUNTIME, "%s/%s: no FASTA sequence", src, file);
    free(raw);
    return rc;
}

static int human_build(const char *src, struct pelab_docs *docs) {
    return fasta_build(src, "hs37chrXtrunc.fa", -1, docs);
}

static int pfal_build(const char *src, struct pelab_docs *docs) {
    return fasta_build(src, "genome_1.fa", PELAB_DOC_TEST, docs);
}

static const char *const dna_tokenizers[] = {"dna", NULL};

const struct pelab_dataset_ops pelab_dataset_dna_human = {
    .name = "dna-human",
    .kind = "dna",
    .summary = "human chromosome X (GRCh37, first 70 Mb), 120 kb documents",
    .source = "deb smalt-examples (hs37chrXtrunc.fa.gz)",
    .license = "public domain (Genome Reference Consortium); package GPL-3",
    .tokenizers = dna_tokenizers,
    .long_docs = 0,
    .text_crc = 0x32bc4625, /* measured on the pinned package (Debian 12) */
    .build = human_build,
};

const struct pelab_dataset_ops pelab_dataset_dna_pfal = {
    .name = "dna-pfal",
    .kind = "dna",
    .summary = "P. falciparum genome (14 chromosomes), 120 kb documents, all test (out of distribution)",
    .source = "deb smalt-examples (genome_1.fa.gz)",
    .license = "public data (PlasmoDB / Sanger); package GPL-3",
    .tokenizers = dna_tokenizers,
    .long_docs = 0,
    .text_crc = 0x1167a82e, /* measured on the pinned package (Debian 12) */
    .build = pfal_build,
};
