#!/usr/bin/env bash
# Tokenizer throughput, tolk vs the sentencepiece library (Python binding, one
# thread, batch encode) on the same 10 MB of real English text (the fixture
# corpus, repeated) and the same model. Prints both and the ratio.
#   bench/tokenize.sh [PYTHON]   (PYTHON: an interpreter with sentencepiece;
#                                 default /work/venv/bin/python)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=${1:-/work/venv/bin/python}
model=$root/tests/fixtures/marian-tiny
cmake --build "$root/build" --target bench_tokenize -j2 >/dev/null
text=$(mktemp)
trap 'rm -f "$text"' EXIT
while [ "$(stat -c %s "$text")" -lt 10000000 ]; do xz -dc "$root/tests/fixtures/corpus/en.txt.xz" >>"$text"; done
echo "input: $(stat -c %s "$text") bytes of English ($(wc -l <"$text") lines)"
tolk_out=$("$root/build/bench/bench_tokenize" "$text" "$model" 5)
echo "$tolk_out"
ref=$("$py" - "$text" "$model/source.spm" <<'PY'
import sys, time, statistics
import sentencepiece as spm
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
if lines and lines[-1] == "": lines.pop()
size = sum(len(l.encode()) for l in lines) + len(lines)
sp = spm.SentencePieceProcessor(model_file=sys.argv[2])
times = []
for _ in range(5):
    t0 = time.perf_counter(); sp.encode(lines, num_threads=1); times.append(time.perf_counter() - t0)
print("%.2f" % (size / 1e6 / statistics.median(times)))
PY
)
echo "sentencepiece $(  "$py" -c 'import sentencepiece; print(sentencepiece.__version__)') encode  ${ref} MB/s  (python binding, num_threads=1, median of 5)"
tolk_mbs=$(echo "$tolk_out" | awk '/spm_encode/ {print $3}')
echo "ratio tolk/sentencepiece: $(awk -v a="$tolk_mbs" -v b="$ref" 'BEGIN {printf "%.2f", a / b}')"
