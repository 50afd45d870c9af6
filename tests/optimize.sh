#!/usr/bin/env bash
# tests/optimize.sh TOLK CONFORMANCE CASE: `tolk optimize` as a user runs it (tests/optimize.cmake
# registers one ctest per CASE).
#   golden-GRAPH: marian-tiny's GRAPH optimized at every level: `tolk check` passes, the node count
#     drops (the merged decoder's in its If branches), optimizing it again changes nothing, tolk runs the result against the fixture's
#     ONNX Runtime outputs (tests/fixtures/golden) within 1e-5, and --report prints each pass.
#   not-onnx, unwritable, same-file, missing: each exits 2 with its message and leaves no file.
set -u
tolk=$1 conformance=$2 case=$3
src=$(cd "$(dirname "$0")/.." && pwd)
tiny=$src/tests/fixtures/marian-tiny
golden=$src/tests/fixtures/golden/marian-tiny
verb=optimize
. "$src/tests/refusal.sh"

case $case in
golden-*)
  g=${case#golden-}
  for level in basic extended all; do
    out=$tmp/$g.$level.onnx
    "$tolk" optimize --level $level --report --runs 3 --inputs "$golden/$g/test_data_set_0" \
      "$tiny/$g.onnx" "$out" >"$tmp/log" || fail "$level: exit $?: $(cat "$tmp/log")"
    grep -Eq "^  constant folding: [0-9]+ -> [0-9]+ nodes \([0-9]+ rewrites?\)$" "$tmp/log" ||
      fail "$level: no line for constant folding: $(cat "$tmp/log")"
    grep -Eq "^  run time in tolk \(median of 3 runs\): original [0-9.]+ ms, optimized [0-9.]+ ms" "$tmp/log" ||
      fail "$level: no timing: $(cat "$tmp/log")"
    # A pass that rewrote something is timed on the graph it left, and only such a pass.
    awk '/^  [^ ].* nodes \([1-9][0-9]* rewrites?\)$/ { bad += want; want = 1; timed++; next }
         /^    run time after it: [0-9.]+ -> [0-9.]+ ms \([-+][0-9.]+ %\)$/ { bad += !want; want = 0; next }
         { bad += want; want = 0 }
         END { exit bad || !timed }' "$tmp/log" || fail "$level: passes not timed one by one: $(cat "$tmp/log")"
    read -r before after < <(sed -nE 's/^  ([0-9]+) -> ([0-9]+) nodes, .*/\1 \2/p' "$tmp/log")
    [ "$after" -lt "$before" ] || fail "$level: $before -> $after nodes"
    "$tolk" check -q "$out" || fail "$level: the optimized graph does not pass tolk check"
    # Optimizing the result again finds nothing left to do.
    "$tolk" optimize --level $level "$out" "$tmp/again.onnx" >"$tmp/again" || fail "$level: again: exit $?"
    grep -Eq "^  ([0-9]+) -> \1 nodes, 0 rewrites;" "$tmp/again" || fail "$level: not idempotent: $(cat "$tmp/again")"
    "$conformance" --atol 1e-5 --rtol 0 --model "$out" "$golden/$g" >"$tmp/conf" 2>&1 ||
      fail "$level: tolk's outputs of the optimized graph differ from ORT's: $(tail -5 "$tmp/conf")"
    silu=2
    [ "$g" = decoder_model_merged ] && silu=4 # two in each branch
    [ "$level" = basic ] || grep -q "QuickGelu fusion: .* ($silu rewrites)" "$tmp/log" ||
      fail "$level: the $silu SiLU activations were not fused: $(cat "$tmp/log")"
  done ;;
not-onnx)
  expect_refusal "^tolk optimize: malformed input: not an ONNX model: .*/config.json: " "$tiny/config.json" \
    "$tmp/out/x.onnx" ;;
missing)
  expect_refusal "^tolk optimize: not found: $tmp/no-such.onnx: No such file or directory$" "$tmp/no-such.onnx" \
    "$tmp/out/x.onnx" ;;
unwritable)
  expect_refusal "^tolk optimize: i/o error: $tmp/out/missing/x.onnx: cannot create a file beside it" \
    "$tiny/encoder_model.onnx" "$tmp/out/missing/x.onnx" ;;
same-file)
  mkdir -p "$tmp/out"
  cp "$tiny/encoder_model.onnx" "$tmp/in.onnx"
  sum=$(sha256sum <"$tmp/in.onnx")
  "$tolk" optimize "$tmp/in.onnx" "$tmp/in.onnx" 2>"$tmp/stderr" && fail "optimized a file onto itself"
  grep -q "^tolk optimize: .*in.onnx: the output may not overwrite the input$" "$tmp/stderr" ||
    fail "stderr: $(cat "$tmp/stderr")"
  [ "$(sha256sum <"$tmp/in.onnx")" = "$sum" ] || fail "the input changed" ;;
*)
  fail "unknown case $case" ;;
esac
echo "ok: optimize $case"
