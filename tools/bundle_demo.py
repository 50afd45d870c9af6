#!/usr/bin/env python3
"""Copy what `tolk translate` needs from a tools/export.py folder into models/demo-en-zh (issue 7).

    python3 tools/bundle_demo.py /tmp/demo-en-zh models/demo-en-zh

Only the int8 graphs tolk runs by default for this model (encoder, decoder, decoder_with_past
`*_quantized.onnx`; not the merged graph, which holds the same weights again), the configs and the
tokenizer files: ~16 MB instead of the export's ~100 MB. tolk-manifest.json is rewritten to list exactly
the bundled files (everything else in it — versions, the export's verification figures — is kept), so
`tolk info` and the checksum check cover the whole bundle. Standard library only.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

sys.dont_write_bytecode = True  # no tools/__pycache__ in the work tree
from common import sha256_file  # tools/common.py

FILES = ["config.json", "generation_config.json", "tokenizer_config.json", "special_tokens_map.json",
         "source.spm", "target.spm", "vocab.json", "encoder_model_quantized.onnx",
         "decoder_model_quantized.onnx", "decoder_with_past_model_quantized.onnx"]


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    src, dst = Path(argv[1]), Path(argv[2])
    missing = [f for f in FILES + ["tolk-manifest.json"] if not (src / f).is_file()]
    if missing:
        print(f"bundle_demo: {src} lacks {', '.join(missing)} (run tools/export.py --quantize int8)", file=sys.stderr)
        return 1
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    manifest = json.loads((src / "tolk-manifest.json").read_text())
    by_path = {e["path"]: e for e in manifest.get("files", [])}
    entries = []
    for f in FILES:
        shutil.copyfile(src / f, dst / f)
        e = dict(by_path.get(f, {"path": f}))
        e.update(size=(dst / f).stat().st_size, sha256=sha256_file(dst / f))
        entries.append(e)
    manifest["files"] = entries
    manifest["bundled_by"] = "tools/bundle_demo.py (int8 graphs, configs and tokenizer only)"
    (dst / "tolk-manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    total = sum((dst / f).stat().st_size for f in FILES)
    print(f"bundle_demo: {len(FILES)} files, {total / 1e6:.1f} MB -> {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
