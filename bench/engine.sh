#!/usr/bin/env bash
# The execution engine against ONNX Runtime (Python onnxruntime, same thread
# count) in one run: the median time of one encoder forward (batch 1, 30
# tokens) and one decoder_with_past step (batch 1, 1 new token, 16 past
# tokens), each engine's peak RSS (measured in its own process), and the
# ratios tolk/ORT.
#   bench/engine.sh [ONNX_DIR] [THREADS] [RUNS] [PYTHON]
# ONNX_DIR holds encoder_model.onnx and decoder_with_past_model.onnx (the
# full-size stand-in: `python tools/make_fixtures.py --bench-model DIR` puts
# them in DIR/onnx; default: tests/fixtures/marian-tiny). THREADS defaults to
# 1, RUNS to 50, PYTHON to /work/venv/bin/python.
# Set SUFFIX=_quantized to compare the int8 graphs, TOLK=path to use a
# prebuilt tolk instead of building $BUILD (default build/).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/tests/fixtures/marian-tiny}
threads=${2:-1}
runs=${3:-50}
py=${4:-/work/venv/bin/python}
suffix=${SUFFIX:-}
build=${BUILD:-$root/build}
if [ -n "${TOLK:-}" ]; then
  tolk=$TOLK # a prebuilt binary
else
  cmake --build "$build" --target tolk -j2 >/dev/null
  tolk=$build/tolk
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Inputs: symbolic dims bound for the scenario, token ids below the vocab,
# masks of ones, float tensors random normal; saved as .npy per graph.
"$py" - "$dir" "$tmp" "$suffix" <<'PY'
import sys, os, numpy as np, onnx
d, out, suffix = sys.argv[1:4]
dims = {"batch_size": 1, "encoder_sequence_length": 30, "decoder_sequence_length": 1,
        "past_decoder_sequence_length": 16}
rng = np.random.default_rng(0)
for g in ("encoder_model", "decoder_with_past_model"):
    m = onnx.load(os.path.join(d, g + suffix + ".onnx"), load_external_data=False)
    os.makedirs(os.path.join(out, g), exist_ok=True)
    for i, v in enumerate(m.graph.input):
        tt = v.type.tensor_type
        shape = [x.dim_value if x.HasField("dim_value") else dims[x.dim_param] for x in tt.shape.dim]
        if tt.elem_type == onnx.TensorProto.INT64:
            a = np.ones(shape, np.int64) if "mask" in v.name else rng.integers(5, 1000, shape).astype(np.int64)
        else:
            a = rng.standard_normal(shape).astype(np.float32)
        np.save(os.path.join(out, g, "%02d_%s.npy" % (i, v.name)), a)
PY

# ORT in its own process; prints "median_ms peak_rss_mb".
ort() {
  "$py" - "$1" "$2" "$threads" "$runs" <<'PY'
import sys, os, glob, time, statistics, resource, numpy as np, onnxruntime as ort
model, inputs, threads, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
o = ort.SessionOptions(); o.intra_op_num_threads = threads; o.inter_op_num_threads = 1
s = ort.InferenceSession(model, o, providers=["CPUExecutionProvider"])
feed = {os.path.basename(f)[3:-4]: np.load(f) for f in sorted(glob.glob(inputs + "/*.npy"))}
for _ in range(3): s.run(None, feed)
t = []
for _ in range(runs):
    a = time.perf_counter(); s.run(None, feed); t.append((time.perf_counter() - a) * 1e3)
print("%.3f %.1f" % (statistics.median(t), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
PY
}
base=$("$py" -c "import resource, numpy, onnxruntime; print('%.1f' % (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))")

echo "models: $dir (graphs${suffix:+ $suffix}), $threads thread(s), median of $runs runs"
echo "(ORT's RSS includes the Python interpreter with numpy and onnxruntime imported: $base MB before loading a model)"
for g in encoder_model decoder_with_past_model; do
  args=()
  for f in "$tmp/$g"/*.npy; do n=$(basename "$f" .npy); args+=(--input "${n:3}=$f"); done
  tolk_out=$("$tolk" run "$dir/$g$suffix.onnx" "${args[@]}" --repeat "$runs" --threads "$threads" --stats)
  t_ms=$(sed -n 's/^time: median \([0-9.]*\) ms.*/\1/p' <<<"$tolk_out")
  t_rss=$(sed -n 's/.*process peak RSS \([0-9.]*\) MB.*/\1/p' <<<"$tolk_out")
  t_peak=$(sed -n 's/^stats: peak intermediate memory \([0-9.]*\) MB.*/\1/p' <<<"$tolk_out")
  read -r o_ms o_rss < <(ort "$dir/$g$suffix.onnx" "$tmp/$g")
  case $g in
    encoder_model) what="encoder forward (batch 1, 30 tokens)" ;;
    *) what="decoder_with_past step (batch 1, 16 past tokens)" ;;
  esac
  echo "$what:"
  echo "  time      tolk $t_ms ms   ORT $o_ms ms   tolk/ORT $(awk -v a="$t_ms" -v b="$o_ms" 'BEGIN{printf "%.2f", a/b}')"
  echo "  peak RSS  tolk $t_rss MB   ORT $o_rss MB   tolk/ORT $(awk -v a="$t_rss" -v b="$o_rss" 'BEGIN{printf "%.2f", a/b}')   (tolk intermediates: $t_peak MB)"
done
