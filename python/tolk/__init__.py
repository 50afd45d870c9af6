"""tolk from Python: ONNX models and Marian translation on tolk's C engine.

- ``InferenceSession`` runs ONNX models with onnxruntime's API
  (``get_inputs``, ``get_outputs``, ``run(output_names, feeds)``): code
  written for ``onnxruntime.InferenceSession`` runs with the import changed.
- ``Translator`` translates text with a Marian model folder (Optimum's export
  layout) with CTranslate2's API (``translate_batch``, ``translate_iterable``)
  taking and returning text, plus ``translate`` for a text of any length.
- ``Tokenizer`` is the model's MarianTokenizer (``encode``, ``decode``).

Arrays cross without copies: inputs are read where numpy keeps them, outputs
are numpy arrays viewing the memory tolk wrote. Every run and translation
releases the GIL, and a session or translator may be used from several
threads at once. Errors are ``TolkError`` subclasses, one per tolk status,
carrying tolk's message.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Union

import numpy as np

from . import _tolk
from ._tolk import (Cancelled, InternalError, InvalidArgument, InvalidModel, IOFailure, LimitExceeded,
                    Malformed, NotFound, OutOfMemory, ShapeMismatch, TolkError, TypeMismatch, Unsupported)

__version__ = _tolk.version()

__all__ = [
    "InferenceSession", "SessionOptions", "NodeArg", "Translator", "TranslationResult", "Tokenizer",
    "TolkError", "InvalidArgument", "IOFailure", "Malformed", "InvalidModel", "Unsupported", "OutOfMemory",
    "LimitExceeded", "ShapeMismatch", "TypeMismatch", "NotFound", "InternalError", "Cancelled",
]


class NodeArg:
    """A model input or output as onnxruntime describes it: ``name``, ``type``
    ("tensor(float)") and ``shape`` (ints, symbol names, None when unknown)."""

    __slots__ = ("name", "type", "shape")

    def __init__(self, name: str, type: str, shape: List[Union[int, str, None]]):
        self.name, self.type, self.shape = name, type, shape

    def __repr__(self) -> str:
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"


class SessionOptions:
    """The one setting of onnxruntime's SessionOptions tolk reads:
    ``intra_op_num_threads`` (0: every core)."""

    def __init__(self) -> None:
        self.intra_op_num_threads = 0


def _node_args(values: List[tuple]) -> List[NodeArg]:
    return [NodeArg(name, f"tensor({dtype})", shape) for name, dtype, shape in values]


def _feed_array(value: Any) -> np.ndarray:
    """The array tolk reads in place: numpy's own when it is C-contiguous and
    aligned (no copy), else a contiguous copy. The dtype is never changed:
    a wrong one is the model's error to report."""
    a = np.asarray(value)
    if not (a.flags.c_contiguous and a.flags.aligned):
        a = np.array(a, order="C")
    return a


class InferenceSession:
    """An ONNX model prepared to run, with onnxruntime's API.

    ``path_or_bytes`` is the .onnx file (external data is looked up beside it)
    or the model's bytes. ``threads`` (or ``sess_options.intra_op_num_threads``)
    sets the intra-op threads; 0 means every core. ``providers`` is accepted for
    onnxruntime compatibility: tolk runs on the CPU.
    """

    def __init__(self, path_or_bytes: Union[str, bytes, "os.PathLike[str]"], sess_options: Optional[SessionOptions] = None,
                 providers: Optional[Sequence[Any]] = None, provider_options: Optional[Sequence[Any]] = None,
                 *, threads: Optional[int] = None, **kwargs: Any):
        if threads is None:
            threads = getattr(sess_options, "intra_op_num_threads", 0) or 0
        self._s = _tolk._Session(path_or_bytes if isinstance(path_or_bytes, bytes) else str(path_or_bytes),
                                 int(threads))
        self._inputs = _node_args(self._s.inputs())
        self._outputs = _node_args(self._s.outputs())

    def get_inputs(self) -> List[NodeArg]:
        """The inputs a run must be fed (initializers excluded)."""
        return list(self._inputs)

    def get_outputs(self) -> List[NodeArg]:
        """The model's outputs, in declared order."""
        return list(self._outputs)

    def get_providers(self) -> List[str]:
        return ["CPUExecutionProvider"]

    def run(self, output_names: Optional[Sequence[str]], input_feed: Dict[str, Any],
            run_options: Any = None) -> List[np.ndarray]:
        """Runs the model on ``input_feed`` (name → array) and returns the
        outputs named in ``output_names`` (None or empty: all) as numpy arrays,
        in that order. The GIL is released while tolk computes."""
        if not isinstance(input_feed, dict):
            raise TypeError("input_feed must be a dict of input name -> array")
        names = list(input_feed)
        arrays = [_feed_array(v) for v in input_feed.values()]
        wanted = list(output_names) if output_names else None
        return [np.asarray(t) for t in self._s.run(wanted, names, arrays)]

    def close(self) -> None:
        """Frees the session now (later calls raise InvalidArgument); refused
        while another thread is running it."""
        self._s.close()

    def __enter__(self) -> "InferenceSession":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# --to of `tolk translate`: a language name to the tags that may stand for it, in preference order.
