"""tolk.InferenceSession against onnxruntime.InferenceSession: the same
description of inputs and outputs, the same outputs (fp32: max abs error
1e-5), the same calling conventions, and errors as exceptions."""
import threading

import numpy as np
import onnxruntime as ort
import pytest

import tolk
from conftest import MARIAN_TINY, SIMPLE_CNN

ATOL = 1e-5


def both(path):
    return tolk.InferenceSession(str(path), threads=1), ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def described(args):
    return [(a.name, a.type, a.shape) for a in args]


@pytest.mark.parametrize("graph", ["encoder_model", "decoder_model", "decoder_with_past_model", "decoder_model_merged"])
def test_inputs_and_outputs_described_as_onnxruntime_does(graph):
    t, o = both(MARIAN_TINY / f"{graph}.onnx")
    assert described(t.get_inputs()) == described(o.get_inputs())
    assert described(t.get_outputs()) == described(o.get_outputs())


@pytest.mark.parametrize("batch", [1, 7])
def test_simple_cnn_matches_onnxruntime(batch):
    t, o = both(SIMPLE_CNN)
    x = np.random.default_rng(batch).standard_normal((batch, 3, 32, 32), dtype=np.float32)
    got, want = t.run(None, {"input": x}), o.run(None, {"input": x})
    assert len(got) == len(want) == 1
    assert got[0].dtype == want[0].dtype and got[0].shape == want[0].shape
    assert np.abs(got[0] - want[0]).max() <= ATOL


def marian_feeds(rng, batch=3, src=9, vocab=60):
    ids = rng.integers(0, vocab, (batch, src), dtype=np.int64)
    mask = np.ones((batch, src), dtype=np.int64)
    mask[0, 6:] = 0
    return ids, mask


def test_marian_encoder_then_decoder_match_onnxruntime():
    rng = np.random.default_rng(0)
    ids, mask = marian_feeds(rng)
    enc_t, enc_o = both(MARIAN_TINY / "encoder_model.onnx")
    hidden_t = enc_t.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    hidden_o = enc_o.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    assert np.abs(hidden_t - hidden_o).max() <= ATOL
    dec_t, dec_o = both(MARIAN_TINY / "decoder_model.onnx")
    feeds = {"input_ids": rng.integers(0, 60, (3, 4), dtype=np.int64), "encoder_attention_mask": mask,
             "encoder_hidden_states": hidden_o}
    names = [a.name for a in dec_o.get_outputs()]
    got, want = dec_t.run(names, feeds), dec_o.run(names, feeds)
    for name, g, w in zip(names, got, want):
        assert g.shape == w.shape, name
        assert np.abs(g - w).max() <= ATOL, name


def test_output_names_select_and_order():
    t, _ = both(MARIAN_TINY / "decoder_model.onnx")
    rng = np.random.default_rng(1)
    ids, mask = marian_feeds(rng)
    hidden = rng.standard_normal((3, 9, 64), dtype=np.float32)
    feeds = {"input_ids": ids[:, :2], "encoder_attention_mask": mask, "encoder_hidden_states": hidden}
    names = [a.name for a in t.get_outputs()]
    every = t.run(None, feeds)
    assert len(every) == len(names)
    picked = t.run([names[2], names[0]], feeds)
    assert np.array_equal(picked[0], every[2]) and np.array_equal(picked[1], every[0])


def test_outputs_are_numpy_views_of_tolks_memory():
    t, _ = both(SIMPLE_CNN)
    out = t.run(None, {"input": np.zeros((2, 3, 32, 32), np.float32)})[0]
    assert isinstance(out, np.ndarray)
    # No copy: the array views the memory of the tensor tolk wrote (through the buffer protocol).
    assert isinstance(out.base, memoryview) and type(out.base.obj).__name__ == "_Tensor"
    out[:] = 1  # writable, as onnxruntime's are
    assert (out == 1).all()


def test_non_contiguous_and_list_feeds():
    t, o = both(SIMPLE_CNN)
    big = np.random.default_rng(2).standard_normal((2, 3, 64, 32), dtype=np.float32)
    x = big[:, :, ::2, :]  # a strided view: fed as a contiguous copy
    assert not x.flags.c_contiguous
    got, want = t.run(None, {"input": x})[0], o.run(None, {"input": np.ascontiguousarray(x)})[0]
    assert np.abs(got - want).max() <= ATOL
    # A list becomes a float64 array, which a float model refuses, as onnxruntime does.
    with pytest.raises(tolk.TypeMismatch):
        t.run(None, {"input": x.tolist()})
    as_list = t.run(None, {"input": np.array(x.tolist(), np.float32)})[0]
    assert np.abs(as_list - want).max() <= ATOL


def test_model_from_bytes_and_session_options():
    opts = tolk.SessionOptions()
    opts.intra_op_num_threads = 2
    t = tolk.InferenceSession(SIMPLE_CNN.read_bytes(), opts, providers=["CPUExecutionProvider"])
    _, o = both(SIMPLE_CNN)
    x = np.ones((1, 3, 32, 32), np.float32)
    assert np.abs(t.run(None, {"input": x})[0] - o.run(None, {"input": x})[0]).max() <= ATOL
    assert t.get_providers() == ["CPUExecutionProvider"]


def test_threads_running_one_session_at_once():
    t, o = both(SIMPLE_CNN)
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((1 + i % 3, 3, 32, 32), dtype=np.float32) for i in range(8)]
    want = [o.run(None, {"input": x})[0] for x in xs]
    errors = []

    def work(i):
        try:
            for _ in range(10):
                got = t.run(None, {"input": xs[i]})[0]
                assert np.abs(got - want[i]).max() <= ATOL
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors


def expect(cls, fragment, fn, *args):
    with pytest.raises(cls) as info:
        fn(*args)
    assert fragment in str(info.value)
    return info.value


def test_bad_feeds_raise_tolk_errors():
    t, _ = both(SIMPLE_CNN)
    x = np.zeros((1, 3, 32, 32), np.float32)
    e = expect(tolk.TypeMismatch, "expected float", t.run, None, {"input": x.astype(np.float64)})
    assert e.status == 9 and isinstance(e, tolk.TolkError)
    expect(tolk.ShapeMismatch, "expected [batch_size, 3, 32, 32]", t.run, None, {"input": x[:, :2]})
    expect(tolk.InvalidArgument, "input 'input' is missing", t.run, None, {})
    expect(tolk.NotFound, "no input named 'nope'", t.run, None, {"input": x, "nope": x})
    expect(tolk.NotFound, "no output or value named 'nope'", t.run, ["nope"], {"input": x})
    expect(tolk.TypeMismatch, "has no tolk type", t.run, None, {"input": np.array([["a"]])})
    expect(tolk.TypeMismatch, "has no tolk type", t.run, None, {"input": np.empty((1,), dtype=object)})
    with pytest.raises(TypeError):
        t.run(None, [x])


def test_bad_models_and_closed_sessions():
    expect(tolk.NotFound, "/no/such/model.onnx", tolk.InferenceSession, "/no/such/model.onnx")
    expect(tolk.Malformed, "", tolk.InferenceSession, b"\xff\xff\xff not protobuf")
    t, _ = both(SIMPLE_CNN)
    t.close()
    t.close()  # a second close is harmless
    expect(tolk.InvalidArgument, "the session is closed", t.run, None, {"input": np.zeros((1, 3, 32, 32), np.float32)})
    with tolk.InferenceSession(str(SIMPLE_CNN)) as s:
        assert s.get_inputs()[0].name == "input"
    expect(tolk.InvalidArgument, "closed", s.run, None, {})
