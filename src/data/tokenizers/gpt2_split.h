/* src/data/tokenizers/gpt2_split.h — GPT-2's pre-tokenizer, by hand. The text is cut into the
 * successive matches of (JavaScript, /u flag, as in the npm package gpt-3-encoder)
 *
 *     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *
 * and BPE runs on each piece's bytes separately. */
#ifndef PELAB_DATA_GPT2_SPLIT_H
#define PELAB_DATA_GPT2_SPLIT_H

#include <stddef.h>

/* End (exclusive) of the match that starts at s[i], i < n. Every position starts a match. */
size_t pelab_gpt2_split(const char *s, size_t n, size_t i);

#endif
