#!/usr/bin/env python3
"""LibreTranslate (PyPI libretranslate) on the benchmark model's weights, offline: builds an Argos
package from the CTranslate2 conversion bench/ already has (MODEL/ct2-float32 + source.spm), installs
it into a private ARGOS_PACKAGES_DIR and serves it, so that nothing is fetched at start.

What a stock LibreTranslate fetches, and what this does instead:
  - the Argos package index, on start, when fewer than two packages are installed: it fails offline
    and LibreTranslate carries on ("Cannot update models (normal if you're offline)");
  - a sentence-boundary model at the first translation: MiniSBD's (the default), Stanza's or spaCy's
    xx_sent_ud_sm, all from GitHub releases, which this machine cannot reach. The package carries a
    blank spaCy pipeline instead (spacy.blank("xx"), to which Argos adds spaCy's rule-based
    sentencizer), selected with ARGOS_CHUNK_TYPE=SPACY.

    python bench/serve_lt.py [--model /tmp/tolk-bench] [--port 8195] [--python /tmp/lt-venv/bin/python]

Runs in a virtual environment with libretranslate==1.9.6 and spacy (its own: its pins conflict with
the rest of the stack). Prints "listening on URL" when it answers, then one translation.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from pathlib import Path


def build_package(model, work, python):
    pkg = work / "translate-en_zh-bench"
    if pkg.exists():
        shutil.rmtree(pkg)
    pkg.mkdir(parents=True)
    shutil.copytree(model / "ct2-float32", pkg / "model")
    shutil.copy(model / "hf" / "source.spm", pkg / "sentencepiece.model")
    (pkg / "metadata.json").write_text(json.dumps({
        "package_version": "1.0", "argos_version": "1.9", "from_code": "en", "from_name": "English",
        "to_code": "zh", "to_name": "Chinese", "type": "translate"}))
    subprocess.run([python, "-c", f"import spacy; spacy.blank('xx').to_disk({str(pkg / 'spacy')!r})"], check=True)
    archive = work / "translate-en_zh-bench.argosmodel"
    with zipfile.ZipFile(archive, "w") as z:
        for f in pkg.rglob("*"):
            z.write(f, f.relative_to(work))
    return archive


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="/tmp/tolk-bench")
    ap.add_argument("--port", type=int, default=8195)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--python", default="/tmp/lt-venv/bin/python")
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    work = Path(a.work or tempfile.mkdtemp(prefix="tolk-lt-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, ARGOS_PACKAGES_DIR=str(work / "packages"), ARGOS_CHUNK_TYPE="SPACY",
               ARGOS_DEVICE_TYPE="cpu", ARGOS_INTRA_THREADS=str(a.threads), XDG_DATA_HOME=str(work / "data"),
               XDG_CACHE_HOME=str(work / "cache"), XDG_CONFIG_HOME=str(work / "config"), HF_HUB_OFFLINE="1")
    archive = build_package(Path(a.model), work, a.python)
    subprocess.run([a.python, "-c", f"import argostranslate.package as p; p.install_from_path({str(archive)!r})"],
                   check=True, env=env)
    lt = Path(a.python).parent / "libretranslate"
    log = open(work / "libretranslate.log", "w")
    proc = subprocess.Popen([str(lt), "--host", "127.0.0.1", "--port", str(a.port), "--load-only", "en,zh",
                             "--disable-web-ui", "--threads", "4"], stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{a.port}"
    t0 = time.monotonic()
    while time.monotonic() - t0 < 120:
        if proc.poll() is not None:
            sys.exit(f"libretranslate exited {proc.returncode}: {(work / 'libretranslate.log').read_text()[-2000:]}")
        try:
            urllib.request.urlopen(url + "/languages", timeout=2).read()
            break
        except OSError:
            time.sleep(0.5)
    print(f"listening on {url} after {time.monotonic() - t0:.1f} s (log {work}/libretranslate.log)", flush=True)
    req = urllib.request.Request(url + "/translate", data=json.dumps({"q": "Open the file.", "source": "en",
                                                                        "target": "zh"}).encode(),
                                 headers={"Content-Type": "application/json"})
    t = time.monotonic()
    with urllib.request.urlopen(req, timeout=300) as r:
        print(f"one sentence: {time.monotonic() - t:.2f} s, {r.read().decode()[:200]}", flush=True)
    proc.terminate()
    proc.wait(30)


if __name__ == "__main__":
    main()
