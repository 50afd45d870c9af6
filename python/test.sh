#!/usr/bin/env bash
# python/test.sh: builds the tolk wheel (python -m build, scikit-build-core
# compiling libtolk into the extension), installs it into build-pyvenv/ (made by
# scripts/testenv.sh from python/requirements-test.txt) and runs python/tests
# with pytest. Needs the C build in build/ for the CLI parity tests
# (TOLK_CLI overrides). Offline: the venv holds every build and test tool.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=$root/build-pyvenv
if [ ! -x "$venv/bin/python" ]; then
  echo "python/test.sh: no $venv; run scripts/testenv.sh (make deps)" >&2
  exit 1
fi
dist=$(mktemp -d)
trap 'rm -rf "$dist"' EXIT
"$venv/bin/python" -m build --wheel --no-isolation --outdir "$dist" "$root/python" >"$dist/build.log" 2>&1 ||
  { cat "$dist/build.log"; exit 1; }
wheel=$(ls "$dist"/tolk-*.whl)
echo "python/test.sh: built $(basename "$wheel")"
"$venv/bin/pip" install -q --disable-pip-version-check --force-reinstall --no-deps "$wheel"
cd "$root"
TOLK_CLI=${TOLK_CLI:-$root/build/tolk} TOLK_WHEEL=$wheel "$venv/bin/python" -m pytest -q python/tests
