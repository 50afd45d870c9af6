#!/usr/bin/env python3
"""Translation benchmark: tolk against transformers (PyTorch), Optimum's ORTModelForSeq2SeqLM and
CTranslate2 on the same pre-tokenized English sentences, the same thread count and a fixed output
length (min_new_tokens = max_new_tokens, because the benchmark model has random weights and would
otherwise stop anywhere). bench/translate.sh is the usual entry point; this file has three commands:

  prepare  pick N real English sentences from tests/fixtures/corpus/en.txt.xz (5-40 words, prose-like,
           evenly spaced through the filtered list: deterministic) and encode them with the model's
           MarianTokenizer -> sentences.txt and ids.txt (one sentence per line, ids ending in </s>).
  run      one engine, one precision, one mode in this process (latency: each sentence alone, P50/P95;
           throughput: sentences sorted by length, longest first, in batches of --batch); prints one
           JSON line like bench_translate's.
  table    the whole table: every (engine, precision, mode) in its own child process -- tolk through
           bench_translate, the peers through `run` -- whose peak RSS is read by /usr/bin/time, so each
           engine is measured alone and the same way; --repeat R rounds, cells are medians over rounds.

The model folder is what `tools/make_fixtures.py --bench-model DIR` writes: DIR/hf (transformers),
DIR/onnx (tolk and Optimum, fp32 and *_quantized int8 graphs), DIR/ct2-float32 and DIR/ct2-int8.
"""
import argparse
import json
import lzma
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "corpus" / "en.txt.xz"
TAG = ">>cmn_Hans<<"

# (engine, precision) rows in table order; tolk rows run bench_translate, tolk-lmh with
# --int8-lm-head (the LM head in int8 as well, as CTranslate2 int8 has it), tolk-bf16 with --bf16
# (the fp32 graphs' weights held as bfloat16; no peer has that precision on a CPU without
# AVX512-BF16, so its ratios are against the fp32 rows, marked as such), tolk-bf16p with
# --bf16-products (the activations rounded too, AVX512-BF16's products; CPUs with it only).
ENGINES = [("tolk", "fp32"), ("tolk-bf16", "bf16"), ("tolk-bf16p", "bf16"), ("tolk", "int8"), ("tolk-lmh", "int8"),
           ("transformers", "fp32"), ("optimum", "fp32"), ("optimum", "int8"), ("ct2", "fp32"), ("ct2", "int8")]
LABEL = {"tolk": "tolk", "tolk-lmh": "tolk --int8-lm-head", "tolk-bf16": "tolk --bf16",
         "tolk-bf16p": "tolk --bf16-products",
         "transformers": "transformers+PyTorch", "optimum": "Optimum ORT", "ct2": "CTranslate2"}
TOLKS = ("tolk", "tolk-lmh", "tolk-bf16", "tolk-bf16p")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------- prepare

def pick_sentences(n):
    """Prose-like lines of 5-40 words: a capital letter then a lower-case one, a final full stop, no
    format directives, markup or paths, >= 90 % letters and spaces; n of them evenly spaced through
    the filtered list (the corpus is sorted, so this spreads them over the alphabet)."""
    cand = []
    seen = set()
    with lzma.open(CORPUS, "rt", encoding="utf-8") as f:
        for line in f:
            s = line.strip()
            w = s.split()
            if not 5 <= len(w) <= 40 or s in seen:
                continue
            if re.search(r"[%$\\{}<>=_|@#\[\]/]", s) or not re.match(r"^[A-Z][a-z]", s) or not s.endswith("."):
                continue
            if sum(c.isalpha() or c == " " for c in s) / len(s) < 0.9:
                continue
            seen.add(s)
            cand.append(s)
    if len(cand) < n:
        raise SystemExit(f"only {len(cand)} candidate sentences in {CORPUS}")
    step = len(cand) / n
    return [cand[int(i * step)] for i in range(n)]


def cmd_prepare(a):
    from transformers import MarianTokenizer
    tok = MarianTokenizer.from_pretrained(str(Path(a.model) / "hf"))
    sents = pick_sentences(a.n)
    tag = TAG if TAG in tok.get_vocab() else ""
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sentences.txt").write_text("".join(s + "\n" for s in sents), encoding="utf-8")
    ids = [tok((tag + " " + s) if tag else s)["input_ids"] for s in sents]
    (out / "ids.txt").write_text("".join(" ".join(map(str, x)) + "\n" for x in ids))
    lens = sorted(len(x) for x in ids)
    log(f"prepare: {len(ids)} sentences{' with ' + tag if tag else ''}, source tokens min {lens[0]} "
        f"median {lens[len(lens) // 2]} max {lens[-1]} -> {out}/ids.txt")


