#!/usr/bin/env bash
# scripts/ray_test.sh [BUILD_DIR] — examples/ray_translate.py's test (examples/test_ray_translate.py,
# pytest) on a local Ray cluster of 2 CPUs, compared with BUILD_DIR/tolk (default build/).
# Sets up build-ray/, a venv of its own: the pinned examples/requirements-ray.txt (Ray Data and
# what it pulls in: about 600 MB, 35 s here; redone only when the pins change), then the tolk
# package built from python/ (pip reuses python/build/, so after python/test.sh only the wheel
# is packed again). Run by .ci/run after python/test.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
venv=$root/build-ray
req=$root/examples/requirements-ray.txt

if ! cmp -s "$req" "$venv/requirements.txt" 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  if ! "$venv/bin/pip" install -q --disable-pip-version-check -r "$req" >"$venv/pip.log" 2>&1; then
    cat "$venv/pip.log" >&2
    rm -rf "$venv"
    echo "ray_test: could not install examples/requirements-ray.txt from PyPI" >&2
    exit 1
  fi
  cp "$req" "$venv/requirements.txt"
fi
"$venv/bin/pip" install -q --disable-pip-version-check --no-build-isolation --no-deps --force-reinstall "$root/python"

# Ray asks nothing of the network when usage stats are off.
export RAY_USAGE_STATS_ENABLED=0
cd "$root"
TOLK_CLI=$build/tolk TOLK_ROOT=$root "$venv/bin/python" -m pytest -q -p no:cacheprovider --timeout 600 \
  examples/test_ray_translate.py
