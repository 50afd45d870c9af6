#!/usr/bin/env bash
# tests/optimize_ort.sh ROOT TOLK CASE CONFORMANCE: runs tests/optimize.py CASE with build-pyvenv's Python
# (onnx, onnxruntime: python/requirements-test.txt, installed by scripts/testenv.sh). Without it
# the test is skipped (exit 77), unless CI is set.
root=$1 tolk=$2 case=$3 conformance=$4
py=$root/build-pyvenv/bin/python
if ! "$py" -c "import onnx, onnxruntime" 2>/dev/null; then
  echo "skipped: no onnx and onnxruntime in $root/build-pyvenv (scripts/testenv.sh makes it)"
  [ -n "${CI:-}" ] && exit 1
  exit 77
fi
exec "$py" "$root/tests/optimize.py" "$tolk" "$root/tests/fixtures" "$case" "$conformance"
