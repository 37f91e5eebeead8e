#!/usr/bin/env bash
# Records the runs behind a recorded table (of README.md or docs/) in results/TABLE/, so that every
# number of the table can be traced to the runs that made it and regenerated from the record
# (lab/scripts/tables.py):
#
#   bash lab/scripts/record.sh TABLE ./pelab compare ... --out DIR
#
# runs the command (a `pelab compare`; runs it finished before are reused, as compare does: only
# those of the settings asked, else compare stops and no record is kept), then
# keeps, in results/TABLE/ ($PELAB_RESULTS/TABLE when set):
#   record.json      the command, its pelab's `--version` and the commit that names (the one the
#                    binary was built from, "+changes" when the tree differed from it), the environment's
#                    PELAB_*, OPENBLAS_* and OMP_* settings, the CPU model, the cores, the date,
#                    the command's wall time, and trained_by: how many of the kept runs that
#                    finished (a summary.json) each build trained (its "trained-by": a run resumed
#                    by another build counts for each; "unrecorded" for a run older than the
#                    field), said on stderr when a build other than the recording one trained any
#   compare.json     compare's own summary of the runs (each run's metrics and sweep)
#   runs/RUN/        each run's config.json, summary.json, sweep files, the last 5 lines of its
#                    log.jsonl (log-tail.jsonl) and its lines with a validation (log-val.jsonl: the
#                    learning curve) (never weights: a record is kilobytes); with --tune the
#                    tuning runs alike in runs/tune/RUN/
# An analysis is recorded alike: record.json, and the file it writes as analysis.json (its --json
# FILE: pelab analyze attn-similarity ...) or analysis.csv (its --out FILE.csv: pelab analyze seqpe
# --variance ...).
# A record names no directory of this machine (lab/scripts/recordpaths.py): its command's binary is
# ./pelab, its --out runs/record/TABLE (an analysis's files runs/record/TABLE/FILE), a path into
# the runs another record keeps (an init-from, an analysis's --models) that record's
# runs/record/OTHER/RUN, any other path relative to the repository; its runs' config.json "out"
# and compare.json "dir" alike; record.json's paths_rewritten says what the command ran with.
# A command that reads runs no record keeps, or names a path outside the repository otherwise, is
# refused before it runs. The --out DIR of a kept compare is marked (DIR/.records) as holding the
# runs of TABLE, by which a later record finds them.
# A record made again replaces the old one; git keeps the history.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 2 ] || { echo "usage: lab/scripts/record.sh TABLE COMMAND... (a pelab compare with --out DIR, or an analysis with --json FILE or --out FILE.csv)" >&2; exit 2; }
table=$1; shift
case $table in */* | .* | "") echo "record: '$table' is not a table name" >&2; exit 2 ;; esac
out="" json="" csv=""
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do  # --out V or --out=V, as pelab reads them
    case ${args[i]} in
    --out) out=${args[i + 1]:-} ;;
    --out=*) out=${args[i]#--out=} ;;
    --json) json=${args[i + 1]:-} ;;
    --json=*) json=${args[i]#--json=} ;;
    esac
done
if [ "${args[1]:-}" = analyze ]; then
    [ -n "$json" ] || { [[ $out == *.csv ]] && csv=$out; }
    out=""
fi
[ -n "$out" ] || [ -n "$json" ] || [ -n "$csv" ] ||
    { echo "record: the command names no --out DIR (a compare), --json FILE or --out FILE.csv (an analysis)" >&2; exit 2; }

# what the record names each path of the command (refused here, before anything runs, when it
# cannot name one)
results=${PELAB_RESULTS:-results} # another directory for the tests
map=$(mktemp)
trap 'rm -f "$map"' EXIT
/usr/bin/python3 lab/scripts/recordpaths.py resolve "$table" "$@" >"$map" || exit 2

# the build that runs, and the commit it was built from (its --version says; taken before the
# command: the tree may change while the runs train)
version=$("$1" --version)
commit=$(sed -n 's/^pelab [^ ]* (commit \([^,]*\),.*/\1/p' <<<"$version")
start=$(date +%s.%N)
"$@"
wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
[ -z "$out" ] || [ -f "$out/compare.json" ] || { echo "record: $out/compare.json is missing" >&2; exit 1; }
[ -n "$out" ] || [ -f "${json:-$csv}" ] || { echo "record: ${json:-$csv} is missing" >&2; exit 1; }

