#!/usr/bin/env python3
"""What int8 quantization costs a translation model: `tolk quantize` dynamic and static (calibrated on
sentences) side by side with the fp32 graphs, scored with sacrebleu against reference translations and
against the fp32 output.  Not part of CI; the figures go in README.md (the quantize section).

    /work/venv/bin/python tools/quant_quality.py --tolk build/tolk --fp32 /tmp/tolk-demo-bench/onnx \\
        [--pairs tests/fixtures/corpus/pairs.tsv.xz] [--test-n 1000] [--calib-n 200] [--out /tmp/qq]

- fp32: a folder with encoder_model.onnx, decoder_model.onnx, decoder_with_past_model.onnx and the tokenizer
  files (tools/bench_from_bundled.py makes one from the bundled demo model: OUT/onnx).
- Data: the cmn_Hans pairs of --pairs (tag, English, Chinese), every k-th one, the first --calib-n of them as
  calibration sentences (English only) and the next --test-n as the test set: the two never overlap.
- Systems: fp32; dynamic (`tolk quantize --per-channel --reduce-range`, what tools/export.py ships); static
  QDQ (MinMax; the LM head float too, `--lm-head no`; per channel; Percentile) and QOperator (MinMax), all
  calibrated with `--calibrate calib.en`. (Dynamic with `--lm-head no` is dynamic: for a tied embedding the
  LM head's B is a Transpose, which ORT's dynamic form leaves to a float MatMul anyway.)  Each quantized folder holds only its *_quantized.onnx graphs plus the tokenizer files, so
  `tolk translate` runs them; greedy (--beam 1), --max-new-tokens 128, 2 threads.
- Scores: sacrebleu corpus chrF and BLEU (tokenize="zh") against the references, and chrF against the fp32
  output; lines identical to fp32's; wall seconds; and the BLEU difference from fp32 with its 95 % interval by
  paired bootstrap resampling (1,000 resamples of the test sentences, seed 1, as sacrebleu's paired_bs): a
  difference whose interval holds 0 is not one the test set can tell from noise.
- `--system 'NAME=ARGS'` (repeatable) runs fp32 and these instead of the systems above: ARGS are `tolk
  quantize` options, `{calib}` standing for the calibration file and `@exclude:REGEX` for an `--exclude` of
  every MatMul of the fp32 graphs whose name matches REGEX (re.search) — to measure which nodes cost quality:

    tools/quant_quality.py ... --system 'no attention products=--calibrate {calib} @exclude:attn/MatMul'

Writes OUT/report.json and OUT/report.md.
"""
from __future__ import annotations

import argparse
import json
import lzma
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import sacrebleu
from sacrebleu.metrics import BLEU

GRAPHS = ["encoder_model", "decoder_model", "decoder_with_past_model"]
TOKENIZER = ["config.json", "generation_config.json", "source.spm", "target.spm", "vocab.json",
             "tokenizer_config.json", "special_tokens_map.json"]


