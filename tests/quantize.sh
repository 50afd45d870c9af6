#!/usr/bin/env bash
# tests/quantize.sh TOLK CASE: `tolk quantize` as a user runs it (tests/quantize.cmake registers one ctest
# per CASE). folder: marian-tiny's folder quantized into a new one, the graphs valid, and a model folder made
# of them translates exactly as the one with ONNX Runtime's quantized graphs (same options as
# tools/export.py); static-folder: the same folder calibrated (--calibrate) checks and translates;
# text-merged: calibrated by sentences, the static merged decoder translates exactly as the two static
# decoders it merges; text-merged-only: a folder of the encoder and the merged decoder alone, calibrated by
# sentences, writes the same graphs as the full folder; the
# failures (static-* included: calibration data that does not match, is empty or looks random): each exits 2
# with its message and leaves no file in the output folder.
set -u
tolk=$1 case=$2
src=$(cd "$(dirname "$0")/.." && pwd)
tiny=$src/tests/fixtures/marian-tiny
verb=quantize
. "$src/tests/refusal.sh"

# A model folder DIR of marian-tiny's tokenizer and config files and the given graphs (int8 only: tolk
# translate runs the *_quantized graphs of such a folder).
model_folder() {
  local dir=$1; shift
  mkdir -p "$dir"
  cp "$tiny"/*.json "$tiny"/*.spm "$dir/"
  rm "$dir/tolk-manifest.json"
  cp "$@" "$dir/"
}
# A greedy translation by the folder $1 of the text $2, as JSON without the timings.
translate_json() {
  "$tolk" translate -m "$1" --beam 1 --json "$2" | sed -E 's/,"timings_ms":\{[^}]*\}//'
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
  model_folder "$tmp/ours" "$tmp"/q/*_quantized.onnx
  model_folder "$tmp/ort" "$tiny"/*_quantized.onnx
  text="The file cannot be opened because the directory does not exist."
  a=$(translate_json "$tmp/ours" "$text") || fail "ours does not translate"
  b=$(translate_json "$tmp/ort" "$text") || fail "ORT's does not translate"
  [ "$a" = "$b" ] || fail "translations differ: $a vs $b" ;;
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
static-folder)
  # Calibrated on the golden input sets (the ONNX test-data layout), one folder per graph; the merged
  # decoder has none and is skipped. The static graphs pass the checker and translate.
  mkdir "$tmp/data"
  for g in encoder_model decoder_model decoder_with_past_model; do
    ln -s "$src/tests/fixtures/golden/marian-tiny/$g" "$tmp/data/$g"
  done
  "$tolk" quantize --calibrate "$tmp/data" "$tiny" "$tmp/q" >"$tmp/log" || fail "exit $?: $(cat "$tmp/log")"
  grep -q "decoder_model_merged.onnx: skipped, no calibration data in $tmp/data/decoder_model_merged$" "$tmp/log" ||
    fail "the graph without data is not reported: $(cat "$tmp/log")"
  grep -q "^  calibrated on 2 samples of $tmp/data/encoder_model$" "$tmp/log" || fail "$(cat "$tmp/log")"
  grep -q "^  16 quantized, 0 skipped; " "$tmp/log" || fail "no summary for the encoder: $(cat "$tmp/log")"
  [ "$(ls "$tmp/q" | grep -c '_quantized\.onnx$')" -eq 3 ] || fail "wanted 3 graphs: $(ls "$tmp/q")"
  "$tolk" check -q "$tmp"/q/*.onnx || fail "a static graph does not pass tolk check"
  model_folder "$tmp/ours" "$tmp"/q/*_quantized.onnx
  out=$("$tolk" translate -m "$tmp/ours" --beam 1 "The file cannot be opened.") || fail "the static folder does not translate"
  [ -n "$out" ] || fail "empty translation"
  # The QOperator form of the same: QLinearMatMul in place of each MatMul.
  "$tolk" quantize -q --format qoperator --calibrate "$tmp/data" "$tiny" "$tmp/qop" >"$tmp/log" || fail "exit $?: $(cat "$tmp/log")"
  "$tolk" inspect "$tmp/qop/encoder_model_quantized.onnx" | grep -q "QLinearMatMul" || fail "no QLinearMatMul in the encoder"
  cp "$tmp"/qop/*_quantized.onnx "$tmp/ours/"
  out=$("$tolk" translate -m "$tmp/ours" --beam 1 "The file cannot be opened.") || fail "the QOperator folder does not translate"
  [ -n "$out" ] || fail "empty translation" ;;
lm-head)
  # --lm-head no leaves the decoder's output projection float, dynamic and static, and nothing else.
  for fmt in "" "--calibrate $src/tests/fixtures/golden/marian-tiny/decoder_model"; do
    # shellcheck disable=SC2086
    "$tolk" quantize --lm-head no $fmt "$tiny/decoder_model.onnx" "$tmp/d.onnx" >"$tmp/log" || fail "exit $?"
    [ "$(grep -c "the output projection" "$tmp/log")" -eq 1 ] || fail "$(cat "$tmp/log")"
    grep -q "^  skipped MatMul '/lm_head/MatMul': the output projection (--lm-head no)$" "$tmp/log" || fail "$(cat "$tmp/log")"
  done
  "$tolk" quantize --lm-head yes --calibrate "$src/tests/fixtures/golden/marian-tiny/decoder_model" \
    "$tiny/decoder_model.onnx" "$tmp/d.onnx" | grep -q "^  quantized MatMul '/lm_head/MatMul'" || fail "--lm-head yes" ;;
text-folder)
  # Sentences run through the folder as translation runs them: the four graphs calibrated — the merged decoder
  # on as many runs as the other two decoders together, every MatMul of both its branches quantized — and
  # the folder of static graphs translates.
  printf '%s\n' "The file cannot be opened." "Press any key to continue." "" "Disk quota exceeded" \
    "The connection was reset by the server." "Do you want to save the changes you made?" >"$tmp/s.txt"
  "$tolk" quantize --calibrate "$tmp/s.txt" "$tiny" "$tmp/q" >"$tmp/log" || fail "exit $?: $(cat "$tmp/log")"
  grep -q "^calibrated on 5 sentences of $tmp/s.txt (.* tokens, 0 unknown)$" "$tmp/log" || fail "$(cat "$tmp/log")"
  [ "$(grep -c "^  calibrated on [0-9]* runs of the sentences$" "$tmp/log")" -eq 4 ] || fail "$(cat "$tmp/log")"
  grep -q "^  calibrated on 5 runs of the sentences$" "$tmp/log" || fail "the encoder did not run once a sentence"
  runs() { grep -A1 "/$2.onnx ->" "$1" | sed -n 's/^  calibrated on \([0-9]*\) runs.*/\1/p'; }
  [ "$(runs "$tmp/log" decoder_model_merged)" -eq $(($(runs "$tmp/log" decoder_model) + \
    $(runs "$tmp/log" decoder_with_past_model))) ] || fail "merged decoder runs: $(cat "$tmp/log")"
  sed -n "/decoder_model_merged.onnx ->/,/ skipped; /p" "$tmp/log" | grep -q "^  54 quantized, 0 skipped; " ||
    fail "the merged decoder's branches: $(cat "$tmp/log")"
  model_folder "$tmp/ours" "$tmp"/q/*_quantized.onnx
  out=$("$tolk" translate -m "$tmp/ours" --beam 1 "Press any key.") || fail "the calibrated folder does not translate"
  [ -n "$out" ] || fail "empty translation"
  # Without decoder_with_past_model.onnx, decoder_model decodes the whole prefix each step: the same greedy
  # tokens, so its runs are the first steps plus every later one of the folder with the past graph.
  mkdir "$tmp/nopast"
  cp "$tiny"/encoder_model.onnx "$tiny"/decoder_model.onnx "$tiny"/*.json "$tiny"/*.spm "$tmp/nopast/"
  "$tolk" quantize -q --calibrate "$tmp/s.txt" "$tmp/nopast" "$tmp/q2" >"$tmp/log2" || fail "exit $?: $(cat "$tmp/log2")"
  first=$(runs "$tmp/log" decoder_model) later=$(runs "$tmp/log" decoder_with_past_model)
  all=$(runs "$tmp/log2" decoder_model)
  [ -n "$all" ] && [ "$all" -eq $((first + later)) ] || fail "decoder runs without the past graph: $all, wanted $first + $later" ;;
text-merged)
  # The merged decoder calibrated by sentences: each branch gets the ranges of the graph it stands for, so
  # a folder of the encoder and the static merged decoder translates token for token, score for score, as
  # the folder of the encoder and the two static decoders does.
  printf '%s\n' "The file cannot be opened." "Press any key to continue." "Disk quota exceeded" >"$tmp/s.txt"
  "$tolk" quantize -q --calibrate "$tmp/s.txt" "$tiny" "$tmp/q" >"$tmp/log" || fail "exit $?: $(cat "$tmp/log")"
  model_folder "$tmp/two" "$tmp"/q/encoder_model_quantized.onnx "$tmp"/q/decoder_model_quantized.onnx \
    "$tmp"/q/decoder_with_past_model_quantized.onnx
  model_folder "$tmp/merged" "$tmp"/q/encoder_model_quantized.onnx "$tmp"/q/decoder_model_merged_quantized.onnx
  "$tolk" info -m "$tmp/merged" | grep -q "decoder_merged .*decoder_model_merged_quantized.onnx" ||
    fail "the folder does not use the merged decoder: $("$tolk" info -m "$tmp/merged")"
  for text in "The file cannot be opened because the directory does not exist." "Press any key." \
              "Do you want to save the changes you made?"; do
    a=$(translate_json "$tmp/two" "$text") || fail "the two decoders do not translate"
    b=$(translate_json "$tmp/merged" "$text") || fail "the merged decoder does not translate"
    [ "$a" = "$b" ] || fail "translations differ: $a vs $b"
  done ;;
text-merged-only)
  # A folder of the encoder and the merged decoder alone (what users keep of an Optimum export): the merged
  # decoder decodes the sentences itself, its first step through the else branch with empty past inputs,
  # the next ones through the cache branch fed its own presents, the tokens from its own logits. Those are
  # the computations the full folder's decoders make, so its ranges are theirs: the graph written is the
  # full folder's byte for byte (so are the scales and zero points). Both branches are calibrated (all 54
  # MatMuls quantized; a branch no run took would leave its 25 float), the graph passes tolk check and the
  # folder translates. With decoder_with_past_model.onnx beside them, that graph takes the later steps from
  # the merged decoder's first: again both graphs as the full folder's.
  printf '%s\n' "The file cannot be opened." "Press any key to continue." "Disk quota exceeded" >"$tmp/s.txt"
  model_folder "$tmp/merged" "$tiny/encoder_model.onnx" "$tiny/decoder_model_merged.onnx"
  "$tolk" quantize --calibrate "$tmp/s.txt" "$tmp/merged" "$tmp/q" >"$tmp/log" || fail "exit $?: $(cat "$tmp/log")"
  [ "$(ls "$tmp/q" | grep -c '_quantized\.onnx$')" -eq 2 ] || fail "wanted 2 graphs: $(ls "$tmp/q")"
  sed -n "/decoder_model_merged.onnx ->/,/ skipped; /p" "$tmp/log" | grep -q "^  54 quantized, 0 skipped; " ||
    fail "the merged decoder's branches: $(cat "$tmp/log")"
  "$tolk" quantize -q --calibrate "$tmp/s.txt" "$tiny" "$tmp/full" >"$tmp/log2" || fail "exit $?: $(cat "$tmp/log2")"
  runs() { grep -A1 "/$2.onnx ->" "$1" | sed -n 's/^  calibrated on \([0-9]*\) runs.*/\1/p'; }
  [ "$(runs "$tmp/log" decoder_model_merged)" = "$(runs "$tmp/log2" decoder_model_merged)" ] ||
    fail "merged decoder runs: $(cat "$tmp/log") against $(cat "$tmp/log2")"
  for g in encoder_model decoder_model_merged; do
    cmp -s "$tmp/q/${g}_quantized.onnx" "$tmp/full/${g}_quantized.onnx" ||
      fail "$g: other ranges than the full folder's calibration gives"
  done
  "$tolk" check -q "$tmp"/q/*.onnx || fail "a static graph does not pass tolk check"
  model_folder "$tmp/int8" "$tmp"/q/*_quantized.onnx
  "$tolk" info -m "$tmp/int8" | grep -q "decoder_merged .*decoder_model_merged_quantized.onnx" ||
    fail "the folder does not use the merged decoder: $("$tolk" info -m "$tmp/int8")"
  out=$(translate_json "$tmp/int8" "Press any key.") || fail "the static merged decoder does not translate"
  grep -q '"translation":"[^"]' <<<"$out" || fail "empty translation: $out"
  model_folder "$tmp/past" "$tiny/encoder_model.onnx" "$tiny/decoder_model_merged.onnx" \
    "$tiny/decoder_with_past_model.onnx"
  "$tolk" quantize -q --calibrate "$tmp/s.txt" "$tmp/past" "$tmp/qp" >"$tmp/log3" || fail "exit $?: $(cat "$tmp/log3")"
  for g in decoder_model_merged decoder_with_past_model; do
    cmp -s "$tmp/qp/${g}_quantized.onnx" "$tmp/full/${g}_quantized.onnx" || fail "$g with the past graph: other ranges"
  done ;;
text-no-decoder)
  # Neither decoder_model.onnx nor the merged decoder: nothing takes the first step.
  model_folder "$tmp/enc" "$tiny/encoder_model.onnx" "$tiny/decoder_with_past_model.onnx"
  printf 'The file cannot be opened.\n' >"$tmp/s.txt"
  expect_refusal "^tolk quantize: not found: $tmp/enc: no decoder_model.onnx or decoder_model_merged.onnx to decode the sentences$" \
    --calibrate "$tmp/s.txt" "$tmp/enc" "$tmp/out" ;;
static-merged-mismatch)
  # decoder_model's samples given to the merged decoder: its past inputs and use_cache_branch are missing.
  expect_refusal "^tolk quantize: invalid argument: calibration sample .*/test_data_set_0: input 'past_key_values.0.decoder.key' is missing$" \
    --calibrate "$src/tests/fixtures/golden/marian-tiny/decoder_model" "$tiny/decoder_model_merged.onnx" "$tmp/out/x.onnx" ;;
eval)
  # --eval translates with fp32 and int8 and reports chrF: a line against fp32, one against the references.
  printf 'The file cannot be opened.\t无法打开文件。\nPress any key to continue.\t按任意键继续。\nDisk quota exceeded\n' \
    >"$tmp/e.tsv"
  "$tolk" quantize -q --eval "$tmp/e.tsv" "$tiny" "$tmp/q" >"$tmp/log" || fail "exit $?: $(cat "$tmp/log")"
  grep -Eq "^eval on 3 sentences of $tmp/e.tsv \(greedy\): int8 against fp32 chrF [0-9]+\.[0-9]{2}, [0-9.]+ % of lines identical$" \
    "$tmp/log" || fail "no eval line: $(cat "$tmp/log")"
  grep -Eq "^  against the references \(2\): chrF fp32 [0-9.]+, int8 [0-9.]+ \([-+][0-9.]+\)$" "$tmp/log" ||
    fail "no reference line: $(cat "$tmp/log")"
  ;;
