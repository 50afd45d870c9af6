#!/usr/bin/env python3
"""bench/serve.sh's driver: tolk serve and the peer services of bench/serve_peer.py on one model, the
same threads, the same requests, one server at a time on loopback, all in one run.

Per server (each its own process, started here and stopped after):
  capacity   open-loop runs (bench/serve_load.py) at rising rates: the highest rate whose answers all
             came back 200 with P99 <= 1.5 x P50 (the deployment checklist's objective);
  load       open-loop runs at 0.25x its own capacity (unloaded) and at 1x, 3x and 10x tolk's capacity
             (tolk's at the same precision): P50/P95/P99, errors by status, RSS, CPU;
  closed     Locust, headless, closed loop: 1, 8, 32, 64 users, the table its users publish;
  rss        the server's RSS every 0.5 s through all of it (the plot).

LibreTranslate (libretranslate-fp32/-int8, not in the default list) runs from its own venv (--lt-python)
through bench/serve_lt.py and gets its own request (bench/serve_load.py --api libretranslate); its API
fixes no output length, so it runs only in the natural-length mode (--new-tokens 0), where every server
stops at its own </s> (at most 256 tokens), and its beam is set at start (ARGOS_BEAM_SIZE = --beam).

Results go to WORK/results.jsonl (one line per run); `table` prints the table and the ratios from it
and draws WORK/latency.png and WORK/rss.png.

    python bench/serve_bench.py all --model /tmp/tolk-bench --tolk build/tolk --work /tmp/tolk-bench-serve
    python bench/serve_bench.py table --work /tmp/tolk-bench-serve
"""
import argparse
import csv
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import serve_lt  # noqa: E402
from serve_load import NATURAL_MAX, rss_mb  # noqa: E402
from translate_peers import pick_sentences  # noqa: E402

SERVERS = ["tolk-fp32", "tolk-int8", "transformers-fp32", "optimum-fp32", "optimum-int8", "ct2-fp32", "ct2-int8"]
LABEL = {"tolk": "tolk serve", "transformers": "FastAPI+PyTorch", "optimum": "FastAPI+Optimum ORT",
         "ct2": "FastAPI+CTranslate2", "libretranslate": "LibreTranslate (Argos)"}


def log(*a):
    print("[serve_bench]", *a, file=sys.stderr, flush=True)


def wait_health(url, proc, seconds):
    t = time.monotonic()
    while time.monotonic() - t < seconds:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode} while starting")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{url} not healthy after {seconds} s")


class Server:
    def __init__(self, a, name, port):
        engine, prec = name.split("-")[:2]  # a third part only labels a variant (tolk-fp32-latency)
        self.name, self.engine, self.prec, self.url = name, engine, prec, f"http://127.0.0.1:{port}"
        self.api = "libretranslate" if engine == "libretranslate" else "native"
        env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
        if engine == "libretranslate":
            cmd, env = serve_lt.command(a.model, Path(a.work) / f"lt-{prec}", port, a.threads, a.beam, prec, a.lt_python)
        elif engine == "tolk":
            cmd = [a.tolk, "serve", "-m", str(Path(a.model) / "onnx"), "--port", str(port), "--threads", str(a.threads)]
            if prec == "int8":
                cmd.append("--int8")
            if name.endswith("-lmh"):  # the LM head in int8 too, as CTranslate2's int8 has it
                cmd.append("--int8-lm-head")
            if prec == "bf16":  # tolk-bf16: --bf16; tolk-bf16-products: AVX512-BF16's products
                cmd.append("--bf16-products" if name.endswith("-products") else "--bf16")
            cmd += a.tolk_args.split()
        else:
            cmd = [sys.executable, str(HERE / "serve_peer.py"), "--engine", engine, "--precision", prec,
                   "--model", a.model, "--threads", str(a.threads), "--port", str(port)]
        env["OMP_NUM_THREADS"] = str(a.threads)
        self.log = open(Path(a.work) / f"{name}.log", "w")
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.rss, self.stop_sampling = [], threading.Event()
        threading.Thread(target=self.sample, daemon=True).start()
        wait_health(self.url, self.proc, 600)
        self.ready_s = time.monotonic() - self.t0

    def sample(self):
        while not self.stop_sampling.wait(0.5):
            self.rss.append((round(time.monotonic() - self.t0, 2), rss_mb(self.proc.pid)))

    def stop(self):
        self.stop_sampling.set()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


