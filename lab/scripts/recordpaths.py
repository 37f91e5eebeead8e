#!/usr/bin/python3
"""The paths of the records in results/ (lab/scripts/record.sh keeps them, lab/scripts/reproduce.sh runs
them again). A record names no directory of the machine that made it, so that a clone anywhere
can run it again:

  - its command's binary is ./pelab, the repository's build;
  - its command's own output is runs/record/NAME (NAME the record's name): a compare's
    --out DIR, and an analysis's files, --json, --png or --out FILE.csv, as runs/record/NAME/FILE;
  - a path into the runs another record keeps (a fine-tune's init-from, an analysis's --models)
    is that record's, runs/record/OTHER/RUN;
  - any other path is relative to the repository (a path outside it is refused);
  - its runs' config.json "out" and compare.json "dir" are runs/record/NAME/RUN (a tuning run's
    runs/record/NAME/tune/RUN);
  - environment settings whose value is an absolute path (PELAB_DATA, the scripts' run
    directories) are left out, and named in record.json's "environment_left_out".

runs/record/NAME thus stands for the runs of record NAME: its command, run from the repository's
root, trains them there, and the command of a record that reads them reads them there, so that
the commands of a chain run from a fresh clone in order; lab/scripts/reproduce.sh trains them in
runs/reproduce/NAME instead, and reads them there. record.json's "paths_rewritten" lists each
path the command ran with that the record names otherwise, {"from": ..., "to": ...}: "from" as
the command gave it, an absolute one as ".../" and its last component.

A directory of runs that a record keeps holds the mark .records (the names of the records that
keep its runs, one a line; lab/scripts/record.sh writes it), by which a later record finds them.

    recordpaths.py resolve NAME COMMAND...   the paths of record NAME's command and what the record
                                             names them (JSON, for apply); one line on stderr and
                                             exit 2 when it cannot name one
    recordpaths.py apply DIR NAME MAP        rewrites the record in DIR (record.json, compare.json,
                                             each run's files, an analysis's) by MAP (resolve's)
    recordpaths.py mark NAME DIR             marks DIR as holding the runs of record NAME
    recordpaths.py check [PATH...]           every absolute path in the records (results/, or the
                                             directories given) and every directory of a machine
                                             (/work/, /tmp/, /home/, /root/, /Users/) in README.md
                                             and docs/ (or the Markdown files given): one line each
    recordpaths.py chain NAME                the records whose runs record NAME reads (and theirs),
                                             then NAME: the order lab/scripts/reproduce.sh runs them in
    recordpaths.py command NAME X=DIR...     record NAME's command, a word a line, runs/record/X
                                             read as DIR for each X given (NAME's own among them)
"""
import glob
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # lab/scripts/../..
RESULTS = os.environ.get("PELAB_RESULTS", os.path.join(ROOT, "results"))  # another one for the tests
ROLE = "runs/record"
MARK = ".records"
BINARY = "./pelab"
# options whose values name runs (several, comma-separated); --pe's entries name them as init-from=
RUN_OPTIONS = ("--init-from", "--model", "--models", "--resume")
PREFIX = "record"  # the messages' first word: the script they stand for

# An absolute path: a word (split at blanks and , = : ; quotes, brackets) starting with '/' and a
# letter, '_', '.' or '~' ("/work/x", "/tmp/a/pelab"; not "1/2" or "//host").
ABSOLUTE = re.compile(r"^/[A-Za-z_.~]")
WORDS = re.compile(r"[\s,=:;\"'`()<>|\[\]]+")
# a directory of a machine in prose
MACHINE = re.compile(r"(?<![\w.~/-])/(?:work|tmp|home|root|Users)/")
STRING = re.compile(r'"(?:[^"\\]|\\.)*"')  # a JSON string literal


def fail(message):
    sys.stderr.write("%s: %s\n" % (PREFIX, message))
    sys.exit(2)


def absolute_paths(text):
    """The absolute paths in a text (a command's word, a configured value)."""
    return [w for w in WORDS.split(text) if ABSOLUTE.match(w)]


def shown(path):
    """A path as paths_rewritten gives where a command had it: as given, or when absolute
    '.../' and its last component."""
    return ".../" + os.path.basename(path.rstrip("/")) if path.startswith("/") else path


def options(words):
    """(index, option, value) of each option of a command: '--name value' (value None for a
    switch) and '--name=value' alike."""
    found = []
    for i, w in enumerate(words):
        if not w.startswith("--"):
            continue
        if "=" in w:
            name, value = w.split("=", 1)
        else:
            name = w
            value = words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--") else None
        found.append((i, name, value))
    return found


