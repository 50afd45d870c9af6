#!/usr/bin/env python3
"""The peer servers of bench/serve.sh: the HTTP service a team writes around its translation model, as
the libraries' own docs show it, with nothing tuned beyond them. FastAPI + uvicorn, one process, one
model load, the same request and answer as tolk's native API (POST /v1/translate with texts,
max_new_tokens, min_new_tokens; {"translations": [{"text": ...}]}), so one load generator drives all.

  transformers  MarianMTModel.generate() on PyTorch: a plain `def` endpoint, which FastAPI runs in its
                thread pool, each request one padded batch of its texts.
  optimum       the same code on Optimum's ORTModelForSeq2SeqLM (ONNX Runtime, CPU provider), fp32 or the
                *_quantized int8 graphs tools/export.py wrote.
  ct2           ctranslate2.Translator with its own queue: translate_batch(asynchronous=True,
                max_batch_size, batch_type="tokens") from an `async def` endpoint, max_queued_batches
                bounding the queue, as CTranslate2's docs recommend for serving.

    python bench/serve_peer.py --engine ct2 --precision int8 --model /tmp/tolk-bench --threads 2 --port 8101

The model folder is what `tools/make_fixtures.py --bench-model DIR` writes (hf/, onnx/, ct2-*/).
"""
import argparse
import asyncio
import os
import sys
from pathlib import Path

TAG = ">>cmn_Hans<<"  # what tolk serve prefixes for target zh; the peers do the same work


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", choices=["transformers", "optimum", "ct2"], required=True)
    ap.add_argument("--precision", choices=["fp32", "int8"], default="fp32")
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--port", type=int, default=8101)
    ap.add_argument("--max-batch-tokens", type=int, default=8192, help="ct2: max_batch_size in tokens")
    ap.add_argument("--max-queued-batches", type=int, default=64, help="ct2: queue bound (-1: none)")
    return ap.parse_args()


def torch_app(a, app, Req):
    import torch
    from transformers import MarianTokenizer
    torch.set_num_threads(a.threads)
    hf = Path(a.model) / "hf"
    tok = MarianTokenizer.from_pretrained(str(hf))
    if a.engine == "transformers":
        if a.precision != "fp32":
            raise SystemExit("transformers: fp32 only")
        from transformers import MarianMTModel
        model = MarianMTModel.from_pretrained(str(hf)).eval()
    else:
        import onnxruntime as ort
        from optimum.onnxruntime import ORTModelForSeq2SeqLM
        so = ort.SessionOptions()
        so.intra_op_num_threads = a.threads
        sfx = "_quantized" if a.precision == "int8" else ""
        model = ORTModelForSeq2SeqLM.from_pretrained(
            str(Path(a.model) / "onnx"), use_cache=True, use_merged=False, session_options=so,
            provider="CPUExecutionProvider", encoder_file_name=f"encoder_model{sfx}.onnx",
            decoder_file_name=f"decoder_model{sfx}.onnx", decoder_with_past_file_name=f"decoder_with_past_model{sfx}.onnx")

    @app.post("/v1/translate")
    def translate(req: Req):
        batch = tok([f"{TAG} {t}" for t in req.texts], return_tensors="pt", padding=True)
        with torch.inference_mode():
            out = model.generate(**batch, num_beams=req.beam, max_new_tokens=req.max_new_tokens,
                                 min_new_tokens=req.min_new_tokens or None)
        return {"translations": [{"text": t} for t in tok.batch_decode(out, skip_special_tokens=True)]}


def ct2_app(a, app, Req):
    # ctranslate2 needs neither torch nor transformers to translate (see bench/translate_peers.py).
    for m in ("torch", "transformers", "huggingface_hub"):
        sys.modules.setdefault(m, None)
    import ctranslate2
    import sentencepiece as spm
    hf = Path(a.model) / "hf"
    src, tgt = spm.SentencePieceProcessor(str(hf / "source.spm")), spm.SentencePieceProcessor(str(hf / "target.spm"))
    d = Path(a.model) / ("ct2-int8" if a.precision == "int8" else "ct2-float32")
    tr = ctranslate2.Translator(str(d), device="cpu", compute_type="int8" if a.precision == "int8" else "float32",
                                inter_threads=1, intra_threads=a.threads, max_queued_batches=a.max_queued_batches)

    @app.post("/v1/translate")
    async def translate(req: Req):
        tokens = [[TAG] + src.encode(t, out_type=str) + ["</s>"] for t in req.texts]
        results = tr.translate_batch(tokens, asynchronous=True, max_batch_size=a.max_batch_tokens, batch_type="tokens",
                                     beam_size=req.beam, max_decoding_length=req.max_new_tokens,
                                     min_decoding_length=req.min_new_tokens)
        hyps = await asyncio.gather(*(asyncio.to_thread(r.result) for r in results))
        return {"translations": [{"text": tgt.decode(h.hypotheses[0])} for h in hyps]}


def main():
    a = parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from fastapi import FastAPI
    from pydantic import BaseModel
    import uvicorn

    class Req(BaseModel):
        texts: list[str]
        max_new_tokens: int = 128
        min_new_tokens: int = 0
        beam: int = 1

    app = FastAPI()

    @app.get("/health")
    def health():
        return {"status": "ok"}

    (ct2_app if a.engine == "ct2" else torch_app)(a, app, Req)
    print(f"listening on http://127.0.0.1:{a.port}", flush=True)
    uvicorn.run(app, host="127.0.0.1", port=a.port, log_level="warning")


if __name__ == "__main__":
    main()
