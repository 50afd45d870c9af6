#!/usr/bin/env python3
"""Build bench/serve.sh's model folder from the bundled models/demo-en-zh, which ships only int8 ONNX graphs.

    nice -n 19 /work/venv/bin/python tools/bench_from_bundled.py /tmp/tolk-demo-bench

The layout is `tools/make_fixtures.py --bench-model`'s, so bench/serve.sh and bench/translate.sh run on it:

  OUT/hf             MarianMTModel + MarianTokenizer (save_pretrained) whose weights are the bundled graphs':
                     each MatMulInteger weight dequantized, (q - zero point) x scale per output channel, and
                     transposed to nn.Linear's [out, in]; the uint8 Gather table of the token embeddings
                     (shared by encoder, decoder and the tied LM head) dequantized the same way; layer norms,
                     biases and final_logits_bias as stored.  transformers never saves Marian's sinusoidal
                     positions (it recomputes them on load): the graphs' uint8 position tables are checked to
                     be exactly those sinusoids quantized.  config.json and generation_config.json are the
                     bundled files byte for byte.
  OUT/onnx           tools/export.py's fp32 graphs of OUT/hf (verified against PyTorch by export.py) beside the
                     bundled *_quantized.onnx, copied as they are; tolk-manifest.json hashes the bundled ones.
  OUT/ct2-float32, OUT/ct2-int8   ct2-transformers-converter of OUT/hf (as --bench-model does).
  OUT/bench-from-bundled.json     the checks' figures.
Unlike --bench-model's folder, OUT/onnx has no decoder_model_merged_quantized.onnx (the bundle has none; tolk
and the Optimum peer run the three separate graphs).

Every tensor is found by following the graph, never by guessing from names: a MatMulInteger's weight belongs
to the module its node is scoped in (/model/decoder/layers.0/self_attn/q_proj/MatMul_quant), confirmed by the
bias that its Cast -> Mul -> Add chain adds (model.decoder.layers.0.self_attn.q_proj.bias); its per-channel
scale is the initializer the scale Mul multiplies with the activation's; a quantized Gather's table and the LM
head's DequantizeLinear name their tensor as the exporter did (<name>_quantized).  Every parameter of
MarianMTModel must be filled, the graphs must agree wherever they hold the same tensor, and no weight-sized
initializer may be left over.

Checks (the run fails if one does, except the round trip, which is reported):
  round trip  export.py's int8 graphs of OUT/hf (the same quantize_dynamic settings) against the bundled
          ones: byte-identical files, else how many weight tensors are (pinned versions give identical files).
  logits  teacher-forced logits of PyTorch on OUT/hf against ONNX Runtime on the bundled int8 graphs, and for
          scale against ORT on export.py's int8 graphs of the same weights and OUT/onnx fp32: the
          bundled graphs must be no further from PyTorch than the re-quantized ones (a wrong mapping is far
          off), the fp32 graphs within 1e-4.
  greedy  --sentences real sentences of tests/fixtures/corpus through `tolk translate -m models/demo-en-zh
          --beam 1` and transformers' generate(num_beams=1) on OUT/hf, token ids compared per sentence (tolk
          runs int8, PyTorch fp32: a few differ); the run fails below --min-identical.

The folder is built as OUT.partial and renamed to OUT when everything passed.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.dont_write_bytecode = True  # no tools/__pycache__ in the work tree
from common import logger, sha256_file  # tools/common.py

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = ROOT / "models" / "demo-en-zh"
GRAPHS = ["encoder_model", "decoder_model", "decoder_with_past_model"]
TAG = ">>cmn_Hans<<"  # what tolk translate prefixes for --to zh (its default)
# The encoder graph is exported from the encoder module alone, so its scopes and names lack this prefix.
PREFIX = {"encoder_model": "model.encoder.", "decoder_model": "", "decoder_with_past_model": ""}

log = logger("bench-from-bundled")


class MappingError(Exception):
    pass


# ----------------------------------------------------------------------------------------------------------
# 1. the graphs' weights as HF parameters
# ----------------------------------------------------------------------------------------------------------

class Graph:
    """One ONNX graph with its initializers as arrays and the producer/consumer links between nodes."""

    def __init__(self, path: Path, prefix: str):
        import onnx
        from onnx import numpy_helper
        self.path, self.prefix = path, prefix
        g = onnx.load(str(path)).graph
        self.nodes = list(g.node)
        self.init = {t.name: numpy_helper.to_array(t) for t in g.initializer}
        self.producer = {o: n for n in self.nodes for o in n.output}
        self.consumers = defaultdict(list)
        for n in self.nodes:
            for i in n.input:
                self.consumers[i].append(n)
        self.used: set[str] = set()

    def take(self, name: str):
        """The initializer called name, marked as accounted for."""
        if name not in self.init:
            raise MappingError(f"{self.path.name}: {name} is not an initializer")
        self.used.add(name)
        return self.init[name]

    def only_consumer(self, tensor: str, op: str):
        c = self.consumers.get(tensor, [])
        if len(c) != 1 or c[0].op_type != op:
            raise MappingError(f"{self.path.name}: {tensor} feeds {[n.op_type for n in c]}, expected one {op}")
        return c[0]

    def const_input(self, node):
        """The one initializer input of a binary node (the other input is computed)."""
        names = [i for i in node.input if i in self.init]
        if len(names) != 1:
            raise MappingError(f"{self.path.name}: {node.name} has initializer inputs {names}, expected one")
        return names[0]

    def scope(self, node) -> str:
        """The module a node was traced in, as a parameter prefix: /model/decoder/layers.0/fc1/MatMul_quant
        -> model.decoder.layers.0.fc1 (with the graph's prefix for the encoder)."""
        parts = node.name.strip("/").split("/")[:-1]
        return self.prefix + ".".join(parts)


def dequantize(q, zero_point, scale, axis: int):
    """(q - zero point) x scale, per channel along axis when scale is a vector; the integer difference is
    exact in fp32 and the product is rounded once."""
    import numpy as np
    d = q.astype(np.float32) - np.asarray(zero_point).astype(np.float32).reshape(_bshape(q, zero_point, axis))
    return (d * np.asarray(scale, dtype=np.float32).reshape(_bshape(q, scale, axis))).astype(np.float32)


def _bshape(q, v, axis):
    import numpy as np
    if np.ndim(v) == 0:
        return ()
    shape = [1] * q.ndim
    shape[axis] = q.shape[axis]
    return shape


def matmul_integer_weights(g: Graph, put):
    """MatMulInteger(x_q, W_q, x_zp, W_zp) -> Cast -> Mul(x_scale * W_scale) -> Add(bias): nn.Linear's weight
    is dequantize(W_q)^T, its bias the Add's initializer; the bias's exported name must name the same module
    as the node's scope."""
    for n in (n for n in g.nodes if n.op_type == "MatMulInteger"):
        module = g.scope(n)
        cast = g.only_consumer(n.output[0], "Cast")
        mul = g.only_consumer(cast.output[0], "Mul")
        scales = [i for i in mul.input if i != cast.output[0]][0]
        smul = g.producer.get(scales)
        if smul is None or smul.op_type != "Mul":
            raise MappingError(f"{g.path.name}: {n.name}: the output scale {scales} is not a Mul of two scales")
        w_scale = g.take(g.const_input(smul))
        w = dequantize(g.take(n.input[1]), g.take(n.input[3]), w_scale, axis=1)
        add = g.only_consumer(mul.output[0], "Add")
        bias_name = g.const_input(add)
        bias = g.prefix + bias_name
        if bias != module + ".bias":
            raise MappingError(f"{g.path.name}: {n.name} is scoped in {module} but its Add adds {bias}")
        put(module + ".weight", w.T.copy(), g)
        put(bias, g.take(bias_name), g)


def layer_norms(g: Graph, put):
    for n in (n for n in g.nodes if n.op_type == "LayerNormalization"):
        module = g.scope(n)
        for inp, what in zip(n.input[1:3], ("weight", "bias")):
            if g.prefix + inp != f"{module}.{what}":
                raise MappingError(f"{g.path.name}: {n.name} is scoped in {module} but takes {inp} as its {what}")
            put(g.prefix + inp, g.take(inp), g)


def exported_name(g: Graph, quantized: str, dq) -> str:
    """The exporter's name of a tensor the quantizer replaced by <name>_quantized (read back by the
    DequantizeLinear dq, per tensor)."""
    if not quantized.endswith("_quantized"):
        raise MappingError(f"{g.path.name}: {quantized} is not named as a quantized initializer")
    if g.init[dq.input[1]].ndim != 0:
        raise MappingError(f"{g.path.name}: {dq.name} dequantizes per channel; only per-tensor tables are expected")
    return quantized[: -len("_quantized")]


def gather_tables(g: Graph, put, positions):
    """Gather(table_q, ids) -> DequantizeLinear(scale, zero point): a token or position embedding table."""
    for n in (n for n in g.nodes if n.op_type == "Gather" and n.input[0] in g.init):
        dq = g.only_consumer(n.output[0], "DequantizeLinear")
        name = g.prefix + exported_name(g, n.input[0], dq)
        raw, scale, zp = g.take(n.input[0]), g.take(dq.input[1]), g.take(dq.input[2])
        if name.endswith("embed_positions.weight"):
            positions[name] = (raw, scale, zp)  # recomputed by transformers; checked, not stored
        else:
            put(name, dequantize(raw, zp, scale, axis=0), g)


def lm_head(g: Graph, put):
    """logits = MatMul(hidden, DequantizeLinear(Transpose(table_q))) + final_logits_bias, the MatMul scoped in
    lm_head: the quantizer transposes the tied embedding's int8 table rather than store it twice."""
    import numpy as np
    for n in (n for n in g.nodes if n.op_type == "MatMul" and g.scope(n) == g.prefix + "lm_head"):
        dq = g.producer.get(n.input[1])
        if dq is None or dq.op_type != "DequantizeLinear":
            raise MappingError(f"{g.path.name}: {n.name}'s weight does not come from a DequantizeLinear")
        src, perm = dq.input[0], None
        tr = g.producer.get(src)
        if tr is not None and tr.op_type == "Transpose":
            src, perm = tr.input[0], [a.ints for a in tr.attribute if a.name == "perm"]
            perm = list(perm[0]) if perm else None
        name = exported_name(g, src, dq)
        w = dequantize(g.take(src), g.take(dq.input[2]), g.take(dq.input[1]), axis=0)
        if tr is not None and tr.op_type == "Transpose":
            w = np.transpose(w, perm)
        put("lm_head.weight", w.T.copy(), g)  # MatMul's B is [d_model, vocab]; nn.Linear's weight the transpose
        put(g.prefix + name, dequantize(g.init[src], g.init[dq.input[2]], g.init[dq.input[1]], axis=0), g)
        add = g.only_consumer(n.output[0], "Add")
        bias = g.const_input(add)
        if bias != "final_logits_bias":
            raise MappingError(f"{g.path.name}: the LM head adds {bias}, expected final_logits_bias")
        put(bias, g.take(bias), g)


def leftovers(g: Graph):
    """Initializers of a weight's size that no rule above accounted for: a mapping that missed something."""
    return sorted(k for k, v in g.init.items() if k not in g.used and v.size >= 256)


def graph_params(model_dir: Path):
    """{HF parameter name: fp32 array} from the three bundled graphs, and the quantized position tables."""
    import numpy as np
    params, seen_in, positions = {}, {}, {}

    def put(name, arr, g):
        if name in params:
            if params[name].shape != arr.shape or not np.array_equal(params[name], arr):
                raise MappingError(f"{name}: {g.path.name} holds a different tensor than {seen_in[name]}")
            return
        params[name], seen_in[name] = arr, g.path.name

    for name in GRAPHS:
        g = Graph(model_dir / f"{name}_quantized.onnx", PREFIX[name])
        matmul_integer_weights(g, put)
        layer_norms(g, put)
        gather_tables(g, put, positions)
        lm_head(g, put)
        left = leftovers(g)
        if left:
            raise MappingError(f"{g.path.name}: initializers not mapped to any parameter: {', '.join(left)}")
    return params, positions


def check_positions(model, positions) -> dict:
    """The uint8 tables must be transformers' sinusoids quantized with their own scale and zero point
    (round half to even, as ONNX Runtime's quantizer): then OUT/hf's recomputed positions are the ones the
    bundled model was trained with."""
    import numpy as np
    out = {}
    for name, (raw, scale, zp) in positions.items():
        exact = model.state_dict()[name].numpy()
        q = np.clip(np.rint(exact / np.float32(scale)) + np.int32(zp), 0, 255).astype(raw.dtype)
        differ = int((q != raw).sum())
        out[name] = {"entries": int(raw.size), "differ": differ,
                     "max_abs_vs_dequantized": float(np.abs(exact - dequantize(raw, zp, scale, 0)).max())}
        if differ:
            raise MappingError(f"{name}: {differ} of {raw.size} quantized positions are not transformers' sinusoids")
    return out


def build_hf(model_dir: Path, hf: Path) -> dict:
    import numpy as np
    import torch
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer
    params, positions = graph_params(model_dir)
    cfg = MarianConfig.from_pretrained(str(model_dir))
    model = MarianMTModel(cfg).eval()
    sd = model.state_dict()
    tied = ["model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"]
    if cfg.tie_word_embeddings:
        tied.append("lm_head.weight")
    # Whichever graph held one of the tied tensors, all copies must agree (put() compared equal names only).
    held = [params[k] for k in tied if k in params]
    if not held or any(h.shape != held[0].shape or (h != held[0]).any() for h in held):
        raise MappingError(f"the tied embeddings {', '.join(k for k in tied if k in params)} differ in the graphs")
    for k in tied:
        params[k] = held[0]
    missing = sorted(k for k in sd if k not in params and "embed_positions" not in k)
    extra = sorted(k for k in params if k not in sd)
    if missing or extra:
        raise MappingError(f"graph tensors vs MarianMTModel: missing {missing}, not in the model {extra}")
    for k, v in params.items():
        if tuple(sd[k].shape) != v.shape:
            raise MappingError(f"{k}: graph shape {v.shape}, model shape {tuple(sd[k].shape)}")
    with torch.no_grad():
        for k, v in params.items():
            sd[k].copy_(torch.from_numpy(np.array(v)))  # onnx's arrays are read-only views
    report = {"parameters_from_graphs": len(params), "positions": check_positions(model, positions)}
    model.save_pretrained(str(hf), safe_serialization=True)
    MarianTokenizer.from_pretrained(str(model_dir)).save_pretrained(str(hf))
    for f in ("config.json", "generation_config.json"):  # the bundled ones, byte for byte
        shutil.copyfile(model_dir / f, hf / f)
    log(f"hf: {len(params)} parameters from the graphs -> {hf}")
    return report


# ----------------------------------------------------------------------------------------------------------
# 2. OUT/onnx with the bundled int8 graphs, OUT/ct2-*
# ----------------------------------------------------------------------------------------------------------

def write_json_atomic(path: Path, obj):
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def swap_int8_graphs(model_dir: Path, out: Path, final: Path):
    """export.py's *_quantized.onnx move to OUT/requant-int8 (the checks' yardstick, removed after them);
    the bundled ones take their place, and the manifest hashes what is there now (tolk checks it)."""
    onnx_dir, requant = out / "onnx", out / "requant-int8"
    requant.mkdir()
    for f in sorted(onnx_dir.glob("*_quantized.onnx")):
        shutil.move(str(f), requant / f.name)
    for name in GRAPHS:
        shutil.copyfile(model_dir / f"{name}_quantized.onnx", onnx_dir / f"{name}_quantized.onnx")
    mpath = onnx_dir / "tolk-manifest.json"
    manifest = json.loads(mpath.read_text(encoding="utf-8"))
    entries = []
    for e in manifest.get("files", []):
        p = onnx_dir / e["path"]
        if p.is_file():
            entries.append(dict(e, size=p.stat().st_size, sha256=sha256_file(p)))
    manifest["files"] = entries
    manifest["source"] = {"kind": "local folder", "path": str(final / "hf")}
    manifest["int8_graphs"] = (f"copied as they are from {model_dir}; OUT/hf holds their weights dequantized "
                               f"(tools/bench_from_bundled.py), the fp32 graphs are export.py's of OUT/hf")
    write_json_atomic(mpath, manifest)


# ----------------------------------------------------------------------------------------------------------
# 3. checks
# ----------------------------------------------------------------------------------------------------------

def check_round_trip(out: Path, model_dir: Path) -> dict:
    """Quantizing OUT/hf's export again must give the bundled tensors back if every weight went where it came
    from; with the versions of tools/requirements.txt even the files come out byte for byte."""
    import onnx
    from onnx import numpy_helper
    res = {}
    for name in GRAPHS:
        a, b = model_dir / f"{name}_quantized.onnx", out / "requant-int8" / f"{name}_quantized.onnx"
        if sha256_file(a) == sha256_file(b):
            res[name] = "byte-identical"
            continue
        tensors = [{t.name: numpy_helper.to_array(t) for t in onnx.load(str(f)).graph.initializer} for f in (a, b)]
        big = [k for k, v in tensors[0].items() if v.size >= 256]
        same = sum(k in tensors[1] and tensors[1][k].dtype == tensors[0][k].dtype and
                   (tensors[1][k] == tensors[0][k]).all() for k in big)
        res[name] = f"{same} of {len(big)} weight tensors identical"
    log("round trip: " + ", ".join(f"{k} {v}" for k, v in res.items()))
    return res


def ort_logits(onnx_dir: Path, sfx: str, ids, dec_ids):
    """Encoder then decoder_model (no cache) on one sentence, teacher-forced: (hidden states, logits)."""
    import numpy as np
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    enc = ort.InferenceSession(str(onnx_dir / f"encoder_model{sfx}.onnx"), so, providers=["CPUExecutionProvider"])
    dec = ort.InferenceSession(str(onnx_dir / f"decoder_model{sfx}.onnx"), so, providers=["CPUExecutionProvider"])
    mask = np.ones_like(ids)
    h = enc.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask})[0]
    logits = dec.run(["logits"], {"input_ids": dec_ids, "encoder_hidden_states": h, "encoder_attention_mask": mask})[0]
    return h, logits