text-blank)
  printf '\n   \n\n' >"$tmp/s.txt"
  expect_refusal "^tolk quantize: invalid argument: $tmp/s.txt: no sentences \(empty or blank\): nothing to calibrate on$" \
    --calibrate "$tmp/s.txt" "$tiny" "$tmp/out" ;;
text-unknown)
  # Symbols the tokenizer has no pieces for: every text token is <unk>.
  printf '\342\230\203\342\230\204 \342\234\210\n\342\234\210\342\234\210 \342\230\203\n' >"$tmp/s.txt"
  expect_refusal "^tolk quantize: invalid argument: $tmp/s.txt: most tokens are unknown to the tokenizer" \
    --calibrate "$tmp/s.txt" "$tiny" "$tmp/out" ;;
static-methods)
  # Entropy and Percentile on samples of different lengths (ORT's collector cannot stack those): both run,
  # and Percentile's ranges, clipped at 99.9 %, make other scales than MinMax's.
  enc=$src/tests/fixtures/golden/marian-tiny/encoder_model
  for m in minmax entropy percentile; do
    "$tolk" quantize -q --method $m --percentile 99.9 --calibrate "$enc" "$tiny/encoder_model.onnx" "$tmp/$m.onnx" \
      >"$tmp/log" 2>&1 || fail "--method $m: $(cat "$tmp/log")"
    grep -q "^  16 quantized, 0 skipped; " "$tmp/log" || fail "--method $m: $(cat "$tmp/log")"
  done
  cmp -s "$tmp/minmax.onnx" "$tmp/percentile.onnx" && fail "percentile and minmax wrote the same graph"
  "$tolk" check -q "$tmp/percentile.onnx" "$tmp/entropy.onnx" || fail "not valid" ;;
