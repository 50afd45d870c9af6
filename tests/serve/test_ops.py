"""The operational endpoints and the page's files, as a monitoring system,
a load balancer and a browser fetch them.

Proves: /health and /ready answer JSON; /metrics is Prometheus text that the
Prometheus client's parser reads, with the request and scheduler figures
moving when a translation is made; /openapi.json is an OpenAPI 3 document
naming every endpoint; GET / and each file of web/ come from the binary with
the right Content-Type and refer to nothing outside the server; --cors-origin
answers browsers' preflight and adds the header; HEAD works where GET does.
"""
import json
import os
import re

import pytest
import requests

from conftest import ROOT, TINY

WEB = os.path.join(ROOT, "web")
TYPES = {".html": "text/html", ".css": "text/css", ".js": "text/javascript", ".json": "application/json",
         ".svg": "image/svg+xml", ".png": "image/png", ".ico": "image/"}


@pytest.fixture(scope="module")
def server(start_server):
    return start_server("-m", TINY, "--cors-origin", "https://app.example")


def test_health_ready(server):
    for path in ("/health", "/ready"):
        r = server.get(path)
        assert r.status_code == 200, (path, r.text)
        assert r.headers["Content-Type"].startswith("application/json")
        r.json()


def test_metrics_parse_and_move(server):
    m0 = server.metrics()
    assert server.post("/v1/translate", json={"texts": ["Open the file. Save it."]}).status_code == 200
    m1 = server.metrics()
    assert m1.get("tolk_sentences_total") - m0.get("tolk_sentences_total") == 2
    assert m1.get("tolk_tokens_generated_total") > m0.get("tolk_tokens_generated_total")
    # Latency histograms: buckets, a sum and a count, as Prometheus expects.
    for h in ("tolk_queue_wait_seconds", "tolk_encode_seconds", "tolk_decode_seconds"):
        assert m1.get(h + "_count") - m0.get(h + "_count") == 2, h
        assert m1.get(h + "_bucket", le="+Inf") == m1.get(h + "_count"), h
    assert m1.get("tolk_http_requests_total", endpoint="/v1/translate", code="200") \
        - m0.get("tolk_http_requests_total", endpoint="/v1/translate", code="200") == 1
    assert m1.has("tolk_model_info") and m1.has("tolk_build_info")


def test_metrics_content_type(server):
    r = server.get("/metrics")
    assert r.headers["Content-Type"].startswith("text/plain")
    assert "version=0.0.4" in r.headers["Content-Type"]


def test_openapi_document(server):
    r = server.get("/openapi.json")
    assert r.status_code == 200
    doc = r.json()
    assert doc["openapi"].startswith("3.")
    paths = set(doc["paths"])
    for p in ("/translate", "/languages", "/detect", "/frontend/settings", "/v2/translate",
              "/v1/translate", "/health", "/ready", "/metrics"):
        assert p in paths, p


def page_files():
    return sorted(f for f in os.listdir(WEB) if not f.startswith("."))


def test_the_page_is_served_from_the_binary(server):
    r = server.get("/")
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/html")
    with open(os.path.join(WEB, "index.html"), "rb") as f:
        assert r.content == f.read()


@pytest.mark.parametrize("name", page_files())
def test_every_web_file(server, name):
    r = server.get("/" + name)
    assert r.status_code == 200, name
    with open(os.path.join(WEB, name), "rb") as f:
        assert r.content == f.read(), name
    ext = os.path.splitext(name)[1]
    assert r.headers["Content-Type"].startswith(TYPES[ext]), (name, r.headers["Content-Type"])


@pytest.mark.parametrize("name", page_files())
def test_the_page_needs_nothing_outside(name):
    # Offline: no absolute URL to another host in src/href/url()/fetch/import.
    with open(os.path.join(WEB, name), encoding="utf-8") as f:
        text = f.read()
    refs = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)|url\(\s*["']?([^)"']+)|"""
                      r"""(?:fetch|import)\s*\(\s*["'`]([^"'`]+)""", text)
    for ref in (x for group in refs for x in group if x):
        assert not re.match(r"(https?:)?//", ref), f"{name} loads {ref}"


def test_head(server):
    r = requests.head(server.url + "/", timeout=10)
    assert r.status_code == 200 and r.content == b""


def test_cors(server):
    r = requests.options(server.url + "/v1/translate", timeout=10, headers={
        "Origin": "https://app.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    assert r.status_code in (200, 204)
    assert r.headers["Access-Control-Allow-Origin"] == "https://app.example"
    assert "POST" in r.headers["Access-Control-Allow-Methods"]
    assert "content-type" in r.headers["Access-Control-Allow-Headers"].lower()
    r = server.post("/v1/translate", json={"texts": ["Open"]}, headers={"Origin": "https://app.example"})
    assert r.headers["Access-Control-Allow-Origin"] == "https://app.example"
    r = server.get("/languages", headers={"Origin": "https://evil.example"})
    assert r.headers.get("Access-Control-Allow-Origin") in (None, "https://app.example")
