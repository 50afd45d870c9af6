#!/usr/bin/env bash
# tests/ort_python.sh ROOT SCRIPT TOLK CASE [ARG...]: runs tests/SCRIPT TOLK FIXTURES CASE [ARG...]
# (tests/optimize.py, which takes the conformance binary; tests/quantize_ort.py) with build-pyvenv's Python (onnx, onnxruntime: python/requirements-test.txt,
# installed by scripts/testenv.sh). Without it the test is skipped (exit 77), unless CI is set.
root=$1 script=$2 tolk=$3 case=$4
py=$root/build-pyvenv/bin/python
if ! "$py" -c "import onnx, onnxruntime" 2>/dev/null; then
  echo "skipped: no onnx and onnxruntime in $root/build-pyvenv (scripts/testenv.sh makes it)"
  [ -n "${CI:-}" ] && exit 1
  exit 77
fi
exec "$py" "$root/tests/$script" "$tolk" "$root/tests/fixtures" "$case" "${@:5}"