# ----------------------------------------------------------------------------------------------- run

def read_ids(path):
    return [[int(t) for t in l.split()] for l in Path(path).read_text().splitlines() if l.strip()]


def batches(ids, size):
    """Longest first, ties in file order: the batches bench_translate makes too."""
    order = sorted(range(len(ids)), key=lambda i: (-len(ids[i]), i))
    return [[ids[i] for i in order[b:b + size]] for b in range(0, len(order), size)]


def percentile(v, q):
    import numpy as np
    return float(np.percentile(np.asarray(v, dtype=np.float64), q)) if v else 0.0


class TorchLike:
    """transformers' generate() on a PyTorch MarianMTModel or Optimum's ORTModelForSeq2SeqLM."""

    def __init__(self, a):
        import torch
        self.torch = torch
        torch.set_num_threads(a.threads)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:
            pass
        self.pad = json.loads((Path(a.model) / "hf" / "config.json").read_text())["pad_token_id"]
        if a.engine == "transformers":
            if a.precision != "fp32":
                raise SystemExit("transformers: fp32 only")
            from transformers import MarianMTModel
            self.model = MarianMTModel.from_pretrained(str(Path(a.model) / "hf")).eval()
        else:
            import onnxruntime as ort
            from optimum.onnxruntime import ORTModelForSeq2SeqLM
            so = ort.SessionOptions()
            so.intra_op_num_threads = a.threads
            so.inter_op_num_threads = 1
            so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            sfx = "_quantized" if a.precision == "int8" else ""
            # The same three graphs tolk runs (not the merged decoder).
            self.model = ORTModelForSeq2SeqLM.from_pretrained(
                str(Path(a.model) / "onnx"), use_cache=True, use_merged=False, session_options=so,
                provider="CPUExecutionProvider", encoder_file_name=f"encoder_model{sfx}.onnx",
                decoder_file_name=f"decoder_model{sfx}.onnx",
                decoder_with_past_file_name=f"decoder_with_past_model{sfx}.onnx")
        self.kw = dict(num_beams=a.beam, num_return_sequences=1, do_sample=False, max_new_tokens=a.new_tokens,
                       min_new_tokens=a.new_tokens)

    def generate(self, batch):
        torch = self.torch
        L = max(len(x) for x in batch)
        ids = torch.full((len(batch), L), self.pad, dtype=torch.long)
        mask = torch.zeros((len(batch), L), dtype=torch.long)
        for i, x in enumerate(batch):
            ids[i, :len(x)] = torch.tensor(x)
            mask[i, :len(x)] = 1
        with torch.inference_mode():
            out = self.model.generate(input_ids=ids, attention_mask=mask, **self.kw)
        # generated tokens per row, the decoder start token and trailing padding not counted
        return [int((row[1:] != self.pad).sum()) for row in out]


def block_torch():
    """ctranslate2 imports torch and transformers when they are installed, for its converters only;
    translating needs neither, and torch's import alone is ~790 MB of RSS here (a CUDA build), which a
    user with only ctranslate2 installed does not pay. Make those imports fail as they would there."""
    for m in ("torch", "transformers", "huggingface_hub"):
        sys.modules.setdefault(m, None)


class CT2:
    def __init__(self, a):
        block_torch()
        import ctranslate2
        d = Path(a.model) / ("ct2-int8" if a.precision == "int8" else "ct2-float32")
        self.tr = ctranslate2.Translator(str(d), device="cpu", compute_type="int8" if a.precision == "int8" else "float32",
                                         inter_threads=1, intra_threads=a.threads)
        vocab = json.loads((Path(a.model) / "hf" / "vocab.json").read_text(encoding="utf-8"))
        self.piece = {i: p for p, i in vocab.items()}
        self.kw = dict(beam_size=a.beam, num_hypotheses=1, max_decoding_length=a.new_tokens,
                       min_decoding_length=a.new_tokens, max_batch_size=0)

    def generate(self, batch):
        toks = [[self.piece[i] for i in x] for x in batch]
        res = self.tr.translate_batch(toks, **self.kw)
        return [len(r.hypotheses[0]) for r in res]


