#!/usr/bin/env python3
"""Faults under load for tolk serve (issue: serving under real load), each against open-loop traffic
from bench/serve_load.py, on the bundled default model unless --model says otherwise:

  shutdown  SIGTERM at full load: every request the server accepted is answered (counted here, on the
            client side: 200, or 503 with Retry-After once it drains; connections it no longer accepts
            are refused, never reset mid-request), exit 0 within --drain;
  crash     kill -9 under load, start again at once: seconds until /ready and until the first 200;
  hostile   well-behaved traffic at half capacity alone, then again beside slow senders (a byte a
            second), clients that hang up mid-request, oversized bodies, garbage bytes and 10,000 idle
            connections attempted: the well-behaved P99 and errors side by side;
  reload    SIGHUP with a new version of the model (a new manifest) under load, then with a broken
            one (a corrupted graph): no failed request, the version /metrics reports before and after;
  coldstart the full-size benchmark model (--bench-model): tolk serve's start to /ready beside ONNX
            Runtime's InferenceSession creation for the same three graphs (needs onnxruntime).

    python bench/serve_faults.py [all|shutdown|crash|hostile|reload|coldstart] [--rate R]

Prints one JSON line per scenario and a verdict line; exit status 1 if a check fails.
"""
import argparse
import asyncio
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import serve_load  # noqa: E402
from translate_peers import pick_sentences  # noqa: E402

DEMO = ROOT / "models" / "demo-en-zh"


def log(*a):
    print("[serve_faults]", *a, file=sys.stderr, flush=True)


def get(url, timeout=2):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return None, ""


class Server:
    """tolk serve on a free port; stdout/stderr to a log file."""

    def __init__(self, tolk, model, *flags, port=None):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.logf = tempfile.NamedTemporaryFile("w+", prefix="tolk-serve-", suffix=".log", delete=False)
        self.cmd = [tolk, "serve", "-m", str(model), "--port", str(self.port), *flags]
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(self.cmd, stdout=self.logf, stderr=subprocess.STDOUT)

    def wait_ready(self, seconds=120):
        while time.monotonic() - self.t0 < seconds:
            if self.proc.poll() is not None:
                raise SystemExit(f"tolk serve exited with {self.proc.returncode}: {self.log()}")
            if get(self.url + "/ready", 1)[0] == 200:
                return time.monotonic() - self.t0
            time.sleep(0.01)
        raise SystemExit(f"{self.url} not ready after {seconds} s")

    def log(self):
        self.logf.flush()
        return Path(self.logf.name).read_text(errors="replace")[-2000:]

    def metric(self, name, **labels):
        _, text = get(self.url + "/metrics")
        for line in text.splitlines():
            if line.startswith(name) and all(f'{k}="{v}"' in line for k, v in labels.items()):
                return line
        return None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load(url, pid, rate, seconds, new_tokens, timeout=60):
    """serve_load's open loop, run to completion (call from a thread to overlap a fault)."""
    a = types.SimpleNamespace(url=url, pid=pid, rate=rate, seconds=seconds, per_request=1, new_tokens=new_tokens,
                              beam=1, timeout=timeout, seed=1, api="native", cycle=0)
    return asyncio.run(serve_load.run(a, SENTENCES))


class Background:
    def __init__(self, *args, **kw):
        self.result = None
        self.t = threading.Thread(target=self.run, args=args, kwargs=kw)
        self.t.start()

    def run(self, *args, **kw):
        self.result = load(*args, **kw)

    def join(self):
        self.t.join()
        return self.result


def capacity(a, srv):
    """The highest rate at which every answer is a 200 with P99 <= 1.5 x P50 (a coarse search)."""
    rate, good, base = 2.0, 0.0, None
    while rate < 400:
        r = load(srv.url, srv.proc.pid, rate, 6, a.new_tokens)
        base = base or r["p50_ms"]
        if r["status"].get("200", 0) != r["sent"] or r["p99_ms"] > 1.5 * r["p50_ms"] or r["p50_ms"] > 2 * base:
            break
        good, rate = rate, rate * 1.5
    return good


def bad_statuses(status, allowed):
    return {k: v for k, v in status.items() if k not in allowed}


# ------------------------------------------------------------------------------------------ scenarios

def shutdown(a, rate):
    srv = Server(a.tolk, a.model, "--drain", str(a.drain))
    srv.wait_ready()
    bg = Background(srv.url, srv.proc.pid, rate, 8, a.new_tokens)
    time.sleep(4)
    t0 = time.monotonic()
    srv.proc.send_signal(signal.SIGTERM)
    rc = srv.proc.wait(a.drain + 60)
    exit_s = time.monotonic() - t0
    r = bg.join()
    # 200: answered; 503: refused while draining (with Retry-After); ClientConnectorError: the listening
    # socket was closed, the request never reached the server. Anything else (a reset, a timeout, a
    # 5xx) is a request the server took and lost.
    lost = bad_statuses(r["status"], {"200", "503", "ClientConnectorError"})
    ok = rc == 0 and exit_s <= a.drain + 1 and not lost
    return dict(scenario="shutdown", rate=rate, status=r["status"], exit_status=rc, exit_s=round(exit_s, 2),
                drain_s=a.drain, lost=lost, ok=ok)


