#!/usr/bin/env python3
"""Train the small English→Chinese MarianMT demo model bundled with tolk (issue 7).  Not part of CI.

    nice -n 15 /work/venv/bin/python tools/train_demo.py --hours 2          # train, or resume, for 2 h in all
    /work/venv/bin/python tools/train_demo.py --hours 2 --fresh            # start over (moves old work aside)
    /work/venv/bin/python tools/train_demo.py --export-only                 # write WORK/final from the last checkpoint
    /work/venv/bin/python tools/train_demo.py --export-only --average 4     # ... from the mean of the 4 newest snapshots

Input: the splits written by tools/demo_data.py (DATA, default /work/demo-data: train.en/zh, dev.en/zh).
Work folder (WORK, default /work/demo-train, outside the repo):

  tok/        source.spm = target.spm (one shared SentencePiece unigram model, ~8k pieces, nmt_nfkc, trained
              on train.en + train.zh), vocab.json (Marian joint vocabulary with the 13 opus-mt-en-zh language
              tags; </s> 0, <unk> 1, <pad> last), tokenizer_config.json, config.json, generation_config.json
  data-*.pt   the encoded training/dev ids, cached per data + vocabulary hash
  ckpt/last.pt      model + optimiser + schedule + data position + RNG states + elapsed time (atomic writes;
                    the previous one is kept as last.prev.pt)
  snap/step-N.pt    the model weights alone at every checkpoint (and at the end), the newest
                    --keep-snapshots kept, for --average
  best/       HF folder of the checkpoint with the best dev chrF so far
  final/      HF folder written when the run ends (time budget, --max-steps, Ctrl-C / SIGTERM); this is what
              tools/export.py takes
  train.log   progress lines (also on stdout) and dev evaluations, JSON lines in metrics.jsonl

The model is opus-mt-en-zh's configuration (tools/make_fixtures.py marian_config: swish, static sinusoidal
positions, scale_embedding, tied embeddings, pad = decoder start, eos 0, bad_words_ids [[pad]], num_beams 4)
with d_model 256, 3+3 layers, 4 heads, ffn 1024.  Sources carry >>cmn_Hans<< as opus-mt-en-zh's do.  The
<pad> row of the tied embedding is kept at zero after every step, as in every converted opus-mt model.

Training: token-bucketed batches (--batch-tokens source+target tokens incl. padding), AdamW, linear warm-up
then inverse-square-root decay, label smoothing 0.1, gradient clipping 1.0, dropout 0.1; the forward pass runs
under bfloat16 autocast (--no-bf16 for fp32), weights, optimiser state and the loss stay fp32.  Everything is seeded
(--seed); the batch order of epoch e depends only on the seed and e, so a resumed run continues with exactly
the batches the interrupted one would have seen (bit-identical results are not promised: thread timing).
--hours is the total training budget across resumes (stored in the checkpoint); evaluations do not count.
--max-epochs stops after a fixed amount of data instead (whichever of the two comes first), so that a run on
a busy machine can be given more hours without training longer than intended.  Rerunning with a larger
--hours or --max-epochs extends a finished run (the learning-rate schedule does not depend on either).  Every --eval-minutes the
first --dev-size dev sentences are decoded greedily and scored with sacrebleu chrF and BLEU (tokenize zh).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import shutil
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.dont_write_bytecode = True  # no tools/__pycache__ in the work tree
sys.path.insert(0, str(ROOT / "tools"))
from common import read_lines  # tools/common.py

SEED = 20261202
TAG = ">>cmn_Hans<<"
SIZES = dict(d_model=256, encoder_layers=3, decoder_layers=3, encoder_attention_heads=4,
             decoder_attention_heads=4, encoder_ffn_dim=1024, decoder_ffn_dim=1024, max_position_embeddings=512)

_stop = {"signal": None}


def _on_signal(sig, _frame):
    _stop["signal"] = sig


class Log:
    def __init__(self, work: Path):
        self.f = open(work / "train.log", "a", encoding="utf-8")
        self.m = open(work / "metrics.jsonl", "a", encoding="utf-8")

        self.stdout = True

    def __call__(self, *a):
        line = time.strftime("%H:%M:%S ") + " ".join(str(x) for x in a)
        if self.stdout:
            try:
                print(line, flush=True)
            except OSError:  # stdout was a pipe that went away (| tee, | tail killed): keep training, log to file
                self.stdout = False
        self.f.write(line + "\n")
        self.f.flush()

    def metric(self, **kw):
        self.m.write(json.dumps(kw, ensure_ascii=False) + "\n")
        self.m.flush()


def file_hash(*paths) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(Path(p).read_bytes())
    return h.hexdigest()[:16]


# ----------------------------------------------------------------------------------------------------------
# tokenizer: one shared SentencePiece model + the Marian joint vocab.json
# ----------------------------------------------------------------------------------------------------------

def build_tokenizer(data: Path, tok: Path, vocab_size: int, seed: int, threads: int, sentences: int, log):
    import sentencepiece as spm
    import make_fixtures as mf  # build_vocab, marian_config, generation_config, write_json, LANG_TAGS
    tok.mkdir(parents=True, exist_ok=True)
    en = read_lines(data / "train.en")
    zh = read_lines(data / "train.zh")
    if hasattr(spm, "set_random_generator_seed"):
        spm.set_random_generator_seed(seed)
    corpus = tok / "spm-train.txt"
    # English and Chinese lines interleaved in a fixed order; deduplicated so that short UI strings
    # repeated across packages do not dominate the piece statistics
    seen, lines = set(), []
    for l in en + zh:
        if l not in seen:
            seen.add(l)
            lines.append(l)
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    t0 = time.time()
    spm.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(tok / "shared"), model_type="unigram", vocab_size=vocab_size,
        character_coverage=0.9995, normalization_rule_name="nmt_nfkc", byte_fallback=False,
        hard_vocab_limit=False, num_threads=threads, input_sentence_size=sentences, shuffle_input_sentence=True,
        split_digits=False, max_sentence_length=8192, minloglevel=2)
    corpus.unlink()
    for name in ("source.spm", "target.spm"):
        shutil.copyfile(tok / "shared.model", tok / name)
    (tok / "shared.model").unlink()
    (tok / "shared.vocab").unlink()
    vocab = mf.build_vocab(tok / "source.spm", tok / "target.spm", en, [("cmn_Hans", l) for l in zh])
    # spm returns a character it does not know (outside character_coverage) as a raw piece, which
    # build_vocab would give an id of its own; on the target side such an id decodes to " ⁇ ", so the model
    # must not learn to produce it.  Keep only spm's own pieces (+ </s>, <unk>, the tags, <pad>): unknown
    # characters become <unk> on both sides, exactly as spm itself maps them.
    sp = spm.SentencePieceProcessor(model_file=str(tok / "source.spm"))
    keep = [p for p in sorted(vocab, key=vocab.get)
            if p in ("</s>", "<unk>", "<pad>") or (p.startswith(">>") and p.endswith("<<"))
            or sp.piece_to_id(p) != sp.unk_id()]
    dropped = len(vocab) - len(keep)
    vocab = {p: i for i, p in enumerate(keep)}
    assert vocab["</s>"] == 0 and vocab["<unk>"] == 1 and vocab["<pad>"] == len(vocab) - 1
    mf.write_json(tok / "vocab.json", vocab, indent=2)
    (tok / "tokenizer_config.json").write_text('{"target_lang": "zho", "source_lang": "eng"}', encoding="utf-8")
    cfg = mf.marian_config(len(vocab), SIZES)
    cfg["_name_or_path"] = "tolk-demo-en-zh"
    mf.write_json(tok / "config.json", cfg, indent=2)
    mf.write_json(tok / "generation_config.json", mf.generation_config(len(vocab)), indent=2)
    log(f"tokenizer: shared spm {vocab_size} pieces in {time.time() - t0:.0f}s; vocab.json {len(vocab)} entries, "
        f"{TAG} = {vocab[TAG]}, <pad> = {vocab['<pad>']} ({dropped} raw characters unknown to spm left out)")


class Encoder:
    """What MarianTokenizer does for `>>cmn_Hans<< text` (source) and text_target=text (target), without its
    per-call overhead: spm pieces looked up in vocab.json (unknown → <unk>), </s> appended, the tag id
    prepended on the source side.  check() compares it with MarianTokenizer on a sample."""

    def __init__(self, tok: Path):
        import sentencepiece as spm
        self.sp = spm.SentencePieceProcessor(model_file=str(tok / "source.spm"))
        self.vocab = json.loads((tok / "vocab.json").read_text(encoding="utf-8"))
        self.unk, self.eos, self.pad = self.vocab["<unk>"], self.vocab["</s>"], self.vocab["<pad>"]
        self.tag = self.vocab[TAG]

    def ids(self, text: str):
        v, unk = self.vocab, self.unk
        return [v.get(p, unk) for p in self.sp.encode(text, out_type=str)] + [self.eos]

    def src(self, text: str):
        return [self.tag] + self.ids(text)

    def check(self, tok: Path, en, zh, n=300):
        from transformers import MarianTokenizer
        mt = MarianTokenizer.from_pretrained(str(tok))
        bad = 0
        for e, z in list(zip(en, zh))[:n]:
            if mt(f"{TAG} {e}").input_ids != self.src(e) or mt(text_target=z).input_ids != self.ids(z):
                bad += 1
        if bad:
            raise SystemExit(f"Encoder disagrees with MarianTokenizer on {bad} of {n} pairs")


def encode_data(data: Path, tok: Path, work: Path, max_len: int, log):
    import torch
    key = file_hash(data / "train.en", data / "train.zh", data / "dev.en", data / "dev.zh", tok / "vocab.json",
                    tok / "source.spm") + f"-{max_len}"
    cache = work / f"data-{key}.pt"
    if cache.exists():
        return torch.load(cache)
    enc = Encoder(tok)
    t0 = time.time()
    out = {}
    for split in ("train", "dev"):
        en, zh = read_lines(data / f"{split}.en"), read_lines(data / f"{split}.zh")
        if split == "train":
            enc.check(tok, en, zh)
        pairs, dropped, unk = [], 0, 0
        for e, z in zip(en, zh):
            s, t = enc.src(e), enc.ids(z)
            if len(s) > max_len or len(t) > max_len:
                dropped += 1
                continue
            unk += t.count(enc.unk)
            pairs.append((s, t))
        out[split] = pairs
        out[split + "_text"] = (en, zh)
        ntok = sum(len(s) + len(t) for s, t in pairs)
        log(f"data: {split} {len(pairs)} pairs ({dropped} over {max_len} tokens dropped), {ntok} tokens, "
            f"{unk} <unk> on the target side")
    out["key"] = key
    torch.save(out, cache)
    log(f"data: encoded in {time.time() - t0:.0f}s → {cache.name}")
    return out


# ----------------------------------------------------------------------------------------------------------
# batches
# ----------------------------------------------------------------------------------------------------------

def make_batches(pairs, batch_tokens: int, seed: int, epoch: int):
    """Token-bucketed batches of pair indices for one epoch: sort by (target, source) length with a seeded
    random tie-break, cut into batches whose padded src+tgt size stays under batch_tokens, shuffle them."""
    rng = random.Random(seed * 1000 + epoch)
    order = list(range(len(pairs)))
    rng.shuffle(order)
    order.sort(key=lambda i: (len(pairs[i][1]), len(pairs[i][0])))
    batches, cur, ms, mt = [], [], 0, 0
    for i in order:
        s, t = pairs[i]
        ms2, mt2 = max(ms, len(s)), max(mt, len(t))
        if cur and (len(cur) + 1) * (ms2 + mt2) > batch_tokens:
            batches.append(cur)
            cur, ms2, mt2 = [], len(s), len(t)
        cur.append(i)
        ms, mt = ms2, mt2
    if cur:
        batches.append(cur)
    rng.shuffle(batches)
    return batches


def order_id(batches) -> str:
    """A short fingerprint of an epoch's batch order: equal in a resumed run and the run it continues."""
    return hashlib.sha256(json.dumps(batches).encode()).hexdigest()[:12]