def cmd_run(a):
    ids = read_ids(a.ids)
    t0 = time.perf_counter()
    eng = CT2(a) if a.engine == "ct2" else TorchLike(a)
    load_ms = (time.perf_counter() - t0) * 1e3
    bs = batches(ids, a.batch)
    eng.generate(ids[:1])  # warm-up, as bench_translate does
    if not a.skip_throughput:
        eng.generate(ids[:a.batch])
    new = []
    lat = []
    n_lat = len(ids) if a.latency_n < 0 else min(a.latency_n, len(ids))
    if not a.skip_latency:
        for x in (ids[i * len(ids) // n_lat] for i in range(n_lat)):  # bench_translate's choice
            t = time.perf_counter()
            new += eng.generate([x])
            lat.append((time.perf_counter() - t) * 1e3)
    total = 0.0
    if not a.skip_throughput:
        for b in bs:
            t = time.perf_counter()
            new += eng.generate(b)
            total += (time.perf_counter() - t) * 1e3
    r = dict(engine=a.engine, precision=a.precision, mode=f"beam {a.beam}" if a.beam > 1 else "greedy", beam=a.beam,
             threads=a.threads, sentences=0 if a.skip_throughput else len(ids),
             latency_sentences=0 if a.skip_latency else n_lat, batch=a.batch, new_tokens=a.new_tokens,
             load_ms=round(load_ms, 1), sent_per_s=len(ids) / (total / 1e3) if total else 0.0,
             throughput_ms=round(total, 1), p50_ms=percentile(lat, 50), p95_ms=percentile(lat, 95),
             mean_ms=statistics.fmean(lat) if lat else 0.0, new_tokens_min=min(new), new_tokens_max=max(new))
    print(json.dumps(r), flush=True)


def cmd_baseline(a):
    """Imports only: the RSS a peer has before it loads a model."""
    if a.engine == "ct2":
        block_torch()
        import ctranslate2  # noqa: F401
    else:
        import torch  # noqa: F401
        import transformers  # noqa: F401
        if a.engine == "optimum":
            import onnxruntime  # noqa: F401
            import optimum.onnxruntime  # noqa: F401


# ----------------------------------------------------------------------------------------------- table

def child(cmd, env):
    """Runs cmd under /usr/bin/time; returns (its last stdout line parsed as JSON or None, its peak RSS in
    MB). Not os.wait4 on a direct child: Linux keeps the larger of the pre-exec and post-exec peak RSS,
    and subprocess forks from this interpreter, so its RSS would leak into the figure."""
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as f:
        p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", f.name] + cmd, stdout=subprocess.PIPE, env=env,
                           text=True)
        lines = [l for l in f.read().splitlines() if l.strip().isdigit()]
    rss = int(lines[-1]) / 1024 if lines else float("nan")
    if p.returncode != 0:
        log(f"table: {' '.join(cmd)} exited with {p.returncode}")
        return None, rss
    out = [l for l in p.stdout.splitlines() if l.startswith("{")]
    return (json.loads(out[-1]) if out else None), rss


def cmd_table(a):
    # OMP_WAIT_POLICY PASSIVE unless the caller says otherwise: on a shared machine OpenMP's default
    # spin-waiting (CTranslate2, PyTorch) loses the CPU to other processes' work and measures the
    # machine's load instead of the engine (CTranslate2 fp32 ran 3-6x slower that way here).
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), MKL_NUM_THREADS=str(a.threads),
               OPENBLAS_NUM_THREADS="1", OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
               TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error",
               PYTHONWARNINGS="ignore")
    a.env_note = f"OMP_WAIT_POLICY={env['OMP_WAIT_POLICY']}"
    if a.from_jsonl:
        return table_from_jsonl(a, env)
    model = Path(a.model)
    ids = Path(a.work) / "ids.txt"
    if not ids.exists():
        cmd_prepare(argparse.Namespace(model=str(model), out=a.work, n=a.n))
    n = len(read_ids(ids))
    want = [e for e in ENGINES if not a.engines or e[0] in a.engines.split(",")]
    modes = [int(b) for b in a.beams.split(",")]
    common = ["--ids", str(ids), "--new-tokens", str(a.new_tokens), "--threads", str(a.threads),
              "--batch", str(a.batch), "--latency-n", str(a.latency_n)]
    results = {}  # (engine, precision, beam) -> list of result dicts (rss_mb added)
    baseline = {}
    for eng in sorted({e for e, _ in want} - set(TOLKS)):
        _, baseline[eng] = child([sys.executable, __file__, "baseline", "--engine", eng], env)
    started = time.time()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    for r in range(a.repeat):
        for beam in modes:
            for eng, prec in want:
                if eng in TOLKS:
                    cmd = [a.bench_bin, "-m", str(model / "onnx"), "--beam", str(beam), "--engine", eng] + common
                    if prec == "int8":
                        cmd.append("--int8")
                    if eng == "tolk-lmh":
                        cmd.append("--int8-lm-head")
                    if eng == "tolk-bf16":
                        cmd.append("--bf16")
                    if eng == "tolk-bf16p":
                        cmd.append("--bf16-products")
                else:
                    cmd = [sys.executable, __file__, "run", "--model", str(model), "--engine", eng, "--precision", prec,
                           "--beam", str(beam)] + common
                t = time.time()
                res, rss = child(cmd, env)
                if res is None:
                    continue
                res["rss_mb"] = rss
                results.setdefault((eng, prec, beam), []).append(res)
                log(f"round {r + 1}/{a.repeat} {eng} {prec} beam {beam}: {res['sent_per_s']:.2f} sent/s, "
                    f"P50 {res['p50_ms']:.1f} ms, P95 {res['p95_ms']:.1f} ms, RSS {rss:.0f} MB, new tokens "
                    f"{res['new_tokens_min']}-{res['new_tokens_max']} ({time.time() - t:.0f} s)")
                if a.jsonl:
                    with open(a.jsonl, "a") as f:
                        f.write(json.dumps(dict(res, round=r + 1, started=stamp,
                                                load_avg=round(os.getloadavg()[0], 2))) + "\n")
    elapsed = time.time() - started
    print_table(a, results, baseline, modes, want, n, elapsed)


