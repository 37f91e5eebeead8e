# pelab — build, test, install.
#
#   make            libpelab.a, libpelab.so, pelab, pelab.pc
#   make test       installs what is missing (make setup), builds and runs every test, the
#                   library's and the lab's; ends with one "N passed, N failed" line
#   make test-lib, make test-lab  the same for the library's tests (tests/) or the lab's (lab/tests/)
#   make test-asan  the C tests and the hostile-input CLI tests built with AddressSanitizer and
#                   UndefinedBehaviorSanitizer (build/asan)
#   make test-valgrind  a tiny training job, its resume, eval and sample under valgrind
#   make fuzz       each libFuzzer target (fuzz/) for FUZZ_SECONDS (default 30) with clang
#   make demo       installs what is missing (make setup), then RoPE, PoPE, ALiBi and NoPE on text
#                   at the demo preset: perplexity at 1x..10x the training length, and its figure
#   make demo-indirect  RoPE vs PoPE vs NoPE on indirect indexing at the cpu preset
#   make setup      the packages of make deps and the test data (.ci/deps, .ci/deps-data)
#   make tables     rewrites the recorded tables of README.md and docs/ from results/: every
#                   Markdown file holding a results block (lab/scripts/tables.py; --check in make test)
#   make reproduce TABLE=NAME  runs a recorded table's command again, each number beside its record
#                              (first the commands of the records whose runs it reads)
#   make lengthgen [TASKS="copy reverse"]  records the length-generalisation tables (hours)
#   make seqpe-table4 [PROFILES="paper authors arms lmax"]  records SeqPE's regulariser ablation (hours)
#   make image-tables [PRESET=cpu-aug] [TABLES="3 5 4"]  records the SeqPE paper's image Tables III-V, 3 seeds (hours)
#   make qa-table2  records the long-context QA (the SeqPE paper's Table II), 3 seeds (hours)
#   make cpu-tables [TASKS="music text"]  records RoPE, PoPE, NoPE at the cpu presets, 3 seeds (hours)
#   make indirect-mid [ARMS="mechanism full"]  records RoPE vs PoPE on indirect indexing with heads
#                   64 wide, 2 seeds (days of both cores; interrupted runs continue); ARMS=lr-probe:
#                   the mechanism arm at lr 1e-3 for 10k updates, seed 1 (about 1.5 h)
#   make bench      pelab against the PyTorch twin, tokens/s and ratios
#   make profile    build/prof/bench/bench_train, bench_generate: the benchmarks with a per-phase time table
#   make data       installs every dataset into data/ (docs/DATA.md); DATASETS="sotu jsb" for some
#   make install PREFIX=/usr/local
#
# Two builds of the same sources: build/f32 (float, what users run) and build/f64 (double, what
# the gradient checks and the PyTorch-twin test run on). PELAB_DOUBLE selects the real type.

CC      ?= cc
PREFIX  ?= /usr/local
# Where objects and test programs go, and what the library and the command are called: the
# sanitizer, valgrind and fuzzing builds (mk/check.mk) reuse these rules in their own directories.
BUILD   ?= build
PELAB_LIB ?= libpelab.a
PELAB_BIN ?= pelab
VERSION := 0.2.0

# `make demo` and `make test` install missing packages first and then build in a second make, which
# looks for the packages again: the first one keeps its notices to itself. (No comma in a
# notice: it would end the argument.)
SETUP_GOALS := $(filter demo test test-lib test-lab,$(MAKECMDGOALS))
notice = $(if $(SETUP_GOALS),,$(info notice: $(1)))

WARN    := -Wall -Wextra -Wshadow -Wno-unused-parameter
# The default build runs on any x86-64: the kernels that vectorise (src/kernels/cpu/simd.h: the
# tiled attention, the norms, GELU, the loss, PoPE, AdamW) are compiled for AVX-512, AVX2 and the
# baseline, and the CPU picks at run time (`pelab --version` says which). ARCH=native builds for
# this CPU alone (-march=native: every loop may use its instructions; the binary may not run on
# another machine).
ARCH    ?=
CFLAGS  ?= -O3 -g
ifeq ($(ARCH),)
  $(info build: portable x86-64; vector kernels chosen at run time (AVX-512, AVX2 or baseline))
else
  CFLAGS += -march=$(ARCH)
  $(info build: -march=$(ARCH), for this CPU only; vector kernels chosen at run time among what it allows)
