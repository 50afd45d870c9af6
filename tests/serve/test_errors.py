"""Every error status the service answers, over real sockets, each checked
for its status, its JSON body ({"error": …}, {"message": …} on DeepL's path)
and the message a client can act on.

400: bad JSON (with the position), bad UTF-8 (with the byte offset), an
unknown language (listing the supported ones), over --max-chars, over
--max-texts. 404, 405 (with Allow), 413 (over --max-body), 415. 429 with
Retry-After (--rate-limit). 503 with Retry-After when the queue is full
(tiny --max-queue). 504 when a request outlives --timeout.
"""
import concurrent.futures as cf
import re
import socket

import pytest
import requests

from conftest import DEMO, TINY

MAX_CHARS = 200
MAX_TEXTS = 4


@pytest.fixture(scope="module")
def server(start_server):
    return start_server("-m", TINY, "--max-chars", str(MAX_CHARS), "--max-texts", str(MAX_TEXTS),
                        "--max-body", "65536")


def error_of(r, status):
    assert r.status_code == status, f"{r.status_code} {r.text}"
    assert r.headers["Content-Type"].startswith("application/json"), r.headers
    body = r.json()
    assert isinstance(body.get("error"), str) and body["error"], body
    return body["error"]


def offset_in(msg):
    m = re.search(r"byte (\d+)|offset (\d+)|position (\d+)", msg)
    assert m, f"no byte position in {msg!r}"
    return int(next(g for g in m.groups() if g))


@pytest.mark.parametrize("path", ["/translate", "/v1/translate"])
def test_bad_json_names_the_position(server, path):
    body = b'{"q": "Open", "texts": ["Open",,], "target": "zh"}'
    bad = body.index(b",,") + 1
    msg = error_of(server.post(path, data=body, headers={"Content-Type": "application/json"}), 400)
    assert abs(offset_in(msg) - bad) <= 1, (msg, bad)


@pytest.mark.parametrize("path,field", [("/translate", "q"), ("/v1/translate", "texts")])
def test_bad_utf8_names_the_byte(server, path, field):
    head = b'{"target": "zh", "' + field.encode() + b'": ["ok", "caf'
    body = head + b'\xc3\x28"]}'
    msg = error_of(server.post(path, data=body, headers={"Content-Type": "application/json"}), 400)
    assert offset_in(msg) == len(head), msg
    assert "UTF-8" in msg


def test_bad_utf8_in_a_form(server):
    msg = error_of(server.post("/translate", data=b"q=caf%C3%28&target=zh",
                               headers={"Content-Type": "application/x-www-form-urlencoded"}), 400)
    assert "UTF-8" in msg and "q" in msg


@pytest.mark.parametrize("path,body,bad,supported", [
    ("/translate", {"q": "Open", "source": "en", "target": "xx"}, "xx", "zh-Hans"),
    ("/translate", {"q": "Open", "source": "fr", "target": "zh"}, "fr", "en"),
    ("/v1/translate", {"texts": ["Open"], "target": "xx"}, "xx", "zh-Hans"),
])
def test_unknown_language_lists_the_supported_ones(server, path, body, bad, supported):
    msg = error_of(server.post(path, json=body), 400)
    assert bad in msg
    assert supported in msg.replace(bad, ""), f"supported languages not listed: {msg!r}"


@pytest.mark.parametrize("path,key", [("/translate", "q"), ("/v1/translate", "texts")])
def test_over_max_chars(server, path, key):
    body = {key: ["a" * (MAX_CHARS + 1)], "target": "zh", "source": "en"}
    msg = error_of(server.post(path, json=body), 400)
    assert str(MAX_CHARS) in msg
    body = {key: ["a" * MAX_CHARS], "target": "zh", "source": "en"}
    assert server.post(path, json=body).status_code == 200


def test_max_chars_counts_characters_not_bytes(server):
    # 200 Chinese characters are 600 bytes: LibreTranslate's limit is characters.
    r = server.post("/translate", json={"q": "中" * MAX_CHARS, "source": "en", "target": "zh"})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("path,key", [("/translate", "q"), ("/v1/translate", "texts")])
def test_over_max_texts(server, path, key):
    msg = error_of(server.post(path, json={key: ["a"] * (MAX_TEXTS + 1), "target": "zh", "source": "en"}), 400)
    assert str(MAX_TEXTS) in msg


def test_404(server):
    msg = error_of(server.get("/no/such/path"), 404)
    assert "/no/such/path" in msg


@pytest.mark.parametrize("method,path,allowed", [
    ("GET", "/translate", "POST"), ("PUT", "/v1/translate", "POST"),
    ("DELETE", "/languages", "GET"), ("POST", "/health", "GET")])
def test_405_says_what_is_allowed(server, method, path, allowed):
    r = requests.request(method, server.url + path, timeout=10)
    error_of(r, 405)
    assert allowed in r.headers["Allow"]


def test_413_over_max_body(server):
    r = server.post("/v1/translate", data=b'{"texts": ["' + b"a" * 70000 + b'"]}',
                    headers={"Content-Type": "application/json"})
    msg = error_of(r, 413)
    assert "65536" in msg


def test_413_before_the_body_is_sent(server):
    # A client announcing a too-big body hears 413 without sending it.
    host, port = server.host_port
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 10000000\r\n\r\n")
        head = s.recv(4096).decode("latin-1")
    assert head.startswith("HTTP/1.1 413"), head


def test_415(server):
    msg = error_of(server.post("/v1/translate", data="Open file", headers={"Content-Type": "text/plain"}), 415)
    assert "text/plain" in msg


def test_429_with_retry_after(start_server):
    s = start_server("-m", TINY, "--rate-limit", "3/min")
    codes = [s.post("/translate", json={"q": "Open", "source": "en", "target": "zh"}) for _ in range(5)]
    assert [r.status_code for r in codes[:3]] == [200, 200, 200]
    r = codes[3]
    error_of(r, 429)
    assert 1 <= int(r.headers["Retry-After"]) <= 60
    # The operational endpoints are never rate-limited.
    assert s.get("/health").status_code == 200


def test_503_full_queue_with_retry_after(start_server):
    # Texts of 2 sentences against room for 4 waiting: each fits alone, not all 16.
    s = start_server("-m", DEMO, "--max-queue", "4")
    text = " ".join(f"Open the file number {i} and save it before closing the window." for i in range(2))

    def one(_):
        return s.post("/v1/translate", json={"texts": [text], "beam": 4}, timeout=120)
    with cf.ThreadPoolExecutor(16) as ex:
        rs = list(ex.map(one, range(16)))
    codes = sorted(r.status_code for r in rs)
    assert set(codes) <= {200, 503}, codes
    full = [r for r in rs if r.status_code == 503]
    assert full, f"16 texts of 2 sentences each against --max-queue 4 were all taken: {codes}"
    assert any(r.status_code == 200 for r in rs), codes
    for r in full:
        assert "queue" in error_of(r, 503).lower()
        assert int(r.headers["Retry-After"]) >= 1
    assert s.get("/health").status_code == 200


def test_504_past_the_timeout(start_server):
    s = start_server("-m", DEMO, "--timeout", "0.05")
    text = " ".join(f"Open the file number {i} and save it before closing the window." for i in range(20))
    msg = error_of(s.post("/v1/translate", json={"texts": [text], "beam": 4}), 504)
    assert "timeout" in msg.lower() or "timed out" in msg.lower()
    r = s.post("/translate", json={"q": text, "source": "en", "target": "zh"})
    error_of(r, 504)
    m = s.metrics()
    assert m.get("tolk_http_rejections_total", reason="deadline") >= 2, m
