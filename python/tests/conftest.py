"""Paths the tests share: the fixtures of the C tests, the bundled model, the CLI."""
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARIAN_TINY = ROOT / "tests" / "fixtures" / "marian-tiny"
DEMO = ROOT / "models" / "demo-en-zh"
SIMPLE_CNN = ROOT / "tests" / "fixtures" / "simple-cnn" / "model.onnx"
CLI = Path(os.environ.get("TOLK_CLI", ROOT / "build" / "tolk"))


def cli(*args: str) -> str:
    """stdout of `tolk ARGS` (the C program the package's results must match)."""
    if not CLI.exists():
        pytest.skip(f"no CLI at {CLI} (build it, or set TOLK_CLI)")
    return subprocess.run([str(CLI), *args], check=True, capture_output=True, text=True).stdout


def cli_json(*args: str) -> list:
    return [json.loads(line) for line in cli(*args).splitlines()]
