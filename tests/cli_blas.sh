#!/usr/bin/env bash
# pelab mends OpenBLAS's kernel choice on a CPU whose model OpenBLAS does not know
# (src/kernels/cpu/blas_kernels.h; the rule itself on recorded pairs: build/tests/test_blas_kernels).
# This machine's OpenBLAS knows its CPU, so the test plays one that it misjudges: PELAB_CPU_FLAGS
# claims AVX-512 with BF16, above the core OpenBLAS chose, and pelab must say so in one line, run
# itself again with OPENBLAS_CORETYPE=Cooperlake, and do the command it was given. OpenBLAS itself
# runs Cooperlake only where the CPU has BF16 (else SkylakeX): which one ran is what --version says.
set -u
. "$(dirname "$0")/lib/cli.sh"
"$P" --version | grep -q "^BLAS: OpenBLAS" || { echo "skip: pelab built without OpenBLAS"; exit 77; }
bf16="fpu sse sse2 pni ssse3 sse4_1 sse4_2 fma avx f16c avx2 avx512f avx512dq avx512cd avx512bw avx512vl avx512_bf16"
chosen=$(env -u OPENBLAS_CORETYPE "$P" --version | sed -n 's/^BLAS: OpenBLAS [^ ]* \([^ ]*\) kernels.*/\1/p')
case $chosen in
Cooperlake | SapphireRapids | "") echo "skip: pelab runs OpenBLAS's $chosen kernels here, the best level: a played CPU cannot be above it"; exit 77 ;;
esac

# misjudged: one line, then the command runs on the better kernels
expect 0 "OpenBLAS chose its $chosen kernels on this AVX-512 with BF16 CPU.*running with OPENBLAS_CORETYPE=Cooperlake" -G -c -- \
    env -u OPENBLAS_CORETYPE PELAB_CPU_FLAGS="$bf16" "$P" --version
grep -q "^BLAS: OpenBLAS .* kernels (OPENBLAS_CORETYPE=Cooperlake" "$W/o" ||
    fail "the second run does not run with OPENBLAS_CORETYPE=Cooperlake: $(cat "$W/o")"

# the arguments reach the second run intact (a space inside one, an empty one), and its exit status
env -u OPENBLAS_CORETYPE PELAB_CPU_FLAGS="$bf16" "$P" train --task indirect --pe rope \
    --d-model 16 --heads 2 --layers 1 --batch 2 --steps 2 --threads 1 --out "$W/run one" \
    >"$W/o" 2>"$W/e" || fail "train exited $?: $(cat "$W/e")"
[ -f "$W/run one/model.safetensors" ] || fail "train under the second run wrote no model"
[ "$(grep -c "running with OPENBLAS_CORETYPE" "$W/e")" -eq 1 ] || fail "the line is not said once: $(cat "$W/e")"
env -u OPENBLAS_CORETYPE PELAB_CPU_FLAGS="$bf16" "$P" train --steps -1 >"$W/o" 2>"$W/e"
[ $? -eq 2 ] || fail "a usage error in the second run does not exit 2"
grep -q "^pelab: --steps: -1 is out of range" "$W/e" || fail "the second run's error is not said: $(cat "$W/e")"

# under mpirun only the first rank says it
env -u OPENBLAS_CORETYPE OMPI_COMM_WORLD_RANK=1 PELAB_CPU_FLAGS="$bf16" "$P" --version >"$W/o" 2>"$W/e" || fail "rank 1 --version"
[ ! -s "$W/e" ] || fail "rank 1 repeats the line: $(cat "$W/e")"

# the user's choice stands, silently, and --version says what this CPU allows
OPENBLAS_CORETYPE=Prescott PELAB_CPU_FLAGS="$bf16" "$P" --version >"$W/o" 2>"$W/e" || fail "--version with OPENBLAS_CORETYPE"
[ ! -s "$W/e" ] || fail "a user's OPENBLAS_CORETYPE is overridden or remarked on: $(cat "$W/e")"
grep -q "Prescott kernels (OPENBLAS_CORETYPE=Prescott; this CPU allows Cooperlake)" "$W/o" || fail "--version: $(cat "$W/o")"
# the CPU as it is: the kernels OpenBLAS chose are as good as its flags allow (else pelab mends them)
env -u OPENBLAS_CORETYPE "$P" --version >"$W/o" 2>"$W/e" || fail "--version"
grep -q "this CPU allows" "$W/o" && fail "OpenBLAS runs below this CPU after the check: $(cat "$W/o")"
echo "ok: kernels $chosen here; a misjudged CPU is mended in one line"