def collate(pairs, idx, pad):
    import torch
    src = [pairs[i][0] for i in idx]
    tgt = [pairs[i][1] for i in idx]
    ls, lt = max(map(len, src)), max(map(len, tgt))
    ids = torch.full((len(idx), ls), pad, dtype=torch.long)
    mask = torch.zeros((len(idx), ls), dtype=torch.long)
    labels = torch.full((len(idx), lt), -100, dtype=torch.long)
    dec_in = torch.full((len(idx), lt), pad, dtype=torch.long)  # decoder start = pad, then labels shifted
    for r, (s, t) in enumerate(zip(src, tgt)):
        ids[r, :len(s)] = torch.tensor(s)
        mask[r, :len(s)] = 1
        labels[r, :len(t)] = torch.tensor(t)
        dec_in[r, 1:len(t)] = torch.tensor(t[:-1])
    ntok = sum(map(len, src)) + sum(map(len, tgt))
    return ids, mask, dec_in, labels, ntok


# ----------------------------------------------------------------------------------------------------------
# dev evaluation
# ----------------------------------------------------------------------------------------------------------

def greedy_translate(model, tok_dir: Path, texts, batch=32, max_new=None):
    """Greedy translations of English texts (tag added), batched by length; returns strings in order."""
    import torch
    from transformers import MarianTokenizer
    mt = MarianTokenizer.from_pretrained(str(tok_dir))
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = [None] * len(texts)
    model.eval()
    with torch.no_grad():
        for b in range(0, len(order), batch):
            idx = order[b:b + batch]
            enc = mt([f"{TAG} {texts[i]}" for i in idx], return_tensors="pt", padding=True, truncation=True,
                     max_length=256)
            n = max_new or min(256, int(enc.input_ids.shape[1] * 2 + 10))
            gen = model.generate(**enc, num_beams=1, do_sample=False, max_new_tokens=n)
            for i, t in zip(idx, mt.batch_decode(gen, skip_special_tokens=True)):
                out[i] = t
    return out


