#!/usr/bin/env python3
"""Records what ONNX Runtime's quantize_dynamic makes of marian-tiny's fp32 graphs, as small JSON files under
tests/data/quantize/, so that the C tests can hold `tolk quantize` to it without ONNX Runtime.

For each graph (encoder, decoder, decoder with past, merged decoder) and each mode — "default" (per tensor),
"per_channel", "reduce_range", "per_channel_reduce_range" (what tools/export.py ships) — the file lists:

  - the options and versions used;
  - the node pattern: every node ORT added or changed, in graph order, with op type, name, inputs and
    outputs, graph by graph (the merged decoder's If branches included: EnableSubgraph);
  - every quantized initializer: dtype, dims, sha256 of its little-endian bytes, sum of its values, and
    its scale and zero point arrays in full (floats as Python repr, exact);
  - op counts before and after.

Weights are recorded by digest, scales in full: a C test compares its own weights' digest (identical) or,
when they differ, the scales show by how much. The quantized models themselves are not committed.

    python3 -m venv /tmp/qvenv && /tmp/qvenv/bin/pip install onnx==1.19.1 onnxruntime==1.23.2 numpy
    /tmp/qvenv/bin/python tools/ort_quantize_reference.py        # rewrites tests/data/quantize/*.json
"""
import collections
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from onnxruntime.quantization import QuantType, quantize_dynamic

from ort_quantize_common import QUANT_SUFFIXES, node_key, tensor_summary

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "fixtures" / "marian-tiny"
OUT = ROOT / "tests" / "data" / "quantize"
GRAPHS = ["encoder_model", "decoder_model", "decoder_with_past_model", "decoder_model_merged"]
MODES = {
    "default": dict(per_channel=False, reduce_range=False),
    "per_channel": dict(per_channel=True, reduce_range=False),
    "reduce_range": dict(per_channel=False, reduce_range=True),
    "per_channel_reduce_range": dict(per_channel=True, reduce_range=True),
}
EXTRA = {"EnableSubgraph": True, "MatMulConstBOnly": True}


def graphs(g, path="main"):
    """The graph and its subgraphs (If branches), depth first, with a path naming each."""
    yield path, g
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from graphs(a.g, f"{path}/{n.name}/{a.name}")


def record(src: Path, mode: str, opts: dict) -> dict:
    fp32 = onnx.load(str(src))
    with tempfile.TemporaryDirectory() as tmp:
        dst = Path(tmp) / "q.onnx"
        quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, extra_options=EXTRA, **opts)
        q = onnx.load(str(dst))
    before = {p: {node_key(n) for n in g.node} for p, g in graphs(fp32.graph)}
    pattern, inits, counts = {}, {}, {}
    for p, g in graphs(q.graph):
        old = before.get(p, set())
        pattern[p] = [{"op": n.op_type, "name": n.name, "inputs": list(n.input), "outputs": list(n.output),
                       **({"to": next(a.i for a in n.attribute if a.name == "to")} if n.op_type == "Cast" else {})}
                      for n in g.node if node_key(n) not in old]
        counts[p] = dict(sorted(collections.Counter(n.op_type for n in g.node).items()))
        for t in g.initializer:
            if t.name.endswith(QUANT_SUFFIXES):
                inits[f"{p}:{t.name}"] = tensor_summary(t)
    return {"format": "tolk-quantize-reference/1", "graph": src.name, "mode": mode,
            "options": {"weight_type": "QInt8", **opts, "extra_options": EXTRA,
                        "op_types_to_quantize": "default"},
            "versions": {"onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__, "numpy": np.__version__},
            "op_counts_before": {p: dict(sorted(collections.Counter(n.op_type for n in g.node).items()))
                                 for p, g in graphs(fp32.graph)},
            "op_counts_after": counts, "pattern": pattern, "initializers": inits}


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for g in GRAPHS:
        for mode, opts in MODES.items():
            ref = record(TINY / f"{g}.onnx", mode, opts)
            path = OUT / f"{g}.{mode}.json"
            path.write_text(json.dumps(ref, indent=1, sort_keys=False) + "\n", encoding="utf-8")
            n = sum(len(v) for v in ref["pattern"].values())
            print(f"{path.relative_to(ROOT)}: {n} nodes added, {len(ref['initializers'])} initializers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
