#!/usr/bin/env bash
# The README's recorded tables (<!-- results:NAME --> blocks) are what their records in results/
# give (scripts/tables.py, make tables): no number typed by hand. Nothing is trained here: the
# tables are made from the records alone. An edit of one digit in a table, or a record's
# number, is caught.
set -u
. "$(dirname "$0")/lib/cli.sh"
out=$(/usr/bin/python3 scripts/tables.py --check 2>&1) || fail "README.md differs from results/: $out"
n=$(grep -c '^<!-- results:' README.md)
[ "$n" -ge 1 ] || fail "README.md has no recorded table"
# one digit of the first recorded table's first row changed: caught, with a diff naming it
cp README.md "$W/README.md"
/usr/bin/python3 - "$W/README.md" <<'PY' || fail "no table row to edit"
import re, sys
p = sys.argv[1]
t = open(p).read()
start = t.index("<!-- results:")
row = re.compile(r"^\| [^|-][^|]* \| (\d+\.\d+)", re.M).search(t, start)
assert row, "no row"
i = row.start(1) + len(row.group(1)) - 1
open(p, "w").write(t[:i] + ("1" if t[i] != "1" else "2") + t[i + 1:])
PY
/usr/bin/python3 scripts/tables.py --check "$W/README.md" >"$W/o" 2>&1 && fail "an edited table number passed the check"
grep -q "^tables: README.md differs from its records" "$W/o" && grep -q '^-| ' "$W/o" ||
    fail "the check does not show the edit: $(cat "$W/o")"
echo "cli_tables: ok ($n recorded tables)"
