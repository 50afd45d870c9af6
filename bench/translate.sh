#!/usr/bin/env bash
# Translation benchmark, the whole table in one go: tolk (fp32, int8) against
# transformers+PyTorch, Optimum ORTModelForSeq2SeqLM (fp32, int8) and
# CTranslate2 (fp32, int8) on the full-size benchmark model, greedy and beam 4,
# the same 200 pre-tokenized English sentences, the same threads, and a fixed
# output length (min_new_tokens = max_new_tokens). Each engine runs in its own
# process; sent/s, P50/P95 per-sentence latency and peak RSS; see bench/README.md.
#   bench/translate.sh [MODEL_DIR] [THREADS] [REPEAT] [PYTHON]
# MODEL_DIR: what `tools/make_fixtures.py --bench-model DIR` writes (default
# /tmp/tolk-bench). THREADS defaults to 2, REPEAT (rounds; cells are medians)
# to 1, PYTHON to /work/venv/bin/python.
# Environment: BUILD (build dir, default <repo>/build; configure it Release),
# WORK (sentences.txt / ids.txt / results.jsonl, default /tmp/tolk-bench-translate),
# N (sentences, 200), NEW_TOKENS (32), BATCH (sentences per throughput batch, 16),
# LATENCY_N (sentences timed alone, default all), BEAMS ("1,4"),
# ENGINES (subset of tolk,tolk-lmh,tolk-bf16,tolk-bf16p,transformers,optimum,ct2; default all;
# tolk-lmh: tolk int8 with --int8-lm-head; tolk-bf16: tolk fp32 with --bf16; tolk-bf16p: with
# --bf16-products, on CPUs with AVX512-BF16).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=${1:-/tmp/tolk-bench}
threads=${2:-2}
repeat=${3:-1}
py=${4:-/work/venv/bin/python}
build=${BUILD:-$root/build}
work=${WORK:-/tmp/tolk-bench-translate}

if [[ ! -f $model/onnx/encoder_model_quantized.onnx || ! -d $model/ct2-int8 || ! -d $model/ct2-float32 ]]; then
  echo "translate.sh: $model is not a complete benchmark model; make it with" >&2
  echo "  nice $py tools/make_fixtures.py --bench-model $model" >&2
  exit 2
fi
cmake --build "$build" --target bench_translate -j2 >/dev/null
mkdir -p "$work"
exec "$py" "$root/bench/translate_peers.py" table --model "$model" --work "$work" \
  --bench-bin "$build/bench/bench_translate" --threads "$threads" --repeat "$repeat" \
  --n "${N:-200}" --new-tokens "${NEW_TOKENS:-32}" --batch "${BATCH:-16}" --latency-n "${LATENCY_N:--1}" \
  --beams "${BEAMS:-1,4}" --engines "${ENGINES:-}" --jsonl "$work/results.jsonl"
