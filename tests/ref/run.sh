#!/usr/bin/env bash
# The PyTorch-twin test: build/tests/test_twin writes fixtures (double build) for every encoding
# case (tests/lib/models.h), twin_check.py compares them with an independent PyTorch model. Run
# from the repository root after `make tests`; `tests/ref/run.sh NAME`: encoding NAME's cases
# alone. Exit status: 0 agreed, 77 skipped (no torch), else failed.
set -u
cd "$(dirname "$0")/../.."
py=/usr/bin/python3
if ! "$py" -c 'import torch' >/dev/null 2>&1; then
    echo "skipped: python3-torch is not installed (run 'make deps')"
    exit 77
fi
if [ ! -x build/tests/test_twin ]; then
    echo "build/tests/test_twin is missing: run 'make tests' first"
    exit 1
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/pelab-twin.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
# test_twin's own checks failing does not stop the comparison: both verdicts are shown.
./build/tests/test_twin "$dir" ${1:+"$1"}
fixtures=$?
"$py" tests/ref/twin_check.py "$dir"
compared=$?
[ $fixtures -ne 0 ] && echo "test_twin's own checks failed (exit $fixtures)"
[ $fixtures -eq 0 ] && [ $compared -eq 0 ]
