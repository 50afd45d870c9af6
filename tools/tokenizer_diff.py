#!/usr/bin/env python3
"""Differential check of tolk's tokenizer against the reference.

Generates strings with a seeded generator that tests/test_tokenizer_diff.c
reimplements exactly (splitmix64 + the category table below), encodes them with
the reference (transformers' MarianTokenizer for the Marian fixture;
sentencepiece for the models in tests/data/spm), decodes seeded random id
sequences, and writes FNV-1a-64 hashes of the results, per block of 1,000, to
tests/data/tokenizer_diff.json. The C test recomputes them with
tolk; a differing block names the strings to look at (--show BLOCK prints
them with the reference output).

Run: /work/venv/bin/python tools/tokenizer_diff.py [--count N] [--show KIND:BLOCK]
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MASK = (1 << 64) - 1
BLOCK = 1000
SEED = 0x70C4_2026


class Rng:
    def __init__(self, seed):
        self.s = seed & MASK

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & MASK
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, n):
        return self.next() % n


WS = [0x20, 0x20, 0x20, 0x09, 0x0A, 0x0D, 0x3000, 0xA0, 0x2009, 0x200A]
ZW = [0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x2060, 0xFEFF, 0xFE0F]
COMPAT = [(0xFF01, 0xFF5E), (0xFB00, 0xFB06), (0x2460, 0x24FF), (0x2070, 0x209F),
          (0x2160, 0x217F), (0x3300, 0x33FF), (0xFF61, 0xFF9F), (0x1D400, 0x1D4FF)]
WORDS = [">>cmn_Hans<<", ">>yue_Hant<<", ">>cmn_Hant<<", ">>", "<<", "</s>", "<unk>", "<pad>",
         ">>xx<<", "%s", "<x>", "http://example.com/a?b=1", "user@example.org", "3.14",
         "...", "\u2026", "don't", "e\u0301", "\U0001F469\u200D\U0001F4BB"]

# (weight, category); weights sum to 100
CATS = [(38, "ascii"), (10, "ws"), (6, "latin"), (4, "combining"), (12, "cjk"), (6, "compat"),
        (3, "control"), (5, "zw_emoji"), (5, "any"), (9, "word"), (2, "longword")]


def gen_char(r, out):
    w = r.below(100)
    for weight, cat in CATS:
        if w < weight:
            break
        w -= weight
    if cat == "ascii":
        out.append(0x20 + r.below(0x5F))
    elif cat == "ws":
        n = 1 + r.below(4)
        c = WS[r.below(len(WS))]
        out.extend([c] * n)
    elif cat == "latin":
        out.append(0xC0 + r.below(0xC0))
    elif cat == "combining":
        out.append(0x300 + r.below(0x70))
    elif cat == "cjk":
        out.append(0x4E00 + r.below(0x5200))
    elif cat == "compat":
        lo, hi = COMPAT[r.below(len(COMPAT))]
        out.append(lo + r.below(hi - lo + 1))
    elif cat == "control":
        c = r.below(0x41)
        out.append(c if c < 0x20 else 0x7F + (c - 0x20))
    elif cat == "zw_emoji":
        if r.below(2):
            out.append(ZW[r.below(len(ZW))])
        else:
            out.append(0x1F300 + r.below(0x800))
    elif cat == "any":
        c = r.below(0x110000)
        out.append(0xFFFD if 0xD800 <= c <= 0xDFFF else c)
    elif cat == "word":
        out.extend(ord(ch) for ch in WORDS[r.below(len(WORDS))])
    else:
        n = 50 + r.below(250)
        out.extend(0x61 + r.below(26) for _ in range(n))


def gen_string(i):
    r = Rng(SEED ^ ((i * 0x9E3779B97F4A7C15) & MASK))
    n = r.below(40)
    out = []
    for _ in range(n):
        gen_char(r, out)
    return "".join(chr(c) for c in out)


def gen_ids(i, vocab):
    r = Rng(SEED ^ 0xD1CE ^ ((i * 0x9E3779B97F4A7C15) & MASK))
    return [r.below(vocab) for _ in range(r.below(30))]


def fnv_update(h, data):
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & MASK
    return h


FNV0 = 0xCBF29CE484222325


def hash_ids(h, ids):
    for x in ids:
        h = fnv_update(h, (x & 0xFFFFFFFF).to_bytes(4, "little"))
    return fnv_update(h, b"\xff\xff\xff\xff")


def hash_text(h, s):
    return fnv_update(fnv_update(h, s.encode("utf-8")), b"\x00")


def blocks(count, fn):
    out = []
    h = FNV0
    for i in range(count):
        h = fn(i, h)
        if (i + 1) % BLOCK == 0:
            out.append("%016x" % h)
            h = FNV0
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=100_000)
    ap.add_argument("--spm-count", type=int, default=20_000)
    ap.add_argument("--show", help="KIND:BLOCK, e.g. marian_encode:12")
    args = ap.parse_args()
    from transformers import MarianTokenizer
    import sentencepiece as spm

    tok = MarianTokenizer.from_pretrained(os.path.join(ROOT, "tests", "fixtures", "marian-tiny"))
    vocab = len(tok.encoder)
    models = {}
    spm_dir = os.path.join(ROOT, "tests", "data", "spm")
    for name in sorted(os.listdir(spm_dir)):
        models[name] = spm.SentencePieceProcessor(model_file=os.path.join(spm_dir, name))

    kinds = {
        "marian_encode": (args.count, lambda i, h: hash_ids(h, tok(gen_string(i))["input_ids"])),
        "marian_decode": (args.spm_count, lambda i, h: hash_text(
            hash_text(h, tok.decode(gen_ids(i, vocab), skip_special_tokens=True)),
            tok.decode(gen_ids(i, vocab), skip_special_tokens=False))),
    }
    for name, sp in models.items():
        kinds["spm_encode:" + name] = (args.spm_count,
                                       lambda i, h, sp=sp: hash_ids(h, sp.encode(gen_string(i))))
        kinds["spm_decode:" + name] = (args.spm_count, lambda i, h, sp=sp: hash_text(
            h, sp.decode(gen_ids(i, sp.get_piece_size()))))

    if args.show:
        kind, block = args.show.rsplit(":", 1)
        for i in range(int(block) * BLOCK, (int(block) + 1) * BLOCK):
            s = gen_string(i)
            print(i, repr(s), tok(s)["input_ids"] if kind == "marian_encode" else "")
        return
    result = {"format": "tolk-tokenizer-diff/1", "seed": SEED, "block": BLOCK,
              "made_by": "tools/tokenizer_diff.py", "kinds": {}}
    for kind, (count, fn) in kinds.items():
        result["kinds"][kind] = {"count": count, "blocks": blocks(count, fn)}
        print(kind, count, file=sys.stderr)
    path = os.path.join(ROOT, "tests", "data", "tokenizer_diff.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print("wrote", path)


if __name__ == "__main__":
    main()
