#!/usr/bin/env python3
"""The library's layers: which module of src/ imports which, against the order they are meant to
stand in (lowest first):

    core  kernels  io  posenc  attn  nn  optim  data  train  eval

A module may import its own and any below it. An import is an #include of another module's
header: "kernels/cpu/layers.h" directly, or a public header "pelab/X.h" through the module that defines
X's functions (the module whose .c files define most of them; a header of types and constants
alone belongs to none). The tests' and the commands' tiers (tests/, cli/, bench/) stand above
the library and may import any of it. The lab (lab/: compare, analyze, plot) stands above them
all, a top layer `lab`: it may import the library and cli/, and nothing of src/, include/ or cli/
includes a header of lab/.

    python3 scripts/layers.py           the modules' imports, the upward ones marked, and circles
    python3 scripts/layers.py --check   exits 1 on a circle, on an upward import not listed in
                                        ALLOWED below (each with its reason), or on an include
                                        of the lab from below it, naming it

tests/cli_layers.sh runs the check in `make test`.
"""
import collections
import os
import re
import sys

ORDER = ["core", "kernels", "io", "posenc", "attn", "nn", "optim", "data", "train", "eval"]

# Upward imports that stand, each with its reason (module, imported module): none may be added
# without one.
ALLOWED = {
}

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_0-9]+)/([a-z_0-9/]+\.h)"', re.M)
DEFINITION = re.compile(r"^[a-z_][\w \t\*]*?\b(pelab_\w+)\s*\([^;{]*\)\s*\{", re.M)
DECLARATION = re.compile(r"\b(pelab_\w+)\s*\(")


def sources():
    for d, _, files in os.walk(os.path.join(ROOT, "src")):
        for f in files:
            if f.endswith((".c", ".h")):
                path = os.path.join(d, f)
                yield os.path.relpath(path, os.path.join(ROOT, "src")).split(os.sep)[0], path


def owners():
    """Each public header's module: where most of the functions it declares are defined."""
    defined = {}
    for module, path in sources():
        if path.endswith(".c"):
            for name in DEFINITION.findall(open(path, encoding="utf-8").read()):
                defined[name] = module
    owner = {}
    public = os.path.join(ROOT, "include", "pelab")
    for f in sorted(os.listdir(public)):
        text = re.sub(r"/\*.*?\*/", "", open(os.path.join(public, f), encoding="utf-8").read(), flags=re.S)
        votes = collections.Counter(defined[n] for n in DECLARATION.findall(text) if n in defined)
        if votes:
            owner[f] = votes.most_common(1)[0][0]
    return owner


def imports():
    """{(module, imported): [files that import it]}"""
    owner = owners()
    edges = collections.defaultdict(list)
    for module, path in sources():
        for top, rest in INCLUDE.findall(open(path, encoding="utf-8").read()):
            target = owner.get(rest) if top == "pelab" else top
            if target and target != module:
                edges[(module, target)].append(os.path.relpath(path, ROOT))
    return edges


QUOTED = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def lab_includes():
    """[(file, header)]: the includes of a lab/ header by a file of src/, include/ or cli/ (a path
    into lab/, or a name found nowhere but lab/)."""
    lab = os.path.join(ROOT, "lab")
    headers = {f for f in os.listdir(lab) if f.endswith(".h")} if os.path.isdir(lab) else set()
    found = []
    for top in ("src", "include", "cli"):
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for f in sorted(files):
                if not f.endswith((".c", ".h")):
                    continue
                path = os.path.join(d, f)
                for name in QUOTED.findall(open(path, encoding="utf-8").read()):
                    seen = [os.path.realpath(os.path.join(base, name)) for base in
                            (d, os.path.join(ROOT, "include"), os.path.join(ROOT, "src"))]
                    seen = [p for p in seen if os.path.exists(p)]
                    if (any(p.startswith(os.path.realpath(lab) + os.sep) for p in seen)
                            or (not seen and os.path.basename(name) in headers)):
                        found.append((os.path.relpath(path, ROOT), name))
    return found


def circles(edges):
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    graph = collections.defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v), on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w), group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in list(graph):
        if v not in index:
            visit(v)
    return found


def main():
    check = "--check" in sys.argv[1:]
    edges = imports()
    rank = {m: i for i, m in enumerate(ORDER)}
    unknown = sorted({m for e in edges for m in e if m not in rank})
    upward = {e: f for e, f in edges.items() if e[0] in rank and e[1] in rank and rank[e[1]] > rank[e[0]]}
    bad = [e for e in upward if e not in ALLOWED]
    loops = circles(edges)
    if not check:
        for (a, b), files in sorted(edges.items(), key=lambda x: (rank.get(x[0][0], 99), x[0][1])):
            mark = "  UPWARD" if (a, b) in upward else ""
            print(f"{a} -> {b}{mark}: {', '.join(sorted(set(files)))}")
        print(f"{len(upward)} upward imports ({len(bad)} not allowed), {len(loops)} circles")
    for m in unknown:
        print(f"layers: module src/{m} is not in the order (scripts/layers.py ORDER)")
    for e in sorted(bad):
        print(f"layers: {e[0]} imports {e[1]}, a higher layer: {', '.join(sorted(set(upward[e])))}")
    for g in loops:
        print(f"layers: circle among {', '.join(g)}")
    below = lab_includes()
    for f, name in below:
        print(f"layers: {f} includes {name}, a header of the lab (lab/), which stands above it")
    stale = [e for e in ALLOWED if e not in upward]
    for e in stale:
        print(f"layers: ALLOWED lists {e[0]} -> {e[1]}, which no longer stands: remove it")
    return 1 if check and (bad or loops or unknown or stale or below) else 0


if __name__ == "__main__":
    sys.exit(main())