_TARGETS = {
    "zh": (">>cmn_Hans<<", ">>cmn<<", ">>zho_Hans<<"), "zh-Hans": (">>cmn_Hans<<", ">>cmn<<"),
    "zh-Hant": (">>cmn_Hant<<", ">>zho_Hant<<"), "zh-TW": (">>cmn_Hant<<",),
    "yue": (">>yue_Hant<<", ">>yue_Hans<<", ">>yue<<"), "yue-Hans": (">>yue_Hans<<",),
    "yue-Hant": (">>yue_Hant<<",),
}


def _resolve_tag(to: Optional[str], tags: List[str]) -> Optional[str]:
    if not tags:
        return None
    to = to or "zh"
    for tag in (to,) if to.startswith(">>") else _TARGETS.get(to, ()):
        if tag in tags:
            return tag
    raise InvalidArgument(f"the model has no tag for {to!r}; its tags: {' '.join(tags)}")


class TranslationResult:
    """The hypotheses of one source text, best first, as CTranslate2 returns
    them but as text: ``hypotheses`` (str), ``scores`` (float; empty unless
    return_scores) and ``ids`` (the generated ids, decoder start first)."""

    __slots__ = ("hypotheses", "scores", "ids")

    def __init__(self, hypotheses: List[str], scores: List[float], ids: List[List[int]]):
        self.hypotheses, self.scores, self.ids = hypotheses, scores, ids

    def __repr__(self) -> str:
        return f"TranslationResult(hypotheses={self.hypotheses!r}, scores={self.scores!r})"