static-mismatch)
  # A file naming no input: the error names the file, the graph's inputs and the sample; nothing written.
  mkdir -p "$tmp/data/s0"
  cp "$src/tests/fixtures/golden/marian-tiny/encoder_model/test_data_set_0/input_0.pb" "$tmp/data/s0/input_ids.pb"
  cp "$src/tests/fixtures/golden/marian-tiny/encoder_model/test_data_set_0/input_1.pb" "$tmp/data/s0/mask.pb"
  expect_refusal "^tolk quantize: invalid argument: calibration sample $tmp/data/s0: mask.pb names no input of the graph \(its inputs: input_ids, attention_mask\)$" \
    --calibrate "$tmp/data" "$tiny/encoder_model.onnx" "$tmp/out/x.onnx" ;;
static-shape)
  # The decoder's input 0 given to the encoder as its input_ids: another shape, named with the declared one.
  mkdir -p "$tmp/data/s0"
  cp "$src/tests/fixtures/golden/marian-tiny/encoder_model/test_data_set_0/input_1.pb" "$tmp/data/s0/input_1.pb"
  cp "$src/tests/fixtures/golden/marian-tiny/decoder_model/test_data_set_1/input_2.pb" "$tmp/data/s0/input_0.pb"
  expect_refusal "^tolk quantize: .*calibration sample $tmp/data/s0: input 'input_ids' (is|has shape) " \
    --calibrate "$tmp/data" "$tiny/encoder_model.onnx" "$tmp/out/x.onnx" ;;
