#!/usr/bin/env bash
# Model load: tolk vs ONNX Runtime on a generated model with >= 300 MB of
# initializers, in both layouts real models come in: weights inline in the
# .onnx (as exporters write them) and in an external data file at 4096-byte
# offsets (as large models are stored). Prints load time and the resident
# memory each adds, side by side, with ratios, and tolk's targets (< 50 ms,
# < 10 MB beyond the mapping).
#
#   bench/load.sh
#   BUILD=/path/to/build LAYERS=80 DIM=1024 RUNS=10 ORT_RUNS=3 ORT_PYTHON=python bench/load.sh
#
# Both are measured warm (the files are in the page cache); each ORT run is
# a fresh process. "RSS anon" is heap and arena memory; "RSS file" is pages of
# the mapped files the load touched.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/bench/out"
build=${BUILD:-$root/build-bench}
layers=${LAYERS:-80} dim=${DIM:-1024} runs=${RUNS:-10} ort_runs=${ORT_RUNS:-3}
mkdir -p "$out"

echo "== building libtolk in $build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target tolk_static -j "${JOBS:-2}" >/dev/null
extra=$(pkg-config --libs libcjson 2>/dev/null || true)
cc -O2 -std=c11 -D_GNU_SOURCE -I"$root/include" -I"$root/src" "$root/bench/load_bench.c" \
   "$build/libtolk.a" $extra -lpthread -lm -o "$out/load_bench"

# A Python with onnxruntime: ORT_PYTHON, the project venv, python3, or a
# venv made here.
py=""
for c in "${ORT_PYTHON:-}" /work/venv/bin/python python3 "$out/venv-ort/bin/python"; do
  [ -n "$c" ] && command -v "$c" >/dev/null 2>&1 && "$c" -c "import onnxruntime" 2>/dev/null && { py=$c; break; }
done
if [ -z "$py" ]; then
  echo "== no onnxruntime found; installing it into $out/venv-ort"
  if python3 -m venv "$out/venv-ort" && "$out/venv-ort/bin/pip" install -q onnxruntime; then
    py="$out/venv-ort/bin/python"
  fi
fi

for layout in inline external; do
  model="$out/load_${layout}_${layers}x${dim}.onnx"
  if [ ! -s "$model" ]; then
    echo "== generating $model"
    python3 "$root/bench/load_gen.py" "$model" --layers "$layers" --dim "$dim" \
      $([ $layout = external ] && echo --external)
  fi
  cat "$model" "$model".data >/dev/null 2>&1 || true # warm the page cache for both
  echo "== tolk ($layout): tolk_model_load x $runs"
  "$out/load_bench" "$model" "$runs" >"$out/load_tolk_$layout.txt"
  if [ -n "$py" ]; then
    echo "== ONNX Runtime ($layout): InferenceSession x $ort_runs ($py)"
    "$py" "$root/bench/load_ort.py" "$model" "$ort_runs" >"$out/load_ort_$layout.txt"
  else
    : >"$out/load_ort_$layout.txt"
  fi
done
[ -n "$py" ] || echo "== ONNX Runtime not available: only tolk's figures below"

python3 - "$out" "$layers" "$dim" <<'PY'
import os, sys
out, layers, dim = sys.argv[1], sys.argv[2], sys.argv[3]
def read(p):
    d = {}
    for line in open(p):
        k, _, v = line.strip().partition(" ")
        if k: d[k] = v
    return d
print()
print("%-44s %12s %14s %14s" % ("", "load median", "RSS anon +", "RSS file +"))
targets = []
for layout in ("inline", "external"):
    model = os.path.join(out, "load_%s_%sx%s.onnx" % (layout, layers, dim))
    size = os.path.getsize(model) + (os.path.getsize(model + ".data") if layout == "external" else 0)
    t, o = read(os.path.join(out, "load_tolk_%s.txt" % layout)), read(os.path.join(out, "load_ort_%s.txt" % layout))
    tm, ta, tf = float(t["load_ms_median"]), int(t["rss_anon_kib"]) / 1024, int(t["rss_file_kib"]) / 1024
    print("%s: %.1f MB, %s initializers, %s read in place (zero-copy)" %
          (layout, size / 1e6, t["initializers"], t["zero_copy"]))
    print("  %-42s %9.2f ms %11.2f MB %11.2f MB" % ("tolk_model_load", tm, ta, tf))
    if o:
        om, oa, of = float(o["session_ms_median"]), int(o["rss_anon_kib"]) / 1024, int(o["rss_file_kib"]) / 1024
        print("  %-42s %9.2f ms %11.2f MB %11.2f MB" % ("onnxruntime %s InferenceSession" % o["ort_version"], om, oa, of))
        print("  %-42s %11.1fx %12.1fx" % ("ratio (ORT / tolk)", om / tm if tm else 0, oa / max(ta, 0.01)))
    targets.append((layout, tm, ta))
print()
for layout, tm, ta in targets:
    print("target (%s): load < 50 ms: %s (%.2f ms); RSS beyond the mapping < 10 MB: %s (%.2f MB)" %
          (layout, "PASS" if tm < 50 else "FAIL", tm, "PASS" if ta < 10 else "FAIL", ta))
print("(both layouts are read in place; inline raw_data not aligned for its dtype is flagged, and a"
      " session copies it aligned only for kernels that read it typed, see src/exec/align.c)")
PY
