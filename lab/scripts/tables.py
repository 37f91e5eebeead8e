#!/usr/bin/python3
"""The recorded tables of README.md and docs/, regenerated from results/ (lab/scripts/record.sh writes
a record).

    lab/scripts/tables.py                 rewrite every block <!-- results:NAME --> ... <!-- /results:NAME -->
                                      from results/NAME, in every Markdown file of the repository that
                                      holds one (README.md, docs/**/*.md; found by the marker)
    lab/scripts/tables.py --check         the same, writing nothing: exit 1, with a diff, where a file
                                      differs from what its records give (make test runs this)
    lab/scripts/tables.py --list          the files that hold a block, one a line
    lab/scripts/tables.py [--check] FILE...  the same for the files given alone (the tests')
    lab/scripts/tables.py --drift NAME DIR [X=DIR...]
                                      each number of record NAME beside the same number of another
                                      run of its command into DIR (lab/scripts/reproduce.sh; X=DIR: the
                                      runs of record X, runs/record/X, made again in DIR), with the
                                      relative drift

A block may name several records of one kind, NAME+NAME+... (a sweep of a task's options, each
record one setting): their runs make one table, each row labelled by the options its record's
command gives that the others' do not. A block BASE>VARIANT+BASE>VARIANT+... sets runs against
runs: a row for each pair, its variant's runs beside the base's of the same encoding and seed
(the last validation loss of training, the test loss and the perplexity at each length), the
variant labelled by the options its command changes.

A block may ask for more, after '?' (several joined by '&'): <!-- results:NAME?ci --> adds to each
mean ± sd over several seeds its 95 % confidence interval, [lo, hi] (Student t, n − 1 degrees of
freedom); ?solved adds "(k of n solved)" to a cell of exact match or accuracy whose seeds split
between solved (≥ 90 %) and not; ?pairs=COLUMN makes, instead of the record's table, the paired
comparison of its rows on one column (a run's field, test_acc, test_loss, test_ppl, trained_em,
or a label of the record's sweep: a bucket 1-10, a length 2x, a side 56): for every two rows over
their common seeds, each seed's difference, their mean and its 95 % t interval, "ahead" only when
it excludes 0, else "level"; &against=ENTRY only that row (nope, rope:random-positions=256) against
each other, &against=best the best mean's (among the rows that fit their trained sizes); ?tune
makes, for a record of a compare with --tune, its grid: each encoding's mean validation loss at
every point on the tuning seeds, the point it chose in bold. Without '?' a block is what it
always was. A record of a compare with --tune gives each table of its runs a column per tuned
option, the value each encoding chose, and says in the caption how.

The block <!-- results:verdict --> (README.md's "What reproduces") is the verdict table: a row per
claim of results/claims.json, the claim put to its test against its record, the verdict computed:
    pair       A better than B on a column (lower perplexity or loss, higher accuracy or exact match,
               or as "better" says), seed by seed: the 95 % t interval of the mean of A − B over the
               seeds they share (paired(), as ?pairs= makes it) excludes 0 on A's side: reproduced;
               on B's: not reproduced; holds 0: inconclusive. Against several B, every one must be
               for the claim, and one against it makes it not reproduced.
    threshold  an entry's value (or its change from another label's, relative_to or minus) below or
               above a limit: the interval of its mean over the seeds (ci95()) and every seed on the
               claimed side: reproduced; the interval on the other: not reproduced; else
               inconclusive. Several entries, likewise every one.
A claim whose record does not exist yet is "not yet measured", with the claim's reason (pending).
The file is JSON, {"claims": [CLAIM, ...]}, each CLAIM an object of
    id, paper, where           its name, the paper and where in it (table or figure)
    claim                      the claim in one sentence
    paper_number, paper_scale  the paper's number(s) and its model and budget as the paper prints
                               them, with where ('—' where the papers in hand give none)
    record, doc                the record that answers it and the document that shows its tables
                               (a repository path and anchor)
    test                       {"kind": "pair", "a": E, "b": E | [E, ...] | "*" (every other entry),
                               "column": C} or {"kind": "pair", "variant": "S=V", "column": C} (each
                               entry E:S=V against E), or {"kind": "threshold", "entries": [E, ...] |
                               "*", "column": C, "below" | "above": X, "relative_to" | "minus": C}
                               (X in the column's unit: a fraction, or a relative change); optionally
                               "fits": "b" | "both" (algorithmic tasks: leave out a B that does not
                               fit its trained sizes in every seed; "both": A not fitting is level),
                               "field" (C a label of that sweep, as a qa record's sweep_em at 8x),
                               "better": "lower" | "higher", and for an attention-similarity record
                               "of": E (the column "jsd": each run of E's divergence from the others)
    pending, scale_from        (optional) why its record does not exist yet; the record whose runs
                               give the scale (for an analysis)
C is a column as ?pairs= takes it (test_ppl, test_loss, test_acc, a length 10x, a bucket 11-20, a
side 84); E an entry by its --pe text or without the settings every row of its record shares and
without init-from. The claims file lives in results/, beside the records, not in docs/: a claim
names a record and its test reads the record's fields, so the two are added and changed together;
it is no record (no directory), so record.sh, reproduce.sh and the checks of records pass it by;
and PELAB_RESULTS points the tests at made-up records that come with their own claims.

A block's table is made from the record alone: its compare.json (each run's metrics) and its
record.json (commit, CPU, command): perplexities at each length of a text compare, exact
matches over each bucket of sizes of an algorithmic task's, accuracy at each side of an image
task's (with the SeqPE paper's rows beneath), the answer span's perplexity and the exact match
at each length of a qa task's (with the paper's Table II rows beneath), or indirect indexing's
accuracy; or, from an analysis's record, the runs' attention similarity or the split of their
grid embeddings' variation (analyze seqpe --variance). With several seeds a cell is mean ±
sample standard deviation over them; the caption line names the seeds, the commit and the CPU.
"""
import collections
import csv
import difflib
import json
import math
import os
import re
import statistics
import sys

import recordpaths  # lab/scripts/recordpaths.py

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # lab/scripts/../..
RESULTS = os.environ.get("PELAB_RESULTS", os.path.join(ROOT, "results"))  # another one for the tests
# The tree whose Markdown files are searched for blocks (another one for the tests), and the
# directories at its top that hold no documentation: the records, runs, data and builds (and
# hidden directories anywhere).
DOCS_ROOT = os.environ.get("PELAB_DOCS_ROOT", ROOT)
NOT_DOCS = {"results", "runs", "data", "build"}
FILE = None  # the file whose blocks are being made, as the messages name it
CURRENT = None  # and its path, from which the verdict table's links are made
# Each encoding's name as tables print it: the `display` of its table in src/posenc, as
# `pelab help encodings --json` lists them (encodings.json beside this script, which
# lab/tests/cli_tables.sh checks against the binary), so that the tables need neither a build nor
# anything outside scripts/.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "encodings.json")) as f:
    NAMES = {e["name"]: e["display"] for e in json.load(f)["encodings"]}
# NAME, or NAME+NAME+... (several records of one kind in one table, each row labelled by the options
# its command gives that the others' do not)
# (or BASE>VARIANT+BASE>VARIANT+...: runs against runs), then ?OPTION&OPTION=VALUE... (ci, solved,
# pairs=COLUMN); "verdict" is the table of claims (results/claims.json)
BLOCK = re.compile(r"(<!-- results:([\w.+>-]+(?:\?[\w.=&-]+)?) -->\n)(.*?)(<!-- /results:\2 -->)", re.S)
OPTIONS = {}  # the options of the block being made (ci, solved, pairs)
SOLVED = 0.9  # exact match or accuracy of a run that solves its column (compare's STATS_SOLVED)
# t(0.975, ν) for ν = 1..30: the two-sided 95 % critical values of Student's t (NIST/SEMATECH
# e-Handbook of Statistical Methods, section 1.3.6.7.2, to 3 decimals; here to 6, as lab/stats.c
# holds them and lab/tests/test_stats.c checks them against the t density integrated numerically)
T975 = (12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157, 2.228139,
        2.200985, 2.178813, 2.160369, 2.144787, 2.131450, 2.119905, 2.109816, 2.100922, 2.093024, 2.085963,
        2.079614, 2.073873, 2.068658, 2.063899, 2.059539, 2.055529, 2.051831, 2.048407, 2.045230, 2.042272)


