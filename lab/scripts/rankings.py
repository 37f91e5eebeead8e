#!/usr/bin/env python3
"""Every ranking word of the documents' prose agrees with the interval it quotes.

    lab/scripts/rankings.py [ROOT]      check README.md, docs/*.md and docs/results/*.md under
                                        ROOT (default: the repository); exit 1 naming each
                                        disagreement

The documents rank encodings in words and back each ranking with the 95 % interval of a paired
difference, written "[lo, hi]" (or "[lo … hi]") beside it: "PoPE is ahead of RoPE from 2× on
(−0.238 [−0.407, −0.069] at 2×)". An interval belongs to the last of "ahead", "behind" or
"level" before it in its clause: the text back to the nearest ". ", "; ", ": ", ", ", " and " or
" but " outside brackets, or the start of a list item. "ahead" and "behind" need an interval that
excludes 0; "level" one that holds it. An interval with no such word in its clause (a mean's
interval, a threshold's) is not judged. Tables, indented code and generated blocks
(<!-- results:... -->) are not prose and are skipped; the tables' own verdicts are tables.py's.
"""
import glob
import os
import re
import sys

NUMBER = r"[−+-]?[0-9][0-9,]*\.?[0-9]*"
INTERVAL = re.compile(r"\[(%s)\s*(?:,|…)\s*(%s)\]" % (NUMBER, NUMBER))
WORD = re.compile(r"\b(ahead|behind|level)\b")
BOUNDARY = re.compile(r"[.;:]\s|,\s|\sand\s|\sbut\s|\n\s*[-*]\s")
BLOCK = re.compile(r"<!-- results:(.*?) -->.*?<!-- /results:\1 -->", re.S)


def value(text):
    return float(text.replace("−", "-").replace(",", ""))


def prose(text):
    """The text without generated blocks, table rows and indented code (lines kept, so that a
    clause does not run across them)."""
    text = BLOCK.sub("", text)
    return "\n".join("" if line.startswith("|") or line.startswith("    ") else line
                     for line in text.split("\n"))


def outside_brackets(text):
    """The text with the separators inside (...) and [...] masked, so that BOUNDARY finds only the
    clause's own."""
    masked, depth = list(text), 0
    for i, ch in enumerate(text):
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth = max(0, depth - 1)
        elif depth and ch in ".,;:":
            masked[i] = "#"
    return "".join(masked)


def disagreements(text):
    """(word, lo, hi, the clause) for each interval whose ranking word it contradicts; and how many
    intervals were judged."""
    text = prose(text)
    masked = outside_brackets(text)
    found, judged = [], 0
    for m in INTERVAL.finditer(text):
        lo, hi = value(m.group(1)), value(m.group(2))
        start = 0
        for b in BOUNDARY.finditer(masked, 0, m.start()):
            start = b.end()
        words = WORD.findall(text[start:m.start()])
        if not words or lo > hi:
            continue
        judged += 1
        excludes = lo > 0 or hi < 0
        if (words[-1] == "level") == excludes:
            found.append((words[-1], m.group(1), m.group(2), " ".join(text[start:m.end()].split())))
    return found, judged


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    files = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")) +
                                                       glob.glob(os.path.join(root, "docs", "results", "*.md")))
    bad, judged = 0, 0
    for path in files:
        with open(path) as f:
            found, n = disagreements(f.read())
        judged += n
        for word, lo, hi, clause in found:
            bad += 1
            print("rankings: %s: '%s' with the interval [%s, %s], which %s 0: %s" % (
                os.path.relpath(path, root), word, lo, hi, "excludes" if word == "level" else "holds", clause))
    if bad:
        sys.exit(1)
    print("rankings: ok (%d intervals under ahead, behind or level in %d files)" % (judged, len(files)))


if __name__ == "__main__":
    main()
