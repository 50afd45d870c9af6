"""Start, reload and stop, as an operator does them.

Proves: SIGTERM with requests in flight answers every one of them (none is
dropped or reset) and exits 0, refusing new connections meanwhile; /health
and /ready answer while running; SIGHUP reloads the model folder, and when
the folder is broken (a corrupted graph) the old model keeps answering and
/metrics or the log says why the reload failed.
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
