"""Per-call overhead of tolk's Python binding against onnxruntime's, on models
so small that a call is almost all overhead: session.run() as user code calls
it (dict of numpy arrays in, list of numpy arrays out), one intra-op thread
for both, rounds alternating between the two. Prints the median of the
rounds' per-call CPU times and the ratio.

    build-pyvenv/bin/python python/bench_overhead.py [--calls 2000] [--rounds 15]
"""
import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

# Python puts this script's folder first on the path, where tolk/ is the
# uncompiled source: measure the installed package instead.
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
import tolk  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODELS = {
    # ONNX's backend test of Add: two [3, 4, 5] float inputs (Debian's libonnx-testdata).
    "add [3,4,5]": (Path("/usr/share/libonnx-testdata/data/node/test_add/model.onnx"),
                    {"x": (3, 4, 5), "y": (3, 4, 5)}),
    # The test fixture CNN (two convolutions, pooling, a linear layer), batch 1.
    "simple-cnn [1,3,32,32]": (ROOT / "tests/fixtures/simple-cnn/model.onnx", {"input": (1, 3, 32, 32)}),
}


def per_call_us(run, feeds, calls):
    # CPU time of this process, not wall time: on a shared machine the wall
    # clock also counts the time other processes held the core. One thread
    # each, so the process's CPU time is the call's.
    t0 = time.process_time()
    for _ in range(calls):
        run(None, feeds)
    return (time.process_time() - t0) / calls * 1e6


def cpu_model():
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    print(f"CPU: {cpu_model()}; tolk {tolk.__version__}, onnxruntime {ort.__version__}, numpy {np.__version__}")
    print(f"{'model':24} {'tolk µs/call':>13} {'onnxruntime µs/call':>20} {'tolk/ort':>9}  (CPU time, medians)")
    rng = np.random.default_rng(0)
    for name, (path, shapes) in MODELS.items():
        if not path.exists():
            print(f"{name:24} skipped: no {path}")
            continue
        feeds = {k: rng.standard_normal(s, dtype=np.float32) for k, s in shapes.items()}
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = opts.inter_op_num_threads = 1
        o = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        t = tolk.InferenceSession(str(path), threads=1)
        got, want = t.run(None, feeds)[0], o.run(None, feeds)[0]
        assert np.abs(got - want).max() <= 1e-5, name
        for r in (t.run, o.run):  # warm up: plans, caches, allocator
            per_call_us(r, feeds, args.calls // 4)
        tt, oo = [], []
        for _ in range(args.rounds):
            tt.append(per_call_us(t.run, feeds, args.calls))
            oo.append(per_call_us(o.run, feeds, args.calls))
        mt, mo = statistics.median(tt), statistics.median(oo)
        print(f"{name:24} {mt:13.2f} {mo:20.2f} {mt / mo:9.2f}")


if __name__ == "__main__":
    main()
