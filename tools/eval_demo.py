#!/usr/bin/env python3
"""Score the demo English→Chinese model (issue 7): PyTorch and `tolk translate --int8` on the held-out test
split, plus a table of everyday interface strings.  Not part of CI.

    /work/venv/bin/python tools/eval_demo.py --hf /work/demo-train/final --onnx models/demo-en-zh \\
        --tolk /work/build-demo/tolk [--data /work/demo-data] [--out /work/demo-train/eval] [--limit N]

- PyTorch: MarianMTModel.generate on `>>cmn_Hans<< ` + each test sentence, batched, with the given --beam
  (default 4 = the model's num_beams) and max_new_tokens = --max-new-tokens.
- tolk: `tolk translate -m ONNX --int8 --beam B --max-new-tokens N --json --input test.en --output FILE`
  (and --fp32 too with --tolk-fp32).  tolk splits a line into sentences and translates each (the PyTorch
  side translates whole lines), so agreement is also reported on the lines tolk left whole.
- Scores: sacrebleu corpus chrF (default chrF2) and BLEU with tokenize="zh" against test.zh; tolk vs
  PyTorch: identical outputs, and chrF of one against the other.
- The interface table: INTERFACE_STRINGS through both, with "seen in training" (exact English string in
  train.en) so it is not mistaken for a held-out test.

Writes OUT/report.json, OUT/report.md (the tables for models/README.md) and the hypothesis files.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True  # no tools/__pycache__ in the work tree
from common import read_lines  # tools/common.py

TAG = ">>cmn_Hans<<"
INTERFACE_STRINGS = [
    "Open file", "Save as…", "Permission denied", "No such file or directory", "Cancel", "Settings",
    "Network is unreachable", "File not found", "Are you sure you want to delete this file?", "Print",
    "Copy", "Paste", "Undo", "Close window", "Connection timed out", "Disk full", "Show hidden files",
    "Check for updates", "Quit", "Invalid password",
]


def torch_translate(hf: Path, texts, beam: int, max_new: int, threads: int, batch: int = 32):
    import torch
    from transformers import MarianMTModel, MarianTokenizer
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
    torch.set_num_threads(threads)
    tok = MarianTokenizer.from_pretrained(str(hf))
    model = MarianMTModel.from_pretrained(str(hf)).eval()
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = [None] * len(texts)
    with torch.no_grad():
        for b in range(0, len(order), batch):
            idx = order[b:b + batch]
            enc = tok([f"{TAG} {texts[i]}" for i in idx], return_tensors="pt", padding=True, truncation=True,
                      max_length=512)
            gen = model.generate(**enc, num_beams=beam, do_sample=False, max_new_tokens=max_new)
            for i, t in zip(idx, tok.batch_decode(gen, skip_special_tokens=True)):
                out[i] = t
    return out


def tolk_translate(tolk: str, onnx: Path, src_file: Path, out_file: Path, beam: int, max_new: int,
                   threads: int, int8: bool):
    """Run the CLI on a file: --output gets tolk's own text (sentences rejoined its way), --json on stdout
    one object per sentence with its 1-based input line, which tells which lines tolk split.  Returns
    ((translations, split flags), seconds)."""
    cmd = [tolk, "translate", "-m", str(onnx), "--beam", str(beam), "--max-new-tokens", str(max_new),
           "--threads", str(threads), "--json", "--input", str(src_file), "--output", str(out_file)]
    if int8:
        cmd.append("--int8")
    out_file.unlink(missing_ok=True)
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    secs = time.time() - t0
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    n = len(read_lines(src_file))
    texts = read_lines(out_file)
    if len(texts) != n:
        raise SystemExit(f"{out_file}: {len(texts)} lines for {n} input lines")
    per_line = [0] * n
    for l in r.stdout.splitlines():
        if l.strip():
            per_line[int(json.loads(l)["line"]) - 1] += 1
    return (texts, [c > 1 for c in per_line]), secs


def scores(hyp, ref):
    import sacrebleu
    return {"chrf": round(sacrebleu.corpus_chrf(hyp, [ref]).score, 2),
            "bleu_zh": round(sacrebleu.corpus_bleu(hyp, [ref], tokenize="zh").score, 2)}


def agreement(a, b, mask=None):
    import sacrebleu
    idx = [i for i in range(len(a)) if mask is None or mask[i]]
    if not idx:
        return {"lines": 0}
    aa, bb = [a[i] for i in idx], [b[i] for i in idx]
    same = sum(x == y for x, y in zip(aa, bb))
    return {"lines": len(idx), "identical": same, "identical_pct": round(100 * same / len(idx), 2),
            "chrf_vs_pytorch": round(sacrebleu.corpus_chrf(bb, [aa]).score, 2)}


def md_escape(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hf", type=Path, required=True, help="HF model folder (train_demo.py's final/ or best/)")
    ap.add_argument("--onnx", type=Path, help="tools/export.py output folder for tolk (skip tolk without it)")
    ap.add_argument("--tolk", default="/work/build-demo/tolk", help="the tolk binary")
    ap.add_argument("--data", type=Path, default=Path("/work/demo-data"))
    ap.add_argument("--out", type=Path, default=Path("/work/demo-train/eval"))
    ap.add_argument("--split", default="test", choices=["test", "dev"])
    ap.add_argument("--limit", type=int, default=0, help="only the first N sentences (0: all)")
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tolk-fp32", action="store_true", help="also run tolk on the fp32 graphs")
    args = ap.parse_args(argv)
    import warnings
    warnings.filterwarnings("ignore", message="Recommended: pip install sacremoses")
    args.out.mkdir(parents=True, exist_ok=True)

    src = read_lines(args.data / f"{args.split}.en")
    ref = read_lines(args.data / f"{args.split}.zh")
    if args.limit:
        src, ref = src[:args.limit], ref[:args.limit]
    src_file = args.out / f"{args.split}.en"
    src_file.write_text("\n".join(src) + "\n", encoding="utf-8")
    train_en = set(read_lines(args.data / "train.en")) if (args.data / "train.en").exists() else set()
    report = {"split": args.split, "sentences": len(src), "beam": args.beam, "max_new_tokens": args.max_new_tokens,
              "hf": str(args.hf), "onnx": str(args.onnx) if args.onnx else None, "systems": {}}

    t0 = time.time()
    pt = torch_translate(args.hf, src, args.beam, args.max_new_tokens, args.threads)
    report["systems"]["pytorch"] = scores(pt, ref) | {"seconds": round(time.time() - t0, 1)}
    (args.out / "hyp.pytorch.zh").write_text("\n".join(pt) + "\n", encoding="utf-8")
    print(f"pytorch: {report['systems']['pytorch']}", flush=True)
    ui_pt = torch_translate(args.hf, INTERFACE_STRINGS, args.beam, args.max_new_tokens, args.threads)
    ui = {"pytorch": ui_pt}

    variants = [("tolk_int8", True)] + ([("tolk_fp32", False)] if args.tolk_fp32 else [])
    if args.onnx:
        ui_file = args.out / "interface.en"
        ui_file.write_text("\n".join(INTERFACE_STRINGS) + "\n", encoding="utf-8")
        for name, int8 in variants:
            (hyp, split), secs = tolk_translate(args.tolk, args.onnx, src_file, args.out / f"hyp.{name}.zh",
                                                args.beam, args.max_new_tokens, args.threads, int8)
            whole = [not s for s in split]
            report["systems"][name] = scores(hyp, ref) | {
                "seconds": round(secs, 1), "lines_split_by_tolk": sum(split),
                "agreement_all": agreement(pt, hyp), "agreement_unsplit_lines": agreement(pt, hyp, whole)}
            print(f"{name}: {report['systems'][name]}", flush=True)
            (uh, _), _ = tolk_translate(args.tolk, args.onnx, ui_file, args.out / f"interface.{name}.zh",
                                        args.beam, args.max_new_tokens, args.threads, int8)
            ui[name] = uh

    report["interface"] = [{"english": e, "seen_in_training": e in train_en, **{k: v[i] for k, v in ui.items()}}
                           for i, e in enumerate(INTERFACE_STRINGS)]
    (args.out / "report.json").write_text(json.dumps(report, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")

    cols = list(ui)
    lines = [f"Test split: {len(src)} sentences, beam {args.beam}, max_new_tokens {args.max_new_tokens}.", "",
             "| system | chrF | BLEU (zh) | seconds |", "| --- | ---: | ---: | ---: |"]
    for k, v in report["systems"].items():
        lines.append(f"| {k} | {v['chrf']:.1f} | {v['bleu_zh']:.1f} | {v['seconds']:.0f} |")
    for k, v in report["systems"].items():
        if "agreement_all" in v:
            a, u = v["agreement_all"], v["agreement_unsplit_lines"]
            lines.append("")
            lines.append(f"{k} vs PyTorch: {a['identical_pct']:.1f}% identical lines, chrF {a['chrf_vs_pytorch']:.1f} "
                         f"against the PyTorch output; on the {u.get('lines', 0)} lines tolk did not split into "
                         f"sentences: {u.get('identical_pct', 0):.1f}% identical.")
    lines += ["", "| English | " + " | ".join(cols) + " | in training data |",
              "| --- | " + " | ".join("---" for _ in cols) + " | --- |"]
    for row in report["interface"]:
        lines.append(f"| {md_escape(row['english'])} | " + " | ".join(md_escape(row[c]) for c in cols) +
                     f" | {'yes' if row['seen_in_training'] else 'no'} |")
    (args.out / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
