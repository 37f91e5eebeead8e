# tests/lib/cli.sh — sourced by every tests/cli_*.sh: runs from the repository root with
# P, the pelab binary; W, a scratch directory removed on exit; fail MESSAGE, which ends the test.
# (Not itself named cli_*.sh: tests/run.sh runs each of those as a test.)
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
P=$PWD/pelab
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
