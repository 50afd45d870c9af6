"""What tools/ort_quantize_reference.py (quantize_dynamic) and tools/ort_quantize_static_reference.py
(quantize_static) record alike: a node's identity, and an initializer's summary (dtype, dims, sha256 of its
little-endian bytes, sum of its values; scales and zero points with their values in full, floats as Python
repr, exact)."""
import hashlib

import numpy as np
import onnx
from onnx import numpy_helper

QUANT_SUFFIXES = ("_quantized", "_scale", "_zero_point")


def node_key(n):
    return (n.op_type, n.name, tuple(n.input), tuple(n.output))


def tensor_summary(t):
    a = numpy_helper.to_array(t)
    s = {"dtype": onnx.TensorProto.DataType.Name(t.data_type), "dims": list(t.dims),
         "sha256": hashlib.sha256(np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()).hexdigest(),
         "sum": int(a.astype(np.int64).sum()) if a.dtype.kind in "iu" else float(a.astype(np.float64).sum())}
    if not t.name.endswith("_quantized"):
        s["values"] = [float(v) if t.data_type == onnx.TensorProto.FLOAT else int(v) for v in a.reshape(-1)]
    return s
