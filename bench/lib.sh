# What the benchmark scripts share (sourced from the repository's root).

# the values of field $1 in the JSON lines on stdin, one per line
fields() { sed -n "s/.*\"$1\":\([0-9.eE+-]*\).*/\1/p"; }
# field $1 of the last JSON line that has it, or nothing
field() { fields "$1" | tail -n 1; }
# median of the numbers on stdin, or "null" when there are none
median() { sort -g | awk '{ x[NR] = $1 } END { if (NR == 0) print "null";
    else if (NR % 2) print x[(NR + 1) / 2]; else print (x[NR / 2] + x[NR / 2 + 1]) / 2 }'; }