def evaluate(model, tok_dir: Path, data, n: int, pad: int, label_smoothing=0.0):
    import sacrebleu
    import torch
    import torch.nn.functional as F
    en, zh = data["dev_text"]
    en, zh = en[:n], zh[:n]
    t0 = time.time()
    hyp = greedy_translate(model, tok_dir, en)
    chrf = sacrebleu.corpus_chrf(hyp, [zh]).score
    bleu = sacrebleu.corpus_bleu(hyp, [zh], tokenize="zh").score
    # dev cross-entropy per target token (no smoothing) on the same sentences
    pairs = data["dev"][:n]
    tot, cnt = 0.0, 0
    with torch.no_grad():
        for b in range(0, len(pairs), 64):
            ids, mask, dec_in, labels, _ = collate(pairs, list(range(b, min(b + 64, len(pairs)))), pad)
            logits = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec_in).logits
            tot += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100,
                                   reduction="sum").item()
            cnt += int((labels != -100).sum())
    return {"chrf": chrf, "bleu": bleu, "dev_ce": tot / max(cnt, 1), "n": len(en), "seconds": time.time() - t0,
            "samples": list(zip(en[:5], hyp[:5]))}


# ----------------------------------------------------------------------------------------------------------
# checkpoints
# ----------------------------------------------------------------------------------------------------------

