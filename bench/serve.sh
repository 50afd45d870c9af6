#!/usr/bin/env bash
# The serving table: tolk serve against the services teams write around PyTorch, Optimum ONNX
# Runtime and CTranslate2 (bench/serve_peer.py, FastAPI + uvicorn), on one model, the same threads,
# the same requests, one server at a time on loopback: capacity at P99 <= 1.5 x P50 (open loop,
# bench/serve_load.py), latency and errors at 1x, 3x and 10x tolk's capacity, Locust's closed loop at
# 1/8/32/64 users with 1- and 4-sentence requests, RSS over time. Prints the table and ratios; plots into WORK.
#   bench/serve.sh [MODEL_DIR] [THREADS] [PYTHON]
# MODEL_DIR: what `tools/make_fixtures.py --bench-model DIR` writes (default /tmp/tolk-bench).
# Environment: WORK (default /tmp/tolk-bench-serve), SERVERS (comma list, default all seven; tolk-int8-lmh: tolk
# int8 with --int8-lm-head, the output projection in int8 too, as CTranslate2's int8 has it; tolk-bf16: fp32
# graphs with --bf16, tolk-bf16-products with --bf16-products, CPUs with AVX512-BF16 only),
# SECONDS_PER_RUN (10), NEW_TOKENS (32; 0: natural length, no min_new_tokens and max_new_tokens 256, each
# server stops at its own </s>: for a trained model), BEAM (1), USERS (1,8,32,64), LOCUST_SECONDS (15), ROUNDS (2: the
# open-loop runs of every server, interleaved; the table gives medians; Locust runs in the first), PORT (8190),
# TOLK_ARGS (tolk serve flags, default --max-batch-rows 3 --max-queue-wait 0.5x: a batch no larger than
# what keeps a step near a one-row step on 2 cores, and waits held to half a sentence's time in the batch, a quarter of that in overload; the
# row bound is BEAM when BEAM > 3, since one sentence takes BEAM rows and tolk serve refuses a beam
# wider than the bound),
# LT_PYTHON (/tmp/lt-venv/bin/python: LibreTranslate's venv, bench/lt_venv.sh; for the libretranslate-int8
# and libretranslate-fp32 servers, which are not in the default list and need NEW_TOKENS=0).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=${1:-/tmp/tolk-bench}
threads=${2:-2}
py=${3:-${PYTHON:-/work/venv/bin/python}}
build=${BUILD:-$root/build}
[ -f "$model/onnx/encoder_model.onnx" ] && [ -d "$model/ct2-int8" ] || {
  echo "serve.sh: $model is not a complete benchmark model; make it with" >&2
  echo "  nice $py tools/make_fixtures.py --bench-model $model" >&2
  exit 2
}
beam=${BEAM:-1}
rows=$(( beam > 3 ? beam : 3 ))
cmake --build "$build" --target tolk -j2 >/dev/null
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores; threads $threads"
exec "$py" "$root/bench/serve_bench.py" all --model "$model" --tolk "$build/tolk" --threads "$threads" \
  --work "${WORK:-/tmp/tolk-bench-serve}" --servers "${SERVERS:-tolk-fp32,tolk-int8,transformers-fp32,optimum-fp32,optimum-int8,ct2-fp32,ct2-int8}" \
  --seconds "${SECONDS_PER_RUN:-10}" --new-tokens "${NEW_TOKENS:-32}" --users "${USERS:-1,8,32,64}" --beam "$beam" \
  --locust-seconds "${LOCUST_SECONDS:-15}" --rounds "${ROUNDS:-2}" --port "${PORT:-8190}" --lt-python "${LT_PYTHON:-/tmp/lt-venv/bin/python}" --tolk-args "${TOLK_ARGS:---max-batch-rows $rows --max-queue-wait 0.5x}"
