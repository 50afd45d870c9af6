#!/usr/bin/env bash
# tests/quantize.sh TOLK CASE: `tolk quantize` as a user runs it (tests/quantize.cmake registers one ctest
# per CASE). folder: marian-tiny's folder quantized into a new one, the graphs valid, and a model folder made
# of them translates exactly as the one with ONNX Runtime's quantized graphs (same options as
# tools/export.py); the failures: each exits 2 with its message and leaves no file in the output folder.
set -u
tolk=$1 case=$2
src=$(cd "$(dirname "$0")/.." && pwd)
tiny=$src/tests/fixtures/marian-tiny
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# Runs tolk quantize expecting exit 2, a stderr line matching $1, and an empty $tmp/out.
expect_refusal() {
  local re=$1; shift
  mkdir -p "$tmp/out"
  "$tolk" quantize "$@" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$?
  [ $rc -eq 2 ] || fail "exit status $rc, wanted 2: $(cat "$tmp/stderr")"
  grep -Eq -- "$re" "$tmp/stderr" || fail "stderr does not match /$re/: $(cat "$tmp/stderr")"
  [ -z "$(ls -A "$tmp/out")" ] || fail "files left behind: $(ls -A "$tmp/out")"
}

case $case in
folder)
  "$tolk" quantize --per-channel --reduce-range "$tiny" "$tmp/q" >"$tmp/log" || fail "exit $?: $(cat "$tmp/log")"
  n=$(ls "$tmp/q" | grep -c '_quantized\.onnx$')
  [ "$n" -eq 4 ] || fail "$n quantized graphs, wanted 4: $(ls "$tmp/q")"
  grep -q "^  42 quantized, 18 skipped; " "$tmp/log" || fail "no summary for the merged decoder: $(cat "$tmp/log")"
  grep -q "^  skipped MatMul '.*': B is not an initializer$" "$tmp/log" || fail "skips are not explained"
  "$tolk" check -q "$tmp"/q/*.onnx || fail "a quantized graph does not pass tolk check"
  # Two int8-only model folders: ours and ORT's (the fixture's).
  mkdir "$tmp/ours" "$tmp/ort"
  for f in "$tiny"/*.json "$tiny"/*.spm; do cp "$f" "$tmp/ours/"; cp "$f" "$tmp/ort/"; done
  rm "$tmp/ours/tolk-manifest.json" "$tmp/ort/tolk-manifest.json"
  cp "$tmp"/q/*_quantized.onnx "$tmp/ours/"
  cp "$tiny"/*_quantized.onnx "$tmp/ort/"
  text="The file cannot be opened because the directory does not exist."
  a=$("$tolk" translate -m "$tmp/ours" --beam 1 --json "$text") || fail "ours does not translate"
  b=$("$tolk" translate -m "$tmp/ort" --beam 1 --json "$text") || fail "ORT's does not translate"
  strip() { sed -E 's/,"timings_ms":\{[^}]*\}//'; }
  [ "$(strip <<<"$a")" = "$(strip <<<"$b")" ] || fail "translations differ: $a vs $b" ;;
not-onnx)
  expect_refusal "^tolk quantize: .*config.json" "$tiny/config.json" "$tmp/out/x.onnx" ;;
nothing)
  expect_refusal "^tolk quantize: not found: .*model.onnx: nothing to quantize" \
    "$src/tests/fixtures/simple-cnn/model.onnx" "$tmp/out/x.onnx" ;;
unwritable)
  expect_refusal "^tolk quantize: i/o error: $tmp/out/missing/x.onnx: cannot create a file beside it" \
    "$tiny/encoder_model.onnx" "$tmp/out/missing/x.onnx" ;;
excluded)
  # Every MatMul but one excluded, Gather and Transpose left out: one node quantized.
  names=$("$tolk" quantize --op-types MatMul "$tiny/encoder_model.onnx" "$tmp/all.onnx" |
          sed -n "s/^  quantized MatMul '\(.*\)' (B .*/\1/p")
  args=()
  for n in $(tail -n +2 <<<"$names"); do args+=(--exclude "$n"); done
  "$tolk" quantize --op-types MatMul "${args[@]}" "$tiny/encoder_model.onnx" "$tmp/one.onnx" >"$tmp/log" ||
    fail "exit $?"
  grep -q "^  1 quantized, 15 skipped; " "$tmp/log" || fail "$(cat "$tmp/log")"
  grep -q "^  skipped MatMul '.*': excluded (--exclude)$" "$tmp/log" || fail "exclusions are not explained" ;;
*)
  fail "unknown case $case" ;;
esac
echo "ok: quantize $case"
