#!/usr/bin/env bash
# Runs each libFuzzer target of $FUZZ_DIR (made by `make fuzz`) for $FUZZ_SECONDS seconds from its
# seed corpus fuzz/corpus/<name>/. New inputs go to $FUZZ_DIR/corpus-<name>/ (the seeds stay as
# they are), crashes to $FUZZ_DIR/crashes/, libFuzzer's output to $FUZZ_DIR/logs/. A crash fails
# the run: reproduce it with `build/tests/test_fuzz_<name> FILE` (the lab's, csv:
# build/lab/tests/test_fuzz_csv), fix it, and keep FILE as
# tests/fuzz/<name>/<what> (make test replays it from then on).
set -u
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-30}
dir=${FUZZ_DIR:-build/fuzz}
mkdir -p "$dir/crashes" "$dir/logs"
failed=()
for bin in "$dir"/fuzz_*; do
    name=${bin##*/fuzz_}
    mkdir -p "$dir/corpus-$name"
    log="$dir/logs/$name.log"
    printf 'fuzz %-12s %ss ... ' "$name" "$secs"
    if "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$dir/crashes/$name-" "$dir/corpus-$name" "fuzz/corpus/$name" >"$log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        echo "ok: $runs inputs, $(ls "$dir/corpus-$name" | wc -l) kept in $dir/corpus-$name"
    else
        echo "FAILED (see $log)"
        grep -m3 -E 'ERROR|SUMMARY|fuzz: ' "$log" | sed 's/^/    /'
        failed+=("$name")
    fi
done
[ ${#failed[@]} -eq 0 ] || { echo "fuzz: crashes in ${failed[*]} (inputs in $dir/crashes/)"; exit 1; }
