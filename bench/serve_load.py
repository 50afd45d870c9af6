#!/usr/bin/env python3
"""Open-loop load for bench/serve.sh: requests sent on a fixed schedule whatever the answers, each
one's latency measured from its scheduled send time, so a server that falls behind cannot hide its
queue by slowing the sender (no coordinated omission). One run = one rate for a fixed time; the run
then waits for the answers still out (each bounded by --timeout) and prints one JSON line:

  rate, sent, by status ({"200": n, "503": n, "timeout": n, ...}), ok_per_s (answered 200 per second
  from the first send to the last 200), P50/P95/P99 of the
  answered-200 latencies, P99 and max of the 503 latencies with the share that carried Retry-After,
  the server's RSS (start, peak, end, sampled every 0.25 s) and the CPU seconds it used.

    python bench/serve_load.py --url http://127.0.0.1:8080 --pid PID --rate 20 --seconds 15 \
        --sentences sentences.txt --per-request 1 --new-tokens 32

Every server but LibreTranslate gets the same body: POST /v1/translate {"texts": [...],
"max_new_tokens": N, "min_new_tokens": N, "beam": B} (tolk's native API; bench/serve_peer.py serves the
same for the peers); --new-tokens 0 (natural length) sends max_new_tokens 256 and no min_new_tokens,
so each server stops at its own </s>. --api libretranslate sends LibreTranslate's own request instead,
POST /translate {"q": text or [texts], "source": "en", "target": "zh", "format": "text"}: its API sets
neither length nor beam (bench/serve_lt.py starts it with the beam). An answer counts as 200 only with
its translations in it ("translations", "translatedText"); a 200 without them is "bad_answer".
--cycle K sends K sentences (a seeded sample) in turn instead of random draws, so that runs at
different rates ask for the same work (bench/serve_bench.py's natural-length mode).
"""
import argparse
import asyncio
import json
import os
import random
import time

import aiohttp

# CTranslate2's max_decoding_length default, which Argos (LibreTranslate) leaves as it is: the bound
# of every server in the natural-length mode.
NATURAL_MAX = 256
ANSWER = {"native": "translations", "libretranslate": "translatedText"}


def request(api, texts, new_tokens, beam):
    """The path and JSON body of one request of these texts."""
    if api == "libretranslate":
        return "/translate", {"q": texts[0] if len(texts) == 1 else texts, "source": "en", "target": "zh", "format": "text"}
    body = {"texts": texts, "max_new_tokens": new_tokens or NATURAL_MAX, "beam": beam}
    if new_tokens:
        body["min_new_tokens"] = new_tokens
    return "/v1/translate", body


def answered(api, raw):
    """Whether a 200's body holds the translations."""
    try:
        return ANSWER[api] in json.loads(raw)
    except ValueError:
        return False


def rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def cpu_s(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
        return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def pct(v, q):
    if not v:
        return None
    v = sorted(v)
    return v[min(len(v) - 1, int(round(q / 100 * (len(v) - 1))))]


async def one(session, api, url, body, t_sched, timeout, rec):
    try:
        async with session.post(url, json=body, timeout=aiohttp.ClientTimeout(total=timeout)) as r:
            raw = await r.read()
            st = "bad_answer" if r.status == 200 and not answered(api, raw) else str(r.status)
            rec.append((st, time.monotonic() - t_sched, "Retry-After" in r.headers, time.monotonic()))
    except asyncio.TimeoutError:
        rec.append(("timeout", time.monotonic() - t_sched, False, time.monotonic()))
    except aiohttp.ClientError as e:
        rec.append((type(e).__name__, time.monotonic() - t_sched, False, time.monotonic()))


async def sample_rss(pid, out, stop):
    while not stop.is_set():
        out.append(rss_mb(pid))
        try:
            await asyncio.wait_for(stop.wait(), 0.25)
        except asyncio.TimeoutError:
            pass


async def run(a, sentences):
    rng = random.Random(a.seed)
    rec, rss, tasks = [], [], []
    stop = asyncio.Event()
    conn = aiohttp.TCPConnector(limit=0, force_close=False)
    pool = rng.sample(sentences, a.cycle) if a.cycle else None
    cpu0 = cpu_s(a.pid)
    async with aiohttp.ClientSession(connector=conn) as session:
        sampler = asyncio.create_task(sample_rss(a.pid, rss, stop))
        n = int(a.rate * a.seconds)
        t0 = time.monotonic() + 0.05
        for i in range(n):
            t_sched = t0 + i / a.rate
            delay = t_sched - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            texts = ([pool[(i * a.per_request + j) % a.cycle] for j in range(a.per_request)] if pool
                     else [rng.choice(sentences) for _ in range(a.per_request)])
            path, body = request(a.api, texts, a.new_tokens, a.beam)
            tasks.append(asyncio.create_task(one(session, a.api, a.url.rstrip("/") + path, body, t_sched, a.timeout, rec)))
        send_end = time.monotonic()
        await asyncio.gather(*tasks)
        stop.set()
        await sampler
    cpu1 = cpu_s(a.pid)
    ok = [lat for st, lat, _, _ in rec if st == "200"]
    busy = [(lat, ra) for st, lat, ra, _ in rec if st == "503"]
    last_ok = max((t for st, _, _, t in rec if st == "200"), default=t0)
    status = {}
    for st, _, _, _ in rec:
        status[st] = status.get(st, 0) + 1
    ms = lambda v: None if v is None else round(v * 1e3, 1)  # noqa: E731
    return dict(rate=a.rate, seconds=a.seconds, per_request=a.per_request, sent=n, status=status,
                ok_per_s=round(len(ok) / max(last_ok - t0, 1e-9), 3), send_lag_s=round(send_end - (t0 + (n - 1) / a.rate), 3),
                p50_ms=ms(pct(ok, 50)), p95_ms=ms(pct(ok, 95)), p99_ms=ms(pct(ok, 99)),
                busy_p99_ms=ms(pct([x for x, _ in busy], 99)), busy_max_ms=ms(max((x for x, _ in busy), default=None)),
                busy_retry_after=round(sum(ra for _, ra in busy) / len(busy), 3) if busy else None,
                rss_start_mb=round(rss[0], 1) if rss else None, rss_peak_mb=round(max(rss), 1) if rss else None,
                rss_end_mb=round(rss[-1], 1) if rss else None, cpu_s=round(cpu1 - cpu0, 2))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--pid", type=int, required=True, help="the server's process, for RSS and CPU")
    ap.add_argument("--rate", type=float, required=True, help="requests per second")
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--sentences", required=True, help="one sentence a line")
    ap.add_argument("--per-request", type=int, default=1)
    ap.add_argument("--new-tokens", type=int, default=32, help="exactly this many; 0: natural length")
    ap.add_argument("--beam", type=int, default=1, help="sent explicitly: tolk's default is the model's num_beams")
    ap.add_argument("--api", choices=list(ANSWER), default="native")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cycle", type=int, default=0, help="K sentences in turn (0: random draws)")
    a = ap.parse_args()
    sentences = [s for s in open(a.sentences, encoding="utf-8").read().splitlines() if s.strip()]
    print(json.dumps(asyncio.run(run(a, sentences))), flush=True)


if __name__ == "__main__":
    main()
