#!/usr/bin/env python3
"""How much int8 resolution a per-tensor MinMax range leaves each MatMul activation of a Marian model: the fp32
encoder and decoder_model run in ONNX Runtime (optimizations off) on pairs of the corpus — the encoder on the
English, the decoder teacher-forced on the reference — every MatMul input and output kept, and per node class
(q/k/v/out projections, fc1, fc2, LM head, attention scores Q·Kᵀ and context P·V; A, B, Y its operands), each
node's tensor measured on its own (its range is its own) and the nodes of a class averaged:

  - max|x| / p99.99|x|: the outlier factor (how far the range is stretched by its last 0.01 % of values);
  - zeroed: the share of values the MinMax step (range / 255) rounds to zero;
  - step/rms: that step against the tensor's root mean square.

Not part of CI; the figures explain tools/quant_quality.py's (README, the quantize section).

    /work/venv/bin/python tools/quant_ranges.py --fp32 /tmp/tolk-demo-bench/onnx --hf /tmp/tolk-demo-bench/hf [--n 60]
"""
import argparse
import collections
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from transformers import MarianTokenizer

import quant_quality


def augmented(path: Path):
    """A session on the graph with every non-initializer MatMul operand an output, and those (node, role, name)."""
    m = onnx.load(str(path))
    inits = {i.name for i in m.graph.initializer}
    names = [(n.name, role, v) for n in m.graph.node if n.op_type == "MatMul"
             for role, v in (("A", n.input[0]), ("B", n.input[1]), ("Y", n.output[0])) if v not in inits]
    have = {o.name for o in m.graph.output}
    for _, _, v in names:
        if v not in have:
            m.graph.output.append(onnx.helper.make_empty_tensor_value_info(v))
            have.add(v)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]), names


def node_class(node: str) -> str:
    for k in ("q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2", "lm_head"):
        if k in node:
            return k
    return "attention Q.K^T" if node.endswith("MatMul") else "attention P.V"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fp32", type=Path, required=True)
    ap.add_argument("--hf", type=Path, required=True, help="the tokenizer's folder")
    ap.add_argument("--pairs", type=Path, default=Path(__file__).resolve().parent.parent / "tests/fixtures/corpus/pairs.tsv.xz")
    ap.add_argument("--n", type=int, default=60)
    a = ap.parse_args()
    tok = MarianTokenizer.from_pretrained(str(a.hf))
    _, test = quant_quality.pick(a.pairs, 200, 1000)
    enc, enc_names = augmented(a.fp32 / "encoder_model.onnx")
    dec, dec_names = augmented(a.fp32 / "decoder_model.onnx")
    dec_inputs = {i.name for i in dec.get_inputs()}
    vals = collections.defaultdict(list)
    for en, zh in test[: a.n]:
        x = tok(">>cmn_Hans<< " + en, return_tensors="np")
        out = dict(zip([o.name for o in enc.get_outputs()],
                       enc.run(None, {"input_ids": x["input_ids"], "attention_mask": x["attention_mask"]})))
        for node, role, v in enc_names:
            vals[("encoder", node, role)].append(out[v].ravel())
        y = tok(text_target=zh, return_tensors="np")["input_ids"]
        ids = np.concatenate([[[tok.pad_token_id]], y[:, :-1]], axis=1).astype(np.int64)
        feed = {"input_ids": ids, "encoder_attention_mask": x["attention_mask"],
                "encoder_hidden_states": out["last_hidden_state"]}
        dout = dict(zip([o.name for o in dec.get_outputs()], dec.run(None, {k: v for k, v in feed.items() if k in dec_inputs})))
        for node, role, v in dec_names:
            vals[("decoder", node, role)].append(dout[v].ravel())
    rows = collections.defaultdict(list)
    for (graph, node, role), xs in vals.items():
        x = np.concatenate(xs).astype(np.float64)
        ax = np.abs(x)
        step = (max(x.max(), 0) - min(x.min(), 0)) / 255
        rows[(graph, node_class(node), role)].append(
            (ax.max() / max(np.percentile(ax, 99.99), 1e-12), np.mean(ax < step / 2), step / max(np.sqrt(np.mean(x * x)), 1e-12)))
    print("| graph | class | operand | max/p99.99 (worst) | zeroed | step/rms |\n| --- | --- | --- | ---: | ---: | ---: |")
    for key in sorted(rows):
        r = np.array(rows[key])
        print(f"| {key[0]} | {key[1]} | {key[2]} | {r[:, 0].mean():.2f} ({r[:, 0].max():.2f}) | "
              f"{100 * r[:, 1].mean():.1f} % | {r[:, 2].mean():.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