def crash(a, rate):
    srv = Server(a.tolk, a.model)
    srv.wait_ready()
    port = srv.port
    bg = Background(srv.url, srv.proc.pid, rate, 6, a.new_tokens, timeout=10)
    time.sleep(2)
    srv.proc.kill()
    srv.proc.wait()
    t0 = time.monotonic()
    srv2 = Server(a.tolk, a.model, port=port)
    ready_s = srv2.wait_ready()
    first_ok = None
    while first_ok is None and time.monotonic() - t0 < 30:
        req = urllib.request.Request(srv2.url + "/v1/translate", data=json.dumps({"texts": ["Open the file."]}).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                if resp.status == 200:
                    first_ok = time.monotonic() - t0
        except OSError:
            time.sleep(0.01)
    r = bg.join()
    after = load(srv2.url, srv2.proc.pid, rate, 4, a.new_tokens)
    rc = srv2.stop()
    ok = ready_s <= 1.0 and first_ok is not None and not bad_statuses(after["status"], {"200"}) and rc == 0
    return dict(scenario="crash", rate=rate, during=r["status"], ready_s=round(ready_s, 3),
                first_200_s=first_ok and round(first_ok, 3), after_restart=after["status"],
                after_p99_ms=after["p99_ms"], ok=ok)


def attackers(port, stop, counts):
    """Hostile clients until stop is set; counts what each kind managed."""
    def dial():
        s = socket.socket()
        s.settimeout(2)
        s.connect(("127.0.0.1", port))
        return s

    def slow():  # a byte a second
        while not stop.is_set():
            try:
                s = dial()
                for ch in b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n":
                    if stop.wait(1.0):
                        break
                    s.send(bytes([ch]))
                s.close()
            except OSError:
                counts["slow_cut"] += 1
                stop.wait(0.2)

    def hang_up():  # half a body, then gone
        while not stop.is_set():
            try:
                s = dial()
                s.send(b'POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n'
                       b'Content-Length: 200\r\n\r\n{"texts": ["Open the')
                s.close()
                counts["hang_up"] += 1
            except OSError:
                pass
            stop.wait(0.05)

    def oversized():  # 2 MB past --max-body
        body = b'{"texts": ["' + b"a" * (2 << 20) + b'"]}'
        while not stop.is_set():
            try:
                s = dial()
                s.send(b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"Content-Length: %d\r\n\r\n" % len(body))
                s.sendall(body[:65536])
                reply = s.recv(64)
                counts["oversized_" + (reply[9:12].decode() or "closed")] += 1
                s.close()
            except OSError:
                counts["oversized_cut"] += 1
            stop.wait(0.1)

    def garbage():
        while not stop.is_set():
            try:
                s = dial()
                s.send(os.urandom(512))
                reply = s.recv(64)
                counts["garbage_" + (reply[9:12].decode(errors="replace") or "closed")] += 1
                s.close()
            except OSError:
                counts["garbage_cut"] += 1
            stop.wait(0.05)

    def idle():  # 10,000 attempted, held open
        held = []
        for _ in range(10000):
            if stop.is_set():
                break
            try:
                s = socket.socket()
                s.setblocking(False)
                s.connect_ex(("127.0.0.1", port))
                held.append(s)
                counts["idle_attempted"] += 1
            except OSError:
                counts["idle_failed"] += 1
        stop.wait()
        for s in held:
            s.close()

    kinds = [slow] * 20 + [hang_up] * 4 + [oversized] * 2 + [garbage] * 2 + [idle]
    ts = [threading.Thread(target=k, daemon=True) for k in kinds]
    for t in ts:
        t.start()
    return ts


def hostile(a, rate):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 20000), hard))
    srv = Server(a.tolk, a.model)
    srv.wait_ready()
    calm = load(srv.url, srv.proc.pid, rate, 10, a.new_tokens)
    from collections import Counter
    counts, stop = Counter(), threading.Event()
    ts = attackers(srv.port, stop, counts)
    time.sleep(1)
    under = load(srv.url, srv.proc.pid, rate, 10, a.new_tokens)
    stop.set()
    for t in ts:
        t.join(5)
    health = get(srv.url + "/health")[0]
    cut = {why: float((srv.metric("tolk_connections_cut_total", reason=why) or "0 0").split()[-1])
           for why in ("slow", "shed")}
    rc = srv.stop()
    ok = (not bad_statuses(under["status"], {"200"}) and under["p99_ms"] is not None and calm["p99_ms"]
          and under["p99_ms"] <= 2 * calm["p99_ms"] and health == 200 and rc == 0)
    return dict(scenario="hostile", rate=rate, calm_status=calm["status"], calm_p50_p99_ms=[calm["p50_ms"], calm["p99_ms"]],
                attacked_status=under["status"], attacked_p50_p99_ms=[under["p50_ms"], under["p99_ms"]],
                attackers=dict(counts), connections_cut=cut, health_after=health, exit_status=rc, ok=ok)


