"""tests/serve — `tolk serve` tested as its clients use it.

Each test module starts the real binary (`$TOLK serve --port 0 ...`) on
loopback, waits for the `listening on http://HOST:PORT` line it prints on
stdout when ready, and talks to it over real sockets with the clients users
run: requests, LibreTranslate's and DeepL's Python clients, an SSE client,
schemathesis. When a module is done the server gets SIGTERM and must exit 0.

The environment (set by tests/serve.cmake): TOLK, the binary; TOLK_ROOT, the
source tree (fixtures and the bundled model). Nothing here reaches beyond
127.0.0.1.
"""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import pytest
import requests

ROOT = os.environ.get("TOLK_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
TOLK = os.environ.get("TOLK", os.path.join(ROOT, "build", "tolk"))
TINY = os.path.join(ROOT, "tests", "fixtures", "marian-tiny")
DEMO = os.path.join(ROOT, "models", "demo-en-zh")


class Server:
    """One `tolk serve` process: its URL, its stderr log, and how it ended."""

    def __init__(self, *args, env=None, ready_timeout=30.0):
        self.args = [TOLK, "serve", "--port", "0", *args]
        self._log = tempfile.NamedTemporaryFile(prefix="tolk-serve-", suffix=".log", delete=False)
        self.log_path = self._log.name
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=self._log,
                                     env=env, text=True)
        self.url = self._wait_listening(ready_timeout)
        # The rest of stdout is drained so the server never blocks on a full pipe.
        self.stdout_tail = []
        threading.Thread(target=self._drain, daemon=True).start()

    def _wait_listening(self, timeout):
        box = {}

        def read():
            for line in self.proc.stdout:
                if line.startswith("listening on "):
                    box["url"] = line.split()[2].rstrip("/")
                    return
        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(timeout)
        if "url" not in box:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"{' '.join(self.args)} printed no 'listening on' line in {timeout} s "
                               f"(exit {self.proc.returncode}); log:\n{self.log()}")
        return box["url"]

    def _drain(self):
        for line in self.proc.stdout:
            self.stdout_tail.append(line)

    def log(self):
        self._log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    @property
    def host_port(self):
        hostport = self.url.split("://", 1)[1]
        host, port = hostport.rsplit(":", 1)
        return host.strip("[]"), int(port)

    def get(self, path, **kw):
        return requests.get(self.url + path, timeout=kw.pop("timeout", 30), **kw)

    def post(self, path, **kw):
        return requests.post(self.url + path, timeout=kw.pop("timeout", 60), **kw)

    def metrics(self):
        """GET /metrics, parsed by the Prometheus Python client."""
        from prometheus_client.parser import text_string_to_metric_families
        r = self.get("/metrics")
        assert r.status_code == 200, r.text
        return Metrics([s for fam in text_string_to_metric_families(r.text) for s in fam.samples])

    def metric(self, name, **labels):
        return self.metrics().get(name, **labels)

    def stop(self, sig=signal.SIGTERM, timeout=30.0):
        """Sends `sig` and returns the exit status (None if it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        self._log.close()
        return self.proc.returncode

    def cleanup(self):
        self.stop()
        try:
            os.unlink(self.log_path)
        except OSError:
            pass


class Metrics:
    """One scrape: samples by name; series of one name (per model slot,
    endpoint, …) are summed over the labels not asked for."""

    def __init__(self, samples):
        self.samples = samples

    def get(self, name, **labels):
        return sum(s.value for s in self.samples if s.name == name
                   and all(s.labels.get(k) == v for k, v in labels.items()))

    def has(self, name):
        return any(s.name == name for s in self.samples)

    def __repr__(self):
        return "\n".join(f"{s.name}{s.labels or ''} {s.value}" for s in self.samples)


@pytest.fixture(scope="module")
def start_server():
    """start_server(*args) → a running Server; every one is stopped with
    SIGTERM at the end of the module and must have exited 0."""
    started = []

    def start(*args, **kw):
        s = Server(*args, **kw)
        started.append(s)
        return s
    yield start
    bad = []
    for s in started:
        rc = s.stop()
        if rc != 0:
            bad.append(f"{' '.join(s.args)}: exit {rc}; log tail:\n{s.log()[-2000:]}")
        s.cleanup()
    assert not bad, "servers did not exit 0 on SIGTERM:\n" + "\n".join(bad)


@pytest.fixture(scope="module")
def demo(start_server):
    """The bundled demo model: real translations ("Open file" → 打开文件)."""
    return start_server("-m", DEMO)


@pytest.fixture(scope="module")
def tiny(start_server):
    """The random-weight test fixture: gibberish, but deterministic and fast."""
    return start_server("-m", TINY)


def cli_sentences(text, model=TINY, *args):
    """`tolk translate --json` on `text` alone: one dict per sentence
    (source, translation, ids, score), the reference the server must match."""
    r = subprocess.run([TOLK, "translate", "-m", model, "--json", *args, text],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def cli_text(text, model=TINY, *args):
    """`tolk translate` on `text`: the whole translation as it prints it."""
    r = subprocess.run([TOLK, "translate", "-m", model, *args, text],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout[:-1] if r.stdout.endswith("\n") else r.stdout


@pytest.fixture
def tmp_model(tmp_path):
    """A copy of the tiny fixture the test may break."""
    dst = tmp_path / "model"
    shutil.copytree(TINY, dst)
    return dst


def wait_until(pred, timeout=10.0, step=0.05, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