mkdir -p "$results"
dest=$results/$table
tmp=$(mktemp -d "$results/.$table.XXXXXX")
trap 'rm -rf "$tmp" "$map"' EXIT
[ -z "$json" ] || cp "$json" "$tmp/analysis.json"
[ -z "$csv" ] || cp "$csv" "$tmp/analysis.csv"
[ -z "$out" ] || cp "$out/compare.json" "$tmp/"
[ -z "$out" ] || /usr/bin/python3 - "$out/compare.json" "$tmp" <<'PY'
import json, os, shutil, sys
compare, dest = sys.argv[1], sys.argv[2]
c = json.load(open(compare))
kept = [(run["dir"], "runs") for run in c["runs"]]  # and with --tune each point's tuning runs
kept += [(d, os.path.join("runs", "tune")) for e in c["encodings"] for g in e.get("tune", {}).get("grid", [])
         for d in g["dirs"]]
for src, under in dict.fromkeys(kept):
    to = os.path.join(dest, under, os.path.basename(src.rstrip("/")))
    os.makedirs(to, exist_ok=True)
    for name in sorted(os.listdir(src)):
        if name in ("config.json", "summary.json") or (name.startswith(("sweep", "resolutions", "qa_sweep", "sizes")) and name.endswith(".json")):
            shutil.copyfile(os.path.join(src, name), os.path.join(to, name))
    with open(os.path.join(src, "log.jsonl")) as f:
        lines = f.readlines()
    with open(os.path.join(to, "log-tail.jsonl"), "w") as f:
        f.writelines(lines[-5:])
    with open(os.path.join(to, "log-val.jsonl"), "w") as f:  # the learning curve
        f.writelines(l for l in lines if '"val_loss"' in l)
PY
/usr/bin/python3 - "$tmp/record.json" "$table" "$commit" "$wall" "$@" <<PY
import collections, glob, json, os, sys, time
path, table, commit, wall, command = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5:]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown")
# the settings of the environment that change what runs (kernels, threads)
env = {k: v for k, v in sorted(os.environ.items()) if k.startswith(("PELAB_", "OPENBLAS_", "OMP_"))}
record = {"table": table, "command": command, "commit": commit, "environment": env,
          "version": """$version""".splitlines(),
          "cpu": cpu, "cores": $(nproc), "date": time.strftime("%Y-%m-%d"), "wall_s": wall}
summaries = sorted(glob.glob(os.path.join(os.path.dirname(path), "runs", "**", "summary.json"), recursive=True))
def builds(summary):
    by = json.load(open(summary)).get("trained-by")
    return [b for b in by if isinstance(b, str) and b != "..."] if isinstance(by, list) and by else ["unrecorded"]
if summaries:  # the builds that trained the kept runs that finished
    trained_by = collections.Counter(b for s in summaries for b in builds(s))
    record["trained_by"] = dict(sorted(trained_by.items()))
    others = {b: n for b, n in trained_by.items() if b != commit}
    if others:
        print("record: %s: runs trained by other builds than commit %s: %s" % (table, commit, ", ".join(
            "%s (%d of %d finished runs)" % (b, n, len(summaries)) for b, n in sorted(others.items()))), file=sys.stderr)
json.dump(record, open(path, "w"), indent=2)
open(path, "a").write("\n")
PY
/usr/bin/python3 lab/scripts/recordpaths.py apply "$tmp" "$table" "$map" || exit 1
rm -rf "$dest"
mv "$tmp" "$dest"
rm -f "$map"
trap - EXIT
[ -z "$out" ] || /usr/bin/python3 lab/scripts/recordpaths.py mark "$table" "$out"
echo "record: $dest ($(find "$dest" -type f | wc -l) files, $(du -sk "$dest" | cut -f1) KB)"