def run_paths(name, value):
    """The runs an option's value names: each init-from= of --pe's entries, each of a
    comma-separated list of the others'."""
    if name == "--pe":
        return [s.split("=", 1)[1] for e in value.split(",") for s in e.split(":")[1:]
                if s.startswith("init-from=")]
    return [v for v in value.split(",") if v]


def analysis(words):
    return len(words) > 1 and words[1] == "analyze"


def outputs(words):
    """The files and directories the command writes: compare's --out, an analysis's --json, --png
    and --out."""
    kinds = ("--out", "--json", "--png") if analysis(words) else ("--out",)
    return [v for _, n, v in options(words) if n in kinds and v not in (None, "", "-")]


def marked_records(path, results):
    """The record that keeps the run at path (as a command gives it, relative to the repository),
    found by the mark of a directory above it: (the part of path naming that directory, the
    record's name), or None."""
    full = os.path.normpath(os.path.join(ROOT, path))
    d, rest = full, []
    while not os.path.isfile(os.path.join(d, MARK)):
        if os.path.dirname(d) == d:
            return None
        rest.insert(0, os.path.basename(d))
        d = os.path.dirname(d)
    parts = path.rstrip("/").split("/")
    if rest and parts[-len(rest):] != rest:
        return None
    given = "/".join(parts[:len(parts) - len(rest)]) if rest else path.rstrip("/")
    with open(os.path.join(d, MARK)) as f:
        names = [line.strip() for line in f if line.strip()]
    return given, keeper(names, rest, results)


def keeper(names, rest, results):
    """Of the records names (the latest last), the latest that keeps run rest[0] (rest[:2] for a
    tuning run, tune/RUN; {seed} any seed), or None."""
    run = [glob.escape(p).replace("{seed}", "*") for p in (rest[:2] if rest[:1] == ["tune"] else rest[:1])]
    for n in reversed(names):
        if os.path.isfile(os.path.join(results, n, "record.json")) and \
                (not run or glob.glob(os.path.join(glob.escape(os.path.join(results, n, "runs")), *run))):
            return n
    return None


def resolve(name, words, find=None, results=None):
    """What record `name` names each path of its command `words` (a list of words): a list of
    [from, to] (from as the command gives it), refusing in one line a path it cannot name. find
    (path) gives (the part of path naming a directory of runs, the record that keeps them) or
    None: by default by the directories' marks."""
    results = results or RESULTS
    find = find or (lambda p: marked_records(p, results))
    maps = {}
    def add(frm, to):
        if maps.get(frm, to) != to:
            fail("%s stands for both %s and %s" % (frm, maps[frm], to))
        maps[frm] = to
    own = "%s/%s" % (ROLE, name)
    for path in outputs(words):
        add(path.rstrip("/"), own + "/" + os.path.basename(path.rstrip("/")) if analysis(words) else own)
    for _, option, value in options(words):
        if option != "--pe" and option not in RUN_OPTIONS or value is None:
            continue
        for path in run_paths(option, value):
            found = find(path)
            if not found or not found[1]:
                fail("%s %s%s: a run no record keeps (record its runs first: lab/scripts/record.sh NAME ... "
                     "--out DIR)" % (option, "init-from=" if option == "--pe" else "", path))
            add(found[0], "%s/%s" % (ROLE, found[1]))
    # any other absolute path: relative to the repository when in it, else refused
    rewrite = substitution(list(maps.items()))
    for w in words[1:]:
        for path in absolute_paths(rewrite(w)[0]):
            rel = os.path.relpath(os.path.realpath(path), ROOT)
            if rel.startswith(".."):
                fail("%s is a path outside the repository, which a record cannot name (give it "
                     "relative to the repository; the data directory as PELAB_DATA, which a record "
                     "leaves out)" % path)
            add(path, rel)
    return [[k, v] for k, v in maps.items()]


def substitution(maps):
    """A function text -> (text with each path of maps as its role, the maps used): a path
    replaced where it stands whole or as a directory above another (after the start, '=', ',',
    ':' or a blank; before the end, '/', ',', ':' or a blank)."""
    if not maps:
        return lambda text: (text, set())
    by_length = sorted(maps, key=lambda m: -len(m[0]))
    to = dict((f, t) for f, t in by_length)
    rx = re.compile(r"(?:^|(?<=[=,:\s]))(%s)(?=$|[/,:\s])" % "|".join(re.escape(f) for f, _ in by_length))
    def sub(text):
        used = set()
        def one(m):
            used.add(m.group(1))
            return to[m.group(1)]
        return rx.sub(one, text), used
    return sub


def rewrite_strings(text, fn):
    """A JSON text with each string literal s written as fn(s), the rest as it was (numbers keep
    their digits)."""
    def one(m):
        s = json.loads(m.group(0))
        t = fn(s)
        return m.group(0) if t == s else json.dumps(t)
    return STRING.sub(one, text)


