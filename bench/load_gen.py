#!/usr/bin/env python3
"""Writes an ONNX model with a large weight payload for bench/load.sh, using
only the standard library (the protobuf wire format is written by hand). The
graph is a chain of `layers` blocks y = Relu(MatMul(x, W) + b) with
W [dim, dim] float, so ONNX Runtime can build a session for it too.

Two layouts, as real models come:
  inline (default)  every tensor's raw_data inside the .onnx, back to back, as
                    exporters write it: payload offsets fall where they fall,
                    so only some are aligned for their dtype;
  --external        the weights in OUT.data at offsets that are multiples of
                    4096, as onnx.proto recommends for mmap (models over 2 GiB
                    must use external data).

    python3 bench/load_gen.py OUT.onnx [--layers 80] [--dim 1024] [--external]
"""
import os
import argparse
import struct


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field, wire):
    return varint((field << 3) | wire)


def ld(field, payload):
    return key(field, 2) + varint(len(payload)) + payload


def vi(field, value):
    return key(field, 0) + varint(value)


def s(field, text):
    return ld(field, text.encode())


def tensor(name, dims, raw):
    return b"".join(vi(1, d) for d in dims) + vi(2, 1) + s(8, name) + ld(9, raw)


def ext_tensor(name, dims, location, offset, length):
    kv = lambda k, v: ld(13, s(1, k) + s(2, v))
    return (b"".join(vi(1, d) for d in dims) + vi(2, 1) + s(8, name) + kv("location", location) +
            kv("offset", str(offset)) + kv("length", str(length)) + vi(14, 1))


def value_info(name, dims):
    shape = b"".join(ld(1, s(2, d) if isinstance(d, str) else vi(1, d)) for d in dims)
    tensor_type = vi(1, 1) + ld(2, shape)
    return s(1, name) + ld(2, ld(1, tensor_type))


def node(op, inputs, outputs, name):
    return b"".join(s(1, i) for i in inputs) + b"".join(s(2, o) for o in outputs) + s(3, name) + s(4, op)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=80)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--external", action="store_true")
    a = ap.parse_args()
    d = a.dim
    # A small non-zero pattern (0.01f) so nothing is all-zero pages.
    w_raw = struct.pack("<f", 0.01) * (d * d)
    b_raw = struct.pack("<f", 0.0) * d
    parts = []
    x = "x"
    for i in range(a.layers):
        parts.append(ld(1, node("MatMul", [x, "W%d" % i], ["m%d" % i], "matmul%d" % i)))
        parts.append(ld(1, node("Add", ["m%d" % i, "b%d" % i], ["a%d" % i], "add%d" % i)))
        y = "y" if i == a.layers - 1 else "h%d" % i
        parts.append(ld(1, node("Relu", ["a%d" % i], [y], "relu%d" % i)))
        x = y
    parts.append(s(2, "load_bench"))
    if a.external:
        location = os.path.basename(a.out) + ".data"
        data = open(os.path.join(os.path.dirname(os.path.abspath(a.out)), location), "wb")
        for i in range(a.layers):
            for name, dims, raw in (("W%d" % i, [d, d], w_raw), ("b%d" % i, [d], b_raw)):
                off = (data.tell() + 4095) // 4096 * 4096
                data.write(b"\0" * (off - data.tell()))
                data.write(raw)
                parts.append(ld(5, ext_tensor(name, dims, location, off, len(raw))))
        data.close()
    else:
        for i in range(a.layers):
            parts.append(ld(5, tensor("W%d" % i, [d, d], w_raw)))
            parts.append(ld(5, tensor("b%d" % i, [d], b_raw)))
    parts.append(ld(11, value_info("x", ["batch", d])))
    parts.append(ld(12, value_info("y", ["batch", d])))
    graph = b"".join(parts)
    model = vi(1, 8) + s(2, "tolk-bench") + ld(8, vi(2, 17)) + ld(7, graph)
    with open(a.out, "wb") as f:
        f.write(model)
    total = len(model) + (os.path.getsize(a.out + ".data") if a.external else 0)
    print("load_gen: %s: %.1f MB%s, %d initializers" %
          (a.out, total / 1e6, " with external data" if a.external else "", 2 * a.layers))


if __name__ == "__main__":
    main()
