# What the benchmark scripts share (sourced from the repository's root).

# the values of field $1 in the JSON lines on stdin, one per line
fields() { sed -n "s/.*\"$1\":\([0-9.eE+-]*\).*/\1/p"; }
# field $1 of the last JSON line that has it, or nothing
field() { fields "$1" | tail -n 1; }
# median of the numbers on stdin, or "null" when there are none
median() { sort -g | awk '{ x[NR] = $1 } END { if (NR == 0) print "null";
    else if (NR % 2) print x[(NR + 1) / 2]; else print (x[NR / 2] + x[NR / 2 + 1]) / 2 }'; }

# the CPU's model name, and the commit (with "+changes" when the tree differs from it): what a
# benchmark's header names
cpu_model() { sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1; }
commit_of() { echo "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo '+changes')"; }

# OpenBLAS on the kernels pelab chooses for this CPU (src/kernels/cpu/blas_kernels.h), set once for
# every program a script runs, so that none re-runs itself to say so, and the twin runs on the same
# kernels: the ratios compare code, not CPU detection. A choice already in OPENBLAS_CORETYPE stands.
blas_core_env() {
    if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
        local core
        core=$(bash scripts/blas-core.sh ./pelab) && [ -n "$core" ] && export OPENBLAS_CORETYPE=$core
    fi
    return 0
}

# The memory bandwidth the rooflines use: bench_stream's triad rate at its default size, measured
# once per script (threads $1)
triad_gbs() {
    [ -n "${TRIAD_GBS:-}" ] || TRIAD_GBS=$(build/bench/bench_stream --threads "$1" | field triad_gbs)
    echo "$TRIAD_GBS"
}
# bench_roofline's line for configuration $1, encoding $2, threads $3: the bound of a training step
roofline() { build/bench/bench_roofline --config "$1" --pe "$2" --threads "$3" --triad-gbs "$(triad_gbs "$3")"; }