# The natural-length mode's sentences: every open-loop run sends the same ones in turn (serve_load.py
# --cycle), so the runs at different rates ask for the same work.
CYCLE = 24
LONG_PROBE_S = 60


def open_loop(a, srv, rate, seconds, per_request=1):
    cmd = [sys.executable, str(HERE / "serve_load.py"), "--url", srv.url, "--pid", str(srv.proc.pid),
           "--rate", f"{rate:.4f}", "--seconds", str(seconds), "--sentences", str(Path(a.work) / "sentences.txt"),
           "--per-request", str(per_request), "--new-tokens", str(a.new_tokens), "--beam", str(a.beam),
           "--timeout", str(a.timeout), "--api", srv.api, "--cycle", str(0 if a.new_tokens else CYCLE)]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def meets_objective(r, base, natural):
    """Every request answered 200, P99 <= 1.5 x P50, and P50 within 2x of the lowest rate's: a run whose
    answers are all uniformly late (a queue that grew the whole run) does not pass on the ratio alone.
    In the natural-length mode the sentences' own lengths spread the latencies (unloaded, tolk's P99 is
    ~5x its P50 on these sentences), so the tail is held to the lowest rate's instead: P99 <= 1.5 x its
    P99, every probe sending the same cycle of sentences at least once."""
    ok = r["status"].get("200", 0)
    tail = base["p99_ms"] if natural else r["p50_ms"]
    return bool(ok == r["sent"] and r["p50_ms"] and r["p99_ms"] <= 1.5 * tail
                and r["p50_ms"] <= 2 * base["p50_ms"])


def capacity(a, srv, emit):
    """Rates rise by 1.5x with short probes while the objective holds; a short probe that fails it is
    repeated long, and only a long failure ends the rise. Then the last rate that met it is probed again,
    and the interval between it and the first that failed is halved twice, with probes long enough for
    --min-requests answers each (at most LONG_PROBE_S seconds, which the slowest peers reach): the P99 of
    40 answers is their largest, so one slow answer would decide, and a 1.5x step alone puts any two
    servers' ratio on a 1.5x grid."""
    natural = a.new_tokens == 0
    seconds = lambda rate: max(a.seconds, CYCLE / rate) if natural else a.seconds  # noqa: E731
    rate, good, bad, base = a.start_rate, 0.0, None, None

    def probe(rate, long):
        secs = max(seconds(rate), min(a.min_requests / rate, LONG_PROBE_S)) if long else seconds(rate)
        r = open_loop(a, srv, rate, secs)
        emit(dict(kind="capacity_probe", **r))
        return r

    def meets(rate, long):
        return meets_objective(probe(rate, long), base, natural)

    while rate <= a.max_rate:
        r = probe(rate, False)
        base = base or (r if r["p50_ms"] else dict(p50_ms=1e9, p99_ms=1e9))
        if not meets_objective(r, base, natural):
            # A short probe's P99 is its largest answer or next to it: one slow answer (a neighbour on the
            # cores, one of the mix's two-sentence lines) fails it at any rate, and the first probe's
            # ~4 answers made a server's capacity 0 that way. A long probe at the same rate decides; the
            # first rate's is the base.
            r = probe(rate, True)
            if not good:
                base = r if r["p50_ms"] else base
        if not meets_objective(r, base, natural):
            bad = rate
            break
        good, rate = rate, rate * 1.5
    if good and bad:
        if not meets(good, True):
            good, bad = good / 1.5, good
        for _ in range(2):
            mid = (good + bad) / 2
            if meets(mid, True):
                good = mid
            else:
                bad = mid
    return good


