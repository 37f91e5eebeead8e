#!/usr/bin/env bash
# make identical BASE=REV: the fingerprints of scripts/identical.sh from this tree's pelab and from
# revision REV's (built in a temporary worktree, removed after), side by side; exits 1 on the
# first difference, naming its cases.
set -euo pipefail
cd "$(dirname "$0")/.."
base=$(git rev-parse --verify "${1:-HEAD}^{commit}")
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/base" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git worktree add --detach "$tmp/base" "$base" >/dev/null 2>&1
echo "identical: building ${base:0:12} apart"
make -C "$tmp/base" -s -j"$(nproc)" pelab >"$tmp/build.log" 2>&1 || { tail -5 "$tmp/build.log"; exit 2; }
echo "identical: fingerprints of this tree and of ${base:0:12} (scripts/identical.sh)"
bash scripts/identical.sh ./pelab >"$tmp/new" &
bash scripts/identical.sh "$tmp/base/pelab" >"$tmp/old"
wait $!
if diff "$tmp/old" "$tmp/new" >"$tmp/diff"; then
    echo "identical: $(wc -l <"$tmp/new") cases bit for bit equal to ${base:0:12}"
else
    echo "identical: differs from ${base:0:12} (< base, > this tree):"; cat "$tmp/diff"; exit 1
fi
