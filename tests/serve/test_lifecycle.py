"""Start, reload and stop, as an operator does them.

Proves: SIGTERM with requests in flight answers every one of them (none is
dropped or reset) and exits 0, refusing new connections meanwhile; /health
and /ready answer while running; SIGHUP reloads the model folder, and when
the folder is broken (a corrupted graph) the old model keeps answering and
/metrics or the log says why the reload failed; kill -9 under load loses only
what was in flight and the next process serves on the same port; the live
heap is flat when the same requests come again (the soak's short version).
"""
import concurrent.futures as cf
import signal
import time

import pytest
import requests

from conftest import DEMO, Server, wait_until


def test_sigterm_answers_requests_in_flight_and_exits_0():
    s = Server("-m", DEMO)
    try:
        text = " ".join(f"Open the file number {i} and save it." for i in range(6))

        def one(i):
            return s.post("/v1/translate", json={"texts": [f"{text} ({i})"], "beam": 4}, timeout=120)
        with cf.ThreadPoolExecutor(8) as ex:
            futs = [ex.submit(one, i) for i in range(8)]
            wait_until(lambda: s.metric("tolk_live_rows") > 0, 30, what="decoding")
            t0 = time.monotonic()
            s.proc.send_signal(signal.SIGTERM)
            rs = [f.result() for f in futs]   # a reset connection would raise here
        assert [r.status_code for r in rs] == [200] * 8, [r.text for r in rs if r.status_code != 200]
        assert all(r.json()["translations"][0]["text"] for r in rs)
        assert s.proc.wait(60) == 0, s.log()
        assert time.monotonic() - t0 < 60
        with pytest.raises(requests.ConnectionError):
            requests.get(s.url + "/health", timeout=5)
    finally:
        s.cleanup()


def test_health_and_ready(demo):
    r = demo.get("/health")
    assert r.status_code == 200
    r = demo.get("/ready")
    assert r.status_code == 200


def test_sighup_with_a_broken_model_keeps_the_old_one(tmp_model):
    s = Server("-m", str(tmp_model))
    try:
        def translate():
            r = s.post("/v1/translate", json={"texts": ["Open the file."], "return_ids": True})
            assert r.status_code == 200, r.text
            return r.json()["translations"][0]["sentences"][0]["ids"]
        before = translate()
        # Corrupt one graph in place: its bytes no longer parse as ONNX.
        graphs = sorted(tmp_model.rglob("encoder_model*.onnx"))
        assert graphs, list(tmp_model.iterdir())
        data = bytearray(graphs[0].read_bytes())
        data[:64] = b"\xff" * 64
        graphs[0].write_bytes(bytes(data))
        s.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: s.metric("tolk_model_reloads_total", result="failed") == 1, 30,
                   what="tolk_model_reloads_total{result=\"failed\"} to count the reload")
        # Why: the last failure's reason in /metrics, or the log, names the graph.
        why = [smp.labels.get("reason", "") for smp in s.metrics().samples
               if smp.name == "tolk_model_reload_last_failure_info"]
        assert any(graphs[0].name in w for w in why) or graphs[0].name in s.log(), (why, s.log())
        assert s.proc.poll() is None, "a failed reload must not stop the server"
        assert translate() == before
        assert s.get("/ready").status_code == 200
    finally:
        rc = s.stop()
        s.cleanup()
    assert rc == 0


def test_sighup_with_a_good_model_reloads(tmp_model):
    s = Server("-m", str(tmp_model))
    try:
        s.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: s.metric("tolk_model_reloads_total", result="ok") == 1,
                   30, what="tolk_model_reloads_total{result=\"ok\"} to count the reload")
        assert s.metric("tolk_model_reloads_total", result="failed") == 0
        r = s.post("/v1/translate", json={"texts": ["Open the file."]})
        assert r.status_code == 200
    finally:
        rc = s.stop()
        s.cleanup()
    assert rc == 0


def test_kill_9_under_load_then_restart_on_the_same_port():
    # A crash loses what was in flight, nothing else: the next process binds
    # the same port at once (no TIME_WAIT refusal) and serves. How fast it is
    # ready is bench/serve_faults.py's figure (crash), not a test's.
    s = Server("-m", DEMO)
    host, port = s.host_port
    try:
        def one(i):
            try:
                return s.post("/v1/translate", json={"texts": [f"Open the file number {i}."]}, timeout=60).status_code
            except requests.ConnectionError:
                return "cut"
        with cf.ThreadPoolExecutor(8) as ex:
            futs = [ex.submit(one, i) for i in range(32)]
            wait_until(lambda: s.metric("tolk_live_rows") > 0, 30, what="decoding")
            s.proc.kill()
            got = [f.result() for f in futs]
        assert s.proc.wait(10) == -signal.SIGKILL
        assert set(got) <= {200, "cut"}, got
    finally:
        s.cleanup()
    again = Server("-m", DEMO, "--host", host, "--port", str(port))
    try:
        assert again.host_port == (host, port)
        wait_until(lambda: again.get("/ready").status_code == 200, 30, what="/ready after the restart")
        r = again.post("/v1/translate", json={"texts": ["Open the file."]})
        assert r.status_code == 200 and r.json()["translations"][0]["text"], r.text
    finally:
        again.cleanup()


def test_heap_flat_when_the_same_requests_come_again():
    # The short soak: the same 120 varied requests, one at a time, four times.
    # The first two passes fill what is kept by design (execution plans per
    # input shape, made at a shape's second run: plan_on_repeat; buffers at
    # their high-water mark); replayed, the requests find all of it, so the
    # live heap must come back to the same size: a leak of
    # 34 bytes a request shows. glibc's per-thread caches are off for the
    # count (GLIBC_TUNABLES), since mallinfo2 counts the chunks they hold as in
    # use and they fill slowly as new sizes are freed: with them on the same
    # passes grow by 15, 7, 7, 5, 3 KB, with them off by 0.
    from conftest import ROOT
    import lzma
    import os
    with lzma.open(f"{ROOT}/tests/fixtures/corpus/en.txt.xz", "rt", encoding="utf-8") as f:
        lines = [l.strip() for l in f if 20 <= len(l.strip()) <= 200][:120]
    s = Server("-m", DEMO, env=dict(os.environ, GLIBC_TUNABLES="glibc.malloc.tcache_count=0"))
    # One keep-alive connection for the requests and the scrapes: the server
    # holds one connection's memory pool throughout, not the pools of closed
    # connections it has yet to clean up (those made a loaded run look 362 KB
    # heavier).
    http = requests.Session()
    try:
        def heap():
            got = []
            for _ in range(3):
                time.sleep(0.1)
                r = http.get(s.url + "/metrics", timeout=30)
                line = next(l for l in r.text.splitlines() if l.startswith("tolk_heap_in_use_bytes "))
                got.append(float(line.split()[1]))
            return min(got)

        def one_pass():
            for i, text in enumerate(lines):
                r = http.post(s.url + "/v1/translate", json={"texts": [text], "beam": 1 + i % 2}, timeout=60)
                assert r.status_code == 200, r.text
            return heap()
        first = one_pass()
        if not first:
            pytest.skip("no malloc statistics in this build (ASan's allocator): LeakSanitizer checks leaks there")
        second = one_pass()
        third = one_pass()
        fourth = one_pass()
        assert fourth <= third + 4096, f"live heap {first:.0f} -> {second:.0f} -> {third:.0f} -> {fourth:.0f} bytes"
    finally:
        s.cleanup()