def check_logits(out: Path, tok, model, sentences) -> dict:
    """Per engine: max |logit difference| over all positions of all sentences, and the share of positions
    whose argmax agrees with PyTorch's."""
    import numpy as np
    import torch
    sets = {"bundled-int8": (out / "onnx", "_quantized"), "requant-int8": (out / "requant-int8", "_quantized"),
            "export-fp32": (out / "onnx", "")}
    worst = {k: {"max_abs_logits": 0.0, "max_abs_hidden": 0.0, "argmax_agree": 0, "positions": 0} for k in sets}
    scale = 0.0
    for s in sentences:
        ids = tok(f"{TAG} {s}", return_tensors="pt").input_ids
        with torch.inference_mode():
            seq = model.generate(input_ids=ids, num_beams=1, max_new_tokens=64)
            dec = seq[:, :-1]
            ref = model(input_ids=ids, decoder_input_ids=dec)
        ref_l, ref_h = ref.logits.numpy(), ref.encoder_last_hidden_state.numpy()
        scale = max(scale, float(np.abs(ref_l).max()))
        for k, (d, sfx) in sets.items():
            h, lg = ort_logits(d, sfx, ids.numpy(), dec.numpy())
            w = worst[k]
            w["max_abs_logits"] = max(w["max_abs_logits"], float(np.abs(lg - ref_l).max()))
            w["max_abs_hidden"] = max(w["max_abs_hidden"], float(np.abs(h - ref_h).max()))
            w["argmax_agree"] += int((lg.argmax(-1) == ref_l.argmax(-1)).sum())
            w["positions"] += int(lg.shape[1])
    for k, w in worst.items():
        w["argmax_share"] = round(w.pop("argmax_agree") / w["positions"], 4)
        log(f"logits: {k:13s} vs PyTorch: max |diff| logits {w['max_abs_logits']:.4g}, hidden "
            f"{w['max_abs_hidden']:.4g}; argmax agrees at {w['argmax_share']:.1%} of {w['positions']} positions")
    b, r, f = worst["bundled-int8"], worst["requant-int8"], worst["export-fp32"]
    problems = []
    if f["max_abs_logits"] > 1e-4:
        problems.append(f"fp32 export differs from PyTorch by {f['max_abs_logits']:.3g} (> 1e-4)")
    # Same weights, same quantizer settings: the bundled graphs' error is the re-quantized graphs' (up to the
    # activations' rounding); a misplaced or mistransposed weight is off by the logits' own scale.
    if b["max_abs_logits"] > 1.5 * r["max_abs_logits"] + 1e-3 or b["argmax_share"] < r["argmax_share"] - 0.02:
        problems.append(f"bundled int8 graphs are further from PyTorch ({b['max_abs_logits']:.3g}, "
                        f"{b['argmax_share']:.1%}) than its re-quantized graphs ({r['max_abs_logits']:.3g}, "
                        f"{r['argmax_share']:.1%})")
    return {"sentences": len(sentences), "max_abs_logit_pytorch": scale, **worst, "problems": problems}


