#!/usr/bin/env python3
"""Translate a corpus with Ray Data and tolk.

    python examples/ray_translate.py parts/*.txt -m models/demo-en-zh -o out/ --actors 2

Each input file is one line-per-sentence block of the corpus (split a big corpus with
`split -l 10000 corpus.txt parts/`). Ray Data reads them (`ray.data.read_text`) and a pool of
`--actors` TolkTranslator actors (`map_batches(TolkTranslator, compute=ActorPoolStrategy(size=N))`,
what `concurrency=N` said before Ray 2.51) translates them in batches of `--batch-size` lines; each actor
loads the model once, in its constructor, and translates with `--threads` intra-op threads.
For every input file the output folder gets `<name>.jsonl` (or `.parquet`), one record per line
(`line`, `source`, `translation`, `score`), written under a temporary name and renamed when the
file is complete. A rerun skips the files whose output is there, so a stopped job resumes by
input block.

Without RAY_ADDRESS, `ray.init` starts a local cluster (`--num-cpus`); with it (or under
`ray job submit` on a KubeRay cluster) the same script runs the actors across the cluster's
nodes, each of which needs the `tolk` package and the model folder at the same path.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import ray


class TolkTranslator:
    """A Ray Data actor: the model is loaded once per actor, then every batch of lines runs
    through tolk's batched generation (one model input per line, as CTranslate2 does)."""

    def __init__(self, model_dir: str, int8: bool = False, threads: int = 1, beam: Optional[int] = None,
                 to: Optional[str] = None):
        import tolk  # imported in the actor's process, not only the driver's

        self.translator = tolk.Translator(model_dir, int8=int8, threads=threads, to=to)
        self.beam = beam

    def __call__(self, batch: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        sources = [str(s) for s in batch["text"]]
        results = self.translator.translate_batch(sources, beam_size=self.beam, return_scores=True)
        return {
            "path": batch["path"],
            "source": np.array(sources, dtype=object),
            "translation": np.array([r.hypotheses[0] for r in results], dtype=object),
            "score": np.array([r.scores[0] for r in results], dtype=np.float64),
        }


def output_path(out_dir: Path, src: Path, fmt: str) -> Path:
    return out_dir / f"{src.name}.{fmt}"


class BlockWriter:
    """The records of one input file, written to `<final>.part` and renamed to `<final>` by
    finish(): an output file that exists is complete."""

    SCHEMA = {"line": "int64", "source": "string", "translation": "string", "score": "float64"}

    def __init__(self, final: Path, fmt: str):
        self.final = final
        self.part = final.with_name(final.name + ".part")
        self.count = 0
        self.rows: List[dict] = []  # parquet: written whole by finish()
        self.f = open(self.part, "w", encoding="utf-8") if fmt == "jsonl" else None

    def add(self, source: str, translation: str, score: float) -> None:
        self.count += 1
        row = {"line": self.count, "source": source, "translation": translation, "score": score}
        if self.f is not None:
            self.f.write(json.dumps(row, ensure_ascii=False) + "\n")
        else:
            self.rows.append(row)

    def finish(self) -> None:
        if self.f is not None:
            self.f.close()
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            schema = pa.schema([(k, pa.type_for_alias(v)) for k, v in self.SCHEMA.items()])
            pq.write_table(pa.Table.from_pylist(self.rows, schema=schema), self.part)
        os.replace(self.part, self.final)


def translate_corpus(inputs: List[Path], out_dir: Path, model: str, actors: int = 1, batch_size: int = 64,
                     threads: int = 1, int8: bool = False, beam: Optional[int] = None, to: Optional[str] = None,
                     fmt: str = "jsonl") -> Dict[Path, int]:
    """Translates every input file whose output is missing; returns {input file: lines}."""
    out_dir.mkdir(parents=True, exist_ok=True)
    pending = [p.resolve() for p in inputs if not output_path(out_dir, p, fmt).exists()]
    done: Dict[Path, int] = {}
    # A file of no lines gives read_text no rows, so no batch would ever close it.
    for p in [p for p in pending if p.stat().st_size == 0]:
        BlockWriter(output_path(out_dir, p, fmt), fmt).finish()
        done[p] = 0
    pending = [p for p in pending if p.stat().st_size > 0]
    if not pending:
        return done

    # Rows come back in input order, so each file's rows are contiguous: a file is complete
    # when the next one starts. Empty lines are kept so that line numbers match the input.
    # Reading lines costs next to nothing, and the actors hold the CPUs (one per intra-op
    # thread): read tasks that asked for a CPU too would wait forever on a cluster the actors fill.
    ray.data.DataContext.get_current().execution_options.preserve_order = True
    ds = ray.data.read_text([str(p) for p in pending], include_paths=True, drop_empty_lines=False, num_cpus=0)
    ds = ds.map_batches(TolkTranslator, batch_size=batch_size, num_cpus=threads,
                        compute=ray.data.ActorPoolStrategy(size=actors),
                        fn_constructor_kwargs=dict(model_dir=model, int8=int8, threads=threads, beam=beam, to=to))
    writer: Optional[BlockWriter] = None
    current: Optional[Path] = None
    for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
        for path, src, tgt, score in zip(batch["path"], batch["source"], batch["translation"], batch["score"]):
            path = Path(str(path)).resolve()
            if path != current:
                if writer is not None:
                    writer.finish()
                    done[current] = writer.count
                current, writer = path, BlockWriter(output_path(out_dir, path, fmt), fmt)
            writer.add(str(src), str(tgt), float(score))
    if writer is not None:
        writer.finish()
        done[current] = writer.count
    return done


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", type=Path, help="text files, one sentence a line; each is a block")
    ap.add_argument("-m", "--model", required=True, help="model folder (Optimum export layout)")
    ap.add_argument("-o", "--output", required=True, type=Path, help="output folder")
    ap.add_argument("--actors", type=int, default=1, help="TolkTranslator actors (each loads the model once)")
    ap.add_argument("--batch-size", type=int, default=64, help="lines per batch sent to an actor")
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads (and CPUs reserved) per actor")
    ap.add_argument("--int8", action="store_true", help="use the *_quantized.onnx graphs")
    ap.add_argument("--beam", type=int, help="beam size (default: the model's num_beams)")
    ap.add_argument("--to", help="target language as tolk translate --to (default zh)")
    ap.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl")
    ap.add_argument("--num-cpus", type=int, help="CPUs of the local cluster started without RAY_ADDRESS")
    return ap


def main(argv: Optional[List[str]] = None) -> int:
    ap = parser()
    a = ap.parse_args(argv)
    for p in a.inputs:
        if not p.is_file():
            ap.error(f"{p}: not a file")
    if not ray.is_initialized():
        ray.init(num_cpus=a.num_cpus if not os.environ.get("RAY_ADDRESS") else None)
    t0 = time.monotonic()
    done = translate_corpus(a.inputs, a.output, str(Path(a.model).resolve()), a.actors, a.batch_size, a.threads,
                            a.int8, a.beam, a.to, a.format)
    lines = sum(done.values())
    dt = time.monotonic() - t0
    print(f"ray_translate: {len(done)} of {len(a.inputs)} files ({lines} lines) in {dt:.1f} s"
          f" ({lines / dt if dt > 0 else 0:.1f} lines/s); the others were done already", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
