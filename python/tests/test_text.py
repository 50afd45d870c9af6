"""tolk.Translator and tolk.Tokenizer against the CLI (`tolk translate --json`,
`tolk tokenize`, `tolk detokenize`): the same ids, texts and scores, on the
fixture model and the bundled one; several threads at once; errors."""
import subprocess
import threading
import time

import pytest

import tolk
from conftest import CLI, DEMO, MARIAN_TINY, cli, cli_json

SENTENCES = ["Zip archive", "Open the file.", "The weather is nice today.", "Save your work before you close it."]


@pytest.fixture(scope="module", params=[MARIAN_TINY, DEMO], ids=["marian-tiny", "demo-en-zh"])
def model(request):
    return request.param


@pytest.fixture(scope="module")
def translator(model):
    return tolk.Translator(model, threads=1)


def test_translate_batch_matches_cli_ids(model, translator):
    want = [cli_json("translate", "-m", str(model), "--json", s)[0] for s in SENTENCES]
    got = translator.translate_batch(SENTENCES, return_scores=True)
    for s, g, w in zip(SENTENCES, got, want):
        assert g.ids[0] == w["ids"], s
        assert g.hypotheses[0] == w["translation"], s
        assert abs(g.scores[0] - w["score"]) <= 1e-5, s


def test_greedy_and_max_new_tokens_match_cli(model, translator):
    want = cli_json("translate", "-m", str(model), "--json", "--beam", "1", "--max-new-tokens", "3", SENTENCES[2])[0]
    got = translator.translate_batch([SENTENCES[2]], beam_size=1, max_new_tokens=3)[0]
    assert got.ids[0] == want["ids"]
    assert len(got.ids[0]) <= 1 + 3
    assert got.scores == []  # return_scores=False


def test_hypotheses_best_first(translator):
    r = translator.translate_batch([SENTENCES[0]], beam_size=4, num_hypotheses=3, return_scores=True)[0]
    assert len(r.hypotheses) == len(r.scores) == len(r.ids) == 3
    assert r.scores == sorted(r.scores, reverse=True)


def test_translate_text_matches_cli(model, translator):
    text = "Open the file. Save your work.\nThe weather is nice today."
    assert translator.translate(text) == cli("translate", "-m", str(model), text).rstrip("\n")


def test_translate_iterable_yields_what_translate_batch_gives(translator):
    texts = SENTENCES + ["Close the window."]
    batch = translator.translate_batch(texts)
    streamed = list(translator.translate_iterable(iter(texts), batch_size=2))
    assert [r.hypotheses for r in streamed] == [r.hypotheses for r in batch]
    with pytest.raises(tolk.InvalidArgument):
        next(translator.translate_iterable(texts, batch_size=0))


def test_threads_translating_at_once(translator):
    want = [r.hypotheses[0] for r in translator.translate_batch(SENTENCES)]
    errors = []

    def work(k):
        try:
            for i in range(3):
                j = (k + i) % len(SENTENCES)
                assert translator.translate_batch([SENTENCES[j]])[0].hypotheses[0] == want[j]
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors


def test_int8_and_target_language():
    t = tolk.Translator(MARIAN_TINY, int8=True, threads=1, to="zh-Hant")
    assert t.tag == ">>cmn_Hant<<"
    want = cli_json("translate", "-m", str(MARIAN_TINY), "--int8", "--to", "zh-Hant", "--json", SENTENCES[1])[0]
    assert t.translate_batch([SENTENCES[1]])[0].ids[0] == want["ids"]


def test_int8_lm_head_matches_cli():
    t = tolk.Translator(DEMO, threads=1, int8_lm_head=True)
    want = cli_json("translate", "-m", str(DEMO), "--int8-lm-head", "--json", SENTENCES[2])[0]
    assert t.translate_batch([SENTENCES[2]])[0].ids[0] == want["ids"]


def test_bf16_matches_cli():
    # marian-tiny's fp32 graphs: the option holds their weights as bfloat16.
    t = tolk.Translator(MARIAN_TINY, threads=1, to="zh-Hant", bf16=True)
    want = cli_json("translate", "-m", str(MARIAN_TINY), "--bf16", "--to", "zh-Hant", "--json", SENTENCES[1])[0]
    assert t.translate_batch([SENTENCES[1]])[0].ids[0] == want["ids"]


