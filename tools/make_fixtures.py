#!/usr/bin/env python3
"""Regenerate every committed test fixture of tolk (tests/fixtures/).

    /work/venv/bin/python tools/make_fixtures.py            # all steps
    /work/venv/bin/python tools/make_fixtures.py --steps tokenizer,tokgold
    /work/venv/bin/python tools/make_fixtures.py --bench-model /tmp/bench   # full-size model, not committed

Needs the versions pinned in tools/requirements.txt.  Everything is seeded; with the pinned versions
a rerun reproduces byte-identical tensors (checked by comparing tests/fixtures/MANIFEST).
See tests/fixtures/README.md for what each fixture is and its file formats.
"""
from __future__ import annotations

import argparse
import glob
import gettext
import json
import lzma
import os
import random
import re
import shutil
import subprocess
import sys
import unicodedata
from collections import Counter
from pathlib import Path

sys.dont_write_bytecode = True  # no tools/__pycache__ in the work tree
from common import logger, sha256_file  # tools/common.py

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
TINY = FIX / "marian-tiny"
GOLD = FIX / "golden"
CORPUS = FIX / "corpus"

SEED = 20261202

# Target-language tags of Helsinki-NLP/opus-mt-en-zh (Tatoeba eng-zho opus-2020-07-17 release: the tags seen
# in its training data, hence in its vocab.json).  In the real vocab they sit among the pieces in frequency
# order (>>cmn_Hans<< = 5, >>cmn_Hant<< = 21).  The counts are the pseudo-frequencies used to place them here.
LANG_TAGS = ["cmn_Hans", "cmn_Hant", "yue_Hant", "yue_Hans", "cmn", "yue", "lzh", "lzh_Hans", "wuu",
             "nan", "gan", "cjy_Hans", "cjy_Hant"]

# Which locale directory gives which target tag (used for the tag frequencies of the joint vocab).
LOCALE_TAG = {"zh_CN": "cmn_Hans", "zh_TW": "cmn_Hant", "zh_HK": "yue_Hant"}

TINY_SIZES = dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                  decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                  max_position_embeddings=512)
FULL_SIZES = dict(d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
                  decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048,
                  max_position_embeddings=512)
SRC_VOCAB = 1000
TGT_VOCAB = 3000
FULL_VOCAB = 65001


log = logger("make_fixtures")


def _finite(o):
    """JSON has no Infinity/NaN (strict parsers such as cJSON reject them): non-finite floats become null."""
    if isinstance(o, float):
        return o if o == o and o not in (float("inf"), float("-inf")) else None
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    return o


def write_json(path: Path, obj, indent=1):
    obj = _finite(obj)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump(obj, f, ensure_ascii=False, indent=indent, sort_keys=False, allow_nan=False)
        f.write("\n")


# ----------------------------------------------------------------------------------------------------------
# 1. corpus: English msgids and Chinese msgstrs of the Debian packages' zh_CN/zh_TW/zh_HK message catalogues
# ----------------------------------------------------------------------------------------------------------

def _licence_of(pkg: str) -> str:
    cp = Path("/usr/share/doc") / pkg / "copyright"
    if not cp.exists():
        return "see the package's copyright file"
    lic = []
    for line in cp.read_text(errors="replace").splitlines():
        if line.startswith("License:"):
            v = line.split(":", 1)[1].strip()
            if v and v not in lic:
                lic.append(v)
    return ", ".join(lic[:6]) if lic else "see /usr/share/doc/%s/copyright" % pkg


def _clean_line(s: str) -> str:
    s = s.replace("\t", " ").strip()
    return s


def step_corpus(args):
    """Extract the corpus from the installed .mo files into tests/fixtures/corpus/ (xz, sorted, deduplicated).

    Only run with --refresh-corpus: the committed corpus is the training input so that regeneration does
    not depend on which Debian packages a machine happens to have."""
    CORPUS.mkdir(parents=True, exist_ok=True)
    en, zh = set(), {}
    sources = []
    for loc in ("zh_CN", "zh_TW", "zh_HK"):
        for f in sorted(glob.glob(f"/usr/share/locale/{loc}/LC_MESSAGES/*.mo")):
            try:
                with open(f, "rb") as fh:
                    cat = gettext.GNUTranslations(fh)._catalog
            except Exception as e:  # a broken catalogue is skipped, not fatal
                log("skip", f, e)
                continue
            pkg = subprocess.run(["dpkg", "-S", f], capture_output=True, text=True).stdout.split(":")[0] or "?"
            n = 0
            for k, v in cat.items():
                if isinstance(k, tuple):
                    k = k[0]
                if not k or not v:
                    continue
                for line in k.split("\n"):
                    line = _clean_line(line)
                    if re.search(r"[A-Za-z]", line):
                        en.add(line)
                for line in v.split("\n"):
                    line = _clean_line(line)
                    if re.search(r"[\u3400-\u9fff]", line):
                        zh.setdefault(line, LOCALE_TAG[loc])
                n += 1
            sources.append((loc, os.path.basename(f), pkg, n))
    en_lines = sorted(en)
    zh_lines = sorted(zh)
    with lzma.open(CORPUS / "en.txt.xz", "wt", encoding="utf-8", preset=9) as f:
        f.write("\n".join(en_lines) + "\n")
    with lzma.open(CORPUS / "zh.txt.xz", "wt", encoding="utf-8", preset=9) as f:
        f.write("\n".join(f"{zh[l]}\t{l}" for l in zh_lines) + "\n")
    pkgs = sorted({p for _, _, p, _ in sources})
    with open(CORPUS / "SOURCES.tsv", "w", encoding="utf-8", newline="\n") as f:
        f.write("# locale\tcatalogue\tdebian_package\tmessages\n")
        for loc, mo, pkg, n in sources:
            f.write(f"{loc}\t{mo}\t{pkg}\t{n}\n")
        f.write("# package\tlicence (from /usr/share/doc/PACKAGE/copyright)\n")
        for p in pkgs:
            f.write(f"#L\t{p}\t{_licence_of(p)}\n")
    extract_pairs()
    log(f"corpus: {len(en_lines)} English lines, {len(zh_lines)} Chinese lines from {len(sources)} catalogues")


