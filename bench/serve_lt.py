#!/usr/bin/env python3
"""LibreTranslate (PyPI libretranslate) on the benchmark model's weights, offline: lays out an Argos
package from the CTranslate2 conversion bench/ already has (MODEL/ct2-float32 or ct2-int8 +
source.spm) in a private ARGOS_PACKAGES_DIR and serves it, so that nothing is fetched at start.
bench/serve_bench.py starts it through command() as its libretranslate-fp32/-int8 rows.

What a stock LibreTranslate fetches, and what this does instead:
  - the Argos package index, on start, when fewer than two packages are installed. Offline, Argos
    asks again each time it finds no local copy, ~1,000 times until Python's recursion limit (4 min
    here). ARGOS_PACKAGE_INDEX points at an empty index under WORK instead: LibreTranslate reads it,
    finds no package to fetch and carries on ("Cannot update models (normal if you're offline)");
  - a sentence-boundary model at the first translation: MiniSBD's (the default), Stanza's or spaCy's
    xx_sent_ud_sm, all from GitHub releases, which this machine cannot reach. The package carries a
    blank spaCy pipeline instead (spacy.blank("xx"), to which Argos adds spaCy's rule-based
    sentencizer), selected with ARGOS_CHUNK_TYPE=SPACY.

Argos encodes each sentence with the package's SentencePiece model and hands the pieces to
CTranslate2 as they are; an Argos package has no source prefix. The Marian model wants the target tag
first and </s> last (what tolk serve and the ct2 peer add), so the package's model/config.json asks
CTranslate2 for them: add_source_bos with bos_token ">>cmn_Hans<<", add_source_eos.

Argos's decoding settings come from its environment (argostranslate/settings.py): ARGOS_BEAM_SIZE
(default 4; beam = max(alternatives + 1, it)), ARGOS_INTER_THREADS (1) and ARGOS_INTRA_THREADS (0:
all cores) of the ctranslate2.Translator, ARGOS_COMPUTE_TYPE (auto). The length is not settable:
translate_batch gets no max_decoding_length, so CTranslate2's 256 applies.

    python bench/serve_lt.py [--model /tmp/tolk-bench] [--precision fp32] [--beam 4] [--port 8195]

Runs LibreTranslate from its own virtual environment (bench/lt_venv.sh makes /tmp/lt-venv with the
pins of bench/lt-requirements.txt; its pins conflict with the rest of the stack). Prints "listening on
URL" when it answers, then one translation.
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
from pathlib import Path

TAG = ">>cmn_Hans<<"  # as bench/serve_peer.py


def build_package(model, packages, python, precision):
    """The package directory Argos would unpack from a .argosmodel, laid out in place: the model's
    files linked, its config.json rewritten to add the tag and </s> to every sentence."""
    pkg = packages / "translate-en_zh-bench"
    if pkg.exists():
        shutil.rmtree(pkg)
    (pkg / "model").mkdir(parents=True)
    ct2 = model / ("ct2-int8" if precision == "int8" else "ct2-float32")
    for f in ct2.iterdir():
        if f.name != "config.json":
            (pkg / "model" / f.name).symlink_to(f.resolve())
    cfg = json.loads((ct2 / "config.json").read_text())
    cfg.update(add_source_bos=True, bos_token=TAG, add_source_eos=True)
    (pkg / "model" / "config.json").write_text(json.dumps(cfg, indent=2))
    shutil.copy(model / "hf" / "source.spm", pkg / "sentencepiece.model")
    (pkg / "metadata.json").write_text(json.dumps({
        "package_version": "1.0", "argos_version": "1.9", "from_code": "en", "from_name": "English",
        "to_code": "zh", "to_name": "Chinese", "type": "translate"}))
    subprocess.run([python, "-c", f"import spacy; spacy.blank('xx').to_disk({str(pkg / 'spacy')!r})"], check=True)


def command(model, work, port, threads, beam, precision, python):
    """Builds the package under WORK and returns (argv, environment) that serve it on PORT."""
    work = Path(work).resolve()
    (work / "index").mkdir(parents=True, exist_ok=True)
    (work / "index" / "index.json").write_text("[]")
    build_package(Path(model), work / "packages", python, precision)
    env = dict(os.environ, ARGOS_PACKAGES_DIR=str(work / "packages"), ARGOS_PACKAGE_INDEX=f"file://{work / 'index'}/",
               ARGOS_CHUNK_TYPE="SPACY",
               ARGOS_DEVICE_TYPE="cpu", ARGOS_INTER_THREADS="1", ARGOS_INTRA_THREADS=str(threads),
               ARGOS_BEAM_SIZE=str(beam), ARGOS_COMPUTE_TYPE="int8" if precision == "int8" else "float32",
               XDG_DATA_HOME=str(work / "data"), XDG_CACHE_HOME=str(work / "cache"),
               XDG_CONFIG_HOME=str(work / "config"), HF_HUB_OFFLINE="1")
    # --threads is waitress's request threads (LibreTranslate's default 4); the model runs on one
    # CTranslate2 worker of `threads` threads, which takes the requests' batches one at a time.
    argv = [str(Path(python).parent / "libretranslate"), "--host", "127.0.0.1", "--port", str(port),
            "--load-only", "en,zh", "--disable-web-ui", "--threads", "4"]
    return argv, env


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="/tmp/tolk-bench")
    ap.add_argument("--precision", choices=["fp32", "int8"], default="fp32")
    ap.add_argument("--beam", type=int, default=4, help="ARGOS_BEAM_SIZE (Argos's default 4)")
    ap.add_argument("--port", type=int, default=8195)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--python", default="/tmp/lt-venv/bin/python")
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    work = Path(a.work or tempfile.mkdtemp(prefix="tolk-lt-"))
    argv, env = command(a.model, work, a.port, a.threads, a.beam, a.precision, a.python)
    log = open(work / "libretranslate.log", "w")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{a.port}"
    t0 = time.monotonic()
    while time.monotonic() - t0 < 300:
        if proc.poll() is not None:
            sys.exit(f"libretranslate exited {proc.returncode}: {(work / 'libretranslate.log').read_text()[-2000:]}")
        try:
            urllib.request.urlopen(url + "/health", timeout=2).read()
            break
        except OSError:
            time.sleep(0.5)
    print(f"listening on {url} after {time.monotonic() - t0:.1f} s (log {work}/libretranslate.log)", flush=True)
    req = urllib.request.Request(url + "/translate", data=json.dumps({"q": "Open the file.", "source": "en",
                                                                        "target": "zh", "format": "text"}).encode(),
                                 headers={"Content-Type": "application/json"})
    t = time.monotonic()
    with urllib.request.urlopen(req, timeout=300) as r:
        print(f"one sentence: {time.monotonic() - t:.2f} s, {r.read().decode()[:200]}", flush=True)
    proc.terminate()
    proc.wait(30)


if __name__ == "__main__":
    main()