def pick(pairs: Path, calib_n: int, test_n: int):
    rows = [l.split("\t") for l in lzma.open(pairs, "rt", encoding="utf-8").read().splitlines()]
    rows = [r for r in rows if len(r) == 3 and r[0] == "cmn_Hans" and r[1].strip() and r[2].strip()]
    step = max(1, len(rows) // (calib_n + test_n))
    chosen = rows[::step][: calib_n + test_n]
    return [r[1] for r in chosen[:calib_n]], [(r[1], r[2]) for r in chosen[calib_n:]]


def folder(out: Path, name: str, fp32: Path) -> Path:
    d = out / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    for f in TOKENIZER:
        if (fp32 / f).exists():
            shutil.copy(fp32 / f, d / f)
    return d


def quantize(tolk: str, fp32: Path, out: Path, name: str, args: list[str]) -> tuple[Path, str]:
    src = out / "fp32-graphs"
    if not src.exists():
        src.mkdir(parents=True)
        for f in TOKENIZER:
            if (fp32 / f).exists():
                shutil.copy(fp32 / f, src / f)
        for g in GRAPHS:
            shutil.copy(fp32 / f"{g}.onnx", src / f"{g}.onnx")
    d = folder(out, name, fp32)
    r = subprocess.run([tolk, "quantize", "-q", *args, str(src), str(d)], capture_output=True, text=True, check=True)
    return d, r.stdout


def bleu_delta(hyp: list[str], base: list[str], refs: list[str], n: int = 1000) -> tuple[float, float, float]:
    """BLEU(hyp) - BLEU(base) and its 95 % interval by paired bootstrap over the sentences."""
    bleu = BLEU(tokenize="zh")
    a = np.array(bleu._extract_corpus_statistics(hyp, [refs]))  # per sentence: n-gram matches, totals, lengths
    b = np.array(bleu._extract_corpus_statistics(base, [refs]))
    score = lambda s: bleu._compute_score_from_stats(list(s)).score  # noqa: E731
    rng = np.random.default_rng(1)
    deltas = []
    for _ in range(n):
        idx = rng.integers(0, len(hyp), len(hyp))
        deltas.append(score(a[idx].sum(0)) - score(b[idx].sum(0)))
    lo, hi = np.percentile(deltas, [2.5, 97.5])
    return score(a.sum(0)) - score(b.sum(0)), float(lo), float(hi)


def expand(args: list[str], fp32: Path, calib: str) -> list[str]:
    """A --system's options: {calib} filled in, each @exclude:REGEX an --exclude per matching MatMul."""
    import onnx  # only for @exclude

    out = []
    for a in args:
        if a.startswith("@exclude:"):
            names = sorted({n.name for g in GRAPHS for n in onnx.load(str(fp32 / f"{g}.onnx")).graph.node
                            if n.op_type == "MatMul" and re.search(a[9:], n.name)})
            if not names:
                sys.exit(f"{a}: no MatMul matches")
            for n in names:
                out += ["--exclude", n]
        else:
            out.append(a.replace("{calib}", calib))
    return out


def translate(tolk: str, model: Path, src: Path, hyp: Path, int8: bool) -> float:
    t = time.time()
    cmd = [tolk, "translate", "-m", str(model), "--beam", "1", "--max-new-tokens", "128", "--threads", "2",
           "--input", str(src), "--output", str(hyp)] + (["--int8"] if int8 else [])
    subprocess.run(cmd, check=True, capture_output=True)
    return time.time() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tolk", required=True)
    ap.add_argument("--fp32", type=Path, required=True)
    ap.add_argument("--pairs", type=Path, default=Path(__file__).resolve().parent.parent / "tests/fixtures/corpus/pairs.tsv.xz")
    ap.add_argument("--test-n", type=int, default=1000)
    ap.add_argument("--calib-n", type=int, default=200)
    ap.add_argument("--out", type=Path, default=Path("/tmp/tolk-quant-quality"))
    ap.add_argument("--system", action="append", default=[], metavar="NAME=ARGS",
                    help="run fp32 and these systems instead of the usual ones (see above)")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    calib, test = pick(a.pairs, a.calib_n, a.test_n)
    (a.out / "calib.en").write_text("\n".join(calib) + "\n", encoding="utf-8")
    # No tag in the file: `tolk translate` gives each line its default (--to zh: >>cmn_Hans<<).
    (a.out / "test.en").write_text("\n".join(en for en, _ in test) + "\n", encoding="utf-8")
    refs = [zh for _, zh in test]
    calib_file = str(a.out / "calib.en")
    systems = {
        "fp32": None,
        "dynamic (per channel, reduce range)": ["--per-channel", "--reduce-range"],
        "static QDQ (MinMax)": ["--calibrate", calib_file],
        "static QDQ, LM head float": ["--calibrate", calib_file, "--lm-head", "no"],
        "static QDQ per channel": ["--calibrate", calib_file, "--per-channel"],
        "static QOperator (MinMax)": ["--calibrate", calib_file, "--format", "qoperator"],
        "static QDQ (Percentile 99.999)": ["--calibrate", calib_file, "--method", "percentile"],
    }
    if a.system:
        systems = {"fp32": None}
        for spec in a.system:
            name, _, args = spec.partition("=")
            systems[name] = expand(shlex.split(args), a.fp32, calib_file)
    rows, fp32_hyp = [], None
    for i, (name, args) in enumerate(systems.items()):
        model, log = (folder(a.out, "fp32", a.fp32), "") if args is None else quantize(a.tolk, a.fp32, a.out, f"s{i}", args)
        if args is None:
            for g in GRAPHS:
                shutil.copy(a.fp32 / f"{g}.onnx", model / f"{g}.onnx")
        size = sum(f.stat().st_size for f in model.glob("*.onnx"))
        hyp_file = a.out / f"s{i}.zh"
        secs = translate(a.tolk, model, a.out / "test.en", hyp_file, args is not None)
        hyp = hyp_file.read_text(encoding="utf-8").splitlines()
        if args is None:
            fp32_hyp = hyp
        rows.append({"system": name, "args": args, "graph_mb": round(size / 1e6, 1), "seconds": round(secs, 1),
                     "chrf": round(sacrebleu.corpus_chrf(hyp, [refs]).score, 2),
                     "bleu_zh": round(sacrebleu.corpus_bleu(hyp, [refs], tokenize="zh").score, 2),
                     "chrf_vs_fp32": round(sacrebleu.corpus_chrf(hyp, [fp32_hyp]).score, 2),
                     "identical_to_fp32": round(100 * sum(x == y for x, y in zip(hyp, fp32_hyp)) / len(hyp), 1),
                     "bleu_delta_ci95": [round(v, 2) for v in bleu_delta(hyp, fp32_hyp, refs)],
                     "quantize_log": log.splitlines()})
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "quantize_log"}), flush=True)
    (a.out / "report.json").write_text(json.dumps({"test_n": len(test), "calib_n": len(calib), "rows": rows},
                                                  indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    md = ["| system | graphs MB | chrF | BLEU (zh) | BLEU Δ [95 % CI] | chrF vs fp32 | = fp32 lines | seconds |",
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    md += [f"| {r['system']} | {r['graph_mb']} | {r['chrf']} | {r['bleu_zh']} | "
           f"{r['bleu_delta_ci95'][0]:+.2f} [{r['bleu_delta_ci95'][1]:+.2f}, {r['bleu_delta_ci95'][2]:+.2f}] | "
           f"{r['chrf_vs_fp32']} | {r['identical_to_fp32']} % | {r['seconds']} |" for r in rows]
    (a.out / "report.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