def locust(a, srv, users, per_request):
    prefix = Path(a.work) / f"locust-{srv.name}-{users}x{per_request}"
    env = dict(os.environ, SENTENCES=str(Path(a.work) / "sentences.txt"), NEW_TOKENS=str(a.new_tokens), BEAM=str(a.beam),
               PER_REQUEST=str(per_request), API=srv.api)
    cmd = [str(Path(sys.executable).parent / "locust"), "-f", str(HERE / "serve_locust.py"), "--headless",
           "-u", str(users), "-r", str(users), "-t", f"{a.locust_seconds}s", "--host", srv.url,
           "--csv", str(prefix), "--only-summary", "--stop-timeout", str(a.timeout)]
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, timeout=a.locust_seconds + a.timeout + 60)
    with open(f"{prefix}_stats.csv") as f:
        row = [r for r in csv.DictReader(f) if r["Name"] == "Aggregated"][0]
    num = lambda k: float(row[k]) if row[k] not in ("", "N/A") else None  # noqa: E731
    return dict(users=users, per_request=per_request, requests=int(row["Request Count"]), failures=int(row["Failure Count"]),
                rps=num("Requests/s"), p50_ms=num("50%"), p95_ms=num("95%"), p99_ms=num("99%"))


def answers_s(a, answered_per_s):
    """A run long enough for --min-requests answers (at most LONG_PROBE_S): the overload target
    compares two P99s, and the P99 of the 16 answers an 8-second unloaded run got was their largest,
    set beside the P99 of 100 at overload: the same statistic only when both have as many answers."""
    return max(a.seconds, min(a.min_requests / answered_per_s, LONG_PROBE_S))


def one_round(a, rnd, emit_to, tolk_cap):
    """Every server once: start, capacity, the load runs, stop; Locust on a fresh process in round 1 only."""
    for name in a.servers.split(","):
        log(f"round {rnd}: {name}: starting")
        srv = Server(a, name, a.port)
        def emit(d, name=name):
            emit_to(dict(server=name, round=rnd, **d))
            if d["kind"] != "rss":
                log(name, json.dumps(d))
        try:
            emit(dict(kind="start", ready_s=round(srv.ready_s, 2), rss_mb=rss_mb(srv.proc.pid),
                      new_tokens=a.new_tokens, beam=a.beam))
            open_loop(a, srv, 1.0, 3)  # warm-up
            cap = capacity(a, srv, emit)
            emit(dict(kind="capacity", capacity=cap))
            if name == f"tolk-{srv.prec}":  # the peers' 1x/3x/10x: the plain tolk row's, not a variant's
                tolk_cap[srv.prec] = cap
            ref = cap if srv.engine == "tolk" else tolk_cap.get(srv.prec) or a.ref_capacity or cap
            if cap:
                emit(dict(kind="unloaded", mult=0.25, **open_loop(a, srv, cap * 0.25, answers_s(a, cap * 0.25))))
            for mult in (1, 3, 10):
                if ref:
                    # A server that sheds load answers about its capacity; one that queues everything
                    # only piles up timeouts in a longer run.
                    secs = answers_s(a, min(ref * mult, cap or ref)) if mult == 1 or srv.engine == "tolk" else a.seconds
                    emit(dict(kind="load", mult=mult, **open_loop(a, srv, ref * mult, secs)))
            emit(dict(kind="load4", **open_loop(a, srv, max(ref, 0.5) / 2, a.seconds, per_request=4)))
        finally:
            srv.stop()
            emit(dict(kind="rss", samples=srv.rss, exit=srv.proc.returncode))
        if rnd > 1:
            continue
        # Closed loop on a fresh process: a peer would still be working through the overload's
        # abandoned requests.
        srv = Server(a, name, a.port)
        try:
            for per_request in (1, 4):
                for users in a.users:
                    emit(dict(kind="locust", **locust(a, srv, users, per_request)))
        finally:
            srv.stop()