def save_ckpt(path: Path, state: dict):
    import torch
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    if path.exists():
        os.replace(path, path.with_name("last.prev.pt"))
    os.replace(tmp, path)


def save_hf(model, tok_dir: Path, out: Path, info: dict):
    """An HF model folder tools/export.py can take: weights + the tokenizer/config files from tok/."""
    tmp = out.with_name(out.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    model.save_pretrained(str(tmp), safe_serialization=True)
    for f in ("config.json", "generation_config.json"):
        (tmp / f).unlink(missing_ok=True)
    for f in ("source.spm", "target.spm", "vocab.json", "tokenizer_config.json", "config.json",
              "generation_config.json"):
        shutil.copyfile(tok_dir / f, tmp / f)
    (tmp / "training.json").write_text(json.dumps(info, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)


def save_snapshot(model, snap: Path, step: int, keep: int):
    """The model weights alone (a tenth of a full checkpoint) for averaging; the oldest beyond `keep` go."""
    import torch
    snap.mkdir(exist_ok=True)
    tmp = snap / f"step-{step:06d}.tmp"
    torch.save(model.state_dict(), tmp)
    os.replace(tmp, tmp.with_suffix(".pt"))
    for old in sorted(snap.glob("step-*.pt"))[:-keep]:
        old.unlink()


def average_snapshots(model, snap: Path, n: int, pad: int):
    """Loads into `model` the element-wise mean of the n newest snapshots (by name: step-N.pt, or any other
    .pt holding a state dict or a full checkpoint, by modification time); returns their names."""
    import torch
    files = sorted(snap.glob("*.pt"), key=lambda p: (p.stat().st_mtime, p.name))[-n:]
    if len(files) < n:
        raise SystemExit(f"--average {n}: only {len(files)} snapshots in {snap}")
    acc = None
    for f in files:
        sd = torch.load(f, map_location="cpu", weights_only=False)
        sd = sd.get("model", sd)
        if acc is None:
            acc = {k: v.double().clone() if v.is_floating_point() else v for k, v in sd.items()}
        else:
            for k, v in sd.items():
                if v.is_floating_point():
                    acc[k] += v.double()
    model.load_state_dict({k: (v / n).float() if v.is_floating_point() else v for k, v in acc.items()})
    with torch.no_grad():
        model.model.shared.weight[pad].zero_()
    return [f.name for f in files]


def lr_at(step: int, peak: float, warmup: int) -> float:
    """Linear warm-up to `peak`, then inverse square root (Marian's schedule), independent of the run length."""
    step = max(step, 1)
    if step < warmup:
        return peak * step / warmup
    return peak * math.sqrt(warmup / step)


def fmt_time(s: float) -> str:
    s = int(max(s, 0))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


# ----------------------------------------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path("/work/demo-data"))
    ap.add_argument("--work", type=Path, default=Path("/work/demo-train"))
    ap.add_argument("--hours", type=float, default=2.0, help="total training time budget across resumes")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many optimiser steps (0: no limit)")
    ap.add_argument("--max-epochs", type=float, default=0.0,
                    help="stop after this many passes over the training data, e.g. 2.5 (0: no limit); with --hours, "
                         "whichever comes first — the amount of training then does not depend on how busy the CPU is")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--vocab-size", type=int, default=8000)
    ap.add_argument("--spm-sentences", type=int, default=400000,
                    help="lines SentencePiece samples (seeded) from the deduplicated train.en + train.zh")
    ap.add_argument("--max-len", type=int, default=96, help="longest source/target in tokens kept for training")
    ap.add_argument("--batch-tokens", type=int, default=4000, help="src+tgt tokens per batch, padding included")
    ap.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    ap.add_argument("--warmup", type=int, default=400, help="warm-up steps")
    ap.add_argument("--label-smoothing", type=float, default=0.1)
    ap.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=True,
                    help="bfloat16 autocast for the forward pass (fp32 weights, optimiser and loss); about 1.4x the "
                         "steps per second of fp32 on a CPU with AVX512-BF16")
    ap.add_argument("--log-every", type=int, default=20, help="progress line every N steps")
    ap.add_argument("--ckpt-minutes", type=float, default=10.0, help="checkpoint every N minutes")
    ap.add_argument("--eval-minutes", type=float, default=20.0, help="dev chrF every N minutes (0: only at the end)")
    ap.add_argument("--dev-size", type=int, default=300, help="dev sentences decoded for chrF")
    ap.add_argument("--fresh", action="store_true", help="ignore (move aside) an existing checkpoint and tokenizer")
    ap.add_argument("--export-only", action="store_true", help="write WORK/final from ckpt/last.pt and exit")
    ap.add_argument("--average", type=int, default=0,
                    help="with --export-only: write WORK/final from the element-wise mean of the N newest snapshots "
                         "in WORK/snap instead (checkpoint averaging)")
    ap.add_argument("--keep-snapshots", type=int, default=8, help="model-weight snapshots kept in WORK/snap")
    args = ap.parse_args(argv)

    import warnings
    warnings.filterwarnings("ignore", message="Recommended: pip install sacremoses")
    # save_pretrained notes that config.json carries generation defaults; opus-mt-en-zh's config.json does too
    warnings.filterwarnings("ignore", message="Moving the following attributes in the config")
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    from transformers import MarianConfig, MarianMTModel
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()

    work = args.work
    if args.fresh and work.exists():
        aside = work.with_name(work.name + time.strftime(".old-%Y%m%d-%H%M%S"))
        os.replace(work, aside)
        print(f"moved the old work folder to {aside}")
    work.mkdir(parents=True, exist_ok=True)
    log = Log(work)
    tok = work / "tok"
    ckpt_path = work / "ckpt" / "last.pt"
    if not (tok / "vocab.json").exists():
        if ckpt_path.exists():
            raise SystemExit(f"{ckpt_path} exists but {tok}/vocab.json does not: use --fresh")
        build_tokenizer(args.data, tok, args.vocab_size, args.seed, args.threads, args.spm_sentences, log)

    random.seed(args.seed)
    torch.manual_seed(args.seed)
    cfg = MarianConfig.from_pretrained(str(tok))
    pad = cfg.pad_token_id
    model = MarianMTModel(cfg)
    with torch.no_grad():
        model.model.shared.weight[pad].zero_()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.0)
    st = {"step": 0, "epoch": 0, "batch_in_epoch": 0, "elapsed": 0.0, "tokens": 0, "best_chrf": -1.0,
          "last_eval_elapsed": 0.0, "args": {k: str(v) for k, v in vars(args).items()}}
    if ckpt_path.exists():
        ck = torch.load(ckpt_path, map_location="cpu", weights_only=False)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optim"])
        st.update(ck["state"])
        torch.set_rng_state(ck["torch_rng"])
        random.setstate(ck["py_rng"])
        log(f"resumed from {ckpt_path}: step {st['step']}, epoch {st['epoch']} batch {st['batch_in_epoch']}, "
            f"{fmt_time(st['elapsed'])} trained, best dev chrF {st['best_chrf']:.1f}")
    nparam = sum(p.numel() for p in model.parameters())

    def state_dict():
        return {"model": model.state_dict(), "optim": opt.state_dict(), "state": dict(st),
                "torch_rng": torch.get_rng_state(), "py_rng": random.getstate()}

    def info():
        return {"step": st["step"], "epoch": st["epoch"], "trained_seconds": round(st["elapsed"]),
                "target_tokens_seen": st["tokens"], "best_dev_chrf": st["best_chrf"], "seed": args.seed,
                "data": str(args.data), "data_key": data["key"], "args": st["args"]}

    if args.export_only:
        data = {"key": "?"}
        extra = {}
        if args.average:
            extra["averaged"] = average_snapshots(model, work / "snap", args.average, pad)
            log(f"averaged {len(extra['averaged'])} snapshots: {', '.join(extra['averaged'])}")
        save_hf(model, tok, work / "final", info() | extra)
        log(f"wrote {work / 'final'} from step {st['step']}")
        return 0

    data = encode_data(args.data, tok, work, args.max_len, log)
    pairs = data["train"]
    log(f"model: {nparam / 1e6:.2f} M parameters (d_model {cfg.d_model}, {cfg.encoder_layers}+{cfg.decoder_layers} "
        f"layers, ffn {cfg.encoder_ffn_dim}, vocab {cfg.vocab_size}); {args.threads} threads; budget "
        f"{args.hours:g} h, {fmt_time(max(0, args.hours * 3600 - st['elapsed']))} left")

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    budget = args.hours * 3600
    batches = make_batches(pairs, args.batch_tokens, args.seed, st["epoch"])
    log(f"epoch {st['epoch']}: {len(batches)} batches, order {order_id(batches)}; next batch {st['batch_in_epoch']}")
    run_t0 = time.time()
    base_elapsed = st["elapsed"]
    last_ckpt = time.time()
    win_loss, win_tok, win_steps, win_t0, win_cpu = 0.0, 0, 0, time.time(), time.process_time()
    reason = None

    def do_eval():
        r = evaluate(model, tok, data, args.dev_size, pad)
        model.train()
        st["last_eval_elapsed"] = st["elapsed"]
        log(f"dev @ step {st['step']}: chrF {r['chrf']:.1f}  BLEU(zh) {r['bleu']:.1f}  CE {r['dev_ce']:.3f}  "
            f"({r['n']} sentences, {r['seconds']:.0f}s)")
        for e, h in r["samples"][:3]:
            log(f"    {e!r} → {h!r}")
        log.metric(kind="dev", step=st["step"], elapsed=round(st["elapsed"]), chrf=r["chrf"], bleu=r["bleu"],
                   dev_ce=r["dev_ce"])
        if r["chrf"] > st["best_chrf"]:
            st["best_chrf"] = r["chrf"]
            save_hf(model, tok, work / "best", info() | {"dev_chrf": r["chrf"], "dev_bleu": r["bleu"]})

    model.train()
    while True:
        if st["batch_in_epoch"] >= len(batches):
            st["epoch"] += 1
            st["batch_in_epoch"] = 0
            batches = make_batches(pairs, args.batch_tokens, args.seed, st["epoch"])
            log(f"epoch {st['epoch']}: {len(batches)} batches, order {order_id(batches)}")
        ids, mask, dec_in, labels, ntok = collate(pairs, batches[st["batch_in_epoch"]], pad)
        lr = lr_at(st["step"] + 1, args.lr, args.warmup)
        for g in opt.param_groups:
            g["lr"] = lr
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            logits = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec_in).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100,
                               label_smoothing=args.label_smoothing)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():
            model.model.shared.weight[pad].zero_()
        st["step"] += 1
        st["batch_in_epoch"] += 1
        st["tokens"] += int((labels != -100).sum())
        st["elapsed"] = base_elapsed + (time.time() - run_t0)
        win_loss += loss.item()
        win_tok += ntok
        win_steps += 1

        if st["step"] % args.log_every == 0:
            dt = time.time() - win_t0
            tps = win_tok / dt
            # CPU seconds this process got per wall second, over the threads it may use: on a shared machine
            # tokens per CPU-second (tps / share) is what an uncontended run would reach
            share = (time.process_time() - win_cpu) / dt / args.threads
            left = budget - st["elapsed"]
            if args.max_steps:
                left = min(left, (args.max_steps - st["step"]) * dt / win_steps)
            if args.max_epochs:
                done_ep = st["epoch"] + st["batch_in_epoch"] / len(batches)
                left = min(left, (args.max_epochs - done_ep) * len(batches) * dt / win_steps)
            log(f"step {st['step']:6d}  ep {st['epoch']} {100 * st['batch_in_epoch'] / len(batches):5.1f}%  "
                f"loss {win_loss / win_steps:.3f}  lr {lr:.2e}  {tps:6.0f} tok/s (cpu {100 * share:3.0f}%)  "
                f"{dt / win_steps:5.2f} s/step  "
                f"trained {fmt_time(st['elapsed'])}  ETA {fmt_time(left)}")
            log.metric(kind="train", step=st["step"], elapsed=round(st["elapsed"]), loss=win_loss / win_steps,
                       lr=lr, tok_per_s=tps, cpu_share=share, epoch=st["epoch"])
            win_loss, win_tok, win_steps, win_t0, win_cpu = 0.0, 0, 0, time.time(), time.process_time()

        if st["elapsed"] >= budget:
            reason = "time budget reached"
        elif args.max_steps and st["step"] >= args.max_steps:
            reason = f"--max-steps {args.max_steps} reached"
        elif args.max_epochs and st["epoch"] + st["batch_in_epoch"] / len(batches) >= args.max_epochs:
            reason = f"--max-epochs {args.max_epochs:g} reached"
        elif _stop["signal"] is not None:
            reason = f"signal {_stop['signal']}"
        if reason:
            break
        if args.eval_minutes and st["elapsed"] - st["last_eval_elapsed"] >= args.eval_minutes * 60:
            t, c = time.time(), time.process_time()
            do_eval()
            run_t0 += time.time() - t  # evaluation time does not count against the training budget
            win_t0 += time.time() - t  # nor in the throughput figures
            win_cpu += time.process_time() - c
        if time.time() - last_ckpt >= args.ckpt_minutes * 60:
            save_ckpt(ckpt_path, state_dict())
            save_snapshot(model, work / "snap", st["step"], args.keep_snapshots)
            last_ckpt = time.time()
            log(f"checkpoint: {ckpt_path} (step {st['step']})")

    log(f"stopping: {reason}")
    if _stop["signal"] is None:
        do_eval()  # before the checkpoint, so that a resumed run knows it was done
    save_ckpt(ckpt_path, state_dict())
    save_snapshot(model, work / "snap", st["step"], args.keep_snapshots)
    log(f"checkpoint: {ckpt_path} (step {st['step']})")
    save_hf(model, tok, work / "final", info())
    log(f"wrote {work / 'final'} (step {st['step']}, {fmt_time(st['elapsed'])} trained, "
        f"{st['tokens']} target tokens); best dev chrF {st['best_chrf']:.1f} in {work / 'best'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
