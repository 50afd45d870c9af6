"""tests/quantize_ort.py TOLK FIXTURES CASE: graphs `tolk quantize --calibrate` writes where ONNX Runtime's
quantize_static cannot be the reference, run in ONNX Runtime (tests/ort_python.sh runs it with
build-pyvenv's onnx and onnxruntime).

merged: marian-tiny's merged decoder (one If on use_cache_branch) calibrated on its four golden sets, in
  QDQ and QOperator form, per tensor and per channel, with and without --reduce-range. ORT 1.23.2's quantize_static leaves every MatMul of
  this graph float (its calibrator watches the main graph only; QOperator with EnableSubgraph fails), but
  each branch is a graph it does quantize: decoder_model (else) and decoder_with_past_model (then), whose
  golden sets the merged ones are. So the written graph must pass onnx.checker (full_check), hold
  QuantizeLinear nodes in both branches and no float MatMul, and ORT — its optimizations off, running the
  graph as written — must give logits as far from the fp32 golden ones as ORT's own quantize_static graph
  of the matching separate graph is on the same inputs (its recorded error, tests/data/quantize/static/),
  within 2 % as tests/test_onnx_quantize_static.c allows tolk.
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

# Merged set k is the separate graph's set k // 2: else branch for even k, then branch for odd.
SEPARATE = ["decoder_model", "decoder_with_past_model"]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def load_pb(path):
    t = onnx.TensorProto()
    t.ParseFromString(Path(path).read_bytes())
    return numpy_helper.to_array(t)


def ops(g, where="main"):
    """Op counts per graph: main, then each branch by its attribute name."""
    out = {where: {}}
    for n in g.node:
        out[where][n.op_type] = out[where].get(n.op_type, 0) + 1
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                out.update(ops(a.g, a.name))
    return out


def merged(tolk, fixtures):
    src = fixtures / "marian-tiny" / "decoder_model_merged.onnx"
    golden = fixtures / "golden" / "marian-tiny" / "decoder_model_merged"
    refs = fixtures.parent / "data" / "quantize" / "static"
    names = [i.name for i in onnx.load(str(src)).graph.input]
    sets = sorted(golden.glob("test_data_set_*"))
    if len(sets) != 4:
        fail(f"{golden}: {len(sets)} sets, wanted 4")
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in ("qdq", "qoperator"):
            for mode, flags in (("default", []), ("per_channel", ["--per-channel"]), ("reduce_range", ["--reduce-range"]),
                                ("per_channel_reduce_range", ["--per-channel", "--reduce-range"])):
                what = f"merged {fmt} {mode}"
                dst = Path(tmp) / f"{fmt}.{mode}.onnx"
                r = subprocess.run([tolk, "quantize", "-q", "--format", fmt, *flags, "--calibrate", str(golden),
                                    str(src), str(dst)], capture_output=True, text=True)
                if r.returncode or "54 quantized, 0 skipped" not in r.stdout:
                    fail(f"{what}: exit {r.returncode}: {r.stdout} {r.stderr}")
                model = onnx.load(str(dst))
                onnx.checker.check_model(model, full_check=True)
                counts = ops(model.graph)
                qop = "QLinearMatMul" if fmt == "qoperator" else "MatMul"
                for branch, want in (("else_branch", 29), ("then_branch", 25)):
                    c = counts.get(branch, {})
                    if c.get("QuantizeLinear", 0) == 0 or c.get(qop, 0) != want or (
                            fmt == "qoperator" and c.get("MatMul", 0)):
                        fail(f"{what}: {branch} ops {c}")
                sess = ort.InferenceSession(str(dst), opts, providers=["CPUExecutionProvider"])
                for k, d in enumerate(sets):
                    feed = {n: load_pb(d / f"input_{i}.pb") for i, n in enumerate(names)}
                    got = sess.run(["logits"], feed)[0]
                    err = float(np.abs(got.astype(np.float64) - load_pb(d / "output_0.pb")).max())
                    ref = json.loads((refs / f"{SEPARATE[k % 2]}.{fmt}.{mode}.json").read_text())
                    bound = ref["runs"][k // 2]["max_abs_vs_fp32"]
                    if not err <= 1.02 * bound:
                        fail(f"{what} set {k}: max |int8 - fp32| {err:.4g} in ORT, ORT's own {SEPARATE[k % 2]} {bound:.4g}")
                    print(f"{what} set {k}: max |int8 - fp32| {err:.4g}, ORT's {SEPARATE[k % 2]} {bound:.4g}")


def main():
    tolk, fixtures, case = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    {"merged": merged}[case](tolk, fixtures)
    print(f"ok: {case}")


if __name__ == "__main__":
    main()
