#!/usr/bin/env python3
"""gemm_ort.py — ONNX Runtime's MatMul on the MarianMT shapes, the peer figures
for bench_gemm (bench/gemm.c): one-node models Y = X · W with W a constant
initializer (so ORT prepacks it, as tolk does), X of m ∈ {1, 4, 30} rows,
W of k × n ∈ {512×512, 512×2048, 2048×512, 512×65001}. Prints the median
time per run and GFLOP/s, in the same layout as bench_gemm.

Weights are cold as in bench_gemm: enough sessions (distinct weights) are
rotated through to exceed 384 MB, unless --hot.

    python3 bench/gemm_ort.py [--threads N] [--hot] [--ms MS]
"""
import argparse
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

SHAPES = [(512, 512, "attention q/k/v/o"), (512, 2048, "ffn fc1"), (2048, 512, "ffn fc2"),
          (512, 65001, "LM head")]
MS = [1, 4, 30]


def model(k, n, seed):
    w = np.random.default_rng(seed).uniform(-0.5, 0.5, (k, n)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["m", k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["m", n])],
        [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8  # what this onnxruntime accepts, whatever the onnx package writes
    return m.SerializeToString()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--hot", action="store_true")
    ap.add_argument("--ms", type=float, default=300)
    args = ap.parse_args()
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    print(f"onnxruntime {ort.__version__}, threads {args.threads}, W "
          f"{'hot (one copy)' if args.hot else 'cold (rotating copies > 384 MB)'}")
    print(f"{'m':>4} {'k':>6} {'n':>6}  {'impl':<12} {'us/call':>10} {'GFLOP/s':>9} {'GB/s(B)':>8}")
    for k, n, what in SHAPES:
        bbytes = k * n * 4
        copies = 1 if args.hot else -(-(384 << 20) // bbytes)
        sessions = [ort.InferenceSession(model(k, n, s), so, providers=["CPUExecutionProvider"])
                    for s in range(copies)]
        print(f"# {what}")
        for m in MS:
            x = np.random.default_rng(m).uniform(-0.5, 0.5, (m, k)).astype(np.float32)
            for s in sessions[:2]:
                s.run(None, {"x": x})
            samples, it = [], 0
            end = time.perf_counter() + args.ms / 1000
            while time.perf_counter() < end or it < 5:
                t0 = time.perf_counter()
                sessions[it % copies].run(None, {"x": x})
                samples.append(time.perf_counter() - t0)
                it += 1
            t = float(np.median(samples))
            print(f"{m:4d} {k:6d} {n:6d}  {'ort':<12} {t * 1e6:10.1f} {2 * m * k * n / t * 1e-9:9.2f} "
                  f"{bbytes / t * 1e-9:8.2f}", flush=True)
        del sessions


if __name__ == "__main__":
    main()
