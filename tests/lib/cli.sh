# tests/lib/cli.sh — sourced by every tests/cli_*.sh: runs from the repository root with
# P, the pelab binary ($PELAB_BIN, default ./pelab); W, a scratch directory removed on exit;
# fail MESSAGE, which ends the test; same_weights A B, whether two safetensors files hold the
# same tensors bit for bit (their metadata may differ: it records each run's directory).
# (Not itself named cli_*.sh: tests/run.sh runs each of those as a test.)
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
P=$(realpath "${PELAB_BIN:-pelab}")
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
same_weights() { /usr/bin/python3 -c '
import json, struct, sys
def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n]); h.pop("__metadata__")
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items()}
sys.exit(0 if load(sys.argv[1]) == load(sys.argv[2]) else 1)' "$1" "$2"; }
