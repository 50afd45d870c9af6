#!/usr/bin/env bash
# The vocabulary shortlist (translate --vmap), measured both ways it matters:
#  speed   bench_translate on the full-size benchmark model (65,001-row LM head), the ids of
#          translate.sh's sentences, batches of 16, 32 forced new tokens, greedy and beam 4, fp32 and
#          int8 graphs with --int8-lm-head; each configuration with and without the shortlist back to
#          back, ROUNDS rounds; medians of sent/s and their ratio. The shortlist is built from the
#          bundled corpus's cmn_Hans pairs with the benchmark model's tokenizer (its weights are
#          random, so only the candidate count matters there).
#  quality the bundled demo model, beam 4, on 1,000 cmn_Hans pairs evenly spaced through
#          tests/fixtures/corpus/pairs.tsv.xz, with a shortlist built from the other pairs (the
#          evaluated English strings left out); chrF against the references (sacrebleu, from PYTHON).
#   bench/vmap.sh [BENCH_MODEL_DIR] [ROUNDS] [PYTHON]
# Environment: BUILD (default <repo>/build), WORK (default /tmp/tolk-bench-vmap), N (sentences for
# the speed runs, default 64), TOP_K (100), ALWAYS (1000), SKIP_SPEED=1, SKIP_QUALITY=1.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=${1:-/tmp/tolk-bench}
rounds=${2:-3}
py=${3:-/work/venv/bin/python}
build=${BUILD:-$root/build}
work=${WORK:-/tmp/tolk-bench-vmap}
mkdir -p "$work"
cmake --build "$build" --target tolk bench_translate -j2 >/dev/null
tolk=$build/tolk

xz -dc "$root/tests/fixtures/corpus/pairs.tsv.xz" | awk -F'\t' '$1 == "cmn_Hans"' > "$work/hans.tsv"
# 1,000 evaluation pairs evenly spaced; the shortlist learns from the others, minus any pair whose
# English is among the evaluated ones.
awk -F'\t' -v n="$(wc -l < "$work/hans.tsv")" -v out="$work" '
  BEGIN { for (i = 0; i < 1000; i++) pick[int(i * n / 1000) + 1] = 1 }
  NR == FNR { if (pick[FNR]) { ev[$2] = 1; print $2 > (out "/eval.en"); print $3 > (out "/eval.zh") } next }
  !($2 in ev) { print > (out "/train.tsv") }' "$work/hans.tsv" "$work/hans.tsv"
opts=(--top-k "${TOP_K:-100}" --always "${ALWAYS:-1000}")

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

if [[ -z ${SKIP_SPEED:-} ]]; then
  "$tolk" vmap build -m "$model/onnx" --pairs "$work/hans.tsv" -o "$work/bench.vmap" "${opts[@]}"
  ids=${IDS:-/tmp/tolk-bench-translate/ids.txt}
  [[ -f $ids ]] || "$py" "$root/bench/translate_peers.py" prepare --model "$model" --work "$(dirname "$ids")" --n 200
  head -"${N:-64}" "$ids" > "$work/ids.txt"
  : > "$work/speed.tsv"
  for r in $(seq "$rounds"); do
    for prec in fp32 int8; do
      flags=(); [[ $prec == int8 ]] && flags=(--int8 --int8-lm-head)
      for beam in 1 4; do
        for v in exact vmap; do
          extra=(); [[ $v == vmap ]] && extra=(--vmap "$work/bench.vmap")
          j=$("$build/bench/bench_translate" -m "$model/onnx" --ids "$work/ids.txt" --skip-latency --batch 16 \
              --beam "$beam" --new-tokens 32 --threads 2 "${flags[@]}" "${extra[@]}")
          s=$(sed -n 's/.*"sent_per_s": \([0-9.]*\).*/\1/p' <<< "$j")
          c=$(sed -n 's/.*"throughput_cpu_ms": \([0-9.]*\).*/\1/p' <<< "$j")
          printf '%s\t%s\t%s\t%s\t%s\n' "$prec" "$beam" "$v" "$s" "$(echo "$(wc -l < "$work/ids.txt") / ($c / 1000)" | bc -l)" |
            tee -a "$work/speed.tsv"
        done
      done
    done
  done
  # sent/s over wall time, and over the process's CPU time (every thread): on shared cores the
  # second says more about tolk and less about the neighbours.
  echo "precision beam | sent/s: exact  vmap  ratio | sent per CPU-s: exact  vmap  ratio   (medians of $rounds rounds)"
  for prec in fp32 int8; do
    for beam in 1 4; do
      row="$prec $beam"
      for col in 4 5; do
        a=$(awk -v p=$prec -v b=$beam -v c=$col '$1 == p && $2 == b && $3 == "exact" { print $c }' "$work/speed.tsv" | median)
        b=$(awk -v p=$prec -v b=$beam -v c=$col '$1 == p && $2 == b && $3 == "vmap" { print $c }' "$work/speed.tsv" | median)
        row+=$(printf ' | %.2f  %.2f  x%.2f' "$a" "$b" "$(echo "$b / $a" | bc -l)")
      done
      echo "$row"
    done
  done
fi

if [[ -z ${SKIP_QUALITY:-} ]]; then
  "$tolk" vmap build --pairs "$work/train.tsv" -o "$work/demo.vmap" "${opts[@]}"
  "$tolk" translate --beam 4 --input "$work/eval.en" --output "$work/exact.zh"
  "$tolk" translate --beam 4 --vmap "$work/demo.vmap" --input "$work/eval.en" --output "$work/vmap.zh"
  "$py" - "$work" <<'PY'
import sys, sacrebleu
w = sys.argv[1]
ref = open(f"{w}/eval.zh", encoding="utf-8").read().splitlines()
hyp = {n: open(f"{w}/{n}.zh", encoding="utf-8").read().splitlines() for n in ("exact", "vmap")}
for n, h in hyp.items():
    print(f"chrF {n}: {sacrebleu.corpus_chrf(h, [ref]).score:.2f}")
same = sum(a == b for a, b in zip(hyp["exact"], hyp["vmap"]))
print(f"identical lines: {same} of {len(ref)}")
PY
fi