def apply(record_dir, name, maps):
    """Rewrites the record in record_dir (made by lab/scripts/record.sh from a command of other paths)
    by maps, resolve's: record.json's command and environment, compare.json, each run's
    config.json and other files, an analysis's output; then record.json says what was rewritten
    (paths_rewritten, environment_left_out). Refuses in one line a record left with an absolute
    path."""
    sub = substitution(maps)
    used, noted = set(), []
    def fn(text):
        new, u = sub(text)
        used.update(u)
        return new
    own = "%s/%s" % (ROLE, name)
    for d, dirs, files in os.walk(record_dir):
        dirs.sort()
        for f in sorted(files):
            path = os.path.join(d, f)
            if f == "record.json":
                continue
            with open(path) as fh:
                text = fh.read()
            if f.endswith(".csv"):
                new = "\n".join(",".join(fn(c) for c in line.split(",")) for line in text.split("\n"))
            elif f.endswith((".json", ".jsonl")):
                run = os.path.relpath(d, os.path.join(record_dir, "runs"))
                if f == "config.json" and not run.startswith(".."):  # a run's, kept as runs/RUN
                    role = "%s/%s" % (own, run)
                    def out(m):
                        was = json.loads(m.group(2))
                        if fn(was) != role:  # a run moved into the directory after it trained
                            noted.append({"from": shown(was), "to": role})
                        return m.group(1) + json.dumps(role)
                    text_out = re.sub(r'("out":\s*)("(?:[^"\\]|\\.)*")', out, text, count=1)
                else:
                    text_out = text
                new = rewrite_strings(text_out, fn)
            else:
                continue
            if new != text:
                with open(path + ".tmp", "w") as fh:
                    fh.write(new)
                os.replace(path + ".tmp", path)
    path = os.path.join(record_dir, "record.json")
    with open(path) as fh:
        record = json.load(fh)
    command = record["command"]
    if command[0] != BINARY:
        noted.insert(0, {"from": shown(command[0]), "to": BINARY})
    record["command"] = [BINARY] + [fn(w) for w in command[1:]]
    env = record.get("environment", {})
    left = sorted(k for k, v in env.items() if absolute_paths(v))
    record["environment"] = {k: v for k, v in env.items() if k not in left}
    rewritten = [{"from": shown(f), "to": t} for f, t in maps if f in used and f != t] + noted
    seen, unique = set(), []
    for r in rewritten:
        if (r["from"], r["to"]) not in seen:
            seen.add((r["from"], r["to"]))
            unique.append(r)
    if unique:
        record["paths_rewritten"] = unique
    if left:
        record["environment_left_out"] = left
    if os.path.isfile(os.path.join(record_dir, "compare.json")):
        with open(os.path.join(record_dir, "compare.json")) as fh:
            for run in json.load(fh)["runs"]:
                if not run["dir"].startswith(own + "/"):
                    fail("%s: run %s is not in the command's --out" % (record_dir, run["dir"]))
    with open(path + ".tmp", "w") as fh:
        json.dump(record, fh, indent=2)
        fh.write("\n")
    os.replace(path + ".tmp", path)
    for line in check_records([record_dir], ""):
        fail(line)


def check_records(dirs, base):
    """A line for each absolute path in the files of records (JSON, JSON lines, CSV)."""
    lines = []
    for top in dirs:
        for d, subdirs, files in os.walk(top):
            subdirs[:] = sorted(x for x in subdirs if not x.startswith("."))
            for f in sorted(files):
                path = os.path.join(d, f)
                with open(path, errors="replace") as fh:
                    text = fh.read()
                if f.endswith((".json", ".jsonl")):
                    values = [json.loads(m.group(0)) for m in STRING.finditer(text)]
                else:
                    values = text.split("\n")
                for v in values:
                    for p in absolute_paths(v):
                        lines.append("%s names %s, an absolute path (records name paths relative to the "
                                     "repository: lab/scripts/recordpaths.py)" % (os.path.relpath(path, base) if base else path, p))
    return lines


def check_prose(files, base):
    """A line for each directory of a machine (/work/, /tmp/, /home/, /root/, /Users/) in
    Markdown files."""
    lines = []
    for path in files:
        with open(path) as fh:
            for k, line in enumerate(fh, 1):
                if MACHINE.search(line):
                    lines.append("%s:%d names a directory of a machine: %s" % (
                        os.path.relpath(path, base) if base else path, k, line.strip()[:120]))
    return lines


def documents():
    """README.md and the Markdown files under docs/."""
    found = [os.path.join(ROOT, "README.md")]
    for d, dirs, files in os.walk(os.path.join(ROOT, "docs")):
        dirs.sort()
        found += [os.path.join(d, f) for f in sorted(files) if f.endswith(".md")]
    return found


