/* src/data/datasets/datasets.h — the dataset tables src/data/dataset.c lists, and what their
 * build functions share: a document list and directory/file helpers. Adding a dataset: write
 * its build function in src/data/datasets/<source>.c with its table, declare it here, list it in
 * dataset.c, add its fetch step to scripts/install-data.sh and its page to docs/DATA.md. */
#ifndef PELAB_DATA_DATASETS_H
#define PELAB_DATA_DATASETS_H

#include <stddef.h>
#include "pelab/dataset.h"

struct pelab_doc {
    char *id;
    char *text; /* malloc'ed, len bytes */
    size_t len;
    int split;  /* enum pelab_doc_split, or -1: by the hash of the id */
};

struct pelab_docs {
    struct pelab_doc *d;
    size_t n, cap;
};

/* Adds a document, taking ownership of `text` (malloc'ed; freed on failure too). */
int pelab_docs_add(struct pelab_docs *docs, const char *id, char *text, size_t len, int split);
void pelab_docs_free(struct pelab_docs *docs);

/* Names in dir (not starting with '.') for which keep(name) is true, sorted bytewise; a
 * malloc'ed array of malloc'ed strings. */
int pelab_list_dir(const char *dir, int (*keep)(const char *name), char ***names, size_t *count);
void pelab_free_names(char **names, size_t count);

/* dir/name read whole (pelab_read_file), with the path for messages in path. */
int pelab_read_source(const char *dir, const char *name, char **data, size_t *size);

extern const struct pelab_dataset_ops pelab_dataset_sotu, pelab_dataset_moby_dick,
    pelab_dataset_brown, pelab_dataset_bible, pelab_dataset_dna_human, pelab_dataset_dna_pfal,
    pelab_dataset_jsb, pelab_dataset_gpt2, pelab_dataset_fashion_mnist;

#endif