def reload(a, rate):
    tmp = Path(tempfile.mkdtemp(prefix="tolk-reload-"))
    model = tmp / "model"
    shutil.copytree(a.model, model)
    srv = Server(a.tolk, model)
    srv.wait_ready()
    v0 = srv.metric("tolk_model_info")
    bg = Background(srv.url, srv.proc.pid, rate, 8, a.new_tokens)
    time.sleep(2)
    # A new version: the same graphs under a new manifest (a release field added), swapped in whole
    # by a rename as a deployment would, then SIGHUP.
    staged = tmp / "staged"
    shutil.copytree(model, staged)
    mf = staged / "tolk-manifest.json"
    m = json.loads(mf.read_text())
    m["release"] = "v2"
    mf.write_text(json.dumps(m, indent=1))
    old = tmp / "old"
    model.rename(old)
    staged.rename(model)
    srv.proc.send_signal(signal.SIGHUP)
    time.sleep(2)
    v1 = srv.metric("tolk_model_info")
    good = srv.metric("tolk_model_reloads_total", result="ok")
    # A broken version: a corrupted encoder.
    enc = sorted(model.glob("encoder_model*.onnx"))[0]
    data = bytearray(enc.read_bytes())
    data[:64] = b"\xff" * 64
    enc.write_bytes(bytes(data))
    srv.proc.send_signal(signal.SIGHUP)
    time.sleep(2)
    failed = srv.metric("tolk_model_reloads_total", result="failed")
    v2 = srv.metric("tolk_model_info")
    r = bg.join()
    rc = srv.stop()
    shutil.rmtree(tmp, ignore_errors=True)
    version = lambda line: line and line.split('version="')[1].split('"')[0]  # noqa: E731
    ok = (not bad_statuses(r["status"], {"200"}) and version(v0) != version(v1) and version(v1) == version(v2)
          and good and good.endswith(" 1") and failed and failed.endswith(" 1") and rc == 0)
    return dict(scenario="reload", rate=rate, status=r["status"], p99_ms=r["p99_ms"], version_before=version(v0),
                version_after_good=version(v1), version_after_broken=version(v2), reloads_ok=good, reloads_failed=failed,
                exit_status=rc, ok=ok)


def coldstart(a, _rate):
    onnx = Path(a.bench_model) / "onnx"
    starts = []
    for _ in range(3):
        srv = Server(a.tolk, onnx)
        starts.append(srv.wait_ready(600))
        srv.stop()
    out = dict(scenario="coldstart", model=str(onnx), tolk_ready_s=sorted(starts)[1])
    try:
        code = ("import sys,time,onnxruntime as ort\n"
                "o=ort.SessionOptions(); o.intra_op_num_threads=2\n"
                "t=time.monotonic()\n"
                "for g in ('encoder_model','decoder_model','decoder_with_past_model'):\n"
                "    ort.InferenceSession(sys.argv[1]+'/'+g+'.onnx', o, providers=['CPUExecutionProvider'])\n"
                "print(time.monotonic()-t)")
        ort = []
        for _ in range(3):
            p = subprocess.run([a.python, "-c", code, str(onnx)], capture_output=True, text=True, check=True)
            ort.append(float(p.stdout.strip().splitlines()[-1]))
        out["ort_sessions_s"] = sorted(ort)[1]
    except (subprocess.CalledProcessError, FileNotFoundError) as e:
        out["ort_sessions_s"] = f"not measured: {e}"
    out["ok"] = True
    return out


SCENARIOS = dict(shutdown=shutdown, crash=crash, hostile=hostile, reload=reload, coldstart=coldstart)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="?", default="all", choices=["all", *SCENARIOS])
    ap.add_argument("--tolk", default=str(ROOT / "build" / "tolk"))
    ap.add_argument("--model", default=str(DEMO))
    ap.add_argument("--bench-model", default="/tmp/tolk-bench")
    ap.add_argument("--python", default=sys.executable, help="with onnxruntime, for coldstart")
    ap.add_argument("--rate", type=float, default=0, help="full load in req/s (0: measure the capacity)")
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--drain", type=float, default=30)
    a = ap.parse_args()
    global SENTENCES
    SENTENCES = pick_sentences(1000)
    rate = a.rate
    if not rate and a.what != "coldstart":
        srv = Server(a.tolk, a.model)
        srv.wait_ready()
        rate = capacity(a, srv)
        srv.stop()
        if not rate:
            sys.exit("serve_faults: not even 2 req/s met P99 <= 1.5 x P50 (a busy machine?); give --rate")
        log(f"capacity {rate} req/s")
    failed = []
    for name in (SCENARIOS if a.what == "all" else [a.what]):
        if name == "coldstart" and not (Path(a.bench_model) / "onnx").is_dir():
            log(f"coldstart: no {a.bench_model}/onnx, skipped")
            continue
        r = SCENARIOS[name](a, rate if name in ("shutdown", "crash") else rate / 2)
        print(json.dumps(r), flush=True)
        if not r["ok"]:
            failed.append(name)
    print("serve_faults: " + ("all passed" if not failed else "FAILED: " + ", ".join(failed)))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