def tolk_translations(tolk: Path, model_dir: Path, sentences):
    """`tolk translate --json --beam 1`, one sentence per line: its segments (source span, output ids)."""
    cmd = [str(tolk), "translate", "-m", str(model_dir), "--beam", "1", "--max-new-tokens", "128", "--json"]
    r = subprocess.run(cmd, input="\n".join(sentences) + "\n", capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    return [json.loads(l) for l in r.stdout.splitlines() if l.strip()]


def check_greedy(tolk: Path, model_dir: Path, tok, model, sentences) -> dict:
    """Each segment tolk translated (it splits a line into sentences; the same text goes to PyTorch) through
    generate(num_beams=1); identical when the generated ids are, start and end tokens aside."""
    import torch
    special = {model.config.decoder_start_token_id, model.config.eos_token_id, model.config.pad_token_id}
    segs = tolk_translations(tolk, model_dir, sentences)
    same, examples = 0, []
    for s in segs:
        ids = tok(f"{TAG} {s['source']}", return_tensors="pt").input_ids
        with torch.inference_mode():
            out = model.generate(input_ids=ids, num_beams=1, max_new_tokens=128)[0].tolist()
        mine = [t for t in out if t not in special]
        theirs = [t for t in s["ids"] if t not in special]
        if mine == theirs:
            same += 1
        elif len(examples) < 3:
            examples.append({"source": s["source"], "tolk": s["translation"],
                             "transformers": tok.decode(out, skip_special_tokens=True)})
    share = same / len(segs)
    log(f"greedy: {same} of {len(segs)} segments ({len(sentences)} lines) identical ({share:.1%}), "
        f"tolk int8 bundled vs transformers fp32 OUT/hf")
    return {"lines": len(sentences), "segments": len(segs), "identical": same, "share": round(share, 4),
            "differing_examples": examples}


def run_checks(out: Path, model_dir: Path, tolk: Path, n: int) -> dict:
    import torch
    from transformers import MarianMTModel, MarianTokenizer
    sys.path.insert(0, str(ROOT / "bench"))
    from translate_peers import pick_sentences  # bench/translate_peers.py: the benchmarks' sentences
    torch.set_num_threads(2)
    tok = MarianTokenizer.from_pretrained(str(out / "hf"))
    model = MarianMTModel.from_pretrained(str(out / "hf")).eval()
    sentences = pick_sentences(n)
    return {"round_trip": check_round_trip(out, model_dir),
            "logits": check_logits(out, tok, model, sentences[:: max(1, n // 6)][:6]),
            "greedy": check_greedy(tolk, model_dir, tok, model, sentences)}


# ----------------------------------------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="the folder to build (replaced when everything passed)")
    ap.add_argument("--model", default=str(BUNDLED), help="the int8-only model folder (default: %(default)s)")
    ap.add_argument("--tolk", default=str(ROOT / "build" / "tolk"), help="tolk binary for the greedy check")
    ap.add_argument("--sentences", type=int, default=50, help="real sentences for the greedy check (default 50)")
    ap.add_argument("--min-identical", type=float, default=0.7,
                    help="the greedy check fails below this share of identical translations (default 0.7)")
    a = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    model_dir, final = Path(a.model).resolve(), Path(a.out).resolve()
    lack = [f"{g}_quantized.onnx" for g in GRAPHS if not (model_dir / f"{g}_quantized.onnx").is_file()]
    if lack or not (model_dir / "config.json").is_file():
        print(f"bench_from_bundled: {model_dir} lacks {', '.join(lack) or 'config.json'}", file=sys.stderr)
        return 2
    if not Path(a.tolk).is_file():
        print(f"bench_from_bundled: no tolk binary at {a.tolk} (cmake --build build, or --tolk)", file=sys.stderr)
        return 2
    out = final.with_name(final.name + ".partial")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    try:
        report = {"model": str(model_dir), "hf": build_hf(model_dir, out / "hf")}
    except MappingError as e:
        print(f"bench_from_bundled: {e}", file=sys.stderr)
        return 1
    import make_fixtures  # tools/make_fixtures.py: export.py and the CTranslate2 conversions, as --bench-model
    rc = make_fixtures.bench_convert(out / "hf", out)
    if rc != 0:
        return rc
    swap_int8_graphs(model_dir, out, final)
    report.update(run_checks(out, model_dir, Path(a.tolk), a.sentences))
    shutil.rmtree(out / "requant-int8")
    write_json_atomic(out / "bench-from-bundled.json", report)
    problems = report["logits"]["problems"]
    if report["greedy"]["share"] < a.min_identical:
        problems.append(f"only {report['greedy']['share']:.1%} of the greedy translations are identical "
                        f"(--min-identical {a.min_identical})")
    if problems:
        print("bench_from_bundled: " + "; ".join(problems) + f" (figures in {out / 'bench-from-bundled.json'})",
              file=sys.stderr)
        return 1
    if final.exists():
        shutil.rmtree(final)
    os.replace(out, final)
    log(f"done: {final} (figures in bench-from-bundled.json)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
