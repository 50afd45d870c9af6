"""The scheduler seen from outside, under load, over real connections.

Proves: 64 connections at once, each with its own text, each get exactly the
ids `tolk translate --json` gives that text alone (batching changes nothing);
a short request sent while long ones decode is answered first (continuous
batching: it joins the running batch instead of waiting behind it); and a
client that disconnects has its work cancelled (/metrics counts it, and the
server stops spending steps on it).
"""
import concurrent.futures as cf
import socket
import threading
import time

import pytest
import requests

from conftest import DEMO, TINY, cli_sentences, wait_until

WORDS = ("file window menu folder printer network account password message project "
         "document picture setting update server device").split()


def text_for(i):
    # Different lengths and words per connection; some with two sentences.
    a, b = WORDS[i % len(WORDS)], WORDS[(i * 7 + 3) % len(WORDS)]
    t = f"Open the {a} {i}."
    if i % 3 == 0:
        t += f" Then close the {b} and save the {a}."
    if i % 5 == 0:
        t += f"\nDelete the old {b}."
    return t


@pytest.fixture(scope="module")
def sixty_four(start_server):
    """64 connections at once, each its own text: (server, texts, answers, references)."""
    s = start_server("-m", TINY)
    texts = [text_for(i) for i in range(64)]
    with cf.ThreadPoolExecutor(2) as ex:
        refs = list(ex.map(lambda t: cli_sentences(t, TINY, "--beam", "2"), texts))
    barrier = threading.Barrier(64)

    def one(i):
        with requests.Session() as sess:   # one connection each
            barrier.wait()
            return sess.post(s.url + "/v1/translate", timeout=120,
                             json={"texts": [texts[i]], "beam": 2, "return_ids": True})
    with cf.ThreadPoolExecutor(64) as ex:
        got = list(ex.map(one, range(64)))
    return s, texts, got, refs


def test_64_connections_get_their_own_ids(sixty_four):
    _, texts, got, refs = sixty_four
    assert [r.status_code for r in got] == [200] * 64, [r.text for r in got if r.status_code != 200]
    for i, (r, ref) in enumerate(zip(got, refs)):
        t = r.json()["translations"][0]
        assert [x["source"] for x in t["sentences"]] == [x["source"] for x in ref], i
        for k, (x, y) in enumerate(zip(t["sentences"], ref)):
            assert x["ids"] == y["ids"], f"connection {i} sentence {k}: {texts[i]!r}"


def test_64_connections_shared_decoder_steps(sixty_four):
    # Some step ran more rows than any one text has (3 sentences × beam 2),
    # which only batching across requests gives.
    m = sixty_four[0].metrics()
    les = sorted(float(x.labels["le"]) for x in m.samples if x.name == "tolk_batch_rows_bucket")
    le = next(v for v in les if v >= 6)
    within = sum(x.value for x in m.samples
                 if x.name == "tolk_batch_rows_bucket" and float(x.labels["le"]) == le)
    wider = m.get("tolk_batch_rows_count") - within
    rows = "\n".join(f"{x.name}{x.labels} {x.value:g}" for x in m.samples if x.name.startswith("tolk_batch_rows"))
    assert wider > 0, f"no decoder step ran more than {le:g} rows:\n{rows}"


def test_short_request_overtakes_long_ones(start_server):
    s = start_server("-m", DEMO)
    # Long sentences: each needs several times the short one's decoder steps,
    # so the short one's time in the shared steps stays well under half.
    long_text = " ".join(f"Open the file number {i}, check every line of the report for errors, "
                         "and save it in the shared folder before you close the window."
                         for i in range(24))
    done = {}

    def post(name, text):
        t0 = time.monotonic()
        r = s.post("/v1/translate", json={"texts": [text], "beam": 4}, timeout=300)
        done[name] = (time.monotonic(), time.monotonic() - t0, r.status_code)
    longs = [threading.Thread(target=post, args=(f"long{i}", long_text)) for i in range(2)]
    for t in longs:
        t.start()
    # Once the long ones are decoding, the short one arrives.
    wait_until(lambda: s.metric("tolk_live_rows") > 0, 30, what="the long texts to decode")
    post("short", "Open file")
    for t in longs:
        t.join()
    assert all(v[2] == 200 for v in done.values()), done
    assert done["short"][0] < min(done["long0"][0], done["long1"][0]), (
        f"the short request finished after a long one: short {done['short'][1]:.2f} s, "
        f"long {done['long0'][1]:.2f} s / {done['long1'][1]:.2f} s")
    assert done["short"][1] < 0.5 * min(done["long0"][1], done["long1"][1]), done


def cancelled(s):
    return s.metric("tolk_sentences_dropped_total", reason="cancelled")


def test_disconnected_client_is_cancelled(start_server):
    s = start_server("-m", DEMO)
    long_text = " ".join(f"Open the file number {i} and save it before you close the window."
                         for i in range(40))
    body = ('{"texts": ["%s"], "beam": 4}' % long_text).encode()
    before = cancelled(s)
    steps0 = s.metric("tolk_decoder_steps_total")
    host, port = s.host_port
    c = socket.create_connection((host, port), timeout=10)
    c.sendall(b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    wait_until(lambda: s.metric("tolk_live_rows") > 0, 30, what="decoding to start")
    c.close()
    wait_until(lambda: cancelled(s) > before, 10,
               what='tolk_sentences_dropped_total{reason="cancelled"} to rise')
    # After the cancel, the scheduler goes idle instead of finishing 40 sentences.
    wait_until(lambda: s.metric("tolk_live_rows") == 0 and s.metric("tolk_queue_depth") == 0,
               10, what="the batch to empty")
    m = s.metrics()
    assert m.get("tolk_sentences_total") < 40, m
    assert m.get("tolk_decoder_steps_total") > steps0
    # The server still answers the next client.
    assert s.post("/v1/translate", json={"texts": ["Open file"]}).json()["translations"][0]["text"] == "打开文件"


def test_cancelled_stream(start_server):
    # One sentence a batch, so that the stream's 200 sentences finish one after
    # another (batched, they would all end within a few steps of each other,
    # before the client could go away).
    s = start_server("-m", DEMO, "--max-batch-tokens", "16")
    long_text = " ".join(f"Save the document {i} before you quit." for i in range(200))
    before = cancelled(s)
    r = requests.post(s.url + "/v1/translate", json={"texts": [long_text], "stream": True},
                      stream=True, timeout=60)
    it = r.iter_lines()
    for line in it:          # the first event, then the client goes away
        if line.startswith(b"data:"):
            break
    r.close()
    wait_until(lambda: cancelled(s) > before, 10, what="the stream's sentences to be cancelled")
    wait_until(lambda: s.metric("tolk_live_rows") == 0, 10, what="the batch to empty")
    assert s.metric("tolk_sentences_total") < 200, "the stream was translated to its end"
