#!/usr/bin/env python3
"""Times ONNX Runtime's InferenceSession creation on one model (CPU provider,
default options) and the resident memory it adds, for bench/load.sh. Prints
"key value" lines. Each run is a fresh process so caches do not carry over.

    python load_ort.py MODEL [RUNS]
"""
import json
import subprocess
import sys

CHILD = r"""
import sys, time
def rss():
    anon = file = 0
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"): anon = int(line.split()[1])
        if line.startswith("RssFile:"): file = int(line.split()[1])
    return anon, file
import onnxruntime as ort
so = ort.SessionOptions()
so.intra_op_num_threads = 1
a0, f0 = rss()
t0 = time.perf_counter()
s = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
ms = (time.perf_counter() - t0) * 1e3
a1, f1 = rss()
print(ms, a1 - a0, f1 - f0, ort.__version__)
"""


def main():
    model = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    res = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", CHILD, model], check=True,
                             capture_output=True, text=True).stdout.split()
        res.append((float(out[0]), int(out[1]), int(out[2]), out[3]))
    res.sort()
    med = res[len(res) // 2]
    print("ort_version", med[3])
    print("runs", runs)
    print("session_ms_median", "%.3f" % med[0])
    print("session_ms_min", "%.3f" % res[0][0])
    print("rss_anon_kib", med[1])
    print("rss_file_kib", med[2])


if __name__ == "__main__":
    main()
