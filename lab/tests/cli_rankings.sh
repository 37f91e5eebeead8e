#!/usr/bin/env bash
# The documents' prose ranks two encodings only as the quoted paired interval allows
# (lab/scripts/rankings.py): "ahead" or "behind" beside an interval that excludes 0, "level" beside
# one that holds it. Checked on README.md and docs/, then on copies that break it: the README with
# one "level" turned into "ahead", and made-up documents.
set -u
. "$(dirname "$0")/../../tests/lib/cli.sh"
out=$(/usr/bin/python3 lab/scripts/rankings.py 2>&1) || fail "a ranking word disagrees with its interval: $out"
# README's demo prose says PoPE and ALiBi are level at 4x (+0.017 [−0.208, +0.243]): "ahead" fails
mkdir -p "$W/m/docs"
grep -q 'level at 4× (+0.017 \[−0.208, +0.243\])' README.md || fail "README.md no longer says 'level at 4× (+0.017 [−0.208, +0.243])': update this test"
sed 's/level at 4× (+0.017/ahead at 4× (+0.017/' README.md >"$W/m/README.md"
/usr/bin/python3 lab/scripts/rankings.py "$W/m" >"$W/o" 2>&1 && fail "'ahead' beside [−0.208, +0.243] passed"
grep -qF "README.md: 'ahead' with the interval [−0.208, +0.243], which holds 0" "$W/o" || fail "'ahead' beside an interval holding 0: $(cat "$W/o")"
# made-up documents: "level" beside an interval that excludes 0 fails; a word governs only the
# intervals of its own clause, tables and generated blocks are not prose, a mean's interval with
# no ranking word is not judged
mkdir -p "$W/d/docs"
cat >"$W/d/README.md" <<'MD'
RoPE is ahead of NoPE (+1.0 [+0.5, +1.5]), level with ALiBi (+0.1 [−0.2, +0.4]) and behind
PoPE (−2.0 [−3.0 … −1.0]). Its mean is 5.0 [4.0, 6.0].

| a | ahead | [−1, 1] |

<!-- results:x -->
level [1.0, 2.0]
<!-- /results:x -->
MD
out=$(/usr/bin/python3 lab/scripts/rankings.py "$W/d" 2>&1) || fail "a document whose words agree with its intervals: $out"
grep -qF "rankings: ok (3 intervals" <<<"$out" || fail "the made-up document's judged intervals: $out"
printf 'At 8x the two are level (+0.58 [+0.25, +0.91]).\n' >"$W/d/docs/x.md"
/usr/bin/python3 lab/scripts/rankings.py "$W/d" >"$W/o" 2>&1 && fail "'level' beside an interval excluding 0 passed"
grep -qF "docs/x.md: 'level' with the interval [+0.25, +0.91], which excludes 0" "$W/o" || fail "'level' beside an interval excluding 0: $(cat "$W/o")"
echo "cli_rankings: ok"
