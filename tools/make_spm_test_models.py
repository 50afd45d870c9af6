#!/usr/bin/env python3
"""Trains the small SentencePiece models in tests/data/spm/ that exercise the
encoder paths the Marian fixture does not: BPE, byte fallback, user-defined
symbols, whitespace as suffix, no whitespace removal, and UNUSED pieces (a
BPE model with every 7th multi-character piece marked unused, which makes
the encoder merge through them and split them back). Trained on the fixture
corpus (tests/fixtures/corpus), seeded by sentencepiece's determinism on a
single thread. Run: /work/venv/bin/python tools/make_spm_test_models.py
"""
import io
import lzma
import os

import sentencepiece as spm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "spm")

SPECS = {
    "bpe-nfkc": dict(model_type="bpe", vocab_size=1200, normalization_rule_name="nmt_nfkc"),
    "bpe-ident": dict(model_type="bpe", vocab_size=800, normalization_rule_name="identity"),
    "unigram-bytefb": dict(model_type="unigram", vocab_size=800, byte_fallback=True,
                           normalization_rule_name="identity"),
    "bpe-bytefb": dict(model_type="bpe", vocab_size=800, byte_fallback=True,
                       normalization_rule_name="identity"),
    "unigram-userdef": dict(model_type="unigram", vocab_size=800,
                            user_defined_symbols=["<x>", "%s", "ab"],
                            normalization_rule_name="identity", remove_extra_whitespaces=False),
    "unigram-suffix": dict(model_type="unigram", vocab_size=800, treat_whitespace_as_suffix=True,
                           normalization_rule_name="identity"),
}


def main():
    corpus = os.path.join(ROOT, "tests", "fixtures", "corpus")
    en = lzma.open(os.path.join(corpus, "en.txt.xz"), "rt", encoding="utf-8").read().splitlines()
    zh = lzma.open(os.path.join(corpus, "zh.txt.xz"), "rt", encoding="utf-8").read().splitlines()
    text = en[:4000] + zh[:1500]
    os.makedirs(OUT, exist_ok=True)
    for name, kw in SPECS.items():
        buf = io.BytesIO()
        spm.SentencePieceTrainer.train(sentence_iterator=iter(text), model_writer=buf,
                                       character_coverage=0.98, num_threads=1, minloglevel=2, **kw)
        with open(os.path.join(OUT, name + ".model"), "wb") as f:
            f.write(buf.getvalue())
        print(name, len(buf.getvalue()), "bytes")
    write_unused_variant()


def write_unused_variant():
    from sentencepiece import sentencepiece_model_pb2 as pb

    m = pb.ModelProto()
    with open(os.path.join(OUT, "bpe-ident.model"), "rb") as f:
        m.ParseFromString(f.read())
    normal = [p for p in m.pieces if p.type == pb.ModelProto.SentencePiece.NORMAL and len(p.piece) > 1]
    for p in normal[::7]:
        p.type = pb.ModelProto.SentencePiece.UNUSED
    data = m.SerializeToString()
    with open(os.path.join(OUT, "bpe-unused.model"), "wb") as f:
        f.write(data)
    print("bpe-unused", len(data), "bytes")


if __name__ == "__main__":
    main()
