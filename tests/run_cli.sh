#!/bin/sh
# tests/run_cli.sh TOLK FIXTURES — checks `tolk run` end to end: reading .pb
# and .npy inputs, --expect PASS/FAIL and exit codes, --output-dir round
# trips, --repeat and --stats output, and clear errors for malformed .npy
# files and inputs of the wrong shape or dtype.
set -u
TOLK=$1
FIX=$2
CNN=$FIX/simple-cnn
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0

# mknpy DESCR SHAPE NBYTES FILE: a .npy file with NBYTES zero data bytes.
mknpy() {
  h="{'descr': '$1', 'fortran_order': False, 'shape': $2, }"
  len=$(( ${#h} + 1 ))
  pad=$(( (64 - (10 + len) % 64) % 64 ))
  len=$(( len + pad ))
  {
    printf '\223NUMPY\001\000'
    printf "$(printf '\\%03o\\%03o' $((len % 256)) $((len / 256)))"
    printf '%s' "$h"
    printf "%${pad}s" ''
    printf '\n'
    head -c "$3" /dev/zero
  } > "$4"
}

# expect CODE REGEX -- COMMAND...: runs COMMAND, checks exit code and output.
expect() {
  code=$1; re=$2; shift 3
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -ne "$code" ] || ! printf '%s\n' "$out" | grep -Eq -- "$re"; then
    echo "FAILED: $* (exit $rc, wanted $code and /$re/)"; printf '%s\n' "$out" | sed 's/^/  | /'
    fails=$((fails + 1))
  else
    echo "ok: $re"
  fi
}

IN=$CNN/test_data_set_0/input_0.pb
OUT=$CNN/test_data_set_0/output_0.pb
expect 0 '^output	float	\[1, 10\]' -- "$TOLK" run "$CNN/model.onnx" --input "input=$IN"
expect 0 'expect output: PASS: max abs error' -- "$TOLK" run "$CNN/model.onnx" --input "$IN" --expect "output=$OUT"
expect 1 'expect output: FAIL: got float \[1, 10\], expected float \[7, 10\]' -- \
  "$TOLK" run "$CNN/model.onnx" --input "$IN" --expect "output=$CNN/test_data_set_1/output_0.pb"
expect 0 'expect output: PASS' -- "$TOLK" run "$CNN/model.onnx" --input "$CNN/test_data_set_1/input_0.pb" \
  --expect "output=$CNN/test_data_set_1/output_0.pb" --output-dir "$TMP/out"
expect 0 'expect output: PASS: max abs error 0,' -- "$TOLK" run "$CNN/model.onnx" --input "$CNN/test_data_set_1/input_0.pb" \
  --expect "output=$TMP/out/output.npy"
expect 0 'time: median [0-9.]+ ms per run over 3 runs' -- "$TOLK" run "$CNN/model.onnx" --input "$IN" --repeat 3 --threads 1
expect 0 'stats: peak intermediate memory [0-9.]+ MB' -- "$TOLK" run "$CNN/model.onnx" --input "$IN" --stats
expect 2 "no output named 'logits'" -- "$TOLK" run "$CNN/model.onnx" --input "$IN" --expect "logits=$OUT"
expect 2 "no input named 'pixels'" -- "$TOLK" run "$CNN/model.onnx" --input "pixels=$IN"
expect 2 "input 'input' is missing" -- "$TOLK" run "$CNN/model.onnx"

# Malformed and mismatched .npy inputs.
printf 'hello, not numpy' > "$TMP/text.npy"
expect 2 'not a .npy file' -- "$TOLK" run "$CNN/model.onnx" --input "input=$TMP/text.npy"
printf '\223NUMPY\001\000\377\000{"descr"' > "$TMP/trunc.npy"
expect 2 'header of 255 bytes runs past the end' -- "$TOLK" run "$CNN/model.onnx" --input "input=$TMP/trunc.npy"
mknpy '<f4' '(2, 3)' 4 "$TMP/short.npy"
expect 2 'declares 6 elements of float \(24 bytes\) but 4 data bytes follow' -- \
  "$TOLK" run "$CNN/model.onnx" --input "input=$TMP/short.npy"
mknpy '>f4' '(2,)' 8 "$TMP/big.npy"
expect 2 'big-endian' -- "$TOLK" run "$CNN/model.onnx" --input "input=$TMP/big.npy"
mknpy '<c8' '(2,)' 16 "$TMP/complex.npy"
expect 2 "element type '<c8' is not supported" -- "$TOLK" run "$CNN/model.onnx" --input "input=$TMP/complex.npy"
mknpy '<f4' '(1, 3, 16, 16)' 3072 "$TMP/small.npy"
expect 2 "input 'input': expected \[batch_size, 3, 32, 32\], given \[1, 3, 16, 16\]" -- \
  "$TOLK" run "$CNN/model.onnx" --input "input=$TMP/small.npy"
mknpy '<f8' '(1, 3, 32, 32)' 24576 "$TMP/double.npy"
expect 2 "input 'input': expected float .*given double" -- "$TOLK" run "$CNN/model.onnx" --input "input=$TMP/double.npy"
mknpy '<f4' '(1, 3, 32, 32)' 12288 "$TMP/zeros.npy"
expect 0 '^output	float	\[1, 10\]' -- "$TOLK" run "$CNN/model.onnx" --input "input=$TMP/zeros.npy"

echo "run_cli: $fails failed"
[ "$fails" -eq 0 ]
