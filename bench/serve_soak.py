#!/usr/bin/env python3
"""Soak for tolk serve: open-loop traffic (bench/serve_load.py's sender, latency from the scheduled
send; the sentences in one shuffled order repeated, so the load is the same from start to end) at a
fraction of the capacity for a long time on the bundled default model, the server's RSS
read ten times a second and kept as each window's peak and lowest (--sample-s, 5 s), its open file
descriptors and threads. After the warm-up (the first 10 %), a least-squares line through the
windows' peak RSS gives the growth over the run and, extrapolated, over the deployment
checklist's 24 hours (target < 5 %; the issue's soak target: < 1 % over the run). Errors by status
per minute; no 5xx allowed.

RSS is also split as the kernel counts it (/proc/PID/status): anonymous memory (the heap: what a
leak grows) and file-backed pages (the memory-mapped model and the binary, paged in as they are
first read: the embedding rows of tokens not seen before, say). File-backed RSS can only grow up to
the size of the files mapped, so a linear fit of it says nothing about 24 hours; the 24-hour bound
is the anonymous part's extrapolation plus every file-backed page not yet resident.

    python bench/serve_soak.py [--minutes 30] [--fraction 0.7] [--rate R] [--order cycle|random] [--model DIR] [--out DIR]

Writes OUT/soak.jsonl (one sample per line), OUT/soak.png when matplotlib is there, and prints a
summary JSON line; exit status 1 when a target is missed.
"""
import argparse
import asyncio
import json
import os
import random
import sys
import time
from pathlib import Path

import aiohttp

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import serve_load  # noqa: E402
from serve_faults import DEMO, Server, capacity, log  # noqa: E402
from translate_peers import pick_sentences  # noqa: E402


def proc_sample(pid):
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    threads = len(os.listdir(f"/proc/{pid}/task"))
    return serve_load.rss_mb(pid), fds, threads


def rss_split_mb(pid):
    """(anonymous, file-backed) resident MB from /proc/PID/status."""
    got = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("RssAnon", "RssFile", "RssShmem"):
                got[k] = int(v.split()[0]) / 1024
    return got.get("RssAnon", 0.0), got.get("RssFile", 0.0) + got.get("RssShmem", 0.0)


def heap_mb(url):
    """(in use, held free) heap MB from the server's /metrics (tolk_heap_*_bytes)."""
    import urllib.request
    got = {}
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("tolk_heap_"):
                k, v = line.split()
                got[k] = float(v) / (1 << 20)
    return got.get("tolk_heap_in_use_bytes", 0.0), got.get("tolk_heap_free_bytes", 0.0)


def file_mapped_mb(pid):
    """The size of every file-backed mapping: the most file-backed RSS can reach."""
    total = 0
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5].startswith("/"):
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                total += hi - lo
    return total / (1 << 20)