static-empty)
  mkdir -p "$tmp/data"
  expect_refusal "^tolk quantize: invalid argument: calibration sample $tmp/data: no input files " \
    --calibrate "$tmp/data" "$tiny/encoder_model.onnx" "$tmp/out/x.onnx" ;;
static-random)
  # Token ids drawn uniformly from the vocabulary (4 samples of 32), as .npy: refused as random.
  for s in 0 1 2 3; do
    mkdir -p "$tmp/data/$s"
    perl -e 'srand(7 + $ARGV[0]); my $h = "{'"'"'descr'"'"': '"'"'<i8'"'"', '"'"'fortran_order'"'"': False, '"'"'shape'"'"': (1, 32), }";
             $h .= " " x (63 - (10 + length($h)) % 64) . "\n";
             for my $f ("ids", "mask") { open(my $o, ">", "$ARGV[1]/$f.npy") or die; binmode $o;
               print $o "\x93NUMPY\x01\x00", pack("v", length($h)), $h;
               print $o pack("q<", $f eq "ids" ? int(rand(4269)) : 1) for 1..32; close $o }' "$s" "$tmp/data/$s"
    mv "$tmp/data/$s/ids.npy" "$tmp/data/$s/input_ids.npy"
    mv "$tmp/data/$s/mask.npy" "$tmp/data/$s/attention_mask.npy"
  done
  expect_refusal "^tolk quantize: invalid argument: $tmp/data: the calibration data looks random: input 'input_ids' took 128 values, 1[0-9][0-9] of them distinct" \
    --calibrate "$tmp/data" "$tiny/encoder_model.onnx" "$tmp/out/x.onnx" ;;
*)
  fail "unknown case $case" ;;
esac
echo "ok: quantize $case"