def extract_pairs():
    """Single-line (English msgid, Chinese msgstr) pairs of the same catalogues, for the short seeded training
    run of marian-tiny (corpus/pairs.tsv.xz: tag, English, Chinese; sorted, deduplicated)."""
    pairs = set()
    for loc in ("zh_CN", "zh_TW", "zh_HK"):
        for f in sorted(glob.glob(f"/usr/share/locale/{loc}/LC_MESSAGES/*.mo")):
            try:
                with open(f, "rb") as fh:
                    cat = gettext.GNUTranslations(fh)._catalog
            except Exception:
                continue
            for k, v in cat.items():
                if isinstance(k, tuple):
                    k = k[0]
                if not k or not v or "\n" in k.strip() or "\n" in v.strip():
                    continue
                k, v = _clean_line(k), _clean_line(v)
                if 2 <= len(k) <= 120 and re.search(r"[A-Za-z]", k) and re.search(r"[\u3400-\u9fff]", v):
                    pairs.add((LOCALE_TAG[loc], k, v))
    with lzma.open(CORPUS / "pairs.tsv.xz", "wt", encoding="utf-8", preset=9) as f:
        f.write("".join(f"{t}\t{e}\t{z}\n" for t, e, z in sorted(pairs)))
    log(f"corpus: {len(pairs)} sentence pairs")


def read_pairs():
    with lzma.open(CORPUS / "pairs.tsv.xz", "rt", encoding="utf-8") as f:
        return [tuple(l.split("\t")) for l in f.read().split("\n") if l]


def read_corpus():
    with lzma.open(CORPUS / "en.txt.xz", "rt", encoding="utf-8") as f:
        en = [l for l in f.read().split("\n") if l]
    zh = []
    with lzma.open(CORPUS / "zh.txt.xz", "rt", encoding="utf-8") as f:
        for l in f.read().split("\n"):
            if l:
                tag, text = l.split("\t", 1)
                zh.append((tag, text))
    return en, zh


# ----------------------------------------------------------------------------------------------------------
# 2. tokenizer: source.spm / target.spm (unigram, nmt_nfkc) + Marian joint vocab.json
# ----------------------------------------------------------------------------------------------------------