def fit(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return slope, my - slope * mx


def growth(xs, ys, span):
    """The least-squares line through (xs, ys): its growth over span seconds and over 24 hours, in %
    of its value at xs[0], with its slope and that value."""
    slope, icpt = fit(xs, ys)
    base = icpt + slope * xs[0]
    return 100 * slope * span / base, 100 * slope * 86400 / base, slope, base


def request_texts(order, sentences, n, seed):
    """The sentence of each of n requests. "cycle": one shuffled order of all the sentences, repeated,
    so that every run of len(sentences) requests carries the same mix and the load is the same from
    start to end; a trend in memory is then the server's. "random": each drawn on its own (with
    replacement), whose stretches differ by chance in how many long sentences meet in one batch."""
    rng = random.Random(seed)
    if order == "random":
        return [rng.choice(sentences) for _ in range(n)]
    perm = list(sentences)
    rng.shuffle(perm)
    return [perm[i % len(perm)] for i in range(n)]


async def soak(a, url, pid, rate, sentences, out):
    rec, samples, file_max = [], [], []
    conn = aiohttp.TCPConnector(limit=0)
    seconds = a.minutes * 60
    async with aiohttp.ClientSession(connector=conn) as session:
        async def sampler():
            t0 = time.monotonic()
            while time.monotonic() - t0 < seconds + 5:
                # RSS at 10 Hz, reported per window as its peak and its lowest: a sentence's batch
                # buffers are mapped while it runs and unmapped after, so one reading every few seconds
                # landed at random in a busy or an idle moment, ~1 MB apart on the default model, and
                # the fit through such readings followed the draw. The peak is what a deployment must
                # provision, and what a leak lifts.
                peak = low = None
                t_end = time.monotonic() + a.sample_s
                while True:
                    rss = serve_load.rss_mb(pid)
                    anon, filed = rss_split_mb(pid)
                    if peak is None or rss > peak[0]:
                        peak = (rss, anon, filed)
                    low = rss if low is None else min(low, rss)
                    if time.monotonic() >= t_end:
                        break
                    await asyncio.sleep(0.1)
                _, fds, th = proc_sample(pid)
                used, held = await asyncio.to_thread(heap_mb, url)
                rss, anon, filed = peak
                s = dict(t=round(time.monotonic() - t0, 1), rss_mb=round(rss, 2), rss_low_mb=round(low, 2),
                         anon_mb=round(anon, 2), file_mb=round(filed, 2), heap_used_mb=round(used, 3),
                         heap_free_mb=round(held, 3), fds=fds, threads=th)
                if not file_max:
                    file_max.append(file_mapped_mb(pid))
                samples.append(s)
                out.write(json.dumps(s) + "\n")
                out.flush()
        st = asyncio.create_task(sampler())
        n, tasks = int(rate * seconds), []
        texts = request_texts(a.order, sentences, n, a.seed)
        t0 = time.monotonic() + 0.05
        body = lambda i: {"texts": [texts[i]], "max_new_tokens": a.new_tokens,  # noqa: E731
                          "min_new_tokens": a.new_tokens, "beam": 1}
        for i in range(n):
            t_sched = t0 + i / rate
            d = t_sched - time.monotonic()
            if d > 0:
                await asyncio.sleep(d)
            tasks.append(asyncio.create_task(serve_load.one(session, "native", url + "/v1/translate", body(i), t_sched, 60, rec)))
            if len(tasks) > 4096:
                tasks = [t for t in tasks if not t.done()]
        await asyncio.gather(*tasks)
        await st
    return rec, samples, file_max[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tolk", default=str(ROOT / "build" / "tolk"))
    ap.add_argument("--model", default=str(DEMO))
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--fraction", type=float, default=0.7, help="of the measured capacity")
    ap.add_argument("--rate", type=float, default=0, help="req/s instead of fraction x capacity")
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--sample-s", type=float, default=5)
    ap.add_argument("--order", choices=("cycle", "random"), default="cycle",
                    help="the requests' sentences: one shuffled order repeated (a load the same throughout), "
                         "or each drawn at random (the runs before 2026-12-07)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="/tmp/tolk-soak")
    a = ap.parse_args()
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    srv = Server(a.tolk, a.model)
    srv.wait_ready()
    sentences = pick_sentences(1000)
    import serve_faults
    serve_faults.SENTENCES = sentences
    rate = a.rate
    if not rate:
        cap = capacity(a, srv)
        rate = cap * a.fraction
        log(f"capacity {cap} req/s; soak at {rate:.2f} req/s for {a.minutes} min")
    with open(out_dir / "soak.jsonl", "w") as f:
        rec, samples, file_max = asyncio.run(soak(a, srv.url, srv.proc.pid, rate, sentences, f))
    rc = srv.stop()
    # After the warm-up and while the load runs: the sampler goes on for 5 s after the last request
    # is sent, when RSS falls as the batch empties.
    warm = [s for s in samples if 0.1 * a.minutes * 60 <= s["t"] <= a.minutes * 60]
    xs, ys = [s["t"] for s in warm], [s["rss_mb"] for s in warm]
    span = xs[-1] - xs[0]
    growth_run, growth_24h, slope, base = growth(xs, ys, span)
    # The floor: each minute's lowest RSS. Bursts of load lift RSS for a while and the trims bring it
    # back; a leak lifts the floor too. Reported beside the fit of the peaks, which decides.
    minutes = {}
    for s in warm:
        minutes.setdefault(int(s["t"] // 60), []).append((s["t"], s["rss_low_mb"]))
    floor = [min(v, key=lambda p: p[1]) for _, v in sorted(minutes.items()) if len(v) > 1]
    floor_run, floor_24h, fslope, _ = growth(*zip(*floor), span) if len(floor) > 2 else (0.0, 0.0, 0.0, base)
    anon = [s["anon_mb"] for s in warm]
    anon_run, _, aslope, abase = growth(xs, anon, span)
    anon_24h = max(0.0, aslope) * 86400
    file_headroom = max(0.0, file_max - warm[-1]["file_mb"])
    bound_24h = 100 * (anon_24h + file_headroom) / base
    # A soak longer than the 30 minutes is also fitted in 30-minute stretches after the warm-up,
    # and from its 30th minute to the end: growth that is the last of the warming (caches and pools
    # reaching the sizes the load asks for) shrinks from one stretch to the next; a leak does not.
    stretches = []
    for k in range(int(span // 1800)):
        lo = xs[0] + 1800 * k
        px, py = zip(*[(x, y) for x, y in zip(xs, ys) if lo <= x < lo + 1800])
        run, day, _, _ = growth(px, py, 1800)
        stretches.append(dict(from_min=round(lo / 60, 1), growth_pct=round(run, 3), growth_24h_pct=round(day, 2)))
    late = [(x, y) for x, y in zip(xs, ys) if x >= 1800]
    if a.minutes >= 60 and len(late) > 2:
        px, py = zip(*late)
        run, day, _, _ = growth(px, py, px[-1] - px[0])
        stretches.append(dict(from_min=30, to_min=round(px[-1] / 60, 1), growth_pct=round(run, 3),
                              growth_24h_pct=round(day, 2)))
    status = {}
    for stt, _, _, _ in rec:
        status[stt] = status.get(stt, 0) + 1
    lat = sorted(l for stt, l, _, _ in rec if stt == "200")
    five = {k: v for k, v in status.items() if k.startswith("5") or not k.isdigit()}
    fds = [s["fds"] for s in warm]
    ths = [s["threads"] for s in warm]
    summary = dict(rate=round(rate, 2), minutes=a.minutes, order=a.order, seed=a.seed, requests=len(rec), status=status,
                   p50_ms=round(serve_load.pct(lat, 50) * 1e3, 1), p99_ms=round(serve_load.pct(lat, 99) * 1e3, 1),
                   rss_warm_mb=round(base, 1), rss_end_mb=ys[-1], rss_slope_mb_per_h=round(slope * 3600, 3),
                   rss_growth_run_pct=round(growth_run, 3), rss_growth_24h_pct=round(growth_24h, 2),
                   anon_warm_mb=round(abase, 2), anon_end_mb=anon[-1], anon_slope_mb_per_h=round(aslope * 3600, 3),
                   anon_growth_run_pct=round(anon_run, 3),
                   file_warm_mb=warm[0]["file_mb"], file_end_mb=warm[-1]["file_mb"], file_mapped_mb=round(file_max, 1),
                   rss_bound_24h_pct=round(bound_24h, 2),
                   rss_floor_slope_mb_per_h=round(fslope * 3600, 3),
                   rss_floor_growth_run_pct=round(floor_run, 3),
                   rss_floor_growth_24h_pct=round(floor_24h, 2),
                   heap_used_warm_end_mb=[warm[0]["heap_used_mb"], warm[-1]["heap_used_mb"]],
                   heap_free_warm_end_mb=[warm[0]["heap_free_mb"], warm[-1]["heap_free_mb"]],
                   stretches=stretches, fds_min_max=[min(fds), max(fds)], threads_min_max=[min(ths), max(ths)], exit_status=rc)
    # Connections come and go with the traffic; what must not happen is fds that keep piling up.
    half = len(fds) // 2
    ok = (growth_run < 1 and min(growth_24h, bound_24h) < 5 and not five and max(ths) == min(ths)
          and max(fds[half:]) <= max(fds[:half]) + 2 and rc == 0)
    summary["ok"] = ok
    print(json.dumps(summary))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(8, 4))
        ax.plot([s["t"] / 60 for s in samples], [s["rss_mb"] for s in samples], label="RSS")
        ax.plot([s["t"] / 60 for s in samples], [s["anon_mb"] for s in samples], label="of which anonymous")
        ax.plot([x / 60 for x in xs], [base + slope * (x - xs[0]) for x in xs], "--", label=f"fit: {slope * 3600:+.2f} MB/h")
        ax.set_xlabel("minutes"), ax.set_ylabel("RSS, MB"), ax.legend(), ax.grid(True, alpha=0.3)
        fig.savefig(out_dir / "soak.png", dpi=110, bbox_inches="tight")
    except ImportError:
        pass
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