endif
# -fno-math-errno: no libm call here is followed by a look at errno, and without it sqrt does not
# vectorise (clang)
CFLAGS  += -std=c11 -D_POSIX_C_SOURCE=200809L -fPIC -fno-math-errno $(WARN) -Iinclude -Isrc -DPELAB_VERSION=\"$(VERSION)\"
LDLIBS  := -lm

# --- optional dependencies: used when present, a visible notice when not -----------------------
BLAS_CFLAGS := $(shell pkg-config --cflags openblas 2>/dev/null)
BLAS_LIBS   := $(shell pkg-config --libs openblas 2>/dev/null)
ifneq ($(BLAS_LIBS),)
  CFLAGS += -DPELAB_BLAS $(BLAS_CFLAGS)
  LDLIBS += $(BLAS_LIBS)
  PC_REQUIRES := openblas
else
  $(call notice,OpenBLAS not found (pkg-config openblas): using the portable matmul (much slower). Install it with 'make deps'.)
endif

# oneDNN: the float32 products of two rows or more (src/kernels/cpu/matmul.c) and the bf16
# matrix products of --precision bf16 (src/kernels/cpu/gemm_bf16.c). Debian's
# libdnnl-dev ships no .pc file: pkg-config dnnl when there is one, else a program that includes
# dnnl.h and links -ldnnl.
DNNL_CFLAGS := $(shell pkg-config --cflags dnnl 2>/dev/null)
DNNL_LIBS   := $(shell pkg-config --libs dnnl 2>/dev/null)
ifeq ($(DNNL_LIBS),)
  DNNL_LIBS := $(shell printf '\043include <dnnl.h>\nint main(void){return dnnl_version() == 0;}\n' | \
    $(CC) -x c - -ldnnl -o /dev/null 2>/dev/null && echo -ldnnl)
endif
ifneq ($(DNNL_LIBS),)
  CFLAGS += -DPELAB_DNNL $(DNNL_CFLAGS)
  LDLIBS += $(DNNL_LIBS)
else
  $(call notice,oneDNN not found (dnnl.h and -ldnnl): float32 products by OpenBLAS alone (slower at small shapes), --precision bf16 refused. Install libdnnl-dev with 'make deps'.)
endif

# cairo draws the PNG figures of `analyze --png` and `plot` (with fontconfig, which Debian's
# libcairo2-dev brings, for its fonts); only the command links them.
CAIRO_CFLAGS := $(shell pkg-config --cflags cairo fontconfig 2>/dev/null)
CAIRO_LIBS   := $(shell pkg-config --libs cairo fontconfig 2>/dev/null)
ifeq ($(CAIRO_LIBS),)
  $(call notice,cairo not found (pkg-config cairo fontconfig); pelab will draw no PNG figures (--png). Install libcairo2-dev with 'make deps'.)
endif

# MPI (Debian's OpenMPI, libopenmpi-dev): `mpirun -np N pelab train` trains data-parallel across
# N ranks (docs/DISTRIBUTED.md). Found through pkg-config ompi, else mpicc's own flags; MPI=0
# builds without it.
MPI ?= auto
ifneq ($(MPI),0)
  MPI_CFLAGS := $(shell pkg-config --cflags ompi 2>/dev/null)
  MPI_LIBS   := $(shell pkg-config --libs ompi 2>/dev/null)
  ifeq ($(MPI_LIBS),)
    MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null)
    MPI_LIBS   := $(shell mpicc --showme:link 2>/dev/null)
  endif
endif
ifneq ($(MPI_LIBS),)
  CFLAGS += -DPELAB_MPI $(MPI_CFLAGS)
  LDLIBS += $(MPI_LIBS)
  PC_REQUIRES += ompi
else ifeq ($(MPI),0)
  $(info notice: MPI=0: pelab will train in one process only (no mpirun).)
else
  $(info notice: MPI not found (pkg-config ompi, mpicc); pelab will train in one process only (no mpirun). Install libopenmpi-dev with 'make deps'.)
endif

HAVE_OPENMP := $(shell echo 'int main(void){return 0;}' | $(CC) -fopenmp -x c - -o /dev/null 2>/dev/null && echo yes)
ifeq ($(HAVE_OPENMP),yes)
  CFLAGS += -fopenmp
  LDLIBS += -fopenmp
