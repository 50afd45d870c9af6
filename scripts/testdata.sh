#!/usr/bin/env bash
# Fetches the ONNX backend test data that Debian's libonnx-testdata (onnx 1.12)
# lacks: the newer node tests shipped inside the onnx wheel from PyPI. Only the
# data folder is kept (build-data/onnx-$VER/{node,…}); no Python is installed.
set -euo pipefail
VER=1.17.0
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/build-data/onnx-$VER"
[ -d "$dest/node" ] && exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "onnx==$VER" >"$tmp/log" 2>&1; then
  echo "testdata: could not download onnx==$VER from PyPI; the newer ONNX tests will be skipped" >&2
  cat "$tmp/log" >&2
  exit 0
fi
mkdir -p "$tmp/x"
python3 - "$tmp" <<'PY'
import sys, zipfile, glob
tmp = sys.argv[1]
whl = glob.glob(tmp + "/onnx-*.whl")[0]
with zipfile.ZipFile(whl) as z:
    for n in z.namelist():
        if n.startswith("onnx/backend/test/data/"):
            z.extract(n, tmp + "/x")
PY
mkdir -p "$root/build-data"
mv "$tmp/x/onnx/backend/test/data" "$dest"
echo "testdata: onnx $VER backend test data in $dest"