def test_bf16_products_match_cli_or_both_refuse():
    # Where the CPU has AVX512-BF16 the products run and give the CLI's ids;
    # elsewhere both refuse, naming what is missing.
    for bad in ("fast", 3, 1.0):
        with pytest.raises(tolk.InvalidArgument):
            tolk.Translator(MARIAN_TINY, bf16=bad)
    args = ("translate", "-m", str(MARIAN_TINY), "--bf16-products", "--to", "zh-Hant", "--json", SENTENCES[1])
    try:
        t = tolk.Translator(MARIAN_TINY, threads=1, to="zh-Hant", bf16="products")
    except tolk.Unsupported as e:
        assert "AVX512-BF16" in str(e)
        r = subprocess.run([str(CLI), *args], capture_output=True, text=True)
        assert r.returncode != 0 and "AVX512-BF16" in r.stderr
        return
    want = cli_json(*args)[0]
    assert t.translate_batch([SENTENCES[1]])[0].ids[0] == want["ids"]


def test_translator_errors():
    with pytest.raises(tolk.NotFound) as e:
        tolk.Translator("/no/such/model")
    assert "/no/such/model" in str(e.value)
    with pytest.raises(tolk.InvalidArgument) as e:
        tolk.Translator(MARIAN_TINY, to="xx")
    assert "no tag for 'xx'" in str(e.value)
    t = tolk.Translator(MARIAN_TINY, threads=1)
    with pytest.raises(tolk.InvalidArgument) as e:
        t.translate_batch(["a"], beam_size=2, num_hypotheses=3)
    assert "num_return_sequences (3) must be at most num_beams (2)" in str(e.value)
    with pytest.raises(tolk.InvalidArgument):
        t.translate_batch(["a"], num_hypotheses=0)
    with pytest.raises(TypeError):
        t.translate_batch([b"bytes"])
    with pytest.raises(TypeError):
        t.translate(3)
    t.close()
    with pytest.raises(tolk.InvalidArgument) as e:
        t.translate("a")
    assert "the translator is closed" in str(e.value)


@pytest.fixture(scope="module")
def tokenizer():
    return tolk.Tokenizer(MARIAN_TINY)


def test_tokenizer_matches_cli(tokenizer):
    for text in ["Zip archive", ">>cmn_Hans<< a</s>b", "Ünïcödé text, 3.5 km"]:
        assert tokenizer.encode(text) == [int(i) for i in cli("tokenize", "-m", str(MARIAN_TINY), text).split()]
        assert " ".join(tokenizer.tokenize(text)) == cli("tokenize", "-m", str(MARIAN_TINY), "--pieces", text).strip()
    ids = [2, 435, 729, 2, 1666, 0]
    assert tokenizer.decode(ids) == cli("detokenize", "-m", str(MARIAN_TINY), *map(str, ids)).strip()
    assert tokenizer.decode(ids) == "Zip 归档文件"
    assert tokenizer.decode(ids, skip_special_tokens=False).endswith("</s>")


def test_tokenizer_flags_and_batches(tokenizer):
    ids = tokenizer.encode("Zip archive")
    assert ids[-1] == 0 and tokenizer.encode("Zip archive", add_special_tokens=False) == ids[:-1]
    assert tokenizer.encode_batch(["Zip archive", "a"]) == [ids, tokenizer.encode("a")]
    assert ">>cmn_Hans<<" in tokenizer.language_tags()
    assert tokenizer.decode([10**6]) == ""  # out of the vocabulary: <unk>, a special token skipped
    assert tokenizer.decode([10**6], skip_special_tokens=False) == "<unk>"


def test_tokenizer_errors():
    with pytest.raises(tolk.NotFound):
        tolk.Tokenizer("/no/such/model")
    t = tolk.Tokenizer(MARIAN_TINY)
    with pytest.raises(OverflowError):
        t.decode([2**40])
    with pytest.raises(TypeError):
        t.decode([["x"]])
    t.close()
    with pytest.raises(tolk.InvalidArgument):
        t.encode("a")


def test_gil_released_and_close_refused_while_translating():
    """While one thread translates a long text, the main thread runs (the GIL
    is released) and close() is refused rather than freeing the model under it."""
    t = tolk.Translator(MARIAN_TINY, threads=1)
    # Long enough to take a second here, on whatever machine: 100 sentences
    # took 0.2 s on a loaded one and under it on an idle one.
    text = " ".join(["Open the file and save your work before you close the window."] * 100)
    while True:
        t0 = time.monotonic()
        t.translate(text)
        if time.monotonic() - t0 >= 1.0:
            break
        text = text + " " + text
    done = threading.Event()
    worker = threading.Thread(target=lambda: (t.translate(text), done.set()))
    worker.start()
    time.sleep(0.2)  # returns while the C call runs only if that call let go of the GIL
    assert not done.is_set(), "the translation ended before the check: make the text longer"
    with pytest.raises(tolk.InvalidArgument) as e:
        t.close()
    assert "in use by 1 running calls" in str(e.value)
    worker.join()
    assert done.is_set()
    t.close()