def train_spm(lines, prefix: Path, vocab_size: int, coverage: float):
    """Train in a scratch folder with relative names: the .model file records its trainer_spec (input file
    and model_prefix), so absolute paths would make the bytes depend on where the repo lives."""
    import tempfile
    import sentencepiece as spm
    if hasattr(spm, "set_random_generator_seed"):
        spm.set_random_generator_seed(SEED)
    name = prefix.name
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="tolk-spm-") as tmp:
        try:
            os.chdir(tmp)
            Path(f"{name}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
            spm.SentencePieceTrainer.train(
                input=f"{name}.txt", model_prefix=name, model_type="unigram", vocab_size=vocab_size,
                character_coverage=coverage, normalization_rule_name="nmt_nfkc", byte_fallback=False,
                hard_vocab_limit=False, num_threads=1, input_sentence_size=0, shuffle_input_sentence=False,
                split_digits=False, max_sentence_length=8192, minloglevel=2)
        finally:
            os.chdir(cwd)
        shutil.copyfile(Path(tmp) / f"{name}.model", prefix.with_suffix(".model"))
    return prefix.with_suffix(".model")


def build_vocab(src_model: Path, tgt_model: Path, en, zh, pad_to: int | None = None):
    """Join the two spm vocabularies as Marian does: marian-vocab counts the pieces of the (spm-encoded)
    training data, most frequent first; </s> = 0, <unk> = 1; the HF converter appends <pad> last, which is
    then also decoder_start_token_id.  Pieces never produced on the corpus are not in the vocab (as in the
    real opus-mt vocabularies), so the tokenizer maps them to <unk>."""
    import sentencepiece as spm
    s = spm.SentencePieceProcessor(model_file=str(src_model))
    t = spm.SentencePieceProcessor(model_file=str(tgt_model))
    cnt = Counter()
    for line in en:
        cnt.update(s.encode(line, out_type=str))
    tagcnt = Counter()
    for tag, line in zh:
        cnt.update(t.encode(line, out_type=str))
        tagcnt[tag] += 1
    # Tags: the source side of each pair starts with its tag.  Tags with no data here get small pseudo counts.
    for i, tag in enumerate(LANG_TAGS):
        cnt[f">>{tag}<<"] = tagcnt.get(tag, 0) or max(1, 200 // (i + 1))
    for sp_ in ("<unk>", "<s>", "</s>"):
        cnt.pop(sp_, None)
    ordered = sorted(cnt.items(), key=lambda kv: (-kv[1], kv[0]))
    vocab = {"</s>": 0, "<unk>": 1}
    for piece, _ in ordered:
        vocab.setdefault(piece, len(vocab))
    if pad_to is not None:
        i = 0
        while len(vocab) < pad_to - 1:
            vocab.setdefault(f"<placeholder_{i}>", len(vocab))
            i += 1
    vocab["<pad>"] = len(vocab)
    return vocab


def marian_config(vocab_size: int, sizes: dict) -> dict:
    """opus-mt-en-zh's config.json (Helsinki-NLP/opus-mt-en-zh, converted with transformers 4.2x), with only
    the sizes changed."""
    pad = vocab_size - 1
    cfg = {
        "_name_or_path": "Helsinki-NLP/opus-mt-en-zh",
        "_num_labels": 3,
        "activation_dropout": 0.0,
        "activation_function": "swish",
        "add_bias_logits": False,
        "add_final_layer_norm": False,
        "architectures": ["MarianMTModel"],
        "attention_dropout": 0.0,
        "bad_words_ids": [[pad]],
        "bos_token_id": 0,
        "classif_dropout": 0.0,
        "classifier_dropout": 0.0,
        "d_model": sizes["d_model"],
        "decoder_attention_heads": sizes["decoder_attention_heads"],
        "decoder_ffn_dim": sizes["decoder_ffn_dim"],
        "decoder_layerdrop": 0.0,
        "decoder_layers": sizes["decoder_layers"],
        "decoder_start_token_id": pad,
        "decoder_vocab_size": vocab_size,
        "dropout": 0.1,
        "encoder_attention_heads": sizes["encoder_attention_heads"],
        "encoder_ffn_dim": sizes["encoder_ffn_dim"],
        "encoder_layerdrop": 0.0,
        "encoder_layers": sizes["encoder_layers"],
        "eos_token_id": 0,
        "extra_pos_embeddings": vocab_size,
        "forced_eos_token_id": 0,
        "gradient_checkpointing": False,
        "id2label": {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"},
        "init_std": 0.02,
        "is_encoder_decoder": True,
        "label2id": {"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2},
        "max_length": 512,
        "max_position_embeddings": sizes["max_position_embeddings"],
        "model_type": "marian",
        "normalize_before": False,
        "normalize_embedding": False,
        "num_beams": 4,
        "num_hidden_layers": sizes["encoder_layers"],
        "pad_token_id": pad,
        "scale_embedding": True,
        "share_encoder_decoder_embeddings": True,
        "static_position_embeddings": True,
        "transformers_version": "4.22.0.dev0",
        "use_cache": True,
        "vocab_size": vocab_size,
    }
    return cfg


def generation_config(vocab_size: int) -> dict:
    pad = vocab_size - 1
    return {
        "bad_words_ids": [[pad]],
        "bos_token_id": 0,
        "decoder_start_token_id": pad,
        "eos_token_id": 0,
        "forced_eos_token_id": 0,
        "max_length": 512,
        "num_beams": 4,
        "pad_token_id": pad,
        "renormalize_logits": True,
        "transformers_version": "4.26.0.dev0",
    }


def write_tokenizer_files(out: Path, pad_to: int | None = None):
    out.mkdir(parents=True, exist_ok=True)
    en, zh = read_corpus()
    work = out / "_spm"
    work.mkdir(exist_ok=True)
    src = train_spm(en, work / "source", SRC_VOCAB, 1.0)
    tgt = train_spm([l for _, l in zh], work / "target", TGT_VOCAB, 0.9995)
    shutil.copyfile(src, out / "source.spm")
    shutil.copyfile(tgt, out / "target.spm")
    shutil.rmtree(work)
    vocab = build_vocab(out / "source.spm", out / "target.spm", en, zh, pad_to=pad_to)
    write_json(out / "vocab.json", vocab, indent=2)
    # the real tokenizer_config.json of opus-mt-en-zh is exactly these two keys
    with open(out / "tokenizer_config.json", "w", encoding="utf-8") as f:
        f.write('{"target_lang": "zho", "source_lang": "eng"}')
    return vocab


def step_tokenizer(args):
    vocab = write_tokenizer_files(TINY)
    write_json(TINY / "config.json", marian_config(len(vocab), TINY_SIZES), indent=2)
    write_json(TINY / "generation_config.json", generation_config(len(vocab)), indent=2)
    log(f"tokenizer: vocab.json has {len(vocab)} entries, <pad> = {vocab['<pad>']}")



# ----------------------------------------------------------------------------------------------------------
# 3. tokenizer goldens: MarianTokenizer ids, spm pieces, normalised text, decodes
# ----------------------------------------------------------------------------------------------------------

EDGE_CASES = [
    "", " ", "  ", "\t", "\n", "\r\n", "a", "A", ".", "...", "Hello world.", "Hello, world!",
    "How are you?", "How are you today?", "The quick brown fox jumps over the lazy dog.",
    "I'm here; you're there — isn't it?", "\"Quoted\" and 'single' and «guillemets» and „low“ quotes.",
    "Tabs\tand\nnewlines\r\nand\u000bvertical\u000cform feeds", "Multiple     spaces   between    words",
    "   leading spaces", "trailing spaces   ", "   both   ", "a\u00a0b\u00a0c (no-break spaces)",
    "thin\u2009space and\u2002en\u2003em\u3000ideographic space", "zero\u200bwidth\u200cnon\u200djoiner\u2060wj",
    "soft\u00adhyphen", "bidi \u202eoverride\u202c and \u200fRLM\u200e LRM", "BOM \ufeffinside",
    "123", "0", "3.14159", "1,234,567.89", "-42", "+1 (555) 123-4567", "2026-12-02T10:04:00Z",
    "Version 4.57.6 was released on 2025-11-27.", "100%", "$5.00 €3,50 ¥100 £7 ₹20", "1st 2nd 3rd 4th",
    "½ ¼ ¾ ⅓ ² ³ ¹ ⁴ ₂ ₀", "Ⅻ ⅻ Ⅳ ⅷ", "① ② ⑩ ⑳ ㉑", "№ ℡ ™ ℃ ℉ Å Ω",
    "https://example.com/path?query=1&x=y#frag", "http://localhost:8080/translate",
    "Visit www.example.org or ftp://files.example.net/pub/file.tar.gz",
    "user@example.com", "Contact first.last+tag@sub.example.co.uk for help.",
    "C:\\Program Files\\tolk\\tolk.exe", "/usr/share/locale/zh_CN/LC_MESSAGES/apt.mo",
    "snake_case_identifier camelCaseIdentifier PascalCase SCREAMING_CASE kebab-case",
    "printf(\"%s: %d\\n\", name, value);", "<b>bold</b> &amp; &lt;tag&gt; &#x4E2D;",
    "{\"json\": [1, 2, 3], \"ok\": true}", "#hashtag @mention $CASH",
    "😀", "😀😃😄", "I ❤️ NY", "👍🏽 thumbs up (skin tone)", "👩‍💻 woman technologist", "👨‍👩‍👧‍👦 family",
    "🏳️‍🌈 rainbow flag", "🇨🇳🇺🇸🇫🇮 flags", "keycap 1️⃣ #️⃣", "🧑🏿‍🤝‍🧑🏻", "☃ ☂ ✈ ♥ ♠ ★ ☆",
    "你好", "你好，世界！", "我爱北京天安门。", "这是一个测试。", "繁體中文測試", "香港廣東話",
    "日本語のテキスト", "カタカナ ｶﾀｶﾅ", "한국어 텍스트", "Mixed 中文 and English 混合", "中文，标点；符号：“引号”（括号）【方括号】《书名号》",
    "Ｆｕｌｌｗｉｄｔｈ　ＡＢＣ　１２３", "ｈｅｌｌｏ，ｗｏｒｌｄ！", "ＡＢＣ－ｘｙｚ＠ｅｘａｍｐｌｅ．ｃｏｍ", "ﾊﾝｶｸ half-width katakana",
    "café", "cafe\u0301", "naïve", "nai\u0308ve", "Zoë Brontë", "résumé", "Ångström", "A\u030angstro\u0308m",
    "ﬁ ﬂ ﬀ ﬃ ligatures", "Straße", "İstanbul ıi", "Ελληνικά", "Русский текст", "עברית", "العربية",
    "हिन्दी", "ภาษาไทย", "Tiếng Việt có dấu", "Z\u0351\u0352a\u0353\u0354l\u0355g\u0356o\u0357", "e\u0301\u0301\u0301",
    "\u0301 leading combining mark", "Ⓐⓑⓒ", "𝐁𝐨𝐥𝐝 𝑰𝒕𝒂𝒍𝒊𝒄 𝔉𝔯𝔞𝔨", "𝟙𝟚𝟛", "ﬀ", "㍿ ㌔ ㎏ ㎞", "ℌ ℍ ℕ",
    "\u0000", "a\u0000b", "\u0001\u0002\u0003", "bell\u0007", "esc\u001b[31mred\u001b[0m", "del\u007f", "\u0085nel",
    "\u2028line sep\u2029para sep", "\ufffd replacement", "\U0010fffd private", "\ue000 private use",
    ">>cmn_Hans<<", ">>cmn_Hans<< Hello world.", ">>cmn_Hant<< Hello world.", ">>yue_Hant<< Good morning.",
    ">>yue_Hans<< Good morning.", ">>lzh<< The master said.", ">>cmn_Hans<<Hello", ">>cmn_Hans<<  Hello",
    ">>cmn_Hans<< >>cmn_Hant<< two tags", ">>xyz<< unknown tag", ">>cmn_Hans unterminated", "cmn_Hans<< no start",
    " >>cmn_Hans<< leading space", "Hello >>cmn_Hans<< middle", "Hello world >>cmn_Hans<<", ">><<", ">> <<",
    ">>>cmn_Hans<<<", ">>cmn_Hans<<>>cmn_Hant<<", ">>CMN_HANS<< upper", ">>cmn_Hans<< 你好", ">>cmn_Hans<<\tTab",
    "</s>", "a </s> b", "<unk>", "x<unk>y", "<pad>", "<pad> <pad>", "<s>", "a</s>b</s>", ">>cmn_Hans<< </s>",
    "▁", "▁▁", "a▁b", "__init__", "~!@#$%^&*()_+`-={}|[]\\:\";'<>?,./",
    "....", "!!!", "???", "—–-", "…", "«»‹›", "¿Qué? ¡Sí!", "' '", "\"\"",
]


def _edge_variants(rng):
    """Generated combinations: space runs, digits, URLs, e-mails, emoji/ZWJ sequences, CJK mixes."""
    out = []
    words = ["file", "error", "the", "cannot", "open", "directory", "package", "install", "system", "user"]
    for n in range(1, 9):
        out.append((" " * n).join(words[: n + 1]))
        out.append("x" + "\u3000" * n + "y")
    for i in range(40):
        out.append(str(rng.randrange(10 ** rng.randrange(1, 15))))
        out.append(f"{rng.randrange(1, 31)}.{rng.randrange(1, 13)}.{rng.randrange(1900, 2100)} at "
                   f"{rng.randrange(24):02d}:{rng.randrange(60):02d}")
    tlds = ["com", "org", "net", "cn", "io", "co.uk"]
    for i in range(30):
        w = rng.sample(words, 3)
        out.append(f"https://{w[0]}.{rng.choice(tlds)}/{w[1]}/{w[2]}?id={rng.randrange(1000)}&lang=zh")
        out.append(f"{w[0]}.{w[1]}{rng.randrange(100)}@{w[2]}.{rng.choice(tlds)}")
    emoji = ["😀", "👍", "👍🏻", "👩‍🔬", "🧑‍🚀", "❤️", "🇫🇮", "👨‍👨‍👦", "🐉", "🀄", "🈶", "🆗", "☺", "✌️", "🤷‍♀️"]
    for i in range(40):
        out.append(" ".join(rng.choice(words) if rng.random() < 0.6 else rng.choice(emoji) for _ in range(rng.randrange(1, 8))))
    cjk = ["文件", "错误", "无法", "打开", "目录", "软件包", "安装", "系统", "用户", "，", "。", "：", "“", "”"]
    for i in range(40):
        out.append("".join(rng.choice(cjk + words + [" "]) for _ in range(rng.randrange(1, 12))))
    for i in range(30):
        base = rng.choice(words)
        marks = "".join(chr(rng.randrange(0x300, 0x370)) for _ in range(rng.randrange(1, 4)))
        out.append(base[:2] + marks + base[2:])
        out.append("".join(chr(0xFF01 + (ord(c) - 0x21)) if 0x21 <= ord(c) <= 0x7E else c for c in base.upper()))
    for i in range(30):
        s = rng.choice(words) + "".join(chr(rng.choice([0, 1, 2, 7, 8, 9, 10, 11, 12, 13, 27, 31, 127, 0x85, 0x9f]))
                                        for _ in range(rng.randrange(1, 4))) + rng.choice(words)
        out.append(s)
    return out


def golden_sentences():
    rng = random.Random(SEED)
    en, zh = read_corpus()
    sents = list(EDGE_CASES) + _edge_variants(rng)
    en_s = rng.sample(en, 1000)
    zh_s = rng.sample(zh, 300)
    sents += en_s
    sents += [l for _, l in zh_s[:150]]
    tags = [f">>{t}<<" for t in LANG_TAGS]
    for i, line in enumerate(rng.sample(en, 400)):
        tag = tags[i % len(tags)] if i % 5 else tags[0]
        sents.append(f"{tag} {line}" if i % 7 else f"{tag}{line}")
    # one input far over 512 tokens
    long_text = " ".join(rng.sample(en, 120))
    sents.append(">>cmn_Hans<< " + long_text)
    sents.append(long_text)
    seen, uniq = set(), []
    for s in sents:
        if s not in seen:
            seen.add(s)
            uniq.append(s)
    return uniq, [l for _, l in zh_s]


def step_tokgold(args):
    import sentencepiece
    import transformers
    from transformers import MarianTokenizer
    tok = MarianTokenizer.from_pretrained(str(TINY))
    sents, zh_lines = golden_sentences()
    vocab = json.loads((TINY / "vocab.json").read_text(encoding="utf-8"))
    encode = []
    for s in sents:
        ids = tok(s).input_ids
        rec = {"text": s, "ids": ids, "tokens": tok.tokenize(s),
               "spm_pieces": tok.spm_source.encode(s, out_type=str),
               "spm_ids": tok.spm_source.encode(s),
               "spm_normalized": tok.spm_source.normalize(s)}
        if len(ids) > 512:
            rec["ids_truncated_512"] = tok(s, truncation=True, max_length=512).input_ids
        encode.append(rec)
    target_encode = []
    for s in zh_lines:
        ids = tok(text_target=s).input_ids
        target_encode.append({"text": s, "ids": ids, "spm_pieces": tok.spm_target.encode(s, out_type=str),
                              "spm_normalized": tok.spm_target.normalize(s)})
    rng = random.Random(SEED + 1)
    V = len(vocab)
    pad = vocab["<pad>"]
    tag_ids = [vocab[f">>{t}<<"] for t in LANG_TAGS]
    src_only = [i for p, i in vocab.items() if tok.spm_target.piece_to_id(p) == tok.spm_target.unk_id()
                and p not in ("</s>", "<unk>", "<pad>")][:300]
    id_seqs = [r["ids"] for r in target_encode]
    id_seqs += [[pad] + r["ids"] for r in target_encode[:50]]          # as generate() returns them
    id_seqs += [[pad, 0], [0], [], [1], [pad], [pad, pad, 5, 0, pad], [V], [V + 100], [0, 0, 0], [1, 1, 2, 2]]
    id_seqs += [[t, 2] + id_seqs[i][:-1] for i, t in enumerate(tag_ids)]
    for i in range(300):
        n = rng.randrange(1, 25)
        seq = []
        for _ in range(n):
            r = rng.random()
            if r < 0.55:
                seq.append(rng.randrange(2, V - 1))
            elif r < 0.7:
                seq.append(rng.choice(src_only))
            elif r < 0.8:
                seq.append(rng.choice([0, 1, pad]))
            elif r < 0.9:
                seq.append(rng.choice(tag_ids))
            else:
                seq.append(vocab.get("▁", 2))
        id_seqs.append(seq)
    decode = []
    for ids in id_seqs:
        decode.append({"ids": ids, "text": tok.decode(ids, skip_special_tokens=True),
                       "text_with_special": tok.decode(ids, skip_special_tokens=False),
                       "tokens": tok.convert_ids_to_tokens(ids)})
    out = {
        "format": "tolk-tokenizer-golden/1",
        "model_dir": "marian-tiny",
        "made_by": "tools/make_fixtures.py step tokgold",
        "versions": {"transformers": transformers.__version__, "sentencepiece": sentencepiece.__version__},
        "settings": {"eos_token_id": tok.eos_token_id, "unk_token_id": tok.unk_token_id,
                     "pad_token_id": tok.pad_token_id, "model_max_length": tok.model_max_length,
                     "clean_up_tokenization_spaces": bool(tok.clean_up_tokenization_spaces),
                     "vocab_size": len(vocab), "supported_language_codes": tok.supported_language_codes},
        "encode": encode,
        "target_encode": target_encode,
        "decode": decode,
    }
    write_json(GOLD / "tokenizer.json", out, indent=None)
    log(f"tokgold: {len(encode)} source sentences, {len(target_encode)} target sentences, {len(decode)} decodes")


# ----------------------------------------------------------------------------------------------------------
# 4. model: MarianMTModel from the config, seeded init, then a short seeded training run on the pairs
# ----------------------------------------------------------------------------------------------------------

TRAIN_STEPS = 1500
TRAIN_BATCH = 48


def _deterministic_torch():
    import torch
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


def build_model(model_dir: Path, train_steps: int):
    """Seeded random init (transformers' own _init_weights, init_std 0.02).  A purely random Marian decoder
    repeats one token forever and has near-ties everywhere, which makes useless generate() goldens, so the
    tiny model is then trained for a few hundred seeded steps on the parallel catalogue strings (single
    thread, deterministic algorithms): its distributions are peaked, it emits </s> at varied lengths and its
    output even resembles Chinese.  The <pad> row of the tied embedding stays zero (the tied LM head would
    otherwise train it).  Only model.safetensors is written; config.json stays the hand-written one."""
    import torch
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer
    _deterministic_torch()
    cfg = MarianConfig.from_pretrained(str(model_dir))
    model = MarianMTModel(cfg)
    if train_steps:
        tok = MarianTokenizer.from_pretrained(str(model_dir))
        pairs = read_pairs()
        rng = random.Random(SEED + 2)
        rng.shuffle(pairs)
        data = []
        for tag, en, zh in pairs:
            src = tok(f">>{tag}<< {en}").input_ids
            tgt = tok(text_target=zh).input_ids
            if len(src) <= 48 and len(tgt) <= 48:
                data.append((src, tgt))
        log(f"model: training {train_steps} steps on {len(data)} pairs")
        opt = torch.optim.Adam(model.parameters(), lr=2e-3)
        model.train()
        pad = cfg.pad_token_id
        for step in range(train_steps):
            batch = [data[(step * TRAIN_BATCH + i) % len(data)] for i in range(TRAIN_BATCH)]
            ls = max(len(a) for a, _ in batch)
            lt = max(len(b) for _, b in batch)
            ids = torch.tensor([a + [pad] * (ls - len(a)) for a, _ in batch])
            mask = torch.tensor([[1] * len(a) + [0] * (ls - len(a)) for a, _ in batch])
            labels = torch.tensor([b + [-100] * (lt - len(b)) for _, b in batch])
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.no_grad():  # keep <pad>'s embedding zero, as in every converted opus-mt model: the
                model.model.shared.weight[pad].zero_()  # decoder starts from it (CTranslate2 relies on it)
            if step % 250 == 0 or step == train_steps - 1:
                log(f"model: step {step} loss {loss.item():.3f}")
        model.eval()
    tmp = model_dir / "_save"
    model.save_pretrained(str(tmp), safe_serialization=True)
    shutil.copyfile(tmp / "model.safetensors", model_dir / "model.safetensors")
    shutil.rmtree(tmp)
    return model


def step_model(args):
    build_model(TINY, TRAIN_STEPS)


# ----------------------------------------------------------------------------------------------------------
# 5. export: tools/export.py on marian-tiny, fp32 + int8, into marian-tiny/
# ----------------------------------------------------------------------------------------------------------

def _import_export():
    sys.path.insert(0, str(ROOT / "tools"))
    import export  # tools/export.py
    return export


def export_into(model_dir: Path, out_dir: Path):
    """Run tools/export.py (the user tool itself) into a temporary folder, then move the ONNX files,
    special_tokens_map.json and tolk-manifest.json next to the model's own files."""
    import tempfile
    exp = _import_export()
    with tempfile.TemporaryDirectory(prefix="tolk-fixture-export-") as tmp:
        rc = exp.main([str(model_dir), tmp, "--quantize", "int8", "--offline", "--reproducible"])
        if rc != 0:
            raise SystemExit(f"tools/export.py failed with status {rc}")
        for f in sorted(Path(tmp).iterdir()):
            # special_tokens_map.json is written by the export and listed in its manifest.
            if f.suffix == ".onnx" or f.name in ("tolk-manifest.json", "special_tokens_map.json"):
                shutil.copyfile(f, out_dir / f.name)


def step_export(args):
    export_into(TINY, TINY)


# ----------------------------------------------------------------------------------------------------------
# 6. ONNX goldens: test_data_set_N/{input_K,output_K}.pb per graph, run by ONNX Runtime
# ----------------------------------------------------------------------------------------------------------

GOLD_SENTENCES = [
    ">>cmn_Hans<< Hello world.",
    ">>cmn_Hans<< The file cannot be opened because the directory does not exist.",
    ">>cmn_Hant<< yes",
]


def _save_set(d: Path, names_in, arrays_in, names_out, arrays_out):
    import numpy as np
    from onnx import numpy_helper
    d.mkdir(parents=True, exist_ok=True)
    for i, (n, a) in enumerate(zip(names_in, arrays_in)):
        t = numpy_helper.from_array(np.ascontiguousarray(a), name=n)
        (d / f"input_{i}.pb").write_bytes(t.SerializeToString())
    for i, (n, a) in enumerate(zip(names_out, arrays_out)):
        t = numpy_helper.from_array(np.ascontiguousarray(a), name=n)
        (d / f"output_{i}.pb").write_bytes(t.SerializeToString())


def _run_and_save(sess, feed: dict, d: Path, desc: str, index: list, graph: str):
    names_in = [i.name for i in sess.get_inputs()]
    arrays_in = [feed[n] for n in names_in]
    names_out = [o.name for o in sess.get_outputs()]
    outs = sess.run(None, {n: feed[n] for n in names_in})
    _save_set(d, names_in, arrays_in, names_out, outs)
    index.append({"graph": graph, "dir": str(d.relative_to(GOLD)), "description": desc,
                  "inputs": [{"name": n, "dtype": str(a.dtype), "shape": list(a.shape)} for n, a in zip(names_in, arrays_in)],
                  "outputs": [{"name": n, "dtype": str(a.dtype), "shape": list(a.shape)} for n, a in zip(names_out, outs)]})
    return dict(zip(names_out, outs))


def _int8_intermediates(model_path: Path, feed: dict, d: Path, index: list):
    """Expose the first DynamicQuantizeLinear and MatMulInteger results of a quantized graph as extra outputs
    (graph optimisations off, so nothing is fused away) and save them — integer stages a C int8 path can be
    checked against before the float rescale."""
    import onnx
    import onnxruntime as ort
    m = onnx.load(str(model_path))
    want = []
    for n in m.graph.node:
        if n.op_type == "DynamicQuantizeLinear" and not any(w[0] == "DynamicQuantizeLinear" for w in want):
            want += [("DynamicQuantizeLinear", o) for o in n.output]
        if n.op_type == "MatMulInteger" and not any(w[0] == "MatMulInteger" for w in want):
            want.append(("MatMulInteger", n.output[0]))
    for _, o in want:
        m.graph.output.append(onnx.helper.make_empty_tensor_value_info(o))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names_in = [i.name for i in sess.get_inputs()]
    outs = sess.run([o for _, o in want], {n: feed[n] for n in names_in})
    _save_set(d, names_in, [feed[n] for n in names_in], [o for _, o in want], outs)
    index.append({"graph": model_path.name, "dir": str(d.relative_to(GOLD)),
                  "description": "integer intermediates: outputs are " + ", ".join(f"{k} -> {o}" for k, o in want)
                                 + " (ORT with graph optimisations disabled); inputs as the graph's",
                  "inputs": [{"name": n, "dtype": str(feed[n].dtype), "shape": list(feed[n].shape)} for n in names_in],
                  "outputs": [{"name": o, "dtype": str(a.dtype), "shape": list(a.shape)} for (_, o), a in zip(want, outs)]})


def step_onnxgold(args):
    import numpy as np
    import onnxruntime as ort
    from transformers import MarianConfig, MarianTokenizer
    tok = MarianTokenizer.from_pretrained(str(TINY))
    cfg = MarianConfig.from_pretrained(str(TINY))
    H, hd = cfg.decoder_attention_heads, cfg.d_model // cfg.decoder_attention_heads
    start = cfg.decoder_start_token_id
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    out_root = GOLD / "marian-tiny"
    if out_root.exists():
        shutil.rmtree(out_root)
    index = []
    for suffix in ("", "_quantized"):
        S = {n: ort.InferenceSession(str(TINY / f"{n}{suffix}.onnx"), so, providers=["CPUExecutionProvider"])
             for n in ("encoder_model", "decoder_model", "decoder_with_past_model", "decoder_model_merged")}
        for si, sents in enumerate([GOLD_SENTENCES[:1], GOLD_SENTENCES]):
            enc = tok(sents, return_tensors="np", padding=True)
            feed = {"input_ids": enc["input_ids"].astype(np.int64), "attention_mask": enc["attention_mask"].astype(np.int64)}
            B = feed["input_ids"].shape[0]
            what = f"batch {B}: " + " | ".join(sents) + (" (right-padded with <pad>, mask 0)" if B > 1 else "")
            eo = _run_and_save(S["encoder_model"], feed, out_root / f"encoder_model{suffix}" / f"test_data_set_{si}",
                               "encoder, " + what, index, f"encoder_model{suffix}.onnx")
            hidden = eo["last_hidden_state"]
            # decoder without past: set 0 = the first step ([start]); set 1 = three tokens at once (teacher forcing)
            dec_ids = np.full((B, 1), start, dtype=np.int64) if si == 0 else \
                np.array([[start, 2, 7]] * B, dtype=np.int64)
            dfeed = {"input_ids": dec_ids, "encoder_hidden_states": hidden, "encoder_attention_mask": feed["attention_mask"]}
            do = _run_and_save(S["decoder_model"], dfeed, out_root / f"decoder_model{suffix}" / f"test_data_set_{si}",
                               f"decoder first pass, decoder input_ids {dec_ids[0].tolist()}, " + what, index,
                               f"decoder_model{suffix}.onnx")
            # with past: the next token (argmax of the last logits) with the cache from decoder_model
            nxt = do["logits"][:, -1, :].argmax(-1).astype(np.int64)[:, None]
            pfeed = {"input_ids": nxt, "encoder_attention_mask": feed["attention_mask"]}
            pfeed.update({k.replace("present", "past_key_values"): v for k, v in do.items() if k != "logits"})
            _run_and_save(S["decoder_with_past_model"], pfeed,
                          out_root / f"decoder_with_past_model{suffix}" / f"test_data_set_{si}",
                          f"decoder step with past (past length {dec_ids.shape[1]}), input_ids = argmax of the "
                          f"previous logits, past = decoder_model{suffix} test_data_set_{si} outputs; " + what,
                          index, f"decoder_with_past_model{suffix}.onnx")
            # merged: use_cache_branch false (empty past tensors) then true
            mfeed = dict(dfeed)
            mfeed["use_cache_branch"] = np.array([False])
            for i in S["decoder_model_merged"].get_inputs():
                if i.name.startswith("past_key_values"):
                    mfeed[i.name] = np.zeros((B, H, 0, hd), dtype=np.float32)
            mo = _run_and_save(S["decoder_model_merged"], mfeed,
                               out_root / f"decoder_model_merged{suffix}" / f"test_data_set_{2 * si}",
                               "merged decoder, use_cache_branch=false (past inputs empty, length 0), decoder "
                               f"input_ids {dec_ids[0].tolist()}, " + what, index, f"decoder_model_merged{suffix}.onnx")
            mfeed2 = {"input_ids": nxt, "encoder_hidden_states": hidden, "encoder_attention_mask": feed["attention_mask"],
                      "use_cache_branch": np.array([True])}
            mfeed2.update({k.replace("present", "past_key_values"): v for k, v in mo.items() if k != "logits"})
            _run_and_save(S["decoder_model_merged"], mfeed2,
                          out_root / f"decoder_model_merged{suffix}" / f"test_data_set_{2 * si + 1}",
                          "merged decoder, use_cache_branch=true, past = the previous set's present outputs "
                          "(its present.*.encoder.* outputs in this branch are not meaningful and are "
                          "compared only if a test wants to); " + what, index, f"decoder_model_merged{suffix}.onnx")
            if suffix and si == 0:
                _int8_intermediates(TINY / "encoder_model_quantized.onnx", feed,
                                    out_root / "encoder_model_quantized" / "intermediates_set_0", index)
    write_json(out_root / "index.json", {
        "format": "tolk-onnx-golden/1",
        "runtime": f"onnxruntime {ort.__version__}, CPUExecutionProvider, default graph optimisations, 1 thread",
        "tolerance_hint": {"fp32": "atol 1e-4 (ORT vs PyTorch agree to ~1e-5)",
                           "int8": "atol 1e-2 on hidden states/logits; exact on integer intermediates "
                                   "except rare round-half ties"},
        "sets": index}, indent=1)
    log(f"onnxgold: {len(index)} test data sets")


# ----------------------------------------------------------------------------------------------------------
# 7. generate() goldens from PyTorch transformers
# ----------------------------------------------------------------------------------------------------------

GEN_SENTENCES = [
    ">>cmn_Hans<< Hello world.",
    ">>cmn_Hans<< The file cannot be opened because the directory does not exist.",
    ">>cmn_Hans<< Print version information and exit.",
    ">>cmn_Hans<< Cannot open package list",
    ">>cmn_Hant<< Display this help and exit.",
    ">>cmn_Hans<< How are you today?",
    ">>yue_Hant<< Unknown option",
    ">>cmn_Hans<< Remove all files in the directory, then try again with a different user name.",
]


def step_generate(args):
    import torch
    import transformers
    from transformers import MarianMTModel, MarianTokenizer
    _deterministic_torch()
    tok = MarianTokenizer.from_pretrained(str(TINY))
    model = MarianMTModel.from_pretrained(str(TINY)).eval()
    cases = []

    def run(name, sents, **kw):
        enc = tok(sents, return_tensors="pt", padding=True)
        with torch.no_grad():
            out = model.generate(**enc, output_scores=True, return_dict_in_generate=True, **kw)
        rec = {"name": name, "inputs": sents, "input_ids": enc["input_ids"].tolist(),
               "attention_mask": enc["attention_mask"].tolist(), "params": kw,
               "sequences": out.sequences.tolist(),
               "texts": tok.batch_decode(out.sequences, skip_special_tokens=True)}
        if getattr(out, "sequences_scores", None) is not None:
            rec["sequences_scores"] = [float(x) for x in out.sequences_scores]
        else:  # greedy: the processed (log-softmax, renormalised) score of each chosen token, and the margin
            steps = torch.stack(out.scores, 1)          # [B, T, V]
            chosen = out.sequences[:, 1:1 + steps.shape[1]]
            rec["token_scores"] = steps.gather(-1, chosen[..., None])[..., 0].tolist()
            top2 = steps.topk(2, -1).values
            rec["min_top2_margin"] = float((top2[..., 0] - top2[..., 1]).min())
        cases.append(rec)

    for i, s in enumerate(GEN_SENTENCES):
        run(f"greedy_{i}", [s], num_beams=1, do_sample=False, max_new_tokens=64)
    for i, s in enumerate(GEN_SENTENCES):
        run(f"beam4_lp1.0_{i}", [s], num_beams=4, length_penalty=1.0, max_new_tokens=64)
        run(f"beam4_lp0.6_{i}", [s], num_beams=4, length_penalty=0.6, max_new_tokens=64)
    run("batch_greedy_padded", GEN_SENTENCES[:5], num_beams=1, do_sample=False, max_new_tokens=64)
    run("batch_beam4_padded", GEN_SENTENCES[:5], num_beams=4, length_penalty=1.0, max_new_tokens=64)
    for n in (1, 2, 5):
        run(f"greedy_max_new_{n}", GEN_SENTENCES[1:3], num_beams=1, do_sample=False, max_new_tokens=n)
        run(f"beam4_max_new_{n}", GEN_SENTENCES[1:3], num_beams=4, max_new_tokens=n)
    run("beam4_return2", GEN_SENTENCES[:3], num_beams=4, num_return_sequences=2, max_new_tokens=64)
    run("beam4_return2_lp0.6", GEN_SENTENCES[:3], num_beams=4, num_return_sequences=2, length_penalty=0.6,
        max_new_tokens=64)
    run("defaults_generation_config", GEN_SENTENCES[:2])   # num_beams 4, max_length 512 from generation_config.json
    gc = model.generation_config.to_dict()
    write_json(GOLD / "generate.json", {
        "format": "tolk-generate-golden/1", "model_dir": "marian-tiny",
        "versions": {"transformers": transformers.__version__, "torch": torch.__version__},
        "generation_config": {k: gc[k] for k in sorted(gc) if k in (
            "bad_words_ids", "bos_token_id", "decoder_start_token_id", "eos_token_id", "forced_eos_token_id",
            "max_length", "num_beams", "pad_token_id", "renormalize_logits", "length_penalty", "early_stopping",
            "no_repeat_ngram_size", "repetition_penalty")},
        "cases": cases}, indent=None)
    log(f"generate: {len(cases)} cases")


# ----------------------------------------------------------------------------------------------------------
# 8. simple-cnn (seed article 004)
# ----------------------------------------------------------------------------------------------------------

def step_cnn(args):
    import numpy as np
    import torch
    import torch.nn as nn
    _deterministic_torch()

    class SimpleCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 16, kernel_size=3, padding=1)
            self.conv2 = nn.Conv2d(16, 32, kernel_size=3, padding=1)
            self.fc = nn.Linear(32 * 8 * 8, 10)

        def forward(self, x):
            x = torch.relu(self.conv1(x))
            x = torch.max_pool2d(x, 2)
            x = torch.relu(self.conv2(x))
            x = torch.max_pool2d(x, 2)
            x = x.view(x.size(0), -1)
            return self.fc(x)

    model = SimpleCNN().eval()
    d = FIX / "simple-cnn"
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    dummy = torch.randn(1, 3, 32, 32)
    torch.onnx.export(model, dummy, str(d / "model.onnx"), export_params=True, opset_version=13,
                      do_constant_folding=True, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch_size"}, "output": {0: "batch_size"}}, dynamo=False)
    for i, b in enumerate((1, 7)):
        x = torch.randn(b, 3, 32, 32)
        with torch.no_grad():
            y = model(x)
        _save_set(d / f"test_data_set_{i}", ["input"], [x.numpy()], ["output"], [y.numpy()])
    log("cnn: simple-cnn/model.onnx with batch 1 and 7 sets")


# ----------------------------------------------------------------------------------------------------------
# 9. MANIFEST: size + sha256 of every fixture file (checked by tests/check_fixtures.cmake, no Python needed)
# ----------------------------------------------------------------------------------------------------------

def step_manifest(args):
    files = []
    for p in sorted(FIX.rglob("*")):
        if p.is_file() and p.name not in ("MANIFEST", "README.md") and "__pycache__" not in p.parts:
            files.append(p)
    lines = ["# tolk fixture manifest: sha256 size path (relative to tests/fixtures). Regenerate with",
             "# /work/venv/bin/python tools/make_fixtures.py --steps manifest ; checked by tests/check_fixtures.cmake"]
    total = 0
    for p in files:
        size = p.stat().st_size
        total += size
        lines.append(f"{sha256_file(p)} {size} {p.relative_to(FIX).as_posix()}")
    (FIX / "MANIFEST").write_text("\n".join(lines) + "\n", encoding="utf-8")
    log(f"manifest: {len(files)} files, {total / 1e6:.2f} MB")



def step_selfcheck(args):
    """Read every committed test_data_set back, run its graph with ONNX Runtime and compare (writes nothing)."""
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, numpy_helper

    def load(p):
        t = TensorProto()
        t.ParseFromString(p.read_bytes())
        return t.name, numpy_helper.to_array(t)

    so = ort.SessionOptions()
    so.log_severity_level = 3
    worst = {}
    dirs = sorted(GOLD.glob("marian-tiny/*/test_data_set_*")) + sorted((FIX / "simple-cnn").glob("test_data_set_*"))
    for d in dirs:
        model = (FIX / "simple-cnn" / "model.onnx") if d.parent.name == "simple-cnn" else (TINY / f"{d.parent.name}.onnx")
        sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
        ins = dict(load(p) for p in sorted(d.glob("input_*.pb")))
        outs = [load(p) for p in sorted(d.glob("output_*.pb"), key=lambda p: int(p.stem.split("_")[1]))]
        got = sess.run([n for n, _ in outs], ins)
        for (n, want), g in zip(outs, got):
            if want.size == 0 and g.size == 0:
                continue
            diff = float(np.abs(want.astype(np.float64) - g.astype(np.float64)).max()) if want.size else 0.0
            key = model.relative_to(FIX).as_posix()
            worst[key] = max(worst.get(key, 0.0), diff)
    for k, v in sorted(worst.items()):
        log(f"selfcheck: {k}: max abs difference re-run vs golden {v:.3g}")
    bad = {k: v for k, v in worst.items() if v > (1e-5 if "simple-cnn" in k or "quantized" not in k else 1e-3)}
    if bad:
        raise SystemExit(f"selfcheck failed: {bad}")

# ----------------------------------------------------------------------------------------------------------
# --bench-model: the full-size opus-mt-en-zh stand-in (not committed)
# ----------------------------------------------------------------------------------------------------------

def bench_model(out: Path) -> int:
    """DIR/hf: HF model folder at opus-mt-en-zh's full size (d_model 512, 6+6 layers, 8 heads, ffn 2048,
    vocab 65001 = the trained tokenizer's pieces + placeholder pieces, <pad> = 65000), seeded random weights.
    DIR/onnx: tools/export.py fp32 + int8 (tolk-manifest.json included).
    DIR/ct2-int8, DIR/ct2-float32: ct2-transformers-converter of the same weights."""
    hf = out / "hf"
    if hf.exists():
        shutil.rmtree(hf)
    vocab = write_tokenizer_files(hf, pad_to=FULL_VOCAB)
    assert len(vocab) == FULL_VOCAB and vocab["<pad>"] == FULL_VOCAB - 1
    write_json(hf / "config.json", marian_config(len(vocab), FULL_SIZES), indent=2)
    write_json(hf / "generation_config.json", generation_config(len(vocab)), indent=2)
    log("bench: random-weight full-size model")
    build_model(hf, 0)
    import torch
    torch.use_deterministic_algorithms(False)
    torch.set_num_threads(os.cpu_count() or 1)
    rc = bench_convert(hf, out)
    if rc == 0:
        log(f"bench: done in {out}")
    return rc


def bench_convert(hf: Path, out: Path) -> int:
    """The engines' copies of the HF folder hf: OUT/onnx (tools/export.py fp32 + int8) and OUT/ct2-int8,
    OUT/ct2-float32 (ct2-transformers-converter).  Shared with tools/bench_from_bundled.py."""
    exp = _import_export()
    onnx_dir = out / "onnx"
    rc = exp.main([str(hf), str(onnx_dir), "--quantize", "int8", "--offline"])
    if rc != 0:
        log(f"bench: tools/export.py returned {rc}")
        return rc
    conv = shutil.which("ct2-transformers-converter") or str(Path(sys.executable).parent / "ct2-transformers-converter")
    for q in ("int8", "float32"):
        d = out / f"ct2-{q}"
        cmd = [conv, "--model", str(hf), "--output_dir", str(d), "--quantization", q, "--force",
               "--copy_files", "source.spm", "target.spm", "generation_config.json"]
        log("bench:", " ".join(cmd))
        subprocess.run(cmd, check=True, env=dict(os.environ, HF_HUB_OFFLINE="1"))
    return 0

# ----------------------------------------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------------------------------------

STEPS = ["tokenizer", "tokgold", "model", "export", "onnxgold", "generate", "cnn", "manifest", "selfcheck"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", default=",".join(STEPS),
                    help="comma-separated subset of: " + ",".join(STEPS) + " (default: all, in that order)")
    ap.add_argument("--refresh-corpus", action="store_true",
                    help="re-extract tests/fixtures/corpus/ from this machine's Debian message catalogues first")
    ap.add_argument("--bench-model", metavar="DIR",
                    help="instead of the fixtures, build the full-size opus-mt-en-zh stand-in in DIR (not committed)")
    args = ap.parse_args(argv)
    if os.environ.get("PYTHONHASHSEED") != "0" and argv is None:
        # Optimum's decoder merge deduplicates initializers through sets of names: with Python's per-process
        # string hashing, which duplicate's name survives changes run to run.  Fixed hashing makes
        # decoder_model_merged*.onnx byte-identical between runs.
        os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, PYTHONHASHSEED="0"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.refresh_corpus or not (CORPUS / "en.txt.xz").exists():
        step_corpus(args)
    elif not (CORPUS / "pairs.tsv.xz").exists():
        extract_pairs()
    if args.bench_model:
        return bench_model(Path(args.bench_model).resolve())
    steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    for s in steps:
        if s not in STEPS:
            ap.error(f"unknown step {s!r}")
    for s in STEPS:
        if s in steps:
            log("step", s)
            globals()["step_" + s](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