def cmd_all(a):
    if a.new_tokens and any(n.startswith("libretranslate") for n in a.servers.split(",")):
        raise SystemExit("serve_bench: LibreTranslate's API fixes no output length; "
                         "run its rows in the natural-length mode (--new-tokens 0, NEW_TOKENS=0 in serve.sh)")
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    (work / "sentences.txt").write_text("".join(s + "\n" for s in pick_sentences(1000)), encoding="utf-8")
    res_path = work / "results.jsonl"
    if not a.append:
        res_path.write_text("")

    def emit_to(d):
        with res_path.open("a") as f:
            f.write(json.dumps(d) + "\n")
    # Rounds interleave the servers, so a slow spell of the shared machine lands on one round of
    # several servers, not on every round of one; each round's 1x/3x/10x follow that round's tolk.
    for rnd in range(a.first_round, a.first_round + a.rounds):
        one_round(a, rnd, emit_to, {})
    cmd_table(a)


def load_results(work):
    rows = [json.loads(l) for l in (Path(work) / "results.jsonl").read_text().splitlines() if l.strip()]
    by = {}
    for r in rows:
        by.setdefault(r["server"], []).append(r)
    return by


def median_record(rs):
    """One record from the same run's rounds: numbers by their median, status counts summed."""
    if len(rs) == 1:
        return rs[0]
    out = dict(rs[0])
    for k, v in rs[0].items():
        vals = [r.get(k) for r in rs]
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in vals):
            out[k] = statistics.median(vals)
        elif all(isinstance(x, dict) for x in vals) and k == "status":
            tot = {}
            for x in vals:
                for kk, n in x.items():
                    tot[kk] = tot.get(kk, 0) + n
            out[k] = tot
    return out


def pick(rs, kind, mult=None):
    """The median over rounds of a server's records of one kind (and load multiple)."""
    got = [r for r in rs if r["kind"] == kind and (mult is None or r.get("mult") == mult)]
    return median_record(got) if got else None


def warm_growth(rs):
    """The 10x run's peak RSS over the peak of the same round's 1x and 3x runs, in %; the median over rounds."""
    got = []
    for rnd in sorted({r.get("round", 1) for r in rs}):
        runs = {r.get("mult"): r for r in rs if r["kind"] == "load" and r.get("round", 1) == rnd}
        warm = [runs[m]["rss_peak_mb"] for m in (1, 3) if runs.get(m) and runs[m].get("rss_peak_mb")]
        if warm and runs.get(10) and runs[10].get("rss_peak_mb"):
            got.append(100 * (runs[10]["rss_peak_mb"] / max(warm) - 1))
    return statistics.median(got) if got else None


def ok_rps(r):
    """Locust's req/s counts failures too: a server that refuses at once would look fast."""
    return r["rps"] * (1 - r["failures"] / r["requests"]) if r["rps"] and r["requests"] else r["rps"]


def fmt(v, nd=0):
    return "—" if v is None else f"{v:.{nd}f}"


def mode(by):
    """What every request asked for, from the start records (older results did not record it)."""
    got = {(r["new_tokens"], r["beam"]) for rs in by.values() for r in rs if r["kind"] == "start" and "new_tokens" in r}
    say = lambda n, b: (f"natural length (no min_new_tokens, max_new_tokens {NATURAL_MAX}: each server stops at its "  # noqa: E731
                        f"own </s>)" if n == 0 else f"exactly {n} new tokens") + f", beam {b}"
    return "; ".join(say(n, b) for n, b in sorted(got)) or "not recorded"


