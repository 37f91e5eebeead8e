# mk/check.mk — checks beyond `make test`, included by the Makefile. Each builds in a directory
# of its own through the Makefile's rules (BUILD, PELAB_LIB, PELAB_BIN; CFLAGS from the
# environment, so the Makefile's own flags still append), leaving the normal build untouched.
#
#   make test-asan       AddressSanitizer + UndefinedBehaviorSanitizer (any error is fatal):
#                        every C test, the fuzz corpora replayed, and the CLI tests that feed
#                        pelab hostile input, with a sanitized pelab (an allocation too large
#                        returns NULL, as malloc does, so pelab's out-of-memory path is tested)
#   make test-valgrind   tests/valgrind.sh: a tiny train, resume, eval, sample and refusals under
#                        valgrind (errors and definite leaks fail), the portable build (the CPU
#                        valgrind emulates has no AVX-512: the kernels dispatch to AVX2)
#   make fuzz            each fuzz/fuzz_<name>.c under libFuzzer (clang) for FUZZ_SECONDS, from
#                        its corpus fuzz/corpus/<name>/; crashes land in build/fuzz/crashes/

ASAN_DIR := build/asan
ASAN_CFLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
# The CLI tests about bad input (cli_plot: malformed CSV files, and the figures' cairo and
# fontconfig code, which must leave nothing allocated; cli_surfaces: hostile data files, image
# runs, sample on a terminal; cli_blas: the re-run under another OPENBLAS_CORETYPE); cli_kill,
# cli_resume and cli_compare repeat training the C tests and these already cover, at many times
# the cost under the sanitizers.
ASAN_CLI_TESTS := cli_train cli_bad_input cli_corrupt cli_nan cli_plot cli_surfaces cli_blas cli_algo

test-asan:
	@CFLAGS="$(ASAN_CFLAGS)" $(MAKE) --no-print-directory BUILD=$(ASAN_DIR) \
	  PELAB_LIB=$(ASAN_DIR)/libpelab.a PELAB_BIN=$(ASAN_DIR)/pelab tests
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 \
	  UBSAN_OPTIONS=print_stacktrace=1 \
	  PELAB_TEST_DIR=$(ASAN_DIR)/tests PELAB_BIN=$(ASAN_DIR)/pelab PELAB_NO_TWIN=1 \
	  PELAB_CLI_TESTS="$(ASAN_CLI_TESTS)" bash tests/run.sh

VG_DIR := build/valgrind

test-valgrind:
	@CFLAGS="-O1 -g" $(MAKE) --no-print-directory BUILD=$(VG_DIR) \
	  PELAB_LIB=$(VG_DIR)/libpelab.a PELAB_BIN=$(VG_DIR)/pelab $(VG_DIR)/pelab
	@PELAB_BIN=$(VG_DIR)/pelab bash tests/valgrind.sh

FUZZ_DIR := build/fuzz
FUZZ_SECONDS ?= 30
FUZZ_CFLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined \
  -fno-sanitize-recover=all -Wno-pass-failed # -O1 does not vectorise the `omp simd` loops
FUZZ_TARGETS := $(FUZZ_SRC:fuzz/fuzz_%.c=$(BUILD)/fuzz_%)

# Linked by the sub-make below (BUILD=build/fuzz, CC=clang).
$(BUILD)/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz.h $(PELAB_LIB)
	$(CC) $(CFLAGS) -fsanitize=fuzzer -Ifuzz -o $@ $< $(FUZZ_EXTRA_$*) $(PELAB_LIB) $(LDLIBS)

fuzz-targets: $(FUZZ_TARGETS)

fuzz:
	@CFLAGS="$(FUZZ_CFLAGS)" $(MAKE) --no-print-directory CC=clang BUILD=$(FUZZ_DIR) \
	  PELAB_LIB=$(FUZZ_DIR)/libpelab.a fuzz-targets
	@FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_DIR=$(FUZZ_DIR) bash fuzz/run.sh

.PHONY: fuzz-targets
# Kept between runs: test programs link them, and make would delete them as intermediates.
.SECONDARY: $(TESTLIB_OBJ)