def load_command(name, results):
    record = os.path.join(results, name, "record.json")
    if not os.path.isfile(record):
        fail("%s is missing" % record)
    try:
        with open(record) as f:
            c = json.load(f)["command"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail("%s is not a record with a command (%s)" % (record, e))
    if not isinstance(c, list) or len(c) < 2 or not all(isinstance(w, str) for w in c):
        fail("%s: its command is not a list of words" % record)
    return c


ROLE_RX = re.compile(r"(?:^|(?<=[=,:\s]))%s/([^/,:=\s]+)" % re.escape(ROLE))


def reads(name, results):
    """The records whose runs record `name`'s command reads (runs/record/X in it, X not name)."""
    found = []
    for w in load_command(name, results)[1:]:
        for x in ROLE_RX.findall(w):
            if x != name and x not in found:
                found.append(x)
    return found


def chain(name, results):
    """The records name reads the runs of, theirs before them, then name."""
    order, state = [], {}
    def visit(n, path):
        if state.get(n) == "done":
            return
        if state.get(n) == "visiting":
            ring = ["%s/%s" % (results, x) for x in path[path.index(n):-1]]
            fail("%s and %s read each other's runs: no order runs them" % (", ".join(ring[:-1]), ring[-1]))
        state[n] = "visiting"
        for x in reads(n, results):
            if not os.path.isdir(os.path.join(results, x)):
                fail("%s/%s reads %s/%s, the runs of a record %s does not hold" % (results, n, ROLE, x, results))
            visit(x, path + [x])
        state[n] = "done"
        order.append(n)
    visit(name, [name])
    return order


def command(name, dirs, results):
    """Record name's command with runs/record/X read as dirs[X]: a compare's --out as dirs[name]
    whatever it names; refused in one line when it cannot be run again."""
    c = load_command(name, results)
    where = "%s/%s" % (results, name)
    if c[1] == "compare":
        i = next((i for i, w in enumerate(c) if w == "--out" or w.startswith("--out=")), None)
        if i is None or (c[i] == "--out" and i + 1 == len(c)):
            fail("%s/record.json: its command names no --out DIR, which reproduce would replace" % where)
        if c[i] == "--out":
            c[i + 1] = "%s/%s" % (ROLE, name)
        else:
            c[i] = "--out=%s/%s" % (ROLE, name)
    elif c[1] == "analyze":
        for path in outputs(c):
            if not path.startswith("%s/%s/" % (ROLE, name)):
                fail("%s: its command writes %s, not in %s/%s/ (record it again: lab/scripts/record.sh)"
                     % (where, path, ROLE, name))
    else:
        fail("%s records a pelab %s, which reproduce does not run (a compare or an analysis)" % (where, c[1]))
    sub = substitution([["%s/%s" % (ROLE, x), d] for x, d in dirs.items()])
    return [c[0]] + [sub(w)[0] for w in c[1:]]


def main(argv):
    global PREFIX
    what = argv[0] if argv else ""
    if what == "resolve" and len(argv) >= 4:
        json.dump(resolve(argv[1], argv[2:]), sys.stdout)
        print()
    elif what == "apply" and len(argv) == 4:
        with open(argv[3]) as f:
            apply(argv[1], argv[2], json.load(f))
    elif what == "mark" and len(argv) == 3:
        mark = os.path.join(argv[2], MARK)
        names = open(mark).read().split() if os.path.isfile(mark) else []
        if argv[1] not in names:
            with open(mark, "a") as f:
                f.write(argv[1] + "\n")
    elif what == "check":
        PREFIX = "paths"
        given = argv[1:]
        md = [p for p in given if p.endswith(".md")]
        dirs = [p for p in given if not p.endswith(".md")]
        if not given:
            md, dirs = documents(), [RESULTS]
        lines = check_records(dirs, ROOT if not given else "") + check_prose(md, ROOT if not given else "")
        for line in lines:
            print("paths: " + line)
        return 1 if lines else 0
    elif what == "chain" and len(argv) == 2:
        PREFIX = "reproduce"
        print("\n".join(chain(argv[1], RESULTS)))
    elif what == "command" and len(argv) >= 2:
        PREFIX = "reproduce"
        dirs = dict(a.split("=", 1) for a in argv[2:])
        print("\n".join(command(argv[1], dirs, RESULTS)))
    else:
        sys.exit("usage: lab/scripts/recordpaths.py resolve NAME COMMAND... | apply DIR NAME MAP | mark NAME DIR | "
                 "check [PATH...] | chain NAME | command NAME X=DIR...")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
