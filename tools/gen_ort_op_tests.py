#!/usr/bin/env python3
"""Writes ONNX-backend-style test folders (model.onnx + test_data_set_0/
{input,output}_N.pb) for the quantization and com.microsoft operators, with
expected outputs computed by ONNX Runtime's CPU provider. tests/conformance
runs them (tests/ort_ops.cmake), so tolk is checked against ORT itself, not
only against references written from its documentation.

  python3 tools/gen_ort_op_tests.py [OUT_DIR]    (default tests/data/ort_ops)

Needs numpy, onnx and onnxruntime (tools/requirements.txt). Deterministic:
fixed seeds; the ORT version used is recorded in OUT_DIR/VERSION.
"""
import os
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

MS = "com.microsoft"
F = TensorProto.FLOAT
NP2ONNX = {np.float32: TensorProto.FLOAT, np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8,
           np.int32: TensorProto.INT32, np.int64: TensorProto.INT64}


def onnx_type(a):
    return NP2ONNX[a.dtype.type]


def write_case(root, name, op, inputs, n_out, attrs=None, domain="", opset=None, out_mask=None,
               inits=None):
    """One node `op` with graph inputs `inputs` (name -> array, None = omitted),
    initializers `inits` (name -> array, fed to the node in input order after
    `inputs`' entries of the same name)."""
    attrs = attrs or {}
    inits = inits or {}
    node_inputs, graph_inputs, feeds = [], [], {}
    for k, v in inputs.items():
        if v is None:
            node_inputs.append("")
            continue
        node_inputs.append(k)
        if k in inits:
            continue
        graph_inputs.append(helper.make_tensor_value_info(k, onnx_type(v), list(v.shape)))
        feeds[k] = v
    out_mask = out_mask or [True] * n_out
    outs = [f"out{i}" if w else "" for i, w in enumerate(out_mask)]
    node = helper.make_node(op, node_inputs, outs, domain=domain or None, **attrs)
    graph_outputs = [onnx.ValueInfoProto(name=o) for o in outs if o]
    initializers = [numpy_helper.from_array(v, k) for k, v in inits.items()]
    graph = helper.make_graph([node], name, graph_inputs, graph_outputs, initializer=initializers)
    imports = [helper.make_opsetid("", opset or 17)]
    if domain:
        imports.append(helper.make_opsetid(domain, 1))
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = 8
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    results = sess.run(None, feeds)
    # Declare the outputs' real types so the model is well-formed on its own.
    del model.graph.output[:]
    for o, r in zip([o for o in outs if o], results):
        model.graph.output.append(helper.make_tensor_value_info(o, onnx_type(r), list(r.shape)))
    d = os.path.join(root, name)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    onnx.save(model, os.path.join(d, "model.onnx"))
    for i, (k, v) in enumerate(feeds.items()):
        t = numpy_helper.from_array(v, k)
        with open(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
            f.write(t.SerializeToString())
    for i, (o, r) in enumerate(zip([o for o in outs if o], results)):
        t = numpy_helper.from_array(r, o)
        with open(os.path.join(d, "test_data_set_0", f"output_{i}.pb"), "wb") as f:
            f.write(t.SerializeToString())


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "..", "tests", "data", "ort_ops")
    if os.path.isdir(root):
        shutil.rmtree(root)
    os.makedirs(root)
    with open(os.path.join(root, "VERSION"), "w") as f:
        f.write(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}, numpy {np.__version__}\n")
    rng = np.random.default_rng(20240607)

    def rn(*shape, lo=-1.0, hi=1.0):
        return rng.uniform(lo, hi, size=shape).astype(np.float32)

    def ri(dtype, *shape):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, endpoint=True).astype(dtype)

    def rw(*shape):
        # int8 weights in quantize_dynamic's reduce_range span (7 bits). With
        # full-range int8 weights, ORT's u8 x s8 kernel on x86 without VNNI
        # (vpmaddubsw) saturates pair sums at int16 and its results depend on
        # the CPU; tolk computes the exact sums (as ORT does with VNNI).
        return rng.integers(-64, 63, size=shape, endpoint=True).astype(np.int8)

    # ---------------------------------------------------- integer quantization
    for i, shape in enumerate([(4, 37, 64), (1, 1, 512), (3, 7, 33)]):
        x = rn(*shape, lo=-3.0 - i, hi=2.0 + 2 * i)
        write_case(root, f"ort_dynamicquantizelinear_{i}", "DynamicQuantizeLinear", {"x": x}, 3,
                   opset=13)
    x = rn(2, 5, 64, lo=-4, hi=3)
    write_case(root, "ort_quantizelinear_s8_axis", "QuantizeLinear",
               {"x": x, "s": rn(5, lo=0.01, hi=0.05), "z": ri(np.int8, 5)}, 1,
               attrs={"axis": 1}, opset=13)
    # The int8 Marian pattern: dynamic activations x int8 weights.
    for i, (ashape, bshape) in enumerate([((2, 9, 64), (64, 48)), ((1, 1, 96), (96, 130)),
                                          ((2, 3, 5, 16), (2, 3, 16, 7))]):
        a = ri(np.uint8, *ashape)
        b = rw(*bshape)
        write_case(root, f"ort_matmulinteger_u8s8_{i}", "MatMulInteger",
                   {"a": a, "b": b, "az": np.array(rng.integers(0, 255), dtype=np.uint8)}, 1,
                   opset=13)
    a = ri(np.uint8, 6, 40)
    b = ri(np.uint8, 40, 24)
    write_case(root, "ort_matmulinteger_u8u8_percol", "MatMulInteger",
               {"a": a, "b": b, "az": np.array(17, dtype=np.uint8), "bz": ri(np.uint8, 24)}, 1,
               opset=13, inits={"b": b})
    a = rn(3, 7, 64, lo=-2, hi=3)
    b = rw(64, 40)
    write_case(root, "ort_dynamicquantizematmul", "DynamicQuantizeMatMul",
               {"a": a, "b": b, "bs": np.array([0.013], dtype=np.float32), "bz": None,
                "bias": rn(40)}, 1, domain=MS, inits={"b": b})
    a = ri(np.uint8, 2, 5, 32)
    b = rw(32, 24)
    write_case(root, "ort_matmulintegertofloat", "MatMulIntegerToFloat",
               {"a": a, "b": b, "as": np.array(0.021, dtype=np.float32),
                "bs": rn(24, lo=0.001, hi=0.02), "az": np.array(131, dtype=np.uint8),
                "bz": ri(np.int8, 24), "bias": rn(24)}, 1, domain=MS, inits={"b": b})

    # ---------------------------------------------------------- activations
    x = rn(3, 4, 40, lo=-5, hi=5)
    bias = rn(40)
    write_case(root, "ort_gelu", "Gelu", {"x": x}, 1, domain=MS)
    write_case(root, "ort_biasgelu", "BiasGelu", {"x": x, "b": bias}, 1, domain=MS)
    write_case(root, "ort_fastgelu", "FastGelu", {"x": x}, 1, domain=MS)
    write_case(root, "ort_fastgelu_bias", "FastGelu", {"x": x, "b": bias}, 1, domain=MS)
    write_case(root, "ort_quickgelu", "QuickGelu", {"x": x}, 1, domain=MS)
    write_case(root, "ort_quickgelu_alpha1", "QuickGelu", {"x": x}, 1, domain=MS,
               attrs={"alpha": 1.0})

    # ---------------------------------------------------------- FusedMatMul
    write_case(root, "ort_fusedmatmul_t_b_alpha", "FusedMatMul",
               {"a": rn(2, 3, 6, 5), "b": rn(3, 7, 6)}, 1, domain=MS,
               attrs={"transA": 1, "transB": 1, "alpha": 0.125})
    write_case(root, "ort_fusedmatmul_plain", "FusedMatMul", {"a": rn(4, 9), "b": rn(9, 3)}, 1,
               domain=MS, attrs={"alpha": 2.0})

    # -------------------------------------------------------- normalisation
    B, S, D = 2, 5, 32
    x, skip, gamma, beta, b = rn(B, S, D, lo=-3, hi=3), rn(B, S, D), rn(D, lo=0.5, hi=1.5), rn(D), rn(D)
    write_case(root, "ort_skiplayernorm_all", "SkipLayerNormalization",
               {"x": x, "skip": skip, "gamma": gamma, "beta": beta, "bias": b}, 4, domain=MS,
               attrs={"epsilon": 1e-5}, out_mask=[True, False, False, True])
    write_case(root, "ort_skiplayernorm_nobeta", "SkipLayerNormalization",
               {"x": x, "skip": skip, "gamma": gamma}, 1, domain=MS)
    write_case(root, "ort_skiplayernorm_sum_only", "SkipLayerNormalization",
               {"x": x, "skip": skip, "gamma": gamma, "beta": beta}, 4, domain=MS,
               out_mask=[True, False, False, True], attrs={"epsilon": 1e-6})
    write_case(root, "ort_skiplayernorm_bcast_skip", "SkipLayerNormalization",
               {"x": x, "skip": rn(S, D), "gamma": gamma, "beta": beta}, 1, domain=MS)
    write_case(root, "ort_skiplayernorm_2d", "SkipLayerNormalization",
               {"x": x[0], "skip": skip[0], "gamma": gamma, "beta": beta}, 1, domain=MS)
    write_case(root, "ort_skipsimplifiedlayernorm", "SkipSimplifiedLayerNormalization",
               {"x": x, "skip": skip, "gamma": gamma, "bias": b}, 4, domain=MS,
               attrs={"epsilon": 1e-6}, out_mask=[True, False, False, True])
    write_case(root, "ort_layernorm_opset13", "LayerNormalization",
               {"x": x, "scale": gamma, "b": beta}, 1, opset=13, attrs={"epsilon": 1e-5})
    write_case(root, "ort_simplifiedlayernorm", "SimplifiedLayerNormalization",
               {"x": x, "scale": gamma}, 1, opset=13, attrs={"epsilon": 1e-6})

    # -------------------------------------------------------------- Attention
    B, S, Din, N, H = 2, 5, 24, 4, 6
    D = N * H
    x, w, bias = rn(B, S, Din), rn(Din, 3 * D, lo=-0.5, hi=0.5), rn(3 * D)
    att = {"num_heads": N}
    write_case(root, "ort_attention_plain", "Attention", {"x": x, "w": w, "b": bias}, 1,
               domain=MS, attrs=att)
    write_case(root, "ort_attention_mask_len", "Attention",
               {"x": x, "w": w, "b": bias, "m": np.array([3, 5], dtype=np.int32)}, 1,
               domain=MS, attrs=att)
    write_case(root, "ort_attention_mask_start", "Attention",
               {"x": x, "w": w, "b": bias, "m": np.array([5, 4, 1, 2], dtype=np.int32)}, 1,
               domain=MS, attrs=att)
    raw = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=np.int32)
    write_case(root, "ort_attention_mask_2d", "Attention",
               {"x": x, "w": w, "b": bias, "m": raw}, 1, domain=MS, attrs=att)
    m3 = rng.integers(0, 2, size=(B, S, S)).astype(np.int32)
    m3[:, :, 0] = 1
    write_case(root, "ort_attention_mask_3d", "Attention",
               {"x": x, "w": w, "b": bias, "m": m3}, 1, domain=MS, attrs=att)
    write_case(root, "ort_attention_causal_mask", "Attention",
               {"x": x, "w": w, "b": bias, "m": raw}, 1, domain=MS,
               attrs={"num_heads": N, "unidirectional": 1})
    write_case(root, "ort_attention_bias_scale", "Attention",
               {"x": x, "w": w, "b": bias, "m": None, "past": None, "ab": rn(1, N, S, S)}, 1,
               domain=MS, attrs={"num_heads": N, "scale": 0.3})
    P = 4
    past = rn(2, B, N, P, H)
    mask_t = np.ones((B, P + 1), dtype=np.int32)
    mask_t[0, 1] = 0
    write_case(root, "ort_attention_past", "Attention",
               {"x": x[:, :1], "w": w, "b": bias, "m": mask_t, "past": past}, 2, domain=MS,
               attrs={"num_heads": N, "unidirectional": 1})
    write_case(root, "ort_attention_past_s3", "Attention",
               {"x": x[:, :3], "w": w, "b": bias, "m": None, "past": past}, 2, domain=MS,
               attrs={"num_heads": N, "unidirectional": 1})
    wv = rn(Din, 2 * D + 2 * N, lo=-0.5, hi=0.5)
    write_case(root, "ort_attention_qkv_sizes", "Attention",
               {"x": x, "w": wv, "b": rn(2 * D + 2 * N)}, 1, domain=MS,
               attrs={"num_heads": N, "qkv_hidden_sizes": [D, D, 2 * N]})

    # ------------------------------------------------------ MultiHeadAttention
    L = 7
    q, k, v = rn(B, S, D), rn(B, L, D), rn(B, L, D)
    qkv_b = rn(3 * D)
    mha = {"num_heads": N}
    write_case(root, "ort_mha_cross", "MultiHeadAttention", {"q": q, "k": k, "v": v}, 1,
               domain=MS, attrs=mha)
    write_case(root, "ort_mha_cross_bias_mask2d", "MultiHeadAttention",
               {"q": q, "k": k, "v": v, "bias": qkv_b,
                "m": np.array([[1] * 5 + [0] * 2, [1] * 7], dtype=np.int32)}, 1,
               domain=MS, attrs=mha)
    write_case(root, "ort_mha_cross_mask_len", "MultiHeadAttention",
               {"q": q, "k": k, "v": v, "bias": None, "m": np.array([4, 7], dtype=np.int32)}, 1,
               domain=MS, attrs=mha)
    write_case(root, "ort_mha_self_causal", "MultiHeadAttention",
               {"q": q, "k": q * 0.5, "v": q + 0.25}, 1, domain=MS,
               attrs={"num_heads": N, "unidirectional": 1})
    pk, pv = rn(B, N, P, H), rn(B, N, P, H)
    write_case(root, "ort_mha_past", "MultiHeadAttention",
               {"q": q[:, :1], "k": k[:, :1], "v": v[:, :1], "bias": qkv_b, "m": None,
                "ab": None, "pk": pk, "pv": pv}, 3, domain=MS, attrs=mha)
    write_case(root, "ort_mha_past_mask", "MultiHeadAttention",
               {"q": q[:, :1], "k": k[:, :1], "v": v[:, :1], "bias": None,
                "m": np.array([[0, 1, 1, 1, 1], [1, 1, 1, 1, 1]], dtype=np.int32),
                "ab": None, "pk": pk, "pv": pv}, 3, domain=MS, attrs=mha)
    write_case(root, "ort_mha_bnsh_kv", "MultiHeadAttention",
               {"q": q, "k": rn(B, N, L, H), "v": rn(B, N, L, H), "bias": qkv_b}, 1,
               domain=MS, attrs=mha)
    # Packed KV / packed QKV inputs: ORT's CPU provider does not implement them
    # ("Packed KV not implemented for CPU"), so they are covered by
    # tests/test_ops_contrib.c's reference only.
    write_case(root, "ort_mha_attn_bias_scale", "MultiHeadAttention",
               {"q": q, "k": k, "v": v, "bias": None, "m": None, "ab": rn(B, 1, S, L)}, 1,
               domain=MS, attrs={"num_heads": N, "scale": 0.2})

    # ------------------------------------- ORT's contrib Quantize/Dequantize
    x = rn(3, 4, 10, lo=-3, hi=3)
    write_case(root, "ort_ms_quantizelinear_axis", "QuantizeLinear",
               {"x": x, "s": rn(4, lo=0.01, hi=0.05), "z": ri(np.uint8, 4)}, 1, domain=MS,
               attrs={"axis": 1})
    write_case(root, "ort_ms_dequantizelinear_axis", "DequantizeLinear",
               {"x": ri(np.int8, 3, 4, 10), "s": rn(10, lo=0.01, hi=0.05), "z": ri(np.int8, 10)},
               1, domain=MS, attrs={"axis": 2})
    # MultiHeadAttention without a past writing present_key/present_value (the new keys and values
    # with their bias, [B, N, L, H]), as tolk's attention fusion writes a decoder without a past
    # (src/ir/fuse_attention.c), its mask an attention_bias. Last, so that the cases before it keep
    # their random data.
    write_case(root, "ort_mha_present", "MultiHeadAttention",
               {"q": q, "k": k, "v": v, "bias": qkv_b, "m": None, "ab": rn(B, 1, S, L)}, 3,
               domain=MS, attrs=mha)
    print(f"wrote {len(os.listdir(root)) - 1} tests to {root}")


if __name__ == "__main__":
    main()
