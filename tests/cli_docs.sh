#!/usr/bin/env bash
# The documentation holds together: every relative link and image of README.md and of every other
# Markdown file of the repository (docs/, bench/RESULTS.md, ...) names a file that exists, and a
# link to a heading (FILE.md#anchor, #anchor) names a heading that file has, as GitHub anchors
# them; README.md, the front page, stays under 500 lines; the project's files name the license
# and version they ship with. Nothing is built or run.
set -u
. "$(dirname "$0")/lib/cli.sh"
/usr/bin/python3 - >"$W/o" 2>&1 <<'PY' || fail "$(cat "$W/o")"
import os, re, sys, unicodedata

def slug(heading):
    """GitHub's anchor of a heading: its text lower-cased, links and code as their text, every
    character but letters, digits, marks, '-', '_' and spaces dropped, spaces as '-'."""
    h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    h = "".join(c for c in h if unicodedata.category(c)[0] in "LNM" or c in "-_ ")
    return h.replace(" ", "-")

def prose(path):
    """The lines of a Markdown file outside code blocks: each with its inline code removed, and as
    it is."""
    fenced = False
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith("    ") or line.startswith("\t"):
            continue
        yield n, re.sub(r"`[^`]*`", "", line), line

def anchors(path):
    seen, found = {}, set()
    for _, _, line in prose(path):
        m = re.match(r"#{1,6} (.*)", line.replace("`", ""))
        if m:
            s = slug(m.group(1))
            k = seen.get(s, 0)
            seen[s] = k + 1
            found.add(s if k == 0 else "%s-%d" % (s, k))
    return found

files = []
for d, dirs, names in os.walk("."):
    dirs[:] = [x for x in dirs if not x.startswith(".") and not (d == "." and x in ("results", "runs", "data", "build"))]
    files += [os.path.normpath(os.path.join(d, f)) for f in names if f.endswith(".md")]
bad, links = [], 0
for f in sorted(files):
    for n, line, _ in prose(f):
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):
                continue  # a URL
            links += 1
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
            if not os.path.exists(dest):
                bad.append("%s:%d: %s: no such file" % (f, n, target))
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                bad.append("%s:%d: %s: %s has no heading with that anchor" % (f, n, target, dest))
if bad:
    sys.exit("broken links:\n" + "\n".join(bad))
print("%d links in %d files" % (links, len(files)))
PY
checked=$(cat "$W/o")
lines=$(wc -l <README.md)
[ "$lines" -lt 500 ] || fail "README.md has $lines lines: the front page stays under 500 (the rest belongs in docs/)"
# the license, the citation and the version agree with the Makefile's
grep -q "^MIT License" LICENSE || fail "LICENSE is not the MIT license"
version=$(sed -n 's/^VERSION := //p' Makefile)
grep -q "^version: $version$" CITATION.cff || fail "CITATION.cff's version is not the Makefile's $version"
grep -q "^## $version " CHANGELOG.md || fail "CHANGELOG.md has no entry for $version"
echo "cli_docs: ok ($checked; README.md $lines lines)"
