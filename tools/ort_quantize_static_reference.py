#!/usr/bin/env python3
"""Records what ONNX Runtime's quantize_static makes of marian-tiny's fp32 graphs, as small JSON files under
tests/data/quantize/static/<graph>.<format>.<mode>.json, so that the C tests can hold `tolk quantize --calibrate` to it without ONNX Runtime.

Calibration data: the golden input sets of each graph (tests/fixtures/golden/marian-tiny/<graph>/test_data_set_N,
real tokenized sentences), fed to a CalibrationDataReader in set order — the same folders tolk reads with
`--calibrate`. Options: QuantFormat.QDQ ("qdq") or QOperator ("qoperator"), CalibrationMethod.MinMax, op_types_to_quantize ["MatMul"],
activation and weight type QInt8 (quantize_static's defaults), per tensor ("default") or per channel, each also
with reduce_range (weights in [-64, 64]; ORT reduces no activation's range).

For each graph and mode the file lists, as tools/ort_quantize_reference.py does for quantize_dynamic:

  - the options and versions used;
  - the node pattern: every node ORT added or changed, in graph order (op type, name, inputs, outputs, and a
    DequantizeLinear's axis);
  - every quantized initializer: dtype, dims, sha256 of its little-endian bytes, sum of its values, and for
    scales and zero points their values in full (floats as Python repr, exact);
  - op counts before and after;
  - "runs": for each golden set, the largest absolute difference of the first graph output as ORT computes
    it with its quantized graph from the fp32 graph's (ORT, same inputs; the golden output_0.pb), and that
    output itself when it is small (the encoder's hidden states, not the decoders' logits).

    python3 -m venv /tmp/qvenv && /tmp/qvenv/bin/pip install onnx==1.19.1 onnxruntime==1.23.2 numpy
Also, for the histogram methods (Entropy with ORT's default 128 bins and with 512, Percentile at 99.999 and
99.9), the range ORT's calibrator gives every tensor on the graph's second golden set, in
<graph>.ranges.<method>.json.

    /tmp/qvenv/bin/python tools/ort_quantize_static_reference.py     # rewrites tests/data/quantize/static/*.json
"""
import collections
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from onnx import numpy_helper
from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                      create_calibrator, quantize_static)

from ort_quantize_common import QUANT_SUFFIXES, node_key, tensor_summary

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "fixtures" / "marian-tiny"
GOLDEN = ROOT / "tests" / "fixtures" / "golden" / "marian-tiny"
OUT = ROOT / "tests" / "data" / "quantize" / "static"
GRAPHS = ["encoder_model", "decoder_model", "decoder_with_past_model"]
MODES = {"default": dict(per_channel=False), "per_channel": dict(per_channel=True),
         "reduce_range": dict(per_channel=False, reduce_range=True),
         "per_channel_reduce_range": dict(per_channel=True, reduce_range=True)}
FORMATS = {"qdq": QuantFormat.QDQ, "qoperator": QuantFormat.QOperator}
VALUES_MAX = 4096  # outputs up to this size are recorded in full (the encoder's); logits only by their error


def load_sets(graph: str) -> list:
    """The golden input sets of a graph, each {input name: array}, input_K being the K-th graph input."""
    names = [i.name for i in onnx.load(str(TINY / f"{graph}.onnx")).graph.input]
    sets = []
    for d in sorted((GOLDEN / graph).glob("test_data_set_*")):
        feed = {}
        for k, name in enumerate(names):
            t = onnx.TensorProto()
            t.ParseFromString((d / f"input_{k}.pb").read_bytes())
            feed[name] = numpy_helper.to_array(t)
        sets.append(feed)
    return sets


class Reader(CalibrationDataReader):
    def __init__(self, sets):
        self.it = iter(sets)

    def get_next(self):
        return next(self.it, None)


def run(path: Path, feed: dict) -> np.ndarray:
    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = 1
    s = onnxruntime.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    return s.run([s.get_outputs()[0].name], feed)[0]


