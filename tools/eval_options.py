#!/usr/bin/env python3
"""Quality of tolk translate's speed options against its exact path (issue 15), on a held-out split.

    /work/venv/bin/python tools/eval_options.py -m models/demo-en-zh --tolk build/tolk \\
        --config exact= --config int8-head=--int8-lm-head --config vmap="--vmap /tmp/demo.vmap" \\
        [--data /work/demo-data] [--split test] [--beam 4] [--max-new-tokens 128] [--out DIR]

Each --config NAME=FLAGS runs `tolk translate -m MODEL FLAGS --beam B --max-new-tokens N --threads T
--input SPLIT.en --output OUT/NAME.zh` on the whole split (tolk splits multi-sentence lines and rejoins
them, as it serves them), then scores every output with sacrebleu 2.5 (tools/requirements.txt) against the
split's references: corpus chrF (chrF2) and BLEU with tokenize="zh". The first config is the reference
path: for each other config the table gives the chrF difference to it (the issue's bound is 0.3), the
share of lines identical to it and the chrF of one against the other. Nothing is downloaded; the split is
tools/demo_data.py's (`test.en`, `test.zh`). Writes OUT/report.json and OUT/report.md.
"""
from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True  # no tools/__pycache__ in the work tree
from common import read_lines  # tools/common.py


def run_config(args, name: str, flags: str, src: Path, out: Path) -> dict:
    hyp = out / f"{name}.zh"
    cmd = [args.tolk, "translate", "-m", str(args.model), *shlex.split(flags), "--beam", str(args.beam),
           "--max-new-tokens", str(args.max_new_tokens), "--threads", str(args.threads),
           "--input", str(src), "--output", str(hyp)]
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return {"name": name, "flags": flags, "seconds": round(time.monotonic() - t0, 2), "hyp": hyp}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-m", "--model", type=Path, required=True, help="model folder for tolk translate")
    ap.add_argument("--tolk", default="build/tolk", help="the tolk binary")
    ap.add_argument("--config", action="append", required=True, metavar="NAME=FLAGS",
                    help="a configuration; the first is the reference path (repeatable)")
    ap.add_argument("--data", type=Path, default=Path("/work/demo-data"))
    ap.add_argument("--split", default="test", choices=["test", "dev"])
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("/tmp/tolk-eval-options"))
    args = ap.parse_args()

    import sacrebleu

    src, ref_file = args.data / f"{args.split}.en", args.data / f"{args.split}.zh"
    refs = read_lines(ref_file)
    if len(read_lines(src)) != len(refs):
        sys.exit(f"{src} and {ref_file} differ in length")
    args.out.mkdir(parents=True, exist_ok=True)
    configs = []
    for c in args.config:
        name, sep, flags = c.partition("=")
        if not sep or not name:
            sys.exit(f"--config {c!r}: want NAME=FLAGS")
        configs.append((name, flags))

    rows = []
    for name, flags in configs:
        r = run_config(args, name, flags, src, args.out)
        hyps = read_lines(r["hyp"])
        if len(hyps) != len(refs):
            sys.exit(f"{name}: {len(hyps)} lines for {len(refs)} sources")
        r["lines"] = hyps
        r["chrf"] = sacrebleu.corpus_chrf(hyps, [refs]).score
        r["bleu"] = sacrebleu.corpus_bleu(hyps, [refs], tokenize="zh").score
        rows.append(r)
        print(f"{name}: chrF {r['chrf']:.2f}, BLEU {r['bleu']:.2f}, {r['seconds']} s", file=sys.stderr)

    base = rows[0]
    for r in rows[1:]:
        r["d_chrf"] = r["chrf"] - base["chrf"]
        r["identical"] = sum(a == b for a, b in zip(r["lines"], base["lines"])) / len(refs)
        r["chrf_vs_base"] = sacrebleu.corpus_chrf(r["lines"], [base["lines"]]).score

    report = {"model": str(args.model), "split": args.split, "sentences": len(refs), "beam": args.beam,
              "max_new_tokens": args.max_new_tokens, "threads": args.threads, "sacrebleu": sacrebleu.__version__,
              "rows": [{k: (str(v) if isinstance(v, Path) else v) for k, v in r.items() if k != "lines"}
                       for r in rows]}
    (args.out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    lines = [f"{args.split} split, {len(refs)} sentences, beam {args.beam}, at most {args.max_new_tokens} new "
             f"tokens, sacrebleu {sacrebleu.__version__}; reference path `{base['name']}`",
             "", "| config | flags | chrF | BLEU (zh) | chrF − reference path | identical lines | "
             "chrF against the reference path | seconds |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r is base:
            lines.append(f"| {r['name']} | `{r['flags'] or '(none)'}` | {r['chrf']:.2f} | {r['bleu']:.2f} | "
                         f"— | — | — | {r['seconds']} |")
        else:
            lines.append(f"| {r['name']} | `{r['flags']}` | {r['chrf']:.2f} | {r['bleu']:.2f} | "
                         f"{r['d_chrf']:+.2f} | {100 * r['identical']:.1f} % | {r['chrf_vs_base']:.2f} | "
                         f"{r['seconds']} |")
    (args.out / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
