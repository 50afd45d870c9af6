"""Helpers the tools/ scripts share: progress lines on stderr, file checksums, text files as lines.

Standard library only, so that scripts without the ML stack (bundle_demo.py) can use it too. A script run
as `python tools/X.py` finds it because Python puts the script's own folder first on sys.path; each sets
sys.dont_write_bytecode before importing it, so that no tools/__pycache__ appears in the work tree.
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path


def logger(tag: str):
    """A log(*a) that prints `[tag] a...` on stderr, flushed at once: the scripts run for minutes, often
    behind a pipe, and their progress should show as it happens."""
    def log(*a):
        print(f"[{tag}]", *a, file=sys.stderr, flush=True)
    return log


def sha256_file(p: Path) -> str:
    """The hex SHA-256 of the file at p, read a MiB at a time (model files run to hundreds of MB)."""
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_lines(p: Path) -> list[str]:
    """The lines of a UTF-8 text file, without their newlines."""
    with open(p, encoding="utf-8") as f:
        return [l.rstrip("\n") for l in f]