def record(graph: str, fmt: str, mode: str, opts: dict) -> dict:
    src = TINY / f"{graph}.onnx"
    fp32 = onnx.load(str(src))
    sets = load_sets(graph)
    with tempfile.TemporaryDirectory() as tmp:
        dst = Path(tmp) / "q.onnx"
        quantize_static(str(src), str(dst), Reader(sets), quant_format=FORMATS[fmt],
                        op_types_to_quantize=["MatMul"], activation_type=QuantType.QInt8,
                        weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax, **opts)
        q = onnx.load(str(dst))
        runs = []
        for feed in sets:
            got, ref = run(dst, feed), run(src, feed)
            r = {"output": fp32.graph.output[0].name, "dims": list(got.shape),
                 "max_abs_vs_fp32": float(np.abs(got.astype(np.float64) - ref).max())}
            if got.size <= VALUES_MAX:
                r["values"] = [float(v) for v in got.reshape(-1)]
            runs.append(r)
    old = {node_key(n) for n in fp32.graph.node}
    pattern = []
    for n in q.graph.node:
        if node_key(n) in old:
            continue
        e = {"op": n.op_type, "name": n.name, "inputs": list(n.input), "outputs": list(n.output)}
        e.update({a.name: a.i for a in n.attribute if a.name == "axis"})
        pattern.append(e)
    inits = {}
    for t in q.graph.initializer:
        if t.name.endswith(QUANT_SUFFIXES):
            inits[t.name] = tensor_summary(t)
    count = lambda g: dict(sorted(collections.Counter(n.op_type for n in g.node).items()))  # noqa: E731
    return {"format": "tolk-quantize-static-reference/1", "graph": src.name, "quant_format": fmt, "mode": mode,
            "calibration": f"tests/fixtures/golden/marian-tiny/{graph}", "samples": len(sets),
            "options": {"quant_format": FORMATS[fmt].name, "calibrate_method": "MinMax", "op_types_to_quantize": ["MatMul"],
                        "activation_type": "QInt8", "weight_type": "QInt8", **opts},
            "versions": {"onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__, "numpy": np.__version__},
            "op_counts_before": count(fp32.graph), "op_counts_after": count(q.graph),
            "pattern": pattern, "initializers": inits, "runs": runs}


# The histogram methods, through ORT's calibrator itself (quantize_static passes no bin counts): ORT's
# HistogramCollector stacks the samples' tensors into one array, so they must have one shape — one golden set.
RANGES = {"entropy": (CalibrationMethod.Entropy, {}),
          "entropy_512": (CalibrationMethod.Entropy, {"num_bins": 512, "num_quantized_bins": 128}),
          "percentile": (CalibrationMethod.Percentile, {}),
          "percentile_99.9": (CalibrationMethod.Percentile, {"percentile": 99.9})}


def record_ranges(graph: str, name: str) -> dict:
    method, extra = RANGES[name]
    feed = load_sets(graph)[1]
    with tempfile.TemporaryDirectory() as tmp:
        cal = create_calibrator(str(TINY / f"{graph}.onnx"), ["MatMul"], str(Path(tmp) / "aug.onnx"),
                                calibrate_method=method, extra_options=extra)
        cal.collect_data(Reader([feed]))
        data = cal.compute_data()
    ranges = {t: [float(np.asarray(d.range_value[0])), float(np.asarray(d.range_value[1]))]
              for t, d in data.data.items()}
    return {"format": "tolk-calibration-ranges/1", "graph": f"{graph}.onnx", "method": name, "options": extra,
            "calibration": f"tests/fixtures/golden/marian-tiny/{graph}/test_data_set_1",
            "versions": {"onnxruntime": onnxruntime.__version__, "numpy": np.__version__}, "ranges": ranges}


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for g in GRAPHS:
        for fmt, mode in ((f, m) for f in FORMATS for m in MODES):
            ref = record(g, fmt, mode, MODES[mode])
            path = OUT / f"{g}.{fmt}.{mode}.json"
            path.write_text(json.dumps(ref, indent=1) + "\n", encoding="utf-8")
            print(f"{path.relative_to(ROOT)}: {len(ref['pattern'])} nodes added, {len(ref['initializers'])} "
                  f"initializers, max |ORT int8 - fp32| {max(r['max_abs_vs_fp32'] for r in ref['runs']):.3g}")
        for name in RANGES:
            ref = record_ranges(g, name)
            path = OUT / f"{g}.ranges.{name}.json"
            path.write_text(json.dumps(ref, indent=1) + "\n", encoding="utf-8")
            print(f"{path.relative_to(ROOT)}: {len(ref['ranges'])} ranges")
    return 0


if __name__ == "__main__":
    sys.exit(main())