def table_from_jsonl(a, env):
    """Reprints the table from results.jsonl lines (every round of every earlier `table` run with the
    same settings), so rounds taken at different times can be pooled."""
    results, rounds = {}, set()
    for line in Path(a.from_jsonl).read_text().splitlines():
        r = json.loads(line)
        if (r["new_tokens"], r["threads"], r["batch"]) != (a.new_tokens, a.threads, a.batch):
            continue
        if a.engines and r["engine"] not in a.engines.split(","):
            continue
        results.setdefault((r["engine"], r["precision"], r["beam"]), []).append(r)
        rounds.add((r.get("started", ""), r.get("round")))
    want = [e for e in ENGINES if any(k[:2] == e for k in results)]
    modes = sorted({k[2] for k in results})
    baseline = {}
    for eng in sorted({e for e, _ in want} - set(TOLKS)):
        _, baseline[eng] = child([sys.executable, __file__, "baseline", "--engine", eng], env)
    n = max(r["sentences"] for rs in results.values() for r in rs)
    a.repeat = len(rounds)
    a.latency_n = max(r["latency_sentences"] for rs in results.values() for r in rs)
    print_table(a, results, baseline, modes, want, n, 0.0)


def med(rs, key):
    return statistics.median(r[key] for r in rs)


def print_table(a, results, baseline, modes, want, n, elapsed):
    lat_n = n if a.latency_n < 0 else min(n, a.latency_n)
    print(f"# {n} sentences ({a.work}/ids.txt), {a.new_tokens} new tokens each (min = max), {a.threads} threads, "
          f"throughput batches of {a.batch} sentences (sorted by length), latency: each of {lat_n} sentences alone; "
          f"median of {a.repeat} round(s); {a.env_note}; {time.strftime('%Y-%m-%d %H:%M')}, {elapsed:.0f} s, "
          f"load average {os.getloadavg()[0]:.1f} at the end")
    hdr = f"| {'engine':<22} | {'prec':<4} | {'mode':<6} | {'sent/s':>7} | {'P50 ms':>8} | {'P95 ms':>8} | {'peak RSS MB':>11} | {'- imports':>9} | {'spread':>6} |"
    print(hdr)
    print("|" + "|".join("-" * (len(c)) for c in hdr.split("|")[1:-1]) + "|")
    for beam in modes:
        for eng, prec in want:
            rs = results.get((eng, prec, beam))
            mode = f"beam {beam}" if beam > 1 else "greedy"
            if not rs:
                print(f"| {LABEL[eng]:<22} | {prec:<4} | {mode:<6} | {'failed':>7} | {'':>8} | {'':>8} | {'':>11} | {'':>9} | {'':>6} |")
                continue
            sp = [r["sent_per_s"] for r in rs]
            spread = (max(sp) - min(sp)) / statistics.median(sp) * 100 if len(sp) > 1 else 0.0
            print(f"| {LABEL[eng]:<22} | {prec:<4} | {mode:<6} | {med(rs, 'sent_per_s'):7.2f} | {med(rs, 'p50_ms'):8.1f} | "
                  f"{med(rs, 'p95_ms'):8.1f} | {med(rs, 'rss_mb'):11.0f} | {med(rs, 'rss_mb') - baseline.get(eng, 0.0):9.0f} | {spread:5.0f}% |")
    print()
    print("Ratios tolk / peer (sent/s: > 1 means tolk is faster; P50 and RSS: < 1 means tolk is lower/better):")
    for beam in modes:
        mode = f"beam {beam}" if beam > 1 else "greedy"
        for subject, tp in [(e, p) for e, p in ENGINES if e in TOLKS]:
            t = results.get((subject, tp, beam))
            if not t:
                continue
            for eng, prec in want:
                if eng in TOLKS:
                    continue
                p = results.get((eng, prec, beam))
                if not p:
                    continue
                if prec != tp and not (eng == "transformers" and tp == "int8") and not (tp == "bf16" and prec == "fp32"):
                    continue
                print(f"  {mode:<6} {LABEL[subject]} {tp} vs {LABEL[eng]} {prec}{' (not the same precision)' if tp != prec else ''}: sent/s x{med(t, 'sent_per_s') / med(p, 'sent_per_s'):.2f}, "
                      f"P50 x{med(t, 'p50_ms') / med(p, 'p50_ms'):.2f}, P95 x{med(t, 'p95_ms') / med(p, 'p95_ms'):.2f}, "
                      f"RSS x{med(t, 'rss_mb') / med(p, 'rss_mb'):.2f}")
    if baseline:
        print("Peak RSS includes the Python interpreter and imports for the peers: " +
              ", ".join(f"{LABEL[e]} {v:.0f} MB" for e, v in sorted(baseline.items())) + " before any model is loaded.")
    bad = [(k, r["new_tokens_min"], r["new_tokens_max"]) for k, rs in results.items() for r in rs
           if not (a.new_tokens - 1 <= r["new_tokens_min"] <= r["new_tokens_max"] <= a.new_tokens)]
    if bad:
        print(f"WARNING: unequal work, new tokens outside [{a.new_tokens - 1}, {a.new_tokens}]: {bad}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--n", type=int, default=200)

    def run_args(q):
        q.add_argument("--ids", required=True)
        q.add_argument("--new-tokens", type=int, default=32)
        q.add_argument("--threads", type=int, default=2)
        q.add_argument("--batch", type=int, default=16)
        q.add_argument("--latency-n", type=int, default=-1, help="sentences timed alone (default: all)")

    p = sub.add_parser("run")
    p.add_argument("--model", required=True)
    p.add_argument("--engine", choices=["transformers", "optimum", "ct2"], required=True)
    p.add_argument("--precision", choices=["fp32", "int8"], default="fp32")
    p.add_argument("--beam", type=int, default=1)
    p.add_argument("--skip-latency", action="store_true")
    p.add_argument("--skip-throughput", action="store_true")
    run_args(p)
    p = sub.add_parser("baseline")
    p.add_argument("--engine", required=True)
    p = sub.add_parser("table")
    p.add_argument("--model", required=True)
    p.add_argument("--work", required=True, help="folder for sentences.txt / ids.txt (made when missing)")
    p.add_argument("--bench-bin", required=True, help="path of bench_translate")
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--beams", default="1,4")
    p.add_argument("--engines", default="", help="comma-separated subset of tolk,tolk-lmh,tolk-bf16,tolk-bf16p,transformers,optimum,ct2")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--jsonl", default="", help="append every run's result here")
    p.add_argument("--from-jsonl", default="", help="run nothing: print the table from these results")
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--latency-n", type=int, default=-1)
    a = ap.parse_args(argv)
    {"prepare": cmd_prepare, "run": cmd_run, "baseline": cmd_baseline, "table": cmd_table}[a.cmd](a)


if __name__ == "__main__":
    main()