def t975(df):
    """The 0.975 quantile of Student's t with df ≥ 1 degrees of freedom: the table, and beyond it
    the Cornish–Fisher expansion about the normal quantile (Abramowitz & Stegun 26.7.5), as
    lab/stats.c computes it."""
    if df <= 30:
        return T975[df - 1]
    z, v = 1.959963984540054, float(df)
    g = ((z ** 3 + z) / 4, (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96,
         (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384,
         (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / 92160)
    return z + sum(gk / v ** (k + 1) for k, gk in enumerate(g))


def ci95(values):
    """The mean of values and the half-width of its 95 % confidence interval, t(0.975, n − 1)·sd/√n
    (None for one value)."""
    n = len(values)
    if n < 2:
        return statistics.mean(values), None
    return statistics.mean(values), t975(n - 1) * statistics.stdev(values) / n ** 0.5


def number(x, digits):
    """x with `digits` decimals, a minus sign (not a hyphen) when negative."""
    return ("−" if x < 0 and round(x, digits) != 0 else "") + "%.*f" % (digits, abs(x))


def signed(x, digits):
    """x with `digits` decimals and its sign: '+1.2', '−0.3'."""
    return ("−" if x < 0 and round(x, digits) != 0 else "+") + "%.*f" % (digits, abs(x))


def fail(message):
    """Stops, naming the file whose block is being made (when one is)."""
    sys.exit("tables: %s%s" % (FILE + ": " if FILE else "", message))


def load(name):
    """A record's record.json and its compare.json (or, for an analysis, its analysis.json, or the
    rows of its analysis.csv as dicts)."""
    d = os.path.join(RESULTS, name)
    if not os.path.isdir(d):
        sys.exit("tables: %sresults/%s, which does not exist (record it: lab/scripts/record.sh)"
                 % (FILE + " names " if FILE else "no ", name))
    with open(os.path.join(d, "record.json")) as f:
        record = json.load(f)
    if os.path.exists(os.path.join(d, "analysis.csv")):
        with open(os.path.join(d, "analysis.csv")) as f:
            return record, list(csv.DictReader(f))
    kept = "compare.json" if os.path.exists(os.path.join(d, "compare.json")) else "analysis.json"
    with open(os.path.join(d, kept)) as f:
        return record, json.load(f)


def cell(values, digits=3):
    """'5.584' for one value, '5.584 ± 0.012' (sample standard deviation) for several; a block with
    ?ci adds the 95 % confidence interval of the mean, '5.584 ± 0.012 [5.554, 5.614]'."""
    if len(values) == 1:
        return "%.*f" % (digits, values[0])
    text = "%.*f ± %.*f" % (digits, statistics.mean(values), digits, statistics.stdev(values))
    if OPTIONS.get("ci"):
        mean, half = ci95(values)
        text += " [%s, %s]" % (number(mean - half, digits), number(mean + half, digits))
    return text


def solved_cell(fractions):
    """A cell of a fraction (exact match, accuracy) per run, in %: a block with ?solved adds
    '(k of n solved)' when its runs split between solved (≥ 90 %) and not."""
    text = cell([100 * x for x in fractions], 1)
    solved = sum(x >= SOLVED for x in fractions)
    if OPTIONS.get("solved") and 0 < solved < len(fractions):
        text += " (%d of %d solved)" % (solved, len(fractions))
    return text


def run_file(name, run, file):
    """The path of a file kept in record `name` for one run of its compare.json (of the run's own
    record where a table merges records)."""
    base = os.path.basename(run["dir"].rstrip("/"))
    return os.path.join(RESULTS, run.get("record", name), "runs", base, file)


def run_config(name, run):
    """The recorded config.json of one run of compare.json."""
    with open(run_file(name, run, "config.json")) as f:
        return json.load(f)


def length_label(label, T):
    """'2x' at T 128 -> '2× (256)'"""
    if label.endswith("x"):
        return "%s× (%s)" % (label[:-1], format(int(round(float(label[:-1]) * T)), ","))
    return label


def entries(compare):
    """The --pe entries in the order of their runs, and the seeds."""
    order = []
    for run in compare["runs"]:
        if run["pe"] not in order:
            order.append(run["pe"])
    return order, sorted({run["seed"] for run in compare["runs"]})


def rows_of(compare):
    """The rows of a table, in the order of their runs: (pe, label, its runs by seed), label the
    options its record alone gives when the table merges records ('' otherwise)."""
    keys = []
    for run in compare["runs"]:
        if (run["pe"], run.get("label", "")) not in keys:
            keys.append((run["pe"], run.get("label", "")))
    return [(pe, label, sorted((r for r in compare["runs"] if r["pe"] == pe and r.get("label", "") == label),
                               key=lambda r: r["seed"])) for pe, label in keys]


def row_name(pe, label, shared=()):
    """entry_name, followed by a merged record's own options."""
    return entry_name(pe, shared) + (" `%s`" % label if label else "")


def shared_settings(order):
    """The settings every one of several entries of one encoding gives ('seqpe:a=1:b=2' and
    'seqpe:a=1' share 'a=1'): said once under the table instead of in every row."""
    if len(order) < 2 or len({pe.split(":")[0] for pe in order}) > 1:
        return []
    sets = [pe.split(":")[1:] for pe in order]
    return [x for x in sets[0] if all(x in other for other in sets[1:])]


def text_sweep(name, record, compare):
    """Encodings × test perplexity and perplexity at each swept length (a compare of a text task)."""
    T = run_config(name, compare["runs"][0])["task"]["seq-len"]
    head = ["encoding"] + tuned_head(compare) + ["test ppl"] + [length_label(l, T) for l in compare["lengths"]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    order, seeds = entries(compare)
    shared = shared_settings(order)
    for pe, label, runs in rows_of(compare):
        row = [row_name(pe, label, shared)] + tuned_cells(compare, pe) + [cell([r["test_ppl"] for r in runs])]
        row += [cell([r["sweep_ppl"][i] for r in runs]) for i in range(len(compare["lengths"]))]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines + caption(name, record, compare, seeds, shared=shared)) + "\n"


def short_commit(commit):
    """A commit as a caption names it: 7 hex digits, '+changes' when the tree differed."""
    return commit.split("+")[0][:7] + ("+changes" if "+" in commit else "")


def built(record):
    """The build a caption names: 'commit `abc1234`', and the builds that trained the runs when any
    is another (record.json's trained_by, a run resumed by another build counting for each:
    'runs trained by `0123456` (1 run), `abc1234` (4 runs)')."""
    text = "commit `%s`" % short_commit(record["commit"])
    by = record.get("trained_by", {})
    if set(by) - {record["commit"]}:
        text += " (runs trained by %s)" % ", ".join(
            "`%s` (%d run%s)" % (b if b == "unrecorded" else short_commit(b), n, "" if n == 1 else "s")
            for b, n in by.items())
    return text


def caption(name, record, compare, seeds, unit="", shared=()):
    """The line under a table: the settings every row shares, seeds, threads, commit, CPU and
    where the records are."""
    what = "seed %d" % seeds[0] if len(seeds) == 1 else \
        "mean ± sample standard deviation over seeds %s" % ", ".join(str(s) for s in seeds)
    if OPTIONS.get("ci") and len(seeds) > 1:
        what += ", in brackets the 95 % confidence interval of the mean (Student t, n − 1 degrees of freedom)"
    if OPTIONS.get("solved") and len(seeds) > 1:
        what += "; k of n solved: the seeds at 90 % or more, where they split"
    commit = built(record)
    threads = run_config(name, compare["runs"][0])["training"]["threads"]
    if shared:
        unit = "every row: %s `%s`; %s" % (compare["runs"][0]["pe"].split(":")[0], as_given(record, " ".join(shared)), unit)
    where = ", ".join("`results/%s`" % n for n in name.split("+"))
    if "tune" in compare and not OPTIONS.get("tune"):
        what += "; " + tuned_how(compare)
    return ["", "<sub>%s%s; %s thread%s a run; %s on %s (%d cores); records in %s, "
            "regenerated by `make tables`.</sub>" % (unit, what, threads, "" if threads == 1 else "s", commit,
                                                     record["cpu"], record["cores"], where)]


def grid_value(x):
    """A tuned option's value as a grid gives it: 0.004 -> '4e-3', 0.9 -> '0.9', 2000 -> '2000'."""
    if x != 0 and abs(x) < 0.01:
        exp = math.floor(math.log10(abs(x)))
        return "%ge%d" % (round(x / 10 ** exp, 6), exp)
    return "%g" % x


def tuned_head(compare):
    """The tuned options' columns of a record of a compare with --tune (none otherwise)."""
    return list(compare["tune"]["options"]) if "tune" in compare else []


def tuned_cells(compare, pe):
    """The value of each tuned option entry `pe` chose."""
    if "tune" not in compare:
        return []
    chosen = next(e["tune"]["chosen"] for e in compare["encodings"] if e["pe"] == pe)
    return [grid_value(chosen[k]) for k in compare["tune"]["options"]]


def tuned_how(compare):
    """How a tuned compare chose: 'lr chosen per encoding from 1e-3, 2e-3, 4e-3 by the least mean
    validation loss on tuning seed 1001'."""
    t = compare["tune"]
    grid = "; ".join("%s from %s" % (k, ", ".join(grid_value(v) for v in t["values"][k])) for k in t["options"])
    seeds = t["seeds"]
    return "%s chosen per encoding by the least mean validation loss on tuning seed%s %s (runs of their own)" % (
        grid, "" if len(seeds) == 1 else "s", ", ".join(str(x) for x in seeds))


def tune_table(name, record, compare):
    """A tuned compare's grid: encodings × the mean validation loss at each point on the tuning
    seeds, the chosen point in bold."""
    t = compare["tune"]
    order, seeds = entries(compare)
    points = compare["encodings"][0]["tune"]["grid"]
    label = lambda p: " ".join("%s %s" % (k, grid_value(p[k])) for k in t["options"])
    lines = ["| encoding | " + " | ".join(label(p) for p in points) + " |", "|" + "---|" * (len(points) + 1)]
    for e in compare["encodings"]:
        cells = []
        for p in e["tune"]["grid"]:
            text = "diverged" if p.get("diverged") else "%.4f" % p["val_loss_mean"]
            chosen = all(p[k] == e["tune"]["chosen"][k] for k in t["options"])
            cells.append("**%s**" % text if chosen else text)
        lines.append("| " + entry_name(e["pe"]) + " | " + " | ".join(cells) + " |")
    return "\n".join(lines + caption(name, record, compare, t["seeds"],
                                     "validation loss at the end of training, mean over the tuning seeds; "
                                     "in bold the point each encoding then trained at (seeds %s); " %
                                     ", ".join(str(x) for x in seeds))) + "\n"


def as_given(record, text):
    """A text of a record's command with each path the record names otherwise (lab/scripts/recordpaths.py:
    runs/record/NAME) as its command gave it, where the record keeps that (a path relative to the
    repository; not one of the machine, '.../NAME'): a table says where its runs came from as the
    command that made them did."""
    given = [[r["to"], r["from"]] for r in record.get("paths_rewritten", []) if not r["from"].startswith(".../")]
    return recordpaths.substitution(given)(text)[0]


def entry_name(pe, shared=()):
    """'rope:random-positions=256' -> 'RoPE + random positions (256)'; other settings as given,
    but for those every row shares (a row with no others is then the encoding's name alone)."""
    name, *settings = pe.split(":")
    text = NAMES.get(name, name)
    for s in settings:
        if s in shared:
            continue
        key, _, value = s.partition("=")
        if key != "init-from":  # a fine-tuning's source: the caption says, the record keeps the path
            text += " + random positions (%s)" % value if key == "random-positions" else " %s" % s
    return text


def sizes_table(name, record, compare):
    """Encodings × test exact match (%) over each bucket of instance sizes (a compare of an
    algorithmic task), the trained bucket marked."""
    L = compare["train_max"]
    head = ["encoding"] + tuned_head(compare) + \
        ["%s %s%s" % ("sizes" if "-" in b else "size", b, " (trained)" if int(b.split("-")[-1]) <= L else "")
         for b in compare["buckets"]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    _, seeds = entries(compare)
    for pe, label, runs in rows_of(compare):
        row = [row_name(pe, label)] + tuned_cells(compare, pe) + [solved_cell([r["sweep_em"][i] for r in runs])
                                       for i in range(len(compare["buckets"]))]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines + caption(name, record, compare, seeds, "exact match in %, ")) + "\n"


def accuracy_table(name, record, compare):
    """Encodings × test accuracy (%), each seed's, and test loss (a compare of a task scored by
    accuracy alone: indirect indexing)."""
    _, seeds = entries(compare)
    head = ["encoding"] + tuned_head(compare) + \
        ["test accuracy (%)", "seeds %s (%%)" % ", ".join(str(s) for s in seeds), "test loss"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for pe, label, runs in rows_of(compare):
        row = [row_name(pe, label)] + tuned_cells(compare, pe) + [solved_cell([r["test_acc"] for r in runs]),
               ", ".join("%.1f" % (100 * r["test_acc"]) for r in runs), cell([r["test_loss"] for r in runs])]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines + caption(name, record, compare, seeds)) + "\n"


# The SeqPE paper's image rows (Li et al. 2025, ImageNet-1k, ViT-S/16 at 224 px; Tables III, IV
# and V), at pelab's sides: the paper's 224 … 672 px are 14 … 42 patches of 16, pelab's 28 … 84 px
# are 7 … 21 patches of 4, so side s here stands for 8s there. Keyed by the table a record stands
# for (its name: image-table3…, image-table4…, image-table5…) and the --pe entry, without the
# settings every row of the record shares.
PAPER_SIDES = (28, 40, 48, 56, 64, 80, 84)
PAPER_IMAGE = {
    "table3": {
        "nope": ("NOPE", (78.8, 79.2, 78.5, 77.3, 75.8, 71.7, 70.5, 75.9)),
        "sinusoidal2d": ("APE-Sin", (80.9, 50.3, 33.3, 32.4, 15.2, 8.8, 8.5, 32.7)),
        "learned2d": ("APE-Learn", (80.4, 80.6, 79.4, 77.6, 75.4, 70.3, 69.1, 76.1)),
        "rope2d": ("RoPE2D", (80.9, 81.5, 80.0, 78.2, 76.1, 67.8, 65.0, 75.6)),
        "rope2d-mixed": ("RoPE2D-Mix", (80.9, 82.2, 81.8, 80.9, 79.1, 71.6, 68.3, 77.8)),
        "seqpe": ("SeqPE", (81.2, 81.8, 81.7, 81.2, 80.5, 77.8, 76.7, 80.1)),
    },
    "table4": {
        "seqpe:seqpe-alpha=0:seqpe-beta=0": ("α 0, β 0", (81.1, 81.2, 79.7, 77.1, 79.7)),
        "seqpe:seqpe-beta=0": ("α 0.1, β 0", (81.0, 81.2, 80.7, 80.0, 80.7)),
        "seqpe:seqpe-alpha=0": ("α 0, β 0.1", (81.3, 81.3, 79.3, 76.1, 79.5)),
        "seqpe": ("α 0.1, β 0.1", (81.2, 81.8, 81.7, 80.5, 81.3)),
    },
    "table5": {
        "seqpe:seqpe-mode=attn-add": ("AttnSum", (80.9, 80.8, 79.8, 78.5, 80.0)),
        "seqpe:seqpe-mode=attn-bias": ("AttnBias", (80.8, 80.9, 80.1, 79.2, 80.2)),
        "seqpe": ("AttnMul", (81.2, 81.8, 81.7, 81.2, 81.4)),
    },
}


# The SeqPE paper's Table II (GPT-2 fine-tuned on RULER-SQuAD at 1,024 tokens): answer-span
# perplexity, then exact match (%), at 1K, 2K, 4K and 8K, i.e. 1×, 2×, 4×, 8× the fine-tuning
# length, as the paper prints them; keyed by the --pe encoding (its settings aside).
PAPER_QA = {
    "nope": ("NoPE", "6.07 236.53 967.89 1.5e4 29.2 3.6 0.6 0.0"),
    "rope": ("RoPE (base 10⁶)", "5.62 23.00 314.77 963.48 28.0 9.0 3.0 0.8"),
    "alibi": ("ALiBi", "5.49 8.07 9.52 121.14 23.8 11.4 8.0 2.0"),
    "seqpe": ("SeqPE", "5.56 7.64 7.58 28.60 26.8 15.0 11.4 2.6"),
}


def paper_table(name):
    """The SeqPE paper's image table a record stands for, by its name ('table3' for
    image-table3-cpu-aug), or None."""
    table = re.match(r"image-(table[345])", name)
    return table and table.group(1)


def paper_row(name, entry, sides):
    """The paper's row for entry in the table record `name` stands for, at `sides` (and its
    average when the sides are the paper's), or None."""
    table = paper_table(name)
    found = table and PAPER_IMAGE[table].get(entry)
    if not found:
        return None
    label, values = found
    at = dict(zip(PAPER_SIDES, values[:-1]))
    if any(side not in at for side in sides):
        return None
    avg = "%.1f" % values[-1] if tuple(sides) == PAPER_SIDES[:len(values) - 1] else "—"
    return ["*paper: %s*" % label] + ["*%.1f*" % at[side] for side in sides] + ["*%s*" % avg]


def resolutions_table(name, record, compare):
    """Encodings × test accuracy (%) at each side and their average over the sides (a compare of
    the image task), each beneath it the SeqPE paper's row where the record stands for one of its
    tables."""
    sides = [int(l) for l in compare["resolutions"]]
    T = run_config(name, compare["runs"][0])["task"]["image-side"]
    of_paper = paper_table(name)  # then the paper's side (8 times ours) beside ours
    notes = [", ".join((["%d" % (8 * s)] if of_paper else []) + (["trained"] if s == T else [])) for s in sides]
    head = ["encoding"] + tuned_head(compare) + \
        ["%d (%s)" % (s, n) if n else "%d" % s for s, n in zip(sides, notes)] + ["AVG"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    order, seeds = entries(compare)
    shared = shared_settings(order)
    for pe, label, runs in rows_of(compare):
        row = [row_name(pe, label, shared)] + tuned_cells(compare, pe)
        row += [cell([100 * r["sweep_acc"][i] for r in runs], 1) for i in range(len(sides))]
        row.append(cell([100 * statistics.mean(r["sweep_acc"]) for r in runs], 1))
        lines.append("| " + " | ".join(row) + " |")
        key = ":".join([pe.split(":")[0]] + [x for x in pe.split(":")[1:] if x not in shared])
        paper = paper_row(name, key, sides)
        if paper:  # the paper's row has no tuned values of ours
            lines.append("| " + " | ".join(paper[:1] + [""] * len(tuned_head(compare)) + paper[1:]) + " |")
    unit = "test accuracy in %% at each side in pixels%s; AVG the mean over the sides; " % (
        " (in brackets the paper's side, 8 times ours)" if of_paper else "")
    return "\n".join(lines + caption(name, record, compare, seeds, unit, shared=shared)) + "\n"


def qa_table(name, record, compare):
    """Encodings × the answer span's test NLL, its perplexity and the exact match (%) of a greedy
    generation at each length (a compare of the qa task, fine-tuning each encoding's pre-trained
    run: the SeqPE paper's Table II, whose rows follow when the lengths are its 1×..8×)."""
    T = run_config(name, compare["runs"][0])["task"]["seq-len"]
    at = [length_label(l, T) for l in compare["lengths"]]
    head = ["encoding"] + tuned_head(compare) + \
        ["test span NLL"] + ["span ppl " + a for a in at] + ["EM " + a for a in at]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    order, seeds = entries(compare)
    for pe, label, runs in rows_of(compare):
        row = [row_name(pe, label)] + tuned_cells(compare, pe) + [cell([r["test_loss"] for r in runs])]
        row += [cell([r["sweep_span_ppl"][i] for r in runs]) for i in range(len(at))]
        row += [cell([100 * r["sweep_em"][i] for r in runs], 1) for i in range(len(at))]
        lines.append("| " + " | ".join(row) + " |")
    if compare["lengths"] == ["1x", "2x", "4x", "8x"]:
        shown = {pe.split(":")[0] for pe in order}
        for pe in (p for p in PAPER_QA if p in shown):
            label, values = PAPER_QA[pe]
            lines.append("| *paper: %s* | — | " % label + " | ".join("*%s*" % v for v in values.split()) + " |")
    return "\n".join(lines + caption(name, record, compare, seeds, "each run fine-tuned from its encoding's "
                                      "pre-trained run of the same seed (init-from); EM in %; ")) + "\n"


def attn_similarity(name, record, analysis):
    """The first group's row of an attn-similarity analysis (the runs' first encoding against each),
    closest first."""
    g, first, mean, std = analysis["groups"], 0, analysis["mean"][0], analysis["std"][0]
    order = sorted(range(len(g)), key=lambda k: (mean[k] is None, mean[k] or 0))  # no pair (null): last
    lines = ["| D(%s, ·) | " % entry_name(g[first]) + " | ".join(entry_name(g[k]) for k in order) + " |",
             "|---|" + "---|" * len(order),
             "| JSD (nats) | " + " | ".join("—" if mean[k] is None else "%.3f ± %.3f" % (mean[k], std[k])
                                         for k in order) + " |"]
    commit = built(record)
    lines += ["", "<sub>mean ± sample standard deviation over pairs of distinct runs (%d sequences of size %d); "
              "%s on %s; record in `results/%s`, regenerated by `make tables`.</sub>"
              % (analysis["examples"], analysis["size"], commit, record["cpu"], name)]
    return "\n".join(lines) + "\n"


def option(command, name, default=None):
    """The value a command (a list of words) gives option --name, as '--name V' or '--name=V'."""
    for i, w in enumerate(command):
        if w == "--" + name and i + 1 < len(command):
            return command[i + 1]
        if w.startswith("--%s=" % name):
            return w.split("=", 1)[1]
    return default


def switch(command, name):
    """Whether a command turns switch --name on ('--name', '--name on', '--name=on')."""
    value = option(command + ["on"], name, "off")  # a switch last in the command: on
    return value != "off"


def short_names(paths):
    """Each path by its last component, or by as many last components as tell it from the others
    ('a/seqpe-s1' and 'b/seqpe-s1' stay apart)."""
    parts = {p: p.rstrip("/").split("/") for p in paths}
    def tail(p, k):
        return "/".join(parts[p][-k:])
    names = {}
    for p in paths:
        k = 1
        while k < len(parts[p]) and any(q != p and tail(q, k) == tail(p, k) for q in paths):
            k += 1
        names[p] = tail(p, k)
    return names


def grid_variance(name, record, rows):
    """An analyze seqpe --variance: for each run, the share of what varies over the first grid asked
    that varies with the rows, the columns and both, then the columns' share over each further
    grid. The CSV gives each run's sides in the order of --grid (4 rows a side); a side asked as 0
    (each run's training grid) is named by its size when the runs share it."""
    asked = option(record["command"], "grid", "0").split(",")
    runs = list(dict.fromkeys(r["model"] for r in rows))  # in the CSV's order
    block = {run: [r for r in rows if r["model"] == run] for run in runs}  # 4 rows per side asked
    share = {(run, k, r["part"]): 100 * float(r["of_variation"])
             for run in runs for k in range(len(asked)) for r in block[run][4 * k:4 * k + 4] if r["part"] != "mean"}
    def label(k):
        sizes = {block[run][4 * k]["grid"] for run in runs}
        return "%s × %s" % (min(sizes), min(sizes)) if len(sizes) == 1 else "training grid"
    names = short_names(runs)
    head = ["run"] + ["%s (%s)" % (part, label(0)) for part in ("rows", "columns", "interaction")]
    head += ["columns (%s)" % label(k) for k in range(1, len(asked))]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for run in runs:
        cells = [share[run, 0, part] for part in ("rows", "columns", "interaction")]
        cells += [share[run, k, "columns"] for k in range(1, len(asked))]
        lines.append("| `%s` | " % names[run] + " | ".join("%.2f %%" % c for c in cells) + " |")
    commit = built(record)
    lines += ["", "<sub>share of Σ|e_rc − ē|² over the G × G grid of coordinates 1..G (`pelab analyze seqpe "
              "--variance`); %s on %s; record in `results/%s`, regenerated by `make tables`.</sub>"
              % (commit, record["cpu"], name)]
    return "\n".join(lines) + "\n"


def command_options(words, leave_out):
    """The options of a command (a list of words) as texts '--name value' ('--name=value' alike,
    a switch alone), but for those named in leave_out."""
    found, i = [], 0
    while i < len(words):
        name, eq, value = words[i].partition("=")
        if not eq:  # '--name value' two words, '--name' a switch
            value = words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--") else ""
            i += 1 if value else 0
        i += 1
        if name.startswith("--") and name not in leave_out:
            found.append((name + " " + value).strip())
    return found


def own_options(commands):
    """For each command (a list of words), the options it gives that not every other one gives
    alike ('--aug-scale 0.08,1'), as text; --out and its directory, and --pe (the row's name), left
    out."""
    sets = [command_options(c, ("--out", "--pe")) for c in commands]
    return [" ".join(o for o in own if not all(o in other for other in sets)) for own in sets]


def one_commit(block, records):
    """Refuses a table of records of different builds."""
    if len({record["commit"] for record in records}) > 1:
        fail("results:%s: records of different commits in one table" % block)


def merged(names):
    """Records NAME+NAME+... as one: the first record's, with every record's runs, each run
    labelled by the options its record alone gives and naming its record."""
    loaded = [load(n) for n in names]
    labels = own_options([record["command"] for record, _ in loaded])
    one_commit("+".join(names), [record for record, _ in loaded])
    kind = lambda compare: {k: v for k, v in compare.items() if k not in ("runs", "encodings")}  # task, sweep
    record, compare = loaded[0]
    trained_by = collections.Counter()  # every record's runs, by the build that trained them
    for r, _ in loaded:
        trained_by.update(r.get("trained_by", {}))
    if trained_by:
        record = dict(record, trained_by=dict(sorted(trained_by.items())))
    compare = dict(compare, runs=[])
    for (_, comp), label, n in zip(loaded, labels, names):
        if kind(comp) != kind(loaded[0][1]):
            fail("results/%s and results/%s are not one kind of table (task, sweep)" % (names[0], n))
        compare["runs"] += [dict(r, label=label, record=n) for r in comp["runs"]]
    return record, compare


# Options that choose which runs a command trains and how many at once, not what a run computes:
# left out when two commands are set against each other.
SCHEDULING = ("--seeds", "--jobs", "--out", "--pe")


def last_val_loss(name, run):
    """The validation loss of a run's last evaluation during training (its recorded log's tail)."""
    with open(run_file(name, run, "log-tail.jsonl")) as f:
        losses = [json.loads(line)["val_loss"] for line in f if '"val_loss"' in line]
    if not losses:
        fail("results/%s: run %s logged no validation loss in its last lines" % (name, run["dir"]))
    return losses[-1]


def changed_options(base, variant):
    """The options variant's command gives that base's does not, scheduling aside ('--precision bf16')."""
    own = command_options(base["command"], SCHEDULING)
    return " ".join(o for o in command_options(variant["command"], SCHEDULING) if o not in own)


def pairs_table(name):
    """BASE>VARIANT+...: for each pair, each run of VARIANT against the run of BASE of the same
    encoding and seed: last validation loss, its change, test loss, and the perplexity at each
    swept length (where the task sweeps lengths)."""
    pairs = [p.split(">") for p in name.split("+")]
    if any(len(p) != 2 for p in pairs):
        fail("results:%s: a block of pairs is BASE>VARIANT+BASE>VARIANT+..." % name)
    loaded = {n: load(n) for p in pairs for n in p}
    one_commit(name, [record for record, _ in loaded.values()])
    head = ["task", "against", "val loss", "variant", "Δ", "test loss", "variant",
            "perplexity at each length", "variant"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    sweep = lambda r: ", ".join("%.3f" % x for x in r["sweep_ppl"]) if "sweep_ppl" in r else "—"
    for base, variant in pairs:
        (brec, bcmp), (vrec, vcmp) = loaded[base], loaded[variant]
        if bcmp.get("task") != vcmp.get("task") or bcmp.get("lengths") != vcmp.get("lengths"):
            fail("results/%s and results/%s are not runs of one task and sweep" % (base, variant))
        by_run = {(r["pe"], r["seed"]): r for r in bcmp["runs"]}
        for v in vcmp["runs"]:
            b = by_run.get((v["pe"], v["seed"]))
            if b is None:
                fail("results/%s has no run of %s, seed %d, to set results/%s's against"
                         % (base, v["pe"], v["seed"], variant))
            steps = run_config(base, b)["training"]["steps"]
            vb, vv = last_val_loss(base, b), last_val_loss(variant, v)
            change = ("%+.2f %%" % (100 * (vv / vb - 1))).replace("-", "−")
            row = ["%s, %s (%s updates, seed %d)" % (bcmp["task"], entry_name(v["pe"]), format(steps, ","), v["seed"]),
                   "`%s`" % changed_options(brec, vrec), "%.5f" % vb, "%.5f" % vv, change,
                   "%.5f" % b["test_loss"], "%.5f" % v["test_loss"], sweep(b), sweep(v)]
            lines.append("| " + " | ".join(row) + " |")
    record = loaded[pairs[0][0]][0]
    swept = {c["task"]: ", ".join(l.replace("x", "×") for l in c["lengths"])
             for _, c in loaded.values() if c.get("lengths")}
    where = ", ".join("`results/%s`" % n for n in dict.fromkeys(n for p in pairs for n in p))
    lines += ["", "<sub>each row a run of the variant's record against the run of the same encoding and seed of "
              "the base's; val loss the last evaluation of training, Δ the variant's change of it%s; %s "
              "on %s (%d cores); records in %s, regenerated by `make tables`.</sub>"
              % ("; perplexity at each multiple of the training length, %s"
                 % "; ".join("%s (%s)" % (l, t) for t, l in swept.items()) if swept else "",
                 built(record), record["cpu"], record["cores"], where)]
    return "\n".join(lines) + "\n"


# What a column of pairs= is, by the field of compare.json it reads (a sweep's: at one of its labels).
COLUMNS = {"sweep_em": "exact match over sizes %s", "sweep_ppl": "perplexity at %s",
           "sweep_acc": "test accuracy at side %s", "sweep_span_ppl": "answer-span perplexity at %s",
           "test_acc": "test accuracy", "test_loss": "test loss", "test_ppl": "test perplexity",
           "trained_em": "exact match over the trained sizes", "val_loss": "validation loss"}


def column_values(compare, column):
    """A column of compare.json for pairs=: its value as a function of a run, what it is, whether
    more is better and whether it is a fraction (shown in %): a run's field (test_acc, test_loss,
    test_ppl, trained_em ...) or a label of the record's sweep (a bucket, a length, a side)."""
    sweeps = (("buckets", "sweep_em"), ("lengths", "sweep_ppl"), ("resolutions", "sweep_acc"),
              ("lengths", "sweep_span_ppl"))
    for labels, key in sweeps:
        if column in compare.get(labels, []) and key in compare["runs"][0]:
            i = compare[labels].index(column)
            return (lambda r: r[key][i]), COLUMNS[key] % column, "ppl" not in key, "ppl" not in key
    if not isinstance(compare["runs"][0].get(column), (int, float)):
        labels = compare.get("buckets", compare.get("lengths", compare.get("resolutions", [])))
        fail("pairs=%s: neither a number of each run (test_acc, test_loss, ...) nor a label of the "
             "record's sweep (%s)" % (column, ", ".join(labels) or "none"))
    lower = "loss" in column or "ppl" in column
    return (lambda r: r[column]), COLUMNS.get(column, column), not lower, column.endswith(("_acc", "_em"))


def paired(ra, rb, value, higher_better, scale=1):
    """Runs ra against runs rb seed by seed on value(run): the common seeds, each seed's difference
    A − B (times scale), their mean, the half-width of its 95 % t interval and who is ahead: 1 (A),
    −1 (B) or 0, level, when the interval holds 0 (or there are fewer than two common seeds: the
    mean and the half-width are then None)."""
    b_by_seed = {r["seed"]: r for r in rb}
    common = [r["seed"] for r in ra if r["seed"] in b_by_seed]
    a_by_seed = {r["seed"]: r for r in ra}
    d = [scale * (value(a_by_seed[s]) - value(b_by_seed[s])) for s in common]
    if len(d) < 2:
        return common, d, None, None, 0
    mean, half = ci95(d)
    side = 1 if mean - half > 0 else -1 if mean + half < 0 else 0
    return common, d, mean, half, side if higher_better else -side


def row_pairs(compare, rows, value, higher_better):
    """The pairs of rows ?pairs= compares: every two rows; with ?against=ENTRY, that row (its entry
    as compare's --pe names it: nope, rope:random-positions=256) against each other; with
    ?against=best, the row of the best mean on the column among those that fit their trained sizes
    (where the record has them) against each other."""
    against = OPTIONS.get("against")
    if not against:
        return [(a, b) for i, a in enumerate(rows) for b in rows[i + 1:]]
    if against == "best":
        fitting = [r for r in rows if "train_max" not in compare or fits(compare, r[2])] or rows
        sign = 1 if higher_better else -1
        base = max(fitting, key=lambda r: sign * statistics.mean(value(run) for run in r[2]))
    else:
        named = [r for r in rows if r[0] == against]
        if len(named) != 1:
            fail("against=%s: not one row of the record (%s)" % (against, ", ".join(r[0] for r in rows)))
        base = named[0]
    return [(base, r) for r in rows if r is not base]


def paired_table(name, record, compare, column):
    """?pairs=COLUMN: every two rows of the record on one column, paired by seed: each seed's
    difference, their mean and its 95 % t interval, "ahead" only when the interval excludes 0."""
    value, what, higher_better, fraction = column_values(compare, column)
    scale, digits = (100, 1) if fraction else (1, 3)
    rows = rows_of(compare)
    head = ["A − B", "each seed", "mean difference", "95 % CI", "verdict"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (pa, la, ra), (pb, lb, rb) in row_pairs(compare, rows, value, higher_better):
        common, d, mean, half, side = paired(ra, rb, value, higher_better, scale)
        a_name, b_name = row_name(pa, la), row_name(pb, lb)
        if mean is None:
            lines.append("| %s − %s | %s | — | — | level |" % (a_name, b_name, ", ".join(signed(x, digits) for x in d) or "—"))
            continue
        verdict = "%s ahead" % (a_name if side > 0 else b_name) if side else "level"
        lines.append("| %s − %s | %s | %s | %s … %s | %s |" % (
            a_name, b_name, ", ".join("%s (%d)" % (signed(x, digits), s) for x, s in zip(d, common)),
            signed(mean, digits), signed(mean - half, digits), signed(mean + half, digits), verdict))
    commit = built(record)
    where = ", ".join("`results/%s`" % n for n in name.split("+"))
    lines += ["", "<sub>%s%s, A − B seed by seed (each difference with its seed in brackets); the 95 %% "
              "confidence interval of the mean difference (Student t, n − 1 degrees of freedom); ahead only "
              "when it excludes 0; %s on %s (%d cores); records in %s, regenerated by `make "
              "tables`.</sub>" % (what, " in %" if fraction else "", commit, record["cpu"], record["cores"], where)]
    return "\n".join(lines) + "\n"


# The verdict table (<!-- results:verdict -->): every claim of CLAIMS, put to the test it names
# against the record it names. The claims file lives in results/ beside the records it reads (see
# the docstring). Verdicts, as the table prints them:
REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, PENDING = "reproduced", "not reproduced", "inconclusive", "not yet measured"
CLAIMS = "claims.json"
CLAIM_FIELDS = ("id", "paper", "where", "claim", "paper_number", "paper_scale", "record", "doc", "test")
TEST_KINDS = {"pair": ("a", "column"), "threshold": ("entries", "column")}


def claim_fail(claim, message):
    fail("results/%s: claim %s: %s" % (CLAIMS, claim.get("id", "?"), message))


def entry_key(pe, shared):
    """An entry as a claim may name it: its --pe text without the settings every row of its record
    shares and without init-from ('seqpe:seqpe-beta=0' for the seqpe-table4 records' rows)."""
    name, *settings = pe.split(":")
    return ":".join([name] + [s for s in settings if s not in shared and not s.startswith("init-from=")])


def claim_record(claim):
    """The record a claim names as (record, compare, labels): a compare's runs, or, for an
    attention-similarity analysis, one row per encoding and seed of the test's `of` encoding: the
    mean divergence ("jsd") between that run's heads and the encoding's runs'."""
    record, data = load(claim["record"])
    if record["command"][1] == "compare":
        return record, data
    of = claim["test"].get("of")
    if record["command"][1:3] != ["analyze", "attn-similarity"] or not of:
        claim_fail(claim, "results/%s is neither a compare nor an attn-similarity analysis with the "
                          "test's \"of\"" % claim["record"])
    runs = data["runs"]
    seed = lambda run: int(re.search(r"-s(\d+)$", run["dir"].rstrip("/")).group(1))
    rows = []
    for i, run in enumerate(runs):
        if run["group"] != of:
            continue
        for g in dict.fromkeys(r["group"] for r in runs if r["group"] != of):
            d = [run["d"][j] for j, r in enumerate(runs) if r["group"] == g]
            rows.append({"pe": g, "seed": seed(run), "dir": run["dir"], "jsd": statistics.mean(d)})
    if not rows:
        claim_fail(claim, "results/%s has no runs of %s" % (claim["record"], of))
    return record, {"task": "attn-similarity", "runs": rows}


def claim_runs(claim, compare, entry):
    """The runs of one entry a claim names (by its --pe text or its entry_key), by seed."""
    order, _ = entries(compare)
    shared = shared_settings(order)
    found = [pe for pe in order if entry in (pe, entry_key(pe, shared))]
    if len(found) != 1:
        claim_fail(claim, "%s names %s entries of results/%s (%s)" % (
            entry, "no" if not found else "several", claim["record"], ", ".join(entry_key(pe, shared) for pe in order)))
    return found[0], sorted((r for r in compare["runs"] if r["pe"] == found[0]), key=lambda r: r["seed"])


def claim_column(claim, compare, test):
    """(value of a run, what it is, higher is better, a fraction) for the test's column: a label of
    the record's sweep or a run's field as pairs= reads it, or test["field"] at label test["column"]
    (a sweep the labels of which another field shares: a qa record's sweep_em at '8x');
    test["better"] ('lower' or 'higher') overrides the direction."""
    column = test["column"]
    if "field" in test:
        labels = compare.get("lengths", compare.get("buckets", compare.get("resolutions", [])))
        if column not in labels or test["field"] not in compare["runs"][0]:
            claim_fail(claim, "no %s at %s in results/%s" % (test["field"], column, claim["record"]))
        i = labels.index(column)
        key = test["field"]
        what = ("exact match at %s" if key == "sweep_em" and "lengths" in compare else COLUMNS.get(key, key + " at %s")) % column
        value = lambda r: r[key][i]
        higher, fraction = "ppl" not in key, key.endswith(("_em", "_acc"))
    elif column == "jsd":
        value, what, higher, fraction = (lambda r: r["jsd"]), "divergence (JSD, nats) from %s's heads" % entry_name(test["of"]), False, False
    else:
        value, what, higher, fraction = column_values(compare, column)
    if "better" in test:
        higher = {"higher": True, "lower": False}[test["better"]]
    return value, re.sub(r"\b(\d+)x\b", "\\1×", what), higher, fraction


def fits(compare, runs):
    """Whether every run fits its trained sizes: exact match ≥ 90 % over them (compare.json's
    fits_training, or worked out from size_em in a record older than it)."""
    def trained(r):
        return r["trained_em"] if "trained_em" in r else statistics.mean(r["size_em"][:compare["train_max"]])
    return all(r.get("fits_training", trained(r) >= SOLVED) for r in runs)


def test_pair(claim, compare, test):
    """kind "pair": entry a better than b on the column, seed by seed (paired's interval); b one
    entry, a list, or "*" (every other entry); "variant": V sets each entry E:V against E instead.
    "fits" (algorithmic tasks): "b" leaves out a pair whose b does not fit its trained sizes in
    every seed (nothing to generalise from), "both" also makes a pair level whose a does not.
    Its parts: (outcome, margin, text), outcome 1 where a is ahead, −1 where b is, 0 level; the
    margin, how far the interval is from 0 on a's side."""
    value, what, higher, fraction = claim_column(claim, compare, test)
    scale, digits = (100, 1) if fraction else (1, 3)
    order, _ = entries(compare)
    shared = shared_settings(order)
    if "variant" in test:
        pairs = [(entry_key(pe, shared) + ":" + test["variant"], entry_key(pe, shared)) for pe in order
                 if ":" + test["variant"] not in pe and any(o == pe + ":" + test["variant"] for o in order)]
    else:
        b = test.get("b", "*")
        b = [entry_key(pe, shared) for pe in order if entry_key(pe, shared) != test["a"]] if b == "*" else b
        pairs = [(test["a"], x) for x in ([b] if isinstance(b, str) else b)]
    parts, left_out = [], []
    for a, b in pairs:
        (pa, ra), (pb, rb) = claim_runs(claim, compare, a), claim_runs(claim, compare, b)
        name_a, name_b = entry_name(pa, shared), entry_name(pb, shared)
        if test.get("fits") == "both" and not fits(compare, ra):
            parts.append((0, 0, "%s does not fit its trained sizes in every seed" % name_a))
            continue
        if test.get("fits") and not fits(compare, rb):
            left_out.append(name_b)
            continue
        common, d, mean, half, side = paired(ra, rb, value, higher, scale)
        if mean is None:
            parts.append((0, 0, "%s − %s: fewer than two common seeds" % (name_a, name_b)))
            continue
        text = "%s − %s: %s [%s, %s], n %d" % (name_a, name_b, signed(mean, digits), signed(mean - half, digits),
                                                signed(mean + half, digits), len(d))
        parts.append((side, mean - half if higher else -(mean + half), text))
    unit = "%s%s" % (what, ", in points" if fraction else "")
    return parts, unit, left_out


def test_threshold(claim, compare, test):
    """kind "threshold": each entry's value on the column ("relative_to": LABEL, its change
    from LABEL's value, v/v_LABEL − 1; "minus": LABEL, v − v_LABEL) below test["below"] (or above
    test["above"]): outcome 1 when the 95 % interval of the mean and every seed are on that side,
    −1 when the interval is wholly on the other, else 0 (and 0 with "fits" when the entry does not
    fit its trained sizes in every seed)."""
    value, what, higher, fraction = claim_column(claim, compare, test)
    base = test.get("relative_to", test.get("minus"))
    if base is not None:
        base_value = claim_column(claim, compare, dict(test, column=base))[0]
    if "relative_to" in test:
        v, scale, digits, unit = (lambda r: value(r) / base_value(r) - 1), 100, 1, " %"
        what = "%s against %s" % (what, base.replace("x", "×"))
    elif "minus" in test:
        v, (scale, digits, unit) = (lambda r: value(r) - base_value(r)), (100, 1, " points") if fraction else (1, 3, "")
        what = "%s less %s" % (what, base.replace("x", "×"))
    else:
        v, (scale, digits, unit) = value, (100, 1, " %") if fraction else (1, 3, "")
    if "below" in test:
        limit, below = test["below"], True
    elif "above" in test:
        limit, below = test["above"], False
    else:
        claim_fail(claim, "a threshold test needs \"below\" or \"above\"")
    order, _ = entries(compare)
    shared = shared_settings(order)
    names = [entry_key(pe, shared) for pe in order] if test["entries"] == "*" else test["entries"]
    parts = []
    for entry in names:
        pe, runs = claim_runs(claim, compare, entry)
        x = [v(r) for r in runs]
        name = entry_name(pe, shared)
        if len(x) < 2:
            parts.append((0, 0, "%s: one seed" % name))
            continue
        mean, half = ci95(x)
        inside = sum(xi < limit if below else xi > limit for xi in x)
        lo, hi = mean - half, mean + half
        side = (1 if hi < limit and inside == len(x) else -1 if lo > limit else 0) if below else \
               (1 if lo > limit and inside == len(x) else -1 if hi < limit else 0)
        text = "%s: %s%s [%s, %s], %d of %d seeds %s %s%s" % (
            name, signed(scale * mean, digits), unit, signed(scale * lo, digits), signed(scale * hi, digits),
            inside, len(x), "below" if below else "above", signed(scale * limit, digits), unit)
        if test.get("fits") and not fits(compare, runs):
            parts.append((0, 0, "%s does not fit its trained sizes in every seed" % name))
            continue
        parts.append((side, limit - hi if below else lo - limit, text))
    return parts, what, []


def judge(claim):
    """A claim's verdict, what pelab measured and the record's scale: "not yet measured" (with the
    claim's "pending" reason) when its record does not exist; otherwise the test's parts: every part
    for the claim, reproduced; one against it, not reproduced; else inconclusive."""
    if not os.path.isdir(os.path.join(RESULTS, claim["record"])):
        if not claim.get("pending"):
            claim_fail(claim, "results/%s does not exist, and the claim gives no \"pending\" reason" % claim["record"])
        return PENDING, claim["pending"], "—"
    test = claim["test"]
    kind = test.get("kind")
    if kind not in TEST_KINDS or any(k not in test for k in TEST_KINDS[kind][1:]) or \
            (kind == "pair" and "a" not in test and "variant" not in test):
        claim_fail(claim, "a test is {\"kind\": \"pair\", \"a\", \"b\" (or \"variant\"), \"column\"} or "
                          "{\"kind\": \"threshold\", \"entries\", \"column\", \"below\" or \"above\"}")
    record, compare = claim_record(claim)
    parts, what, left_out = (test_pair if kind == "pair" else test_threshold)(claim, compare, test)
    if not parts:
        if not left_out:
            claim_fail(claim, "its test sets nothing against anything in results/%s" % claim["record"])
        parts = [(0, 0, "nothing left to set against")]
    against = [p for p in parts if p[0] < 0]
    level = [p for p in parts if p[0] == 0]
    verdict = NOT_REPRODUCED if against else INCONCLUSIVE if level else REPRODUCED
    # the part that decides: the first against the claim, else the first level, else the narrowest
    # margin for it (how far the interval is from 0, or from the threshold, on the claim's side)
    shown = against[0] if against else level[0] if level else min(parts, key=lambda p: p[1])
    text = "%s: %s" % (what[0].upper() + what[1:], shown[2])
    if len(parts) > 1:
        text += " (one of %d: %d for the claim, %d against, %d level)" % (
            len(parts), len(parts) - len(against) - len(level), len(against), len(level))
    if left_out:
        text += "; left out, not fitting their trained sizes: %s" % ", ".join(left_out)
    return verdict, text, record_scale(claim.get("scale_from", claim["record"]))


def record_scale(name):
    """A record's model and budget, from its first run: parameters, layers × width, updates."""
    _, compare = load(name)
    run = compare["runs"][0]
    config = run_config(name, run)
    with open(run_file(name, run, "summary.json")) as f:
        params = json.load(f).get("parameters")
    model = "%s × %s" % (config["model"]["layers"], config["model"]["d-model"])
    return "%s(%s), %s updates" % ("%.2fM parameters " % (params / 1e6) if params else "", model,
                                   format(config["training"]["steps"], ","))


def link(path):
    """A repository path as a link from the file being made (README.md or a document)."""
    target, _, anchor = path.partition("#")
    target = os.path.join(DOCS_ROOT, target)
    if CURRENT and anchor and os.path.abspath(target) == CURRENT:
        return "#" + anchor
    here = os.path.dirname(CURRENT) if CURRENT else DOCS_ROOT
    return os.path.relpath(target, here) + ("#" + anchor if anchor else "")


def verdict_table():
    """<!-- results:verdict -->: a line counting the verdicts, then a row per claim of results/
    claims.json: the claim, the paper's number, pelab's (the deciding comparison's mean, 95 %
    interval and seeds), the scale of each, and the verdict."""
    path = os.path.join(RESULTS, CLAIMS)
    if not os.path.isfile(path):
        fail("results:verdict needs results/%s, the claims it tests" % CLAIMS)
    with open(path) as f:
        claims = json.load(f)["claims"]
    head = ["claim", "the paper", "pelab (record: the comparison that decides)", "scale: the paper's; pelab's", "verdict"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    count, seen = {}, set()
    for claim in claims:
        missing = [k for k in CLAIM_FIELDS if k not in claim]
        if missing or claim["id"] in seen:
            claim_fail(claim, "repeats an id" if not missing else "lacks %s" % ", ".join(missing))
        seen.add(claim["id"])
        verdict, measured, scale = judge(claim)
        count[verdict] = count.get(verdict, 0) + 1
        lines.append("| %s ([%s](%s)) | %s, %s: %s | `%s`: %s | %s; %s | **%s** |" % (
            claim["claim"], claim["id"], link(claim["doc"]), claim["paper"], claim["where"], claim["paper_number"],
            claim["record"], measured, claim["paper_scale"], scale, verdict))
    summary = "**%d claims: %s.**" % (len(claims), ", ".join(
        "%d %s" % (count[v], v) for v in (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, PENDING) if v in count))
    lines += ["", "<sub>A − B: the mean of the seeds' differences and its 95 %% confidence interval (Student t, "
              "n − 1 degrees of freedom), over the seeds the two share; a threshold: the mean over the seeds and "
              "its interval. Reproduced: the interval (and, for a threshold, every seed) on the claim's side; not "
              "reproduced: the interval on the other; inconclusive: otherwise. Claims and tests in "
              "`results/%s`; each record's commit and CPU under its table in the linked document; regenerated by "
              "`make tables`.</sub>" % CLAIMS]
    return summary + "\n\n" + "\n".join(lines) + "\n"


def block_options(block, text):
    """The options after '?' of a block: {'ci': True, 'pairs': 'test_acc', ...}."""
    found = {}
    for item in text.split("&") if text else []:
        key, eq, value = item.partition("=")
        if key not in ("ci", "solved", "pairs", "against", "tune") or bool(eq) != (key in ("pairs", "against")) or (eq and not value):
            fail("results:%s: '%s' is not an option of a block (ci, solved, pairs=COLUMN, against=ENTRY, tune)" % (block, item))
        found[key] = value or True
    return found


def render(block):
    global OPTIONS
    name, _, options = block.partition("?")
    OPTIONS = block_options(block, options)
    if name == "verdict":
        if OPTIONS:
            fail("results:%s: the verdict block takes no options" % block)
        return verdict_table()
    if ">" in name:
        if OPTIONS:
            fail("results:%s: a block of runs against runs takes no options" % block)
        return pairs_table(name)
    names = name.split("+")
    record, compare = merged(names) if len(names) > 1 else load(name)
    if OPTIONS.get("against") and not OPTIONS.get("pairs"):
        fail("results:%s: against= is for a block of pairs=" % block)
    if OPTIONS.get("tune"):
        if len(OPTIONS) > 1 or "tune" not in compare:
            fail("results:%s: ?tune is alone, for a record of a compare with --tune" % block)
        return tune_table(name, record, compare)
    if OPTIONS.get("pairs"):
        if record["command"][1] != "compare":
            fail("results:%s: pairs= is for a record of compare" % block)
        return paired_table(name, record, compare, OPTIONS["pairs"])
    if record["command"][1:3] == ["analyze", "attn-similarity"]:
        return attn_similarity(name, record, compare)
    if record["command"][1:3] == ["analyze", "seqpe"] and switch(record["command"], "variance"):
        return grid_variance(name, record, compare)
    if record["command"][1] == "analyze":
        fail("results/%s: no table kind for this analysis (attn-similarity, or seqpe "
                 "--variance)" % name)
    if compare.get("lengths") and "sweep_ppl" in compare["runs"][0]:
        return text_sweep(name, record, compare)
    if compare.get("buckets") and "sweep_em" in compare["runs"][0]:
        return sizes_table(name, record, compare)
    if compare.get("resolutions") and "sweep_acc" in compare["runs"][0]:
        return resolutions_table(name, record, compare)
    if compare.get("task") == "indirect":
        return accuracy_table(name, record, compare)
    if compare.get("lengths") and "sweep_span_ppl" in compare["runs"][0]:
        return qa_table(name, record, compare)
    fail("results/%s: no table kind for this record (a text compare with --lengths, an "
             "algorithmic task's with --buckets, an image task's with --resolutions, a qa "
             "task's with --lengths, or indirect indexing's)" % name)


def regenerate(text):
    return BLOCK.sub(lambda m: m.group(1) + render(m.group(2)) + m.group(4), text)


def sweep_numbers(compare, r):
    """The numbers of one run of compare.json that drift sets beside each other: (what, value)."""
    labels = compare.get("lengths", compare.get("buckets", compare.get("resolutions", [])))
    found = [(k, r[k]) for k in ("test_ppl",) if k in r]
    if "sweep_span_ppl" in r:
        found.append(("test_loss", r["test_loss"]))
    for key, prefix in (("sweep_ppl", ""), ("sweep_span_ppl", "span "),
                        ("sweep_em", "EM " if "sweep_span_ppl" in r else ""), ("sweep_acc", "")):
        found += [(prefix + l, r[key][i]) for i, l in enumerate(labels) if key in r]
    return found or [(k, r[k]) for k in ("test_acc", "test_loss") if k in r]


def flat_numbers(x, path=""):
    """Every number of a JSON value, by where it stands ('.mean[0][1]')."""
    if isinstance(x, bool) or x is None:
        return []
    if isinstance(x, (int, float)):
        return [(path, x)]
    if isinstance(x, dict):
        return [n for k, v in x.items() for n in flat_numbers(v, "%s.%s" % (path, k))]
    if isinstance(x, list):
        return [n for i, v in enumerate(x) for n in flat_numbers(v, "%s[%d]" % (path, i))]
    return []


def drift(name, where, dirs):
    """Each number of record `name` beside the same number made again in directory `where` by
    lab/scripts/reproduce.sh (dirs: X=DIR, where the runs of each record X of its chain were made
    again, runs/record/X in the record), with the relative drift: a compare's by run (pe and seed),
    an analysis's (the numbers of its table; the largest drift over every number of its file)."""
    record, kept = load(name)
    written = option(record["command"], "json") or option(record["command"], "out") or ""
    made = os.path.join(where, "compare.json" if record["command"][1] == "compare" else os.path.basename(written))
    if not os.path.isfile(made):
        sys.exit("tables: %s is missing: the command did not write it" % made)
    back = recordpaths.substitution([[d, "%s/%s" % (recordpaths.ROLE, x)] for x, d in (a.split("=", 1) for a in dirs)])
    role = lambda text: back(text)[0]
    rows, worst = [], [0.0]
    def row(label, what, was, is_, show=True):
        d = None
        if is_ is not None:
            d = (is_ - was) / was if was else (0.0 if is_ == was else float("inf"))
            worst[0] = max(worst[0], abs(d))
        if show:
            rows.append((label, what, was, is_, d))
    if record["command"][1] == "compare":
        with open(made) as f:
            fresh = {(role(r["pe"]), r["seed"]): r for r in json.load(f)["runs"]}
        for r in kept["runs"]:
            now = dict(sweep_numbers(kept, fresh[r["pe"], r["seed"]])) if (r["pe"], r["seed"]) in fresh else {}
            for what, was in sweep_numbers(kept, r):
                row("%-8s %4d" % (r["pe"], r["seed"]), what, was, now.get(what))
        head = "%-8s %4s" % ("pe", "seed")
    else:
        if isinstance(kept, list):  # an analysis's CSV: each row by its run, side and part
            with open(made) as f:
                fresh = {(role(r["model"]), r["grid"], r["part"]): r for r in csv.DictReader(f)}
            for r in kept:
                now = fresh.get((r["model"], r["grid"], r["part"]), {})
                for k, v in r.items():
                    if k in ("model", "grid", "part") or v == "":
                        continue
                    is_ = float(now[k]) if now.get(k) else None
                    row("%-24s" % ("%s %s" % (os.path.basename(r["model"]), r["grid"])), r["part"],
                        float(v), is_, show=k == "of_variation")
            head = "%-24s" % "run, side (share)"
        else:  # an analysis's JSON: its numbers where they stand
            with open(made) as f:
                now = dict(flat_numbers(json.load(f)))
            for where_, was in flat_numbers(kept):
                first = re.match(r"\.(mean|std)\[0\]\[(\d+)\]$", where_)
                label = "%s, %s" % (kept["groups"][0], kept["groups"][int(first.group(2))]) if first else where_
                row("%-24s" % label, first.group(1) if first else "", was, now.get(where_), show=bool(first))
            head = "%-24s" % "pair"
    print("%s %-10s %12s %12s %9s" % (head, "number", "record", "now", "drift"))
    for label, what, was, is_, d in rows:
        if is_ is None:
            print("%s %-10s %12.4f %12s %9s" % (label, what, was, "—", "—"))
        else:
            print("%s %-10s %12.4f %12.4f %+8.3f%%" % (label, what, was, is_, 100 * d))
    print("largest drift: %.3f %%" % (100 * worst[0]))


def documents():
    """Every Markdown file under DOCS_ROOT that holds a block, README.md first, then by path."""
    found = []
    for d, dirs, files in os.walk(DOCS_ROOT):
        dirs[:] = sorted(x for x in dirs if not x.startswith(".") and not (d == DOCS_ROOT and x in NOT_DOCS))
        for f in sorted(files):
            path = os.path.join(d, f)
            if f.endswith(".md"):
                with open(path) as fh:
                    if BLOCK.search(fh.read()):
                        found.append(path)
    readme = os.path.join(DOCS_ROOT, "README.md")
    return sorted(found, key=lambda p: (p != readme, os.path.relpath(p, DOCS_ROOT)))


def shown(path):
    """A path as the messages name it: relative to the repository when inside it."""
    rel = os.path.relpath(path, DOCS_ROOT)
    return path if rel.startswith("..") else rel


def main(argv):
    global FILE, CURRENT
    if argv[:1] == ["--drift"] and len(argv) >= 3:
        drift(argv[1], argv[2], argv[3:])
        return 0
    if argv == ["--list"]:
        print("\n".join(shown(p) for p in documents()))
        return 0
    check = argv[:1] == ["--check"]
    paths = argv[1:] if check else argv
    if any(p.startswith("-") for p in paths):
        sys.exit("usage: lab/scripts/tables.py [--check] [FILE...] | --list | --drift NAME DIR [X=DIR...]")
    for p in paths:
        if not os.path.isfile(p):
            sys.exit("tables: %s: no such file" % p)
    paths = paths or documents()
    if not paths:
        sys.exit("tables: no Markdown file under %s holds a block <!-- results:NAME -->" % DOCS_ROOT)
    differ, tables = [], 0
    for path in paths:
        FILE, CURRENT = shown(path), os.path.abspath(path)
        with open(path) as f:
            text = f.read()
        new = regenerate(text)
        tables += len(BLOCK.findall(new))
        if new == text:
            continue
        if check:
            sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), new.splitlines(True),
                                                       FILE, FILE + " from results/"))
            print("tables: %s differs from its records (above); 'make tables' rewrites it" % FILE)
            differ.append(FILE)
        else:
            with open(path + ".tmp", "w") as f:
                f.write(new)
            os.replace(path + ".tmp", path)
    if differ:
        return 1
    print("tables: %d recorded tables in %d file%s %s results/ (%s)"
          % (tables, len(paths), "" if len(paths) == 1 else "s", "match" if check else "written from",
             ", ".join(shown(p) for p in paths)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
