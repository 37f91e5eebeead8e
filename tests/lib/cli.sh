# tests/lib/cli.sh — sourced by every tests/cli_*.sh: runs from the repository root with
# P, the pelab binary ($PELAB_BIN, default ./pelab); W, a scratch directory removed on exit;
# fail MESSAGE, which ends the test.
# (Not itself named cli_*.sh: tests/run.sh runs each of those as a test.)
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
P=$(realpath "${PELAB_BIN:-pelab}")
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