else
  $(call notice,$(CC) cannot build OpenMP programs; pelab will run on one thread. Install it with 'make deps'.)
endif

# --- sources --------------------------------------------------------------------------------
LIB_SRC := $(sort $(wildcard src/*/*.c src/*/*/*.c src/*/*/*/*.c))
CLI_SRC := $(sort $(wildcard cli/*.c))
# The lab (lab/): compare, analyze, plot and the binary's command table, above the library and its
# commands; its objects see cli/'s headers, and nothing below sees lab/'s.
LAB_SRC := $(sort $(wildcard lab/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
TESTLIB_SRC := $(sort $(wildcard tests/lib/*.c))

OBJ32 := $(LIB_SRC:%.c=$(BUILD)/f32/%.o)
OBJ64 := $(LIB_SRC:%.c=$(BUILD)/f64/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/f32/%.o)
LAB_OBJ := $(LAB_SRC:%.c=$(BUILD)/f32/%.o)
TESTLIB_OBJ := $(TESTLIB_SRC:%.c=$(BUILD)/f64/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
# The kernels', the exponential's, the bf16 and the KV cache's tests also run in the float build, the
# one users run.
TEST_BIN += $(BUILD)/tests/test_kernels_f32 $(BUILD)/tests/test_vexp_f32 $(BUILD)/tests/test_bf16_f32 \
  $(BUILD)/tests/test_bf16_attn_f32 $(BUILD)/tests/test_kv_cache_f32
# Each fuzz target also builds as a test that replays its corpus and the crash regressions; those
# of the lab's code (LAB_FUZZ) among the lab's tests.
FUZZ_SRC := $(sort $(wildcard fuzz/fuzz_*.c))
LAB_FUZZ := csv
FUZZ_REPLAY := $(filter-out $(LAB_FUZZ:%=$(BUILD)/tests/test_fuzz_%),$(FUZZ_SRC:fuzz/fuzz_%.c=$(BUILD)/tests/test_fuzz_%))
# The lab's test programs (lab/tests/test_*.c, each with the lab's sources it tests,
# LAB_TEST_EXTRA_NAME), in $(BUILD)/lab/tests beside the replays of its fuzz targets.
LAB_TEST_SRC := $(sort $(wildcard lab/tests/test_*.c))
LAB_TEST_BIN := $(LAB_TEST_SRC:lab/tests/%.c=$(BUILD)/lab/tests/%) $(LAB_FUZZ:%=$(BUILD)/lab/tests/test_fuzz_%)

all: libpelab.a libpelab.so pelab pelab.pc

$(BUILD)/f32/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/f64/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DPELAB_DOUBLE -MMD -MP -c $< -o $@

$(PELAB_LIB): $(OBJ32)
	rm -f $@ && ar rcs $@ $^

libpelab.so: $(OBJ32)
	$(CC) -shared -o $@ $^ $(LDLIBS)

$(BUILD)/f64/libpelab.a: $(OBJ64)
	rm -f $@ && ar rcs $@ $^

# The commit the library is built from, for `pelab --version`, each run's summary.json and the
# records of results/ (with "+changes" when tracked files differed from it; "unknown" outside a
# git checkout). A file that changes only when the commit does rebuilds src/kernels/cpu/commit.o
# then, and only then.
COMMIT := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(shell git rev-parse HEAD >/dev/null 2>&1 && ! git diff --quiet HEAD -- 2>/dev/null && echo +changes)
$(shell mkdir -p $(BUILD) && [ "$$(cat $(BUILD)/commit 2>/dev/null)" = "$(COMMIT)" ] || echo "$(COMMIT)" >$(BUILD)/commit)
$(BUILD)/f32/src/kernels/cpu/commit.o $(BUILD)/f64/src/kernels/cpu/commit.o: $(BUILD)/commit
$(BUILD)/f32/src/kernels/cpu/commit.o $(BUILD)/f64/src/kernels/cpu/commit.o: CFLAGS += -DPELAB_COMMIT=\"$(COMMIT)\"

$(LAB_OBJ): CFLAGS += -Icli

$(PELAB_BIN): $(LAB_OBJ) $(CLI_OBJ) $(PELAB_LIB)
	$(CC) $(CFLAGS) -o $@ $(LAB_OBJ) $(CLI_OBJ) $(PELAB_LIB) $(LDLIBS) $(CAIRO_LIBS)

ifneq ($(CAIRO_LIBS),)
$(BUILD)/f32/lab/plot.o: CFLAGS += -DPELAB_CAIRO $(CAIRO_CFLAGS)
endif

$(BUILD)/tests/%: tests/%.c $(TESTLIB_OBJ) $(BUILD)/f64/libpelab.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DPELAB_DOUBLE -Itests -o $@ $< $(TESTLIB_OBJ) $(TEST_OBJ_EXTRA) $(BUILD)/f64/libpelab.a $(LDLIBS)

# test_alloc and test_contract count the library's allocations: its calls are rerouted through the
# counters of tests/lib/wrap/alloc_count.c.
$(BUILD)/tests/test_alloc $(BUILD)/tests/test_contract: $(BUILD)/f64/tests/lib/wrap/alloc_count.o
$(BUILD)/tests/test_alloc $(BUILD)/tests/test_contract: TEST_OBJ_EXTRA := $(BUILD)/f64/tests/lib/wrap/alloc_count.o
$(BUILD)/tests/test_alloc $(BUILD)/tests/test_contract: LDLIBS += -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc \
  -Wl,--wrap=aligned_alloc,--wrap=posix_memalign

# A lab test program with the lab's sources it tests (LAB_TEST_EXTRA_NAME, prerequisites too).
LAB_TEST_EXTRA_test_stats := lab/stats.c
.SECONDEXPANSION:
$(BUILD)/lab/tests/%: lab/tests/%.c $$(LAB_TEST_EXTRA_$$*) $(TESTLIB_OBJ) $(BUILD)/f64/libpelab.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DPELAB_DOUBLE -Itests -Ilab -o $@ $< $(LAB_TEST_EXTRA_$*) $(TESTLIB_OBJ) $(BUILD)/f64/libpelab.a $(LDLIBS)

# (the float build's: check.o has no reals; models.o has, so it is built again in float, and kept)
.SECONDARY: $(BUILD)/f32/tests/lib/models.o
$(BUILD)/tests/%_f32: tests/%.c $(BUILD)/f64/tests/lib/check.o $(BUILD)/f32/tests/lib/models.o $(PELAB_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(BUILD)/f64/tests/lib/check.o $(BUILD)/f32/tests/lib/models.o $(PELAB_LIB) $(LDLIBS)

# fuzz/fuzz_NAME.c with fuzz/replay.c's main (and the target's extra sources, FUZZ_EXTRA_NAME,
# which are prerequisites too: a change to them rebuilds the replay test and the fuzzer).
FUZZ_EXTRA_options := cli/args.c
FUZZ_EXTRA_csv := lab/csv.c
$(BUILD)/tests/test_fuzz_options $(BUILD)/fuzz_options: $(FUZZ_EXTRA_options) cli/args.h
$(BUILD)/lab/tests/test_fuzz_csv $(BUILD)/fuzz_csv: $(FUZZ_EXTRA_csv) lab/csv.h
define fuzz_replay
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DPELAB_DOUBLE -DFUZZ_NAME=\"$*\" -Ifuzz -o $@ $< fuzz/replay.c $(FUZZ_EXTRA_$*) \
	  $(BUILD)/f64/libpelab.a $(LDLIBS)
endef
$(BUILD)/tests/test_fuzz_%: fuzz/fuzz_%.c fuzz/replay.c fuzz/fuzz.h $(BUILD)/f64/libpelab.a
	$(fuzz_replay)
$(BUILD)/lab/tests/test_fuzz_%: fuzz/fuzz_%.c fuzz/replay.c fuzz/fuzz.h $(BUILD)/f64/libpelab.a
	$(fuzz_replay)

BENCH_SRC := $(sort $(wildcard bench/*.c))
BENCH_BIN := $(BENCH_SRC:bench/%.c=build/bench/%)

$(BUILD)/bench/%: bench/%.c bench/configs.h $(PELAB_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(PELAB_LIB) $(LDLIBS)

# bench_train and bench_generate with the phase timers of src/core/prof.h compiled in, in build/prof.
profile:
	@CFLAGS="-O3 -g -DPELAB_PROFILE" $(MAKE) --no-print-directory BUILD=build/prof \
	  PELAB_LIB=build/prof/libpelab.a build/prof/bench/bench_train build/prof/bench/bench_generate

# The twin test program writes fixtures with the double build; tests/ref/twin.py checks them.
tests: $(TEST_BIN) $(FUZZ_REPLAY) $(LAB_TEST_BIN) $(PELAB_BIN)

# Written on every make: `make install PREFIX=DIR` after a plain `make` must record DIR.
.PHONY: pelab.pc
pelab.pc: Makefile
	@printf 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: pelab\nDescription: decoder-only Transformers with pluggable positional encodings\nVersion: %s\nRequires.private: %s\nLibs: -L$${libdir} -lpelab\nLibs.private: %s\nCflags: -I$${includedir}\n' \
	  '$(PREFIX)' '$(VERSION)' '$(PC_REQUIRES)' '$(filter-out $(BLAS_LIBS) $(MPI_LIBS),$(LDLIBS))' > $@

# make test runs the library's tests and the lab's, one total; test-lib and test-lab each alone
# (tests/run.sh's PELAB_TIERS).
test: setup
	@$(MAKE) --no-print-directory tests
	@bash tests/run.sh

test-lib test-lab: setup
	@$(MAKE) --no-print-directory tests
	@PELAB_TIERS=$(@:test-%=%) bash tests/run.sh

demo: setup
	@echo "demo: building pelab" && $(MAKE) --no-print-directory -s pelab
	@bash lab/scripts/demo.sh

demo-indirect: pelab
	./pelab compare --task indirect --pe rope,pope,nope --preset cpu --seeds 1 --jobs 2 --out runs/demo-indirect

setup:
	@bash .ci/deps
	@bash .ci/deps-data

bench: pelab $(BENCH_BIN)
	@bash bench/run.sh

# every Markdown file of the repository that holds a <!-- results:NAME --> block (lab/scripts/tables.py --list)
tables:
	@/usr/bin/python3 lab/scripts/tables.py

reproduce: setup
	@$(MAKE) --no-print-directory -s pelab
	@bash lab/scripts/reproduce.sh $(TABLE)

lengthgen: setup
	@$(MAKE) --no-print-directory -s pelab
	@bash lab/scripts/lengthgen.sh $(TASKS)

seqpe-table4: setup
	@$(MAKE) --no-print-directory -s pelab
	@bash lab/scripts/seqpe_table4.sh $(PROFILES)

image-tables: setup
	@$(MAKE) --no-print-directory -s pelab
	@bash lab/scripts/image_tables.sh $(or $(PRESET),cpu-aug) $(TABLES)

qa-table2: setup
	@$(MAKE) --no-print-directory -s pelab
	@bash lab/scripts/qa_table2.sh

cpu-tables: setup
	@$(MAKE) --no-print-directory -s pelab
	@bash lab/scripts/cpu_tables.sh $(TASKS)

indirect-mid: setup
	@$(MAKE) --no-print-directory -s pelab
	@bash lab/scripts/indirect_mid.sh $(ARMS)

# whether this tree trains, evaluates and samples bit for bit as revision BASE does (a refactoring's
# check): scripts/identical.sh with both binaries, BASE built apart in a temporary worktree
identical: pelab
	@bash scripts/identical_base.sh $(or $(BASE),HEAD)

deps:
	@bash .ci/deps

data: pelab
	./pelab data install $(DATASETS)

install: all
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include/pelab $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 libpelab.a libpelab.so $(DESTDIR)$(PREFIX)/lib/
	install -m 644 include/pelab/*.h $(DESTDIR)$(PREFIX)/include/pelab/
	install -m 755 pelab $(DESTDIR)$(PREFIX)/bin/
	install -m 644 pelab.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/
	install -d $(DESTDIR)$(PREFIX)/share/pelab
	install -m 755 scripts/install-data.sh $(DESTDIR)$(PREFIX)/share/pelab/

clean:
	rm -rf build libpelab.a libpelab.so pelab pelab.pc

.PHONY: all test test-lib test-lab tests demo demo-indirect setup bench profile deps data install clean test-asan test-valgrind fuzz tables reproduce lengthgen seqpe-table4 image-tables qa-table2 cpu-tables indirect-mid identical
.DELETE_ON_ERROR:

-include $(OBJ32:.o=.d) $(OBJ64:.o=.d) $(CLI_OBJ:.o=.d) $(LAB_OBJ:.o=.d) $(TESTLIB_OBJ:.o=.d) $(BUILD)/f32/tests/lib/models.d
include mk/check.mk
