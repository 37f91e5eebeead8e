#!/usr/bin/env bash
# Runs every test of two tiers: the library's (its C test programs, build/tests/test_*; its
# command-line scripts, tests/cli_*.sh; the PyTorch twin, tests/ref/run.sh) and the lab's (its C
# test programs, build/lab/tests/test_*, and scripts, lab/tests/cli_*.sh). PELAB_TIERS="lib lab"
# (the default) runs both, "lib" or "lab" one (make test-lib, make test-lab). Each program's exit
# status is its verdict: 0 passed, 77 skipped (a missing optional dependency, said on its own
# line), else failed. Another build's programs (make test-asan): PELAB_TEST_DIR (default
# build/tests; the lab's are in lab/tests beside it), PELAB_BIN (read by tests/lib/cli.sh),
# PELAB_CLI_TESTS (names of the cli scripts to run, of either tier; default all) and
# PELAB_NO_TWIN=1.
set -u
cd "$(dirname "$0")/.."
# Idle OpenMP threads sleep instead of spinning: on a busy machine spinning threads take the cores
# the working ones need, and small test problems then run many times slower.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
test_dir=${PELAB_TEST_DIR:-build/tests}
lab_test_dir=$(dirname "$test_dir")/lab/tests
tiers=${PELAB_TIERS:-lib lab}
for t in $tiers; do
    case $t in lib | lab) ;; *) echo "tests/run.sh: PELAB_TIERS: '$t' is not a tier (lib, lab)" >&2; exit 2 ;; esac
done
in_tier() { [[ " $tiers " == *" $1 "* ]]; }
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
cli_dirs=() prog_dirs=()
in_tier lib && cli_dirs+=(tests) && prog_dirs+=("$test_dir")
in_tier lab && cli_dirs+=(lab/tests) && prog_dirs+=("$lab_test_dir")
cli_tests=()
for d in "${cli_dirs[@]}"; do
    if [ -n "${PELAB_CLI_TESTS:-}" ]; then
        for n in $PELAB_CLI_TESTS; do [ -f "$d/$n.sh" ] && cli_tests+=("$d/$n.sh"); done
    else
        cli_tests+=("$d"/cli_*.sh)
    fi
done
# The tests run PELAB_TEST_JOBS at a time (default: the cores), each with its output kept apart;
# a line per test as it ends, then the totals and the wall time. The longest ones start first (by
# their times in the last run, kept in $test_dir/../test-times), so that the last to start are short.
jobs=${PELAB_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
times=$test_dir/../test-times
all=() all_names=()
in_tier lib && [ -z "${PELAB_NO_TWIN:-}" ] && [ -f tests/ref/run.sh ] && all+=("bash tests/ref/run.sh") && all_names+=("pytorch-twin")
for t in "${cli_tests[@]}"; do [ -f "$t" ] && all+=("bash $t") && all_names+=("$(basename "$t" .sh)"); done
for d in "${prog_dirs[@]}"; do
    for t in "$d"/test_*; do [ -x "$t" ] && all+=("$t") && all_names+=("$(basename "$t")"); done
done
tests=() names=()
while read -r i; do tests+=("${all[$i]}"); names+=("${all_names[$i]}"); done < <(
    for i in "${!all[@]}"; do
        # the first line of its name only, and only a number: each test once in the order, whatever
        # the file holds (a duplicated line once ran tests twice, and the next file kept both)
        s=$(awk -v n="${all_names[$i]}" '$1 == n { print $2; exit }' "$times" 2>/dev/null)
        [[ $s =~ ^[0-9]+$ ]] || s=0
        echo "$s $i"
    done | sort -k1,1nr -k2,2n | cut -d' ' -f2)
[ ${#tests[@]} -eq ${#all[@]} ] ||
    { echo "tests/run.sh: the order holds ${#tests[@]} tests where there are ${#all[@]}" >&2; exit 2; }
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
started=$SECONDS
passed=0 failed=0 skipped=0 failures=()
declare -A pid_of start_of
report() { # INDEX: the test's line (and, on failure, its output's last lines)
    local i=$1 name=${names[$1]} rc
    rc=$(cat "$logs/$i.rc")
    case $rc in
    0) passed=$((passed + 1)); printf 'ok    %-32s %3ds\n' "$name" "$(cat "$logs/$i.s")" ;;
    77) skipped=$((skipped + 1)); printf 'skip  %-32s %s\n' "$name" "$(tail -n 1 "$logs/$i.log")" ;;
    *) failed=$((failed + 1)); failures+=("$name"); printf 'FAIL  %-32s (exit %d)\n' "$name" "$rc"
       sed 's/^/      /' "$logs/$i.log" | tail -n 40 ;;
    esac
}
run_one() { # INDEX, in the background: its status, seconds and output into $logs
    local i=$1 t0=$SECONDS
    ${tests[$1]} >"$logs/$i.log" 2>&1
    echo $? >"$logs/$i.rc.tmp"
    echo $((SECONDS - t0)) >"$logs/$i.s"
    mv "$logs/$i.rc.tmp" "$logs/$i.rc"
}
running=()
for i in "${!tests[@]}"; do
    while [ ${#running[@]} -ge "$jobs" ]; do
        wait -n 2>/dev/null
        still=()
        for r in "${running[@]}"; do
            if [ -f "$logs/$r.rc" ]; then wait "${pid_of[$r]}" 2>/dev/null; report "$r"; else still+=("$r"); fi
        done
        running=("${still[@]}")
    done
    run_one "$i" &
    pid_of[$i]=$!
    running+=("$i")
done
wait
for r in "${running[@]}"; do report "$r"; done
for i in "${!tests[@]}"; do echo "${names[$i]} $(cat "$logs/$i.s")"; done >"$times.tmp" 2>/dev/null &&
    mv "$times.tmp" "$times" 2>/dev/null
echo
[ ${#failures[@]} -gt 0 ] && echo "failed: ${failures[*]}"
echo "tests: $jobs at a time, $((SECONDS - started)) s of wall time"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
