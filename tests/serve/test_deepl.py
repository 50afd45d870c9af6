"""The DeepL-compatible API, POST /v2/translate, through DeepL's official
Python client (`deepl.Translator(auth_key, server_url=...)`, which sends JSON
and reads billed_characters) and through requests for DeepL's form body with
`text` repeated.

Proves: an application written for DeepL works unchanged against tolk —
single and batched texts, source_lang given or detected, split_sentences,
the languages and usage calls, the `Authorization: DeepL-Auth-Key` check
(403 → AuthorizationException) and errors in DeepL's shape ({"message": …},
surfaced by the client).
"""
import deepl
import pytest

from conftest import DEMO

KEY = "tolk-test-key:fx"


@pytest.fixture(scope="module")
def server(start_server, tmp_path_factory):
    keys = tmp_path_factory.mktemp("keys") / "api-keys"
    keys.write_text(KEY + "\n")
    return start_server("-m", DEMO, "--api-keys", str(keys))


@pytest.fixture(autouse=True)
def no_client_retries(monkeypatch):
    # The client retries 429 and 5xx with back-off; a test wants the first answer.
    monkeypatch.setattr(deepl.http_client, "max_network_retries", 0)


def translator(server, key=KEY):
    return deepl.Translator(key, server_url=server.url)


def test_client_translate_one(server):
    r = translator(server).translate_text("Open file", target_lang="ZH")
    assert r.text == "打开文件"
    assert r.detected_source_lang == "EN"
    assert r.billed_characters == len("Open file")


def test_client_translate_many_in_order(server):
    rs = translator(server).translate_text(["Open file", "Save file", "Open file"],
                                           source_lang="EN", target_lang="ZH-HANS")
    assert [r.text for r in rs][0] == "打开文件" and rs[2].text == "打开文件"
    assert len(rs) == 3 and all(r.detected_source_lang == "EN" for r in rs)


@pytest.mark.parametrize("split", ["0", "1", "nonewlines"])
def test_client_split_sentences(server, split):
    r = translator(server).translate_text("Open file.\nSave file.", target_lang="ZH",
                                          split_sentences=split)
    assert r.text


def test_split_sentences_keeps_line_breaks(server):
    # "1" (DeepL's default) splits at punctuation and newlines; the newline
    # stays in the translation, as tolk translate keeps it.
    r = translator(server).translate_text("Open file.\nSave file.", target_lang="ZH", split_sentences="1")
    assert r.text.count("\n") == 1, r.text


def test_form_body_text_repeated(server):
    r = server.post("/v2/translate", data=[("text", "Open file"), ("text", "Save file"),
                                           ("target_lang", "ZH")],
                    headers={"Authorization": f"DeepL-Auth-Key {KEY}"})
    assert r.status_code == 200, r.text
    tr = r.json()["translations"]
    assert len(tr) == 2 and tr[0] == {**tr[0], "detected_source_language": "EN", "text": "打开文件"}


def test_wrong_key_is_403(server):
    with pytest.raises(deepl.AuthorizationException) as e:
        translator(server, "not-a-key").translate_text("Open file", target_lang="ZH")
    assert e.value.http_status_code == 403


def test_missing_key_is_403(server):
    r = server.post("/v2/translate", json={"text": ["Open file"], "target_lang": "ZH"})
    assert r.status_code == 403
    assert r.json()["message"]


def test_unknown_target_is_400_with_message(server):
    with pytest.raises(deepl.DeepLException) as e:
        translator(server).translate_text("Open file", target_lang="XX")
    assert e.value.http_status_code == 400
    # The client appends the server's "message" to what it raises.
    assert "message: " in str(e.value) and "XX" in str(e.value).upper()


def test_missing_text_is_400(server):
    r = server.post("/v2/translate", json={"target_lang": "ZH"},
                    headers={"Authorization": f"DeepL-Auth-Key {KEY}"})
    assert r.status_code == 400
    assert "text" in r.json()["message"]


def test_client_languages(server):
    t = translator(server)
    assert "EN" in {l.code.upper() for l in t.get_source_languages()}
    targets = {l.code.upper() for l in t.get_target_languages()}
    assert targets & {"ZH", "ZH-HANS"}, targets


def test_client_usage(server):
    usage = translator(server).get_usage()
    assert usage.character is not None
