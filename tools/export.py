#!/usr/bin/env python3
"""Export a HuggingFace Marian (or other Optimum-supported seq2seq) model to ONNX for tolk.

    python3 tools/export.py MODEL OUT_DIR [--quantize int8]

MODEL is a HuggingFace model id (e.g. Helsinki-NLP/opus-mt-en-zh) or a local model folder.
OUT_DIR receives Optimum's layout:

    encoder_model.onnx  decoder_model.onnx  decoder_with_past_model.onnx  decoder_model_merged.onnx
    config.json  generation_config.json  source.spm  target.spm  vocab.json  tokenizer_config.json
    *_quantized.onnx         (with --quantize int8: onnxruntime dynamic int8, as HuggingFace ONNX repos name them)
    tolk-manifest.json       (sha256 and size of every file, opsets, versions, verification figures)

Verification (always, unless --no-verify): ONNX Runtime against PyTorch on sample sentences — encoder hidden
states and first-step logits (and the merged decoder's two branches), max abs difference printed, failure
above --atol (1e-4); then greedy translations compared token by token.  Exit status 0 only if all passed.

Offline: with HF_HUB_OFFLINE=1 (or --offline) nothing is downloaded; a model id that is not in the local
cache, or a folder that does not exist, is a clear error.  Versions: tools/requirements.txt.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.dont_write_bytecode = True  # no tools/__pycache__ in the work tree
from common import logger, sha256_file  # tools/common.py

TOKENIZER_FILES = ["source.spm", "target.spm", "vocab.json", "tokenizer_config.json", "target_vocab.json"]
CONFIG_FILES = ["config.json", "generation_config.json"]
ONNX_NAMES = ["encoder_model", "decoder_model", "decoder_with_past_model", "decoder_model_merged"]
SAMPLE_SENTENCES = [
    "Hello world.",
    "The file cannot be opened because the directory does not exist.",
    "Print version information and exit.",
    "How are you today?",
]
QUANT_SETTINGS = {
    "method": "onnxruntime.quantization.quantize_dynamic",
    "weight_type": "QInt8",
    "per_channel": True,
    "reduce_range": True,
    "op_types_to_quantize": "default (IntegerOpsRegistry: MatMul, Gather, Conv, Attention, ...)",
    "extra_options": {"EnableSubgraph": True, "MatMulConstBOnly": True},
}


class ExportError(Exception):
    pass


log = logger("export")


def offline_requested(args) -> bool:
    v = os.environ.get("HF_HUB_OFFLINE", "").strip().lower()
    return args.offline or v in ("1", "true", "yes", "on")


def resolve_model(model: str, offline: bool) -> tuple[Path, dict]:
    """Return a local folder for MODEL and a description of where it came from.  Never hangs: offline, only
    the local cache is consulted; online, huggingface_hub's own timeouts apply and errors are reported."""
    p = Path(model).expanduser()
    looks_like_path = model.startswith((".", "/", "~")) or os.sep in model.strip("/").replace("/", "", 1) \
        or p.exists()
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise ExportError(f"{p}: not a HuggingFace model folder (no config.json)")
        return p.resolve(), {"kind": "local folder", "path": str(p.resolve())}
    if p.exists():
        raise ExportError(f"{p}: is a file, expected a model folder or a HuggingFace model id")
    if looks_like_path or model.count("/") > 1:
        raise ExportError(f"{model}: no such model folder")
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", "20")
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", "60")
    if offline:
        os.environ["HF_HUB_OFFLINE"] = "1"
    from huggingface_hub import snapshot_download
    patterns = ["*.json", "*.spm", "*.model", "*.txt", "*.safetensors", "pytorch_model*.bin"]
    try:
        folder = snapshot_download(model, allow_patterns=patterns, local_files_only=offline)
    except Exception as e:  # LocalEntryNotFoundError, RepositoryNotFoundError, connection errors ...
        if offline:
            raise ExportError(
                f"{model}: not in the local HuggingFace cache and offline mode is on (HF_HUB_OFFLINE=1 or "
                f"--offline), so nothing is downloaded. Download it first on a machine with internet "
                f"(huggingface-cli download {model}) or pass a local model folder. ({type(e).__name__})") from None
        raise ExportError(f"{model}: cannot fetch from the HuggingFace Hub: {type(e).__name__}: {e}. "
                          f"Check the id and the network, or pass a local model folder.") from None
    folder = Path(folder)
    desc = {"kind": "huggingface hub", "id": model, "snapshot": folder.name, "path": str(folder)}
    return folder, desc


