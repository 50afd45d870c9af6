"""The native API, POST /v1/translate, with requests and an SSE client.

Proves: the response's shape (per text: translation, sentences, n-best with
scores, ids, queue/encode/decode timings); that its ids are exactly those of
`tolk translate --json` on the same text with the same options; that
max_new_tokens and n_best are obeyed; and that "stream": true is a real
Server-Sent Events stream — one event per finished sentence, parsed by
sseclient-py, then `event: done` — carrying the same translation.
"""
import json

import pytest
import requests
import sseclient

from conftest import TINY, cli_sentences, cli_text

TEXT = "Open the file. Save it before you close the window.\nThen quit."


def native(server, body, **kw):
    r = server.post("/v1/translate", json=body, **kw)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("application/json")
    return r.json()


def test_demo_model_translates(demo):
    out = native(demo, {"texts": ["Open file"], "target": "zh"})
    assert [t["text"] for t in out["translations"]] == ["打开文件"]
    assert out["target"] == "zh-Hans"
    assert out["translations"][0]["model"] == "demo-en-zh"
    assert out["translations"][0]["source_language"] == "en"


def test_shape_and_ids_match_the_cli(tiny):
    out = native(tiny, {"texts": [TEXT, "Hello."], "target": "zh", "beam": 4,
                        "return_scores": True, "return_ids": True})
    assert len(out["translations"]) == 2
    for text, t in zip([TEXT, "Hello."], out["translations"]):
        ref = cli_sentences(text, TINY, "--beam", "4")
        assert [s["source"] for s in t["sentences"]] == [r["source"] for r in ref]
        assert [s["ids"] for s in t["sentences"]] == [r["ids"] for r in ref]
        assert [s["translation"] for s in t["sentences"]] == [r["translation"] for r in ref]
        for s, r in zip(t["sentences"], ref):
            assert s["score"] == pytest.approx(r["score"], abs=1e-4)
        # Line breaks are kept, as the CLI keeps them.
        assert t["text"].count("\n") == text.count("\n")
        # The whole text as tolk translate prints it: sentences rejoined, lines kept.
        assert t["text"] == cli_text(text, TINY, "--beam", "4")
        for key in ("queue", "encode", "decode", "total"):
            assert isinstance(t["timings_ms"][key], (int, float)) and t["timings_ms"][key] >= 0, key
        for s in t["sentences"]:
            for key in ("queue", "encode", "decode"):
                assert s["timings_ms"][key] >= 0, key
            # Each sentence says where it came from: its bytes in the text.
            assert text.encode()[s["begin"]:s["end"]].decode() == s["source"]


def test_n_best_with_scores(tiny):
    out = native(tiny, {"texts": ["Open the file."], "beam": 4, "n_best": 3,
                        "return_scores": True, "return_ids": True})
    s = out["translations"][0]["sentences"][0]
    hyps = s["n_best"]
    assert len(hyps) == 3
    scores = [h["score"] for h in hyps]
    assert scores == sorted(scores, reverse=True), "n-best comes best first"
    assert hyps[0]["ids"] == s["ids"] and hyps[0]["text"] == s["translation"]
    assert len({tuple(h["ids"]) for h in hyps}) == 3, "three different hypotheses"


def test_max_new_tokens(tiny):
    ref = cli_sentences("Open the file.", TINY, "--beam", "1", "--max-new-tokens", "3")
    out = native(tiny, {"texts": ["Open the file."], "beam": 1, "max_new_tokens": 3,
                        "return_ids": True})
    ids = out["translations"][0]["sentences"][0]["ids"]
    assert ids == ref[0]["ids"]
    assert len(ids) <= 3 + 2, ids   # the decoder start and, at most, EOS besides


def test_ids_and_scores_only_when_asked(tiny):
    s = native(tiny, {"texts": ["Open the file."]})["translations"][0]["sentences"][0]
    assert "ids" not in s and "score" not in s


def stream(server, body):
    r = requests.post(server.url + "/v1/translate", json={**body, "stream": True},
                      stream=True, timeout=60, headers={"Accept": "text/event-stream"})
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("text/event-stream")
    events = [(e.event, json.loads(e.data)) for e in sseclient.SSEClient(r).events()]
    r.close()
    return events


def test_stream_one_event_per_sentence_then_done(tiny):
    body = {"texts": [TEXT], "beam": 2, "return_ids": True}
    events = stream(tiny, body)
    names = [name for name, _ in events]
    assert names[-1] == "done", names
    sentences = [data for name, data in events if name == "sentence"]
    ref = cli_sentences(TEXT, TINY, "--beam", "2")
    assert len(sentences) == len(ref) == len(names) - 1
    # Events come as sentences finish (any order); each names its place.
    by_index = sorted(sentences, key=lambda d: (d["text"], d["index"]))
    assert [d["ids"] for d in by_index] == [r["ids"] for r in ref]
    assert [d["translation"] for d in by_index] == [r["translation"] for r in ref]
    done = events[-1][1]
    assert done["translations"][0]["text"] == native(tiny, body)["translations"][0]["text"]


def test_stream_several_texts(tiny):
    texts = ["Open the file.", "Close it. Then quit."]
    events = stream(tiny, {"texts": texts})
    sentences = [d for name, d in events if name == "sentence"]
    assert sorted((d["text"], d["index"]) for d in sentences) == [(0, 0), (1, 0), (1, 1)]
    assert events[-1][0] == "done"


def test_stream_error_before_any_event_is_plain_json(tiny):
    r = tiny.post("/v1/translate", json={"texts": ["x"], "target": "xx", "stream": True})
    assert r.status_code == 400
    assert "xx" in r.json()["error"]
