#!/usr/bin/env bash
# Runs every test: the C test programs (build/tests/test_*), the command-line scripts
# (tests/cli_*.sh) and the PyTorch twin (tests/ref/run.sh). Each program's exit status is its
# verdict: 0 passed, 77 skipped (a missing optional dependency, said on its own line), else failed.
# Another build's programs (make test-asan): PELAB_TEST_DIR (default build/tests), PELAB_BIN
# (read by tests/lib/cli.sh), PELAB_CLI_TESTS (names of the cli scripts to run; default all) and
# PELAB_NO_TWIN=1.
set -u
cd "$(dirname "$0")/.."
# Idle OpenMP threads sleep instead of spinning: on a busy machine spinning threads take the cores
# the working ones need, and small test problems then run many times slower.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
test_dir=${PELAB_TEST_DIR:-build/tests}
# Every program runs on the OpenBLAS kernels pelab chooses for this CPU (scripts/blas-core.sh):
# the C tests too, and pelab says nothing about a choice already made.
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
    core=$(bash scripts/blas-core.sh "${PELAB_BIN:-./pelab}") && [ -n "$core" ] && export OPENBLAS_CORETYPE=$core
fi
[ -n "${OPENBLAS_CORETYPE:-}" ] && echo "OpenBLAS kernels: $OPENBLAS_CORETYPE"
# On an AVX-512 CPU without AVX512-BF16 the bf16 tests run on oneDNN's emulation of the bf16
# products (pelab/precision.h) rather than skip: its arithmetic is bf16's, its speed is not.
if [ -z "${PELAB_BF16_EMULATION+set}" ] && grep -qw avx512f /proc/cpuinfo && ! grep -qw avx512_bf16 /proc/cpuinfo; then
    export PELAB_BF16_EMULATION=1
    echo "bf16: oneDNN's emulation (this CPU lacks AVX512-BF16)"
fi
cli_tests=()
if [ -n "${PELAB_CLI_TESTS:-}" ]; then
    for n in $PELAB_CLI_TESTS; do cli_tests+=("tests/$n.sh"); done
else
    cli_tests=(tests/cli_*.sh)
fi
passed=0 failed=0 skipped=0 failures=()
run() {
    local name=$1; shift
    local log; log=$(mktemp)
    local start=$SECONDS
    "$@" >"$log" 2>&1
    local rc=$?
    case $rc in
    0) passed=$((passed + 1)); printf 'ok    %-32s %3ds\n' "$name" $((SECONDS - start)) ;;
    77) skipped=$((skipped + 1)); printf 'skip  %-32s %s\n' "$name" "$(tail -n 1 "$log")" ;;
    *) failed=$((failed + 1)); failures+=("$name"); printf 'FAIL  %-32s (exit %d)\n' "$name" $rc
       sed 's/^/      /' "$log" | tail -n 40 ;;
    esac
    rm -f "$log"
}
for t in "$test_dir"/test_*; do [ -x "$t" ] && run "$(basename "$t")" "$t"; done
for t in "${cli_tests[@]}"; do [ -f "$t" ] && run "$(basename "$t" .sh)" bash "$t"; done
[ -z "${PELAB_NO_TWIN:-}" ] && [ -f tests/ref/run.sh ] && run "pytorch-twin" bash tests/ref/run.sh
echo
[ ${#failures[@]} -gt 0 ] && echo "failed: ${failures[*]}"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
