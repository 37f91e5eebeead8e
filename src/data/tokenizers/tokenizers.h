/* src/data/tokenizers/tokenizers.h — the tokenizer tables the registry in src/data/tokenizer.c
 * lists. Adding a tokenizer: write src/data/tokenizers/<name>.c defining `pelab_tokenizer_<name>`,
 * declare it here, add it to the table in tokenizer.c, and give its id layout in docs/DATA.md. */
#ifndef PELAB_DATA_TOKENIZERS_H
#define PELAB_DATA_TOKENIZERS_H

#include "pelab/tokenizer.h"

extern const struct pelab_tokenizer_ops pelab_tokenizer_byte;
extern const struct pelab_tokenizer_ops pelab_tokenizer_gpt2;
extern const struct pelab_tokenizer_ops pelab_tokenizer_dna;
extern const struct pelab_tokenizer_ops pelab_tokenizer_jsb;

/* gpt2 from the texts of its two files already in memory (each with a NUL after its last byte),
 * named enc_name and bpe_name in messages: pelab_tokenizer_load without the directory. */
int pelab_gpt2_load_texts(struct pelab_tokenizer *tk, const char *enc_name, const char *enc,
                          size_t enc_size, const char *bpe_name, const char *bpe, size_t bpe_size);

#endif
