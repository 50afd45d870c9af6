#!/usr/bin/env python3
"""Writes models/doctor-sentences.txt: the 1,000 English sentences `tolk doctor` times (tail latency,
memory) when no --sentences FILE is given.

They are real program messages from tests/fixtures/corpus/en.txt.xz (Debian's gettext catalogues; see
tests/fixtures/README.md for their sources and licences), kept only when they read as prose — a capital
first letter, 3 to 30 words, no printf conversions, option tables or shell syntax — and drawn with a fixed
seed in the corpus's own length mix, so the set has varied lengths as real traffic does. Needs only the
Python standard library; the output is committed, so neither the build nor the tests run this.

    python3 tools/make_doctor_sentences.py            # rewrites models/doctor-sentences.txt
"""
import lzma
import random
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "corpus" / "en.txt.xz"
OUT = ROOT / "models" / "doctor-sentences.txt"
COUNT = 1000
SEED = 20261204

# Not prose: printf conversions, shell and option syntax, markup, paths, code.
NOT_PROSE = re.compile(r"[%$\\`<>{}\[\]|_=@#~^*/]|--|\t|  ")


def prose(line: str) -> bool:
    words = line.split()
    return (3 <= len(words) <= 30 and line[0].isupper() and line.isascii() and not NOT_PROSE.search(line)
            and sum(c.isalpha() for c in line) >= 0.7 * len(line.replace(" ", "")))


def main() -> int:
    lines = lzma.decompress(CORPUS.read_bytes()).decode("utf-8").splitlines()
    pool = sorted({line.strip() for line in lines if prose(line.strip())})
    if len(pool) < COUNT:
        sys.exit(f"only {len(pool)} prose lines in {CORPUS}")
    picked = random.Random(SEED).sample(pool, COUNT)
    OUT.write_text("".join(s + "\n" for s in picked), encoding="utf-8")
    words = sorted(len(s.split()) for s in picked)
    print(f"{OUT}: {COUNT} sentences of {words[0]}-{words[-1]} words (median {words[COUNT // 2]}) "
          f"from {len(pool)} prose lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