class Translator:
    """A Marian translation model folder (Optimum's export layout: encoder,
    decoder(s), config, generation config, tokenizer files).

    ``int8`` runs the ``*_quantized.onnx`` graphs; ``threads`` is the intra-op
    threads (0: every core); ``to`` the target language as for ``tolk
    translate --to`` (zh, zh-Hant, yue, or a tag like ">>cmn_Hans<<"), for
    models whose texts need a tag; ``verify`` checks tolk-manifest.json;
    ``int8_lm_head`` multiplies the LM head in int8 (``--int8-lm-head``);
    ``bf16`` holds the float weights as bfloat16 (``--bf16``); ``bf16="products"``
    rounds the activations too and multiplies with AVX512-BF16
    (``--bf16-products``; raises Unsupported on a CPU without it).
    Translations may run from several threads at once; each releases the GIL.
    """

    def __init__(self, model_dir: Union[str, "os.PathLike[str]"], int8: bool = False, threads: int = 0,
                 to: Optional[str] = None, verify: bool = True, int8_lm_head: bool = False, bf16: Union[bool, int, str] = False):
        # False/True as before, the C API's TOLK_BF16_* values (0, 1, 2), or their names.
        modes = {0: 0, 1: 1, 2: 2, "weights": 1, "products": 2}
        if not isinstance(bf16, (bool, int, str)) or bf16 not in modes:
            raise InvalidArgument(f"bf16 is {bf16!r}: False, True, 'weights' or 'products'")
        self._t = _tolk._Translator(str(model_dir), bool(int8), int(threads), bool(verify), bool(int8_lm_head),
                                    modes[bf16])
        self.tag = _resolve_tag(to, self._t.language_tags())

    def _tagged(self, text: str) -> str:
        if not isinstance(text, str):
            raise TypeError(f"expected str, got {type(text).__name__}")
        return text if self.tag is None or text.startswith(">>") else f"{self.tag} {text}"

    def translate_batch(self, source: Sequence[str], beam_size: Optional[int] = None,
                        max_new_tokens: Optional[int] = None, num_hypotheses: int = 1,
                        return_scores: bool = False) -> List[TranslationResult]:
        """Translates each sentence of ``source`` (one model input each, not
        split; see ``translate`` for longer texts). ``beam_size`` None keeps the
        model's num_beams; ``num_hypotheses`` ≤ beam_size."""
        texts = [self._tagged(s) for s in source]
        rows = self._t.generate(texts, beam_size or 0, max_new_tokens or 0, num_hypotheses,
                                scores=return_scores)
        return [TranslationResult([h[0] for h in hyps], [h[1] for h in hyps] if return_scores else [],
                                  [h[2] for h in hyps]) for hyps in rows]

    def translate_iterable(self, source: Iterable[str], batch_size: int = 32,
                           **kwargs: Any) -> Iterator[TranslationResult]:
        """Translates a stream of sentences ``batch_size`` at a time, yielding a
        result per sentence in order; keyword arguments as translate_batch."""
        if batch_size < 1:
            raise InvalidArgument(f"batch_size must be at least 1, not {batch_size}")
        batch: List[str] = []
        for text in source:
            batch.append(text)
            if len(batch) == batch_size:
                yield from self.translate_batch(batch, **kwargs)
                batch = []
        if batch:
            yield from self.translate_batch(batch, **kwargs)

    def translate(self, text: str) -> str:
        """Translates a text of any length as ``tolk translate`` does: split into
        sentences (line breaks kept), translated in batches, rejoined."""
        if not isinstance(text, str):
            raise TypeError(f"expected str, got {type(text).__name__}")
        return self._t.translate_text(text, self.tag)

    def close(self) -> None:
        """Frees the model now; refused while another thread is translating."""
        self._t.close()

    def __enter__(self) -> "Translator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Tokenizer:
    """A Marian model's tokenizer, as HuggingFace's MarianTokenizer: ``encode``
    gives the ids of a text (``</s>`` appended), ``decode`` the text of ids."""

    _TARGET, _NO_EOS = 1, 2
    _SKIP_SPECIAL, _SOURCE = 1, 2

    def __init__(self, model_dir: Union[str, "os.PathLike[str]"], max_length: int = 0):
        self._t = _tolk._Tokenizer(str(model_dir), int(max_length))

    def encode(self, text: str, add_special_tokens: bool = True, target: bool = False) -> List[int]:
        """The ids of ``text`` (source side unless ``target``)."""
        return self.encode_batch([text], add_special_tokens, target)[0]

    def encode_batch(self, texts: Sequence[str], add_special_tokens: bool = True,
                     target: bool = False) -> List[List[int]]:
        flags = (0 if add_special_tokens else self._NO_EOS) | (self._TARGET if target else 0)
        return self._t.encode(list(texts), flags)

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True, source: bool = False) -> str:
        """The text of ``ids`` (target side unless ``source``); unknown ids decode as <unk>."""
        return self.decode_batch([ids], skip_special_tokens, source)[0]

    def decode_batch(self, seqs: Sequence[Sequence[int]], skip_special_tokens: bool = True,
                     source: bool = False) -> List[str]:
        flags = (self._SKIP_SPECIAL if skip_special_tokens else 0) | (self._SOURCE if source else 0)
        return self._t.decode([list(s) for s in seqs], flags)

    def tokenize(self, text: str) -> List[str]:
        """The pieces of ``text`` before they become ids (MarianTokenizer.tokenize)."""
        return self._t.tokenize(text)

    def language_tags(self) -> List[str]:
        return self._t.language_tags()

    def close(self) -> None:
        self._t.close()
