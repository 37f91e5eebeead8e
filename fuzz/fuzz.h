/* fuzz/fuzz.h — what the libFuzzer targets share.
 *
 * Each fuzz/fuzz_<name>.c defines LLVMFuzzerTestOneInput for one reader of hostile input. It
 * builds two ways: with clang -fsanitize=fuzzer (make fuzz), and with fuzz/replay.c's main as
 * the test build/tests/test_fuzz_<name>, which feeds it every file of fuzz/corpus/<name>/ (the
 * seeds) and tests/fuzz/<name>/ (inputs that once crashed), so `make test` replays them.
 *
 * Besides not crashing, a target checks what pelab promises for bad input: a refusal returns a
 * status and sets one line (no newline) that starts with the name of the file at fault. A broken
 * promise aborts, which libFuzzer reports like a crash. */
#ifndef PELAB_FUZZ_H
#define PELAB_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/io.h"
#include "pelab/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The tiny run that fuzz_state's checkpoints belong to: its settings, as pelab train options
 * (fuzz/make_corpus.sh trains it with these, plus --steps, --threads and --out). */
#define FUZZ_TINY_RUN                                                                          \
    "--pe pope --d-model 4 --heads 1 --layers 1 --mlp-mult 1 --batch 2 --eval-batches 1 "      \
    "--save-every 1 --decay-steps 2 --indirect-val-size 4 --indirect-test-size 4"

/* Rewrites the two pelab checksums of a safetensors image in place, where the writer puts them,
 * to match its bytes: a mutated checkpoint then gets past the checksums to the checks behind them
 * (a fuzzer would almost never guess a CRC). Images without them are left as they are. */
static inline void fuzz_fix_checksums(uint8_t *b, size_t size) {
    if (size < 8) return;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | b[i];
    if (n > size - 8) return;
    char *h = (char *)b + 8;
    const char *dkey = "\"pelab.data-crc32\":\"", *hkey = "\"pelab.header-crc32\":\"";
    char *d = NULL, *hd = NULL;
    for (size_t i = 0; i + 30 <= n; i++) {
        if (!d && memcmp(h + i, dkey, strlen(dkey)) == 0) d = h + i + strlen(dkey);
        if (!hd && memcmp(h + i, hkey, strlen(hkey)) == 0) hd = h + i + strlen(hkey);
    }
    char digits[9];
    if (d && (size_t)(d - h) + 8 <= n) {
        snprintf(digits, sizeof digits, "%08x", (unsigned)pelab_crc32(0, h + n, size - 8 - n));
        memcpy(d, digits, 8);
    }
    if (hd && (size_t)(hd - h) + 8 <= n) {
        memcpy(hd, "00000000", 8);
        snprintf(digits, sizeof digits, "%08x", (unsigned)pelab_crc32(0, b, 8 + n));
        memcpy(hd, digits, 8);
    }
}

/* A refusal: status `rc` (1 or 2) and a one-line message starting with `name` (if not NULL). */
static inline void fuzz_check_refusal(int rc, const char *name) {
    const char *msg = pelab_last_error();
    int ok = (rc == PELAB_ERR_RUNTIME || rc == PELAB_ERR_USAGE) && msg[0] &&
             !strchr(msg, '\n') && (!name || strncmp(msg, name, strlen(name)) == 0);
    if (!ok) {
        fprintf(stderr, "fuzz: a refusal broke its promise (rc %d): '%s'\n", rc, msg);
        abort();
    }
}

#endif