def versions() -> dict:
    out = {"python": platform.python_version()}
    import importlib.metadata as md
    for pkg in ("torch", "transformers", "optimum", "optimum-onnx", "onnx", "onnxruntime", "sentencepiece",
                "numpy", "tokenizers"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    return out


# ----------------------------------------------------------------------------------------------------------
# export + quantize
# ----------------------------------------------------------------------------------------------------------

def onnx_export(src: Path, out: Path, task: str, opset: int | None):
    from optimum.exporters.onnx import main_export
    if task == "auto":
        cfg = json.loads((src / "config.json").read_text(encoding="utf-8"))
        if not cfg.get("is_encoder_decoder"):
            raise ExportError(f"{src}: not an encoder-decoder model (config.json is_encoder_decoder is not true); "
                              f"pass --task explicitly to export it anyway")
        task = "text2text-generation-with-past"
    log(f"exporting {src} ({task}) with Optimum to {out}")
    with tempfile.TemporaryDirectory(prefix="tolk-export-") as tmp:
        main_export(str(src), tmp, task=task, opset=opset, device="cpu", do_validation=False,
                    local_files_only=True, library_name="transformers")
        out.mkdir(parents=True, exist_ok=True)
        for f in sorted(Path(tmp).iterdir()):
            if f.is_file():
                shutil.copyfile(f, out / f.name)
    # keep the model's own config and tokenizer files byte for byte (save_pretrained rewrites them)
    for name in CONFIG_FILES + TOKENIZER_FILES:
        if (src / name).is_file():
            shutil.copyfile(src / name, out / name)
    missing = [n + ".onnx" for n in ONNX_NAMES if not (out / (n + ".onnx")).is_file()]
    if missing:
        raise ExportError(f"Optimum did not produce {', '.join(missing)} (task {task}); "
                          f"the four-file decoder layout needs a seq2seq model with past key values")
    return task


def quantize_int8(out: Path):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    made = []
    for n in ONNX_NAMES:
        src = out / f"{n}.onnx"
        dst = out / f"{n}_quantized.onnx"
        log(f"quantizing {src.name} -> {dst.name}")
        quantize_dynamic(str(src), str(dst), per_channel=True, reduce_range=True, weight_type=QuantType.QInt8,
                         extra_options={"EnableSubgraph": True, "MatMulConstBOnly": True})
        made.append(dst.name)
    return made


# ----------------------------------------------------------------------------------------------------------
# verification: ORT vs PyTorch
# ----------------------------------------------------------------------------------------------------------

class OrtSeq2Seq:
    """The minimal ORT driver the verification needs (and a readable reference for tolk's own loop)."""

    def __init__(self, out: Path, suffix: str = ""):
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.log_severity_level = 3
        self.timings = {}

        def sess(name):
            t0 = time.perf_counter()
            s = ort.InferenceSession(str(out / f"{name}{suffix}.onnx"), so, providers=["CPUExecutionProvider"])
            self.timings[f"{name}{suffix}.onnx"] = round(time.perf_counter() - t0, 4)
            return s

        self.enc = sess("encoder_model")
        self.dec = sess("decoder_model")
        self.past = sess("decoder_with_past_model")
        self.merged = sess("decoder_model_merged")

    @staticmethod
    def _feed(sess, values):
        names = [i.name for i in sess.get_inputs()]
        return {k: v for k, v in values.items() if k in names}

    def encode(self, ids, mask):
        return self.enc.run(None, self._feed(self.enc, {"input_ids": ids, "attention_mask": mask}))[0]

    def first_step(self, hidden, mask, dec_ids):
        outs = self.dec.run(None, self._feed(self.dec, {"input_ids": dec_ids, "encoder_hidden_states": hidden,
                                                        "encoder_attention_mask": mask}))
        names = [o.name for o in self.dec.get_outputs()]
        return outs[0], dict(zip(names[1:], outs[1:]))

    def next_step(self, mask, dec_ids, past):
        feed = {"input_ids": dec_ids, "encoder_attention_mask": mask}
        feed.update({k.replace("present", "past_key_values"): v for k, v in past.items()})
        outs = self.past.run(None, self._feed(self.past, feed))
        names = [o.name for o in self.past.get_outputs()]
        new = dict(zip(names[1:], outs[1:]))
        merged = dict(past)
        merged.update(new)  # the with-past decoder does not return the (constant) cross-attention keys/values
        return outs[0], merged

    def merged_step(self, hidden, mask, dec_ids, past, use_cache: bool, heads: int, head_dim: int):
        import numpy as np
        feed = {"input_ids": dec_ids, "encoder_hidden_states": hidden, "encoder_attention_mask": mask,
                "use_cache_branch": np.array([use_cache])}
        for i in self.merged.get_inputs():
            if i.name.startswith("past_key_values"):
                key = i.name.replace("past_key_values", "present")
                if use_cache:
                    feed[i.name] = past[key]
                else:
                    feed[i.name] = np.zeros((dec_ids.shape[0], heads, 0, head_dim), dtype=np.float32)
        outs = self.merged.run(None, self._feed(self.merged, feed))
        names = [o.name for o in self.merged.get_outputs()]
        new = dict(zip(names[1:], outs[1:]))
        if use_cache:  # the cache branch's cross-attention outputs are placeholders: keep the first step's
            new.update({k: v for k, v in past.items() if ".encoder." in k})
        return outs[0], new


def _lang_prefix(tok) -> str:
    codes = getattr(tok, "supported_language_codes", None) or []
    for c in (">>cmn_Hans<<", ">>zho_Hans<<"):
        if c in codes:
            return c + " "
    return (codes[0] + " ") if codes else ""


def greedy_ort(ort_model, gen, ids, mask, max_new: int, use_merged: bool, heads: int, head_dim: int):
    """Greedy search exactly as transformers' generate(num_beams=1) with opus-mt's generation_config:
    bad_words_ids masks <pad>, forced_eos at max_length - 1."""
    import numpy as np
    start, eos, pad = gen["decoder_start_token_id"], gen["eos_token_id"], gen["pad_token_id"]
    bad = [b[0] for b in (gen.get("bad_words_ids") or []) if len(b) == 1]
    hidden = ort_model.encode(ids, mask)
    B = ids.shape[0]
    seqs = np.full((B, 1), start, dtype=np.int64)
    done = np.zeros(B, dtype=bool)
    past = None
    max_length = max_new + 1
    for step in range(max_new):
        cur = seqs[:, -1:] if past is not None else seqs
        if use_merged:
            logits, past = ort_model.merged_step(hidden, mask, cur, past, past is not None, heads, head_dim)
        elif past is None:
            logits, past = ort_model.first_step(hidden, mask, cur)
        else:
            logits, past = ort_model.next_step(mask, cur, past)
        lg = logits[:, -1, :].astype(np.float32).copy()
        for b in bad:
            lg[:, b] = -np.inf
        if seqs.shape[1] == max_length - 1 and gen.get("forced_eos_token_id") is not None:
            lg[:, :] = -np.inf
            lg[:, gen["forced_eos_token_id"]] = 0
        nxt = lg.argmax(-1)
        nxt = np.where(done, pad, nxt)
        seqs = np.concatenate([seqs, nxt[:, None]], axis=1)
        done |= nxt == eos
        if done.all():
            break
    return seqs


def verify(src: Path, out: Path, atol: float, quantized: bool, max_new: int = 24) -> dict:
    import numpy as np
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, GenerationConfig
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(str(src))
    model = AutoModelForSeq2SeqLM.from_pretrained(str(src)).eval()
    cfg = model.config
    try:
        gcfg = GenerationConfig.from_pretrained(str(src))
    except OSError:
        gcfg = model.generation_config
    gen = {k: getattr(gcfg, k, None) for k in ("decoder_start_token_id", "eos_token_id", "pad_token_id",
                                                "forced_eos_token_id", "bad_words_ids")}
    if gen["decoder_start_token_id"] is None:
        gen["decoder_start_token_id"] = cfg.decoder_start_token_id
    heads = cfg.decoder_attention_heads
    head_dim = cfg.d_model // heads
    prefix = _lang_prefix(tok)
    sents = [prefix + s for s in SAMPLE_SENTENCES]
    enc = tok(sents, return_tensors="np", padding=True)
    ids, mask = enc["input_ids"].astype(np.int64), enc["attention_mask"].astype(np.int64)
    tids, tmask = torch.from_numpy(ids), torch.from_numpy(mask)
    start = np.full((ids.shape[0], 1), gen["decoder_start_token_id"], dtype=np.int64)
    with torch.no_grad():
        t_hidden = model.get_encoder()(input_ids=tids, attention_mask=tmask).last_hidden_state
        t_out = model(encoder_outputs=(t_hidden,), attention_mask=tmask, decoder_input_ids=torch.from_numpy(start),
                      use_cache=True)
        t_logits1 = t_out.logits.numpy()
        # second step with the cache, fed the argmax of the first
        nxt = t_out.logits[:, -1].argmax(-1, keepdim=True)
        t_out2 = model(encoder_outputs=(t_hidden,), attention_mask=tmask, decoder_input_ids=nxt,
                       past_key_values=t_out.past_key_values, use_cache=True)
        t_logits2 = t_out2.logits.numpy()
        t_gen = model.generate(input_ids=tids, attention_mask=tmask, num_beams=1, do_sample=False,
                               max_new_tokens=max_new)
    t_hidden = t_hidden.numpy()
    results = {}
    for variant in (["fp32", "int8"] if quantized else ["fp32"]):
        om = OrtSeq2Seq(out, "" if variant == "fp32" else "_quantized")
        r = {"session_create_s": om.timings}
        hidden = om.encode(ids, mask)
        r["encoder_hidden_max_abs_diff"] = float(np.abs(hidden - t_hidden).max())
        l1, past = om.first_step(hidden, mask, start)
        r["decoder_step1_logits_max_abs_diff"] = float(np.abs(l1 - t_logits1).max())
        l2, _ = om.next_step(mask, nxt.numpy(), past)
        r["decoder_with_past_step2_logits_max_abs_diff"] = float(np.abs(l2 - t_logits2).max())
        m1, mpast = om.merged_step(hidden, mask, start, None, False, heads, head_dim)
        r["merged_no_cache_step1_logits_max_abs_diff"] = float(np.abs(m1 - t_logits1).max())
        m2, _ = om.merged_step(hidden, mask, nxt.numpy(), mpast, True, heads, head_dim)
        r["merged_cache_step2_logits_max_abs_diff"] = float(np.abs(m2 - t_logits2).max())
        greedy = {}
        for mode in ("split", "merged"):
            seqs = greedy_ort(om, gen, ids, mask, max_new, mode == "merged", heads, head_dim)
            ref = t_gen.numpy()
            n = max(seqs.shape[1], ref.shape[1])
            pad = gen["pad_token_id"]
            a = np.pad(seqs, ((0, 0), (0, n - seqs.shape[1])), constant_values=pad)
            b = np.pad(ref, ((0, 0), (0, n - ref.shape[1])), constant_values=pad)
            greedy[mode] = {"tokens_compared": int(a.size), "tokens_equal": int((a == b).sum()),
                            "identical": bool((a == b).all())}
        r["greedy_vs_pytorch"] = greedy
        figs = [v for k, v in r.items() if k.endswith("max_abs_diff")]
        log(f"{variant}: encoder {r['encoder_hidden_max_abs_diff']:.3g}, step-1 logits "
            f"{r['decoder_step1_logits_max_abs_diff']:.3g}, with-past step-2 "
            f"{r['decoder_with_past_step2_logits_max_abs_diff']:.3g}, merged "
            f"{r['merged_no_cache_step1_logits_max_abs_diff']:.3g}/{r['merged_cache_step2_logits_max_abs_diff']:.3g}; "
            f"greedy identical: split {greedy['split']['identical']}, merged {greedy['merged']['identical']}")
        if variant == "fp32":
            r["passed"] = bool(max(figs) <= atol and greedy["split"]["identical"] and greedy["merged"]["identical"])
        else:
            r["passed"] = None  # int8 is reported, not judged: it is not expected to match fp32 to 1e-4
        results[variant] = r
    results["atol"] = atol
    results["sentences"] = sents
    results["max_new_tokens"] = max_new
    results["pytorch_greedy"] = {"ids": t_gen.numpy().tolist(),
                                 "text": tok.batch_decode(t_gen, skip_special_tokens=True)}
    results["passed"] = bool(results["fp32"]["passed"])
    return results


# ----------------------------------------------------------------------------------------------------------
# manifest
# ----------------------------------------------------------------------------------------------------------

def onnx_facts(path: Path) -> dict:
    import onnx
    m = onnx.load(str(path), load_external_data=False)
    opsets = {(o.domain or "ai.onnx"): o.version for o in m.opset_import}
    try:
        onnx.checker.check_model(str(path))
        checker = "ok"
    except Exception as e:  # recorded, not fatal: the verification decides
        checker = f"failed: {e}"
    return {"ir_version": m.ir_version, "opset": opsets.get("ai.onnx"), "opset_import": opsets,
            "producer": f"{m.producer_name} {m.producer_version}".strip(),
            "inputs": [i.name for i in m.graph.input], "outputs": [o.name for o in m.graph.output],
            "onnx_checker": checker}


def write_manifest(out: Path, source: dict, src_dir: Path, task: str, quantized: list, verification,
                   reproducible: bool = False):
    import onnxruntime as ort
    files = []
    for f in sorted(out.iterdir()):
        if not f.is_file() or f.name == "tolk-manifest.json":
            continue
        rec = {"path": f.name, "size": f.stat().st_size, "sha256": sha256_file(f)}
        if f.suffix == ".onnx":
            rec.update(onnx_facts(f))
            rec["quantization"] = dict(QUANT_SETTINGS) if f.name in quantized else None
        files.append(rec)
    src_weights = {}
    for pat in ("*.safetensors", "pytorch_model*.bin"):
        for f in sorted(src_dir.glob(pat)):
            src_weights[f.name] = {"size": f.stat().st_size, "sha256": sha256_file(f)}
    man = {
        "format": "tolk-manifest/1",
        "created_by": "tools/export.py",
        "created_at": None if reproducible else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "source": source,
        "task": task,
        "versions": versions(),
        "files": files,
        "checklist": {
            "source_weights_sha256": src_weights,
            "onnx_checker": {r["path"]: r["onnx_checker"] for r in files if r["path"].endswith(".onnx")},
            "ort_available_providers": ort.get_available_providers(),
            "ort_session_create_s": ({**verification["fp32"]["session_create_s"],
                                      **verification.get("int8", {}).get("session_create_s", {})}
                                     if verification else None),
            "not_checked_here": ["long-tail latency (P99 <= 1.5 x P50)", "24 h RSS growth",
                                 "rollback plan"],
        },
        "verification": verification,
    }
    with open(out / "tolk-manifest.json", "w", encoding="utf-8", newline="\n") as f:
        json.dump(man, f, ensure_ascii=False, indent=2)
        f.write("\n")
    return man


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="HuggingFace model id or local model folder")
    ap.add_argument("out_dir", help="output folder (created)")
    ap.add_argument("--quantize", choices=["int8"], help="also write dynamic-int8 *_quantized.onnx variants")
    ap.add_argument("--task", default="auto", help="Optimum task (default: inferred, with past key values)")
    ap.add_argument("--opset", type=int, default=None, help="ONNX opset (default: Optimum's for the model)")
    ap.add_argument("--atol", type=float, default=1e-4, help="max abs difference ORT vs PyTorch (default 1e-4)")
    ap.add_argument("--offline", action="store_true", help="same as HF_HUB_OFFLINE=1")
    ap.add_argument("--no-verify", action="store_true", help="skip the ORT-vs-PyTorch verification")
    ap.add_argument("--reproducible", action="store_true",
                    help="leave out of tolk-manifest.json what differs run to run (date, timings, absolute paths)")
    args = ap.parse_args(argv)
    try:
        offline = offline_requested(args)
        src, source = resolve_model(args.model, offline)
        os.environ["HF_HUB_OFFLINE"] = "1"  # from here on everything is local
        out = Path(args.out_dir)
        task = onnx_export(src, out, args.task, args.opset)
        quantized = quantize_int8(out) if args.quantize == "int8" else []
        verification = None
        if not args.no_verify:
            verification = verify(src, out, args.atol, bool(quantized))
        if args.reproducible:
            source = {k: (Path(v).name if k == "path" else v) for k, v in source.items()}
            if verification:
                for v in ("fp32", "int8"):
                    if v in verification:
                        verification[v]["session_create_s"] = {k: None for k in verification[v]["session_create_s"]}
        man = write_manifest(out, source, src, task, quantized, verification, reproducible=args.reproducible)
        if verification is not None and not verification["passed"]:
            log(f"FAILED: ONNX Runtime differs from PyTorch by more than {args.atol} or greedy outputs differ; "
                f"see {out / 'tolk-manifest.json'}")
            return 1
        log(f"done: {out}")
        return 0
    except ExportError as e:
        print(f"export.py: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