def cmd_table(a):
    by = load_results(a.work)
    print(f"\nServing table ({a.work}/results.jsonl). Latencies in ms from the scheduled send; capacity in req/s")
    print(f"Requests: {mode(by)}")
    print("| server | capacity | unloaded P99 | 1x P50/P95/P99 | 3x P99 | 10x P99 (accepted) | 10x statuses | "
          "10x 503 P99 | peak / end RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    caps, round_caps = {}, {}
    for name, rs in by.items():
        cap = pick(rs, "capacity")["capacity"] if pick(rs, "capacity") else None
        caps[name] = cap
        round_caps[name] = {r.get("round", 1): r["capacity"] for r in rs if r["kind"] == "capacity"}
        un, l1, l3, l10 = pick(rs, "unloaded"), pick(rs, "load", 1), pick(rs, "load", 3), pick(rs, "load", 10)
        rss_runs = [r for r in rs if r["kind"] == "rss" and r["samples"]]
        peak = max((m for r in rss_runs for _, m in r["samples"]), default=None)
        end = rss_runs[-1]["samples"][-1][1] if rss_runs else None
        each = " (" + ", ".join(fmt(c, 2) for _, c in sorted(round_caps[name].items())) + ")" if len(round_caps[name]) > 1 else ""
        print(f"| {name} | {fmt(cap, 2)}{each} | {fmt(un and un['p99_ms'])} | "
              f"{fmt(l1 and l1['p50_ms'])}/{fmt(l1 and l1['p95_ms'])}/{fmt(l1 and l1['p99_ms'])} | "
              f"{fmt(l3 and l3['p99_ms'])} | {fmt(l10 and l10['p99_ms'])} | {l10 and l10['status']} | "
              f"{fmt(l10 and l10['busy_p99_ms'])} | {fmt(peak)} / {fmt(end)} |")
    for per_request in (1, 4):
        print(f"\nClosed loop (Locust, {per_request}-sentence requests): answered req/s and P50/P95 ms (of all "
              "answers) by users; refused: the share of requests answered 503 at once")
        print("| server | " + " | ".join(f"{u} users" for u in a.users) + " |")
        print("|---|" + "---|" * len(a.users))
        for name, rs in by.items():
            lc = {r["users"]: r for r in rs if r["kind"] == "locust" and r.get("per_request", 1) == per_request}
            cells = [f"{fmt(ok_rps(lc[u]), 1)} ({fmt(lc[u]['p50_ms'])}/{fmt(lc[u]['p95_ms'])})"
                     f"{', ' + str(round(100 * lc[u]['failures'] / lc[u]['requests'])) + ' % refused' if lc[u]['failures'] else ''}"
                     if u in lc else "—" for u in a.users]
            print(f"| {name} | " + " | ".join(cells) + " |")
    print("\nOverload targets at 10x (tolk rows): accepted P99 / unloaded P99 (<= 2), 503 P99 (<= 50 ms), "
          "other 5xx (none), RSS during the 10x run over the warmed-up value (<= 5 %: the peak of the 1x and 3x "
          "runs just before it, which filled the batch; also given over the 10x run's first reading, taken after "
          "the idle gap in which malloc's free pages went back)")
    for name, rs in by.items():
        un, l10 = pick(rs, "unloaded"), pick(rs, "load", 10)
        if not (un and l10 and un["p99_ms"] and l10["p99_ms"]):
            print(f"  {name}: no accepted answers at 10x" if l10 else f"  {name}: not run")
            continue
        other = {k: v for k, v in l10["status"].items() if k.startswith("5") and k != "503"}
        growth = 100 * (l10["rss_peak_mb"] / l10["rss_start_mb"] - 1) if l10.get("rss_start_mb") else None
        print(f"  {name}: {l10['p99_ms'] / un['p99_ms']:.2f}x unloaded P99; 503 P99 {fmt(l10['busy_p99_ms'])} ms "
              f"(Retry-After on {fmt(100 * (l10['busy_retry_after'] or 0))} %); other 5xx {other or 'none'}; "
              f"RSS {'—' if (w := warm_growth(rs)) is None else f'{w:+.1f}'} % over the warmed-up value, +{fmt(growth, 1)} % over the run's start")
    print("\nCapacity ratios, tolk / best peer at the same precision:")
    for name in (n for n in caps if n.startswith("tolk-")):
        prec, t = name.split("-")[1], caps[name]
        peers = {n: c for n, c in caps.items() if not n.startswith("tolk") and n.endswith(prec) and c}
        if t and peers:
            best = max(peers, key=peers.get)
            per_round = []
            for rnd, tc in sorted(round_caps[name].items()):
                pc = [round_caps[n].get(rnd) for n in peers if round_caps[n].get(rnd)]
                if tc and pc:
                    per_round.append(f"round {rnd}: {tc / max(pc):.2f}x")
            print(f"  {prec}: {name} {t:.2f} req/s vs {best} {peers[best]:.2f} req/s = {t / peers[best]:.2f}x "
                  f"(medians of rounds{'; ' + ', '.join(per_round) if len(per_round) > 1 else ''})")
    plots(a, by)


def plots(a, by):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib missing: no plots")
        return
    fig, ax = plt.subplots(figsize=(8, 5))
    for name, rs in by.items():
        pts = sorted((r["rate"], r["p99_ms"]) for r in rs if r["kind"] in ("capacity_probe", "unloaded", "load") and r["p99_ms"])
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.set_xscale("log"), ax.set_yscale("log"), ax.set_xlabel("offered load, requests/s (open loop)")
    ax.set_ylabel("P99 latency of answered requests, ms"), ax.legend(), ax.grid(True, which="both", alpha=0.3)
    fig.savefig(Path(a.work) / "latency.png", dpi=110, bbox_inches="tight")
    fig, ax = plt.subplots(figsize=(8, 5))
    for name, rs in by.items():
        rss = next((r for r in rs if r["kind"] == "rss"), None)
        if rss and rss["samples"]:
            ax.plot([t for t, _ in rss["samples"]], [m for _, m in rss["samples"]], label=name)
    ax.set_xlabel("seconds since start"), ax.set_ylabel("RSS, MB"), ax.legend(), ax.grid(True, alpha=0.3)
    fig.savefig(Path(a.work) / "rss.png", dpi=110, bbox_inches="tight")
    log(f"plots: {a.work}/latency.png, {a.work}/rss.png")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=["all", "table"])
    ap.add_argument("--model", default="/tmp/tolk-bench")
    ap.add_argument("--tolk", default=str(HERE.parent / "build" / "tolk"))
    ap.add_argument("--work", default="/tmp/tolk-bench-serve")
    ap.add_argument("--servers", default=",".join(SERVERS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tolk-args", default="--max-batch-rows 3 --max-queue-wait 0.1",
                    help="tolk serve's flags beyond model and threads")
    ap.add_argument("--port", type=int, default=8190)
    ap.add_argument("--new-tokens", type=int, default=32,
                    help=f"every answer has exactly this many tokens; 0: natural length (each stops at </s>, <= {NATURAL_MAX})")
    ap.add_argument("--beam", type=int, default=1, help="1: greedy, in every request to every server")
    ap.add_argument("--lt-python", default="/tmp/lt-venv/bin/python", help="LibreTranslate's venv (bench/lt_venv.sh)")
    ap.add_argument("--seconds", type=float, default=10, help="per open-loop run")
    ap.add_argument("--start-rate", type=float, default=0.5)
    ap.add_argument("--min-requests", type=int, default=120, help="answers in each of the final capacity probes")
    ap.add_argument("--max-rate", type=float, default=500)
    ap.add_argument("--timeout", type=float, default=60, help="a request's client-side limit")
    ap.add_argument("--users", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8, 32, 64])
    ap.add_argument("--locust-seconds", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=1, help="of the open-loop runs (Locust runs in the first)")
    ap.add_argument("--append", action="store_true", help="add to results.jsonl instead of starting it again")
    ap.add_argument("--first-round", type=int, default=1,
                    help="with --append: the number of the first round run here (a stopped run's rounds resumed)")
    ap.add_argument("--ref-capacity", type=float, default=0,
                    help="with --append: the tolk capacity whose 1x/3x/10x the load runs offer (default: the server's own)")
    a = ap.parse_args()
    # A run stopped with SIGTERM unwinds, so each server's `finally` stops it: otherwise the server (a
    # LibreTranslate from its own venv, say) outlives the run and holds the port.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    (cmd_all if a.cmd == "all" else cmd_table)(a)


if __name__ == "__main__":
    main()
