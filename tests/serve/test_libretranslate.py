"""The LibreTranslate-compatible API, through LibreTranslate's own Python
client (libretranslatepy) and through requests for what that client does not
send (JSON bodies, q arrays, alternatives, html, auto).

Proves: an application written for LibreTranslate works unchanged when its
URL points at tolk — translate, detect, languages, with and without an API
key — and the responses have LibreTranslate's shapes: translatedText (a list
for a q list), alternatives, detectedLanguage, /frontend/settings.
"""
import urllib.error

import pytest
from libretranslatepy import LibreTranslateAPI

from conftest import DEMO


@pytest.fixture(scope="module")
def keyed(start_server, tmp_path_factory):
    keys = tmp_path_factory.mktemp("keys") / "api-keys"
    keys.write_text("# one key a line\nsecret-key-1\nsecret-key-2\n")
    return start_server("-m", DEMO, "--api-keys", str(keys))


def test_client_translate(demo):
    lt = LibreTranslateAPI(demo.url)
    assert lt.translate("Open file", "en", "zh") == "打开文件"
    assert lt.translate("Open file", "auto", "zh") == "打开文件"


def test_client_languages(demo):
    langs = LibreTranslateAPI(demo.url).languages()
    by_code = {l["code"]: l for l in langs}
    assert "en" in by_code and by_code["en"]["name"] == "English"
    assert "zh-Hans" in by_code["en"]["targets"]   # LibreTranslate's current code for zh
    for l in langs:
        assert set(l) >= {"code", "name", "targets"}


def test_client_detect(demo):
    got = LibreTranslateAPI(demo.url).detect("Open the file and save it.")
    assert isinstance(got, list) and got
    assert got[0]["language"] == "en"
    assert 0 <= got[0]["confidence"] <= 100


def test_client_with_api_key(keyed):
    assert LibreTranslateAPI(keyed.url, api_key="secret-key-2").translate("Open file", "en", "zh") == "打开文件"
    with pytest.raises(urllib.error.HTTPError) as e:
        LibreTranslateAPI(keyed.url, api_key="wrong").translate("Open file", "en", "zh")
    assert e.value.code == 403
    with pytest.raises(urllib.error.HTTPError) as e:
        LibreTranslateAPI(keyed.url).translate("Open file", "en", "zh")
    assert e.value.code in (400, 403)
    # LibreTranslate's languages and settings stay open without a key.
    assert LibreTranslateAPI(keyed.url).languages()


def test_json_body_and_q_array(demo):
    r = demo.post("/translate", json={"q": ["Open file", "Save file"], "source": "en", "target": "zh"})
    assert r.status_code == 200, r.text
    out = r.json()["translatedText"]
    assert isinstance(out, list) and len(out) == 2 and out[0] == "打开文件"


def test_form_body(demo):
    r = demo.post("/translate", data={"q": "Open file", "source": "en", "target": "zh", "format": "text"})
    assert r.status_code == 200, r.text
    assert r.json() == {"translatedText": "打开文件"}


def test_auto_gives_detected_language(demo):
    r = demo.post("/translate", json={"q": "Open file", "source": "auto", "target": "zh"})
    body = r.json()
    assert body["translatedText"] == "打开文件"
    assert body["detectedLanguage"]["language"] == "en"
    assert 0 <= body["detectedLanguage"]["confidence"] <= 100


def test_alternatives(demo):
    r = demo.post("/translate", json={"q": "Open file", "source": "en", "target": "zh", "alternatives": 2})
    body = r.json()
    assert r.status_code == 200, r.text
    assert body["translatedText"] == "打开文件"
    alts = body["alternatives"]
    assert isinstance(alts, list) and 1 <= len(alts) <= 2
    assert all(isinstance(a, str) and a for a in alts)


def test_html_keeps_the_markup(demo):
    r = demo.post("/translate", json={"q": '<p class="x">Open file</p>', "source": "en",
                                      "target": "zh", "format": "html"})
    assert r.status_code == 200, r.text
    assert r.json()["translatedText"] == '<p class="x">打开文件</p>'


def test_frontend_settings(demo):
    r = demo.get("/frontend/settings")
    assert r.status_code == 200
    s = r.json()
    assert isinstance(s["charLimit"], int)
    assert isinstance(s["keyRequired"], bool) and s["keyRequired"] is False
    assert s["language"]["source"]["code"] in ("en", "auto")
    assert s["language"]["target"]["code"] == "zh-Hans"


def test_frontend_settings_says_a_key_is_required(keyed):
    assert keyed.get("/frontend/settings").json()["keyRequired"] is True


def test_errors_have_libretranslate_shape(demo):
    r = demo.post("/translate", json={"source": "en", "target": "zh"})
    assert r.status_code == 400
    assert set(r.json()) == {"error"} and "q" in r.json()["error"]
    r = demo.post("/translate", json={"q": "Open file", "source": "en", "target": "xx"})
    assert r.status_code == 400 and "xx" in r.json()["error"]
