#!/usr/bin/env bash
# The library's modules import only their own layer and those below it (core < kernels < io <
# posenc < attn < nn < optim < data < train < eval), with no circle among them:
# scripts/layers.py --check on the tree, which lists no exception (its ALLOWED table is empty).
# Then the check itself, on copies of src/: an upward include, a circle, an unknown module and a
# stale exception each fail it, naming what they found. Nothing is built or run.
set -u
. "$(dirname "$0")/lib/cli.sh"
out=$(python3 scripts/layers.py --check 2>&1) || fail "the library's layers: $out"
[ -z "$out" ] || fail "layers.py --check passed but said: $out"

# copy: a tree of its own (scripts/layers.py, include/, src/) to break
copy() { rm -rf "$W/t" && mkdir -p "$W/t/scripts" && cp scripts/layers.py "$W/t/scripts/" && cp -r include src "$W/t/"; }
# refused PATTERN: the copy's check exits 1 with a line containing PATTERN
refused() {
    python3 "$W/t/scripts/layers.py" --check >"$W/o" 2>&1 && fail "layers.py --check passed $1: $(cat "$W/o")"
    grep -qF -- "$2" "$W/o" || fail "layers.py --check on $1: expected '$2': $(cat "$W/o")"
}

# kernels reaching up into the model
copy
sed -i '0,/#include "kernels\/cpu\/layers.h"/s//&\n#include "nn\/forward.h"/' "$W/t/src/kernels/cpu/softmax_attn.c"
refused "an upward include" "layers: kernels imports nn, a higher layer: src/kernels/cpu/softmax_attn.c"
refused "an upward include" "layers: circle among"
# an upward import through a public header: pelab/train.h's functions are train's
copy
sed -i '0,/#include "kernels\/cpu\/vmath.h"/s//&\n#include "pelab\/train.h"/' "$W/t/src/kernels/cpu/softmax_attn.c"
refused "an include of a public header" "layers: kernels imports train, a higher layer"
# a module the order does not know
copy
mkdir -p "$W/t/src/lab" && printf '#include "nn/forward.h"\n' >"$W/t/src/lab/x.c"
refused "an unknown module" "layers: module src/lab is not in the order"
# an exception that no longer stands
copy
sed -i 's/^ALLOWED = {$/&\n    ("kernels", "nn"): "a reason",/' "$W/t/scripts/layers.py"
refused "a stale exception" "layers: ALLOWED lists kernels -> nn, which no longer stands"
# the same exception where the import stands: allowed, though the circle it makes is not
sed -i '0,/#include "kernels\/cpu\/layers.h"/s//&\n#include "nn\/forward.h"/' "$W/t/src/kernels/cpu/softmax_attn.c"
refused "an allowed import that makes a circle" "layers: circle among"
grep -q "kernels imports nn" "$W/o" && fail "layers.py --check named an allowed import: $(cat "$W/o")"
exit 0
