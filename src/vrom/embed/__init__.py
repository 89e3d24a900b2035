"""Embedding engine: texts in, an L2-normalised float32 matrix out, plus a fingerprint.

`Embedder` is the interface every model implements. The default is all-MiniLM-L6-v2 running on
onnxruntime from files that install with vrom (no model hub, no torch); `Embedder.onnx` loads any
local ONNX model directory; `Embedder.fake` is deterministic and instant, for tests. Models load
lazily: importing this module imports neither numpy nor onnxruntime.
"""

from __future__ import annotations

import abc
import hashlib
import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from vrom import settings
from vrom.errors import ModelError, ValidationError, VromError
from vrom.settings import OPENAI_API_KEY_ENV

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Fingerprint:
    """What makes two embedders' vectors comparable: same fingerprint, same vector space.

    Fields: ``model`` (id), ``revision`` (version or file hash), ``dims``, ``pooling``,
    ``max_tokens``, ``normalized``.
    """

    model: str
    revision: str
    dims: int
    pooling: str
    max_tokens: int
    normalized: bool = True

    def to_json(self) -> str:
        """Return the fingerprint as canonical JSON (as stored in the ``meta`` table)."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Fingerprint:
        """Return the fingerprint stored as JSON by `to_json`."""
        return cls(**json.loads(text))

    def describe(self) -> str:
        """Return a short human description: ``all-MiniLM-L6-v2 (384 d)``."""
        return f"{self.model} ({self.dims} d)"

    def digest(self) -> str:
        """Return a short id of the fingerprint: the first 16 hex digits of the SHA-256 of
        `to_json` (equal digests, same vector space), to name a model in an export or a log."""
        return hashlib.sha256(self.to_json().encode("utf-8")).hexdigest()[:16]


class Embedder(abc.ABC):
    """Turns texts into L2-normalised float32 vectors (one row per text).

    Subclasses implement `_embed`; documents and queries may be embedded differently (models with
    query/passage prefixes or input types override `embed_query`). Any string embeds: a lone
    surrogate (what bytes that are not UTF-8 become in Python) reaches `_embed` as U+FFFD, since
    tokenizers and HTTP bodies take only valid Unicode.
    """

    @property
    @abc.abstractmethod
    def fingerprint(self) -> Fingerprint:
        """The embedder's fingerprint."""

    @property
    def dim(self) -> int:
        """The number of dimensions of each vector."""
        return self.fingerprint.dims

    @abc.abstractmethod
    def _embed(self, texts: Sequence[str], kind: str) -> Matrix:
        """Return the normalised vectors of ``texts``; ``kind`` is ``document`` or ``query``."""

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        """Return one normalised float32 row per document text."""
        return self._embedded(_checked(texts), "document")

    def embed_query(self, text: str) -> Matrix:
        """Return the normalised float32 vector of a query, shaped (dim,)."""
        if not isinstance(text, str):
            raise ValidationError(f"a query must be a string, not {type(text).__name__}")
        result: Matrix = self._embedded([_valid_unicode(text)], "query")[0]
        return result

    def _embedded(self, texts: Sequence[str], kind: str) -> Matrix:
        """Return `_embed`'s vectors; a failure of the model itself (a custom embedder's own
        exception, a crashed runtime) becomes a `ModelError`, so every caller sees one error
        type for it."""
        try:
            return self._embed(texts, kind)
        except VromError:
            raise
        except Exception as exc:
            raise ModelError(
                f"embedding {len(texts)} {kind} text{'s' if len(texts) != 1 else ''} with "
                f"{type(self).__name__} failed: {type(exc).__name__}: {exc}"
            ) from exc

    def close(self) -> None:  # noqa: B027 - most embedders hold nothing to release
        """Release the model (a no-op for most embedders)."""

    @staticmethod
    def default(threads: int | None = None, batch_size: int = 16) -> Embedder:
        """Return the default model: all-MiniLM-L6-v2 (int8 ONNX), offline, from the package.

        The model loads when the first text is embedded (see `vrom.embed.deferred`); a missing
        model package is a `ModelError` here, at once.
        """
        from vrom.embed.default import check_installed, default_fingerprint
        from vrom.embed.deferred import DeferredEmbedder

        check_installed()

        def load() -> Embedder:
            from vrom.embed.onnx import default_onnx_embedder

            return default_onnx_embedder(threads=threads, batch_size=batch_size)

        return DeferredEmbedder(default_fingerprint(), load)

    @staticmethod
    def onnx(model_dir: str | os.PathLike[str], **options: Any) -> Embedder:
        """Return an embedder for a local folder holding ``model.onnx`` and ``tokenizer.json``."""
        from vrom.embed.onnx import OnnxEmbedder

        return OnnxEmbedder.from_dir(model_dir, **options)

    @staticmethod
    def openai(model: str, base_url: str = "https://api.openai.com/v1", **options: Any) -> Embedder:
        """Return an embedder for an OpenAI-compatible ``/embeddings`` endpoint.

        OpenAI, NVIDIA NIM, Ollama, vLLM; see `vrom.embed.remote.OpenAIEmbedder` for the options
        (``api_key``, else ``$OPENAI_API_KEY`` or the variable ``api_key_env`` names; batching,
        retries, ``input_type``). Needs httpx (``pip install 'vrom[remote]'``).
        """
        from vrom.embed.remote import OpenAIEmbedder

        if options.get("api_key") is None:
            variable = options.get("api_key_env", OPENAI_API_KEY_ENV)
            options = {**options, "api_key": settings.api_key(variable)}
        return OpenAIEmbedder(model, base_url, **options)

    @staticmethod
    def fake(dims: int = 64, delay_per_text: float = 0.0) -> Embedder:
        """Return a deterministic embedder for tests (hashed words, not meaning): instant, or
        ``delay_per_text`` seconds a text to stand in for a slow model."""
        from vrom.embed.fake import FakeEmbedder

        return FakeEmbedder(dims, delay_per_text)

    @staticmethod
    def from_spec(spec: str) -> Embedder | None:
        """Return the embedder a short spec names.

        ``default``; ``none`` (keyword search only); ``fake``, ``fake:DIMS`` or
        ``fake:DIMS:MS`` (MS milliseconds a text: a slow model, for tests);
        ``onnx:/path/to/model-dir``; ``openai:MODEL`` or ``openai:MODEL@BASE_URL`` (its API
        key from ``$OPENAI_API_KEY``).
        """
        return _spec_embedder(spec, settings.api_key())


def _spec_embedder(spec: str, api_key: str | None) -> Embedder | None:
    """Return the embedder ``spec`` names (see `Embedder.from_spec`), an ``openai:`` one with
    ``api_key``."""
    if not isinstance(spec, str):
        raise ValidationError(f"an embedder spec must be a string, not {type(spec).__name__}")
    spec = spec.strip()
    kind, _, argument = spec.partition(":")
    if kind == "default" and not argument:
        return Embedder.default()
    if kind == "none" and not argument:
        return None
    if kind == "fake":
        dims, _, delay_ms = argument.partition(":")
        try:
            return Embedder.fake(int(dims) if dims else 64, float(delay_ms or 0) / 1000)
        except ValueError:
            pass
    if kind == "onnx" and argument:
        return Embedder.onnx(argument)
    if kind == "openai" and argument:
        from vrom.embed.remote import OpenAIEmbedder

        return OpenAIEmbedder.from_argument(argument, api_key=api_key)
    raise ValidationError(
        f"unknown embedder {spec!r}: use 'default', 'none', 'fake[:DIMS[:MS]]', 'onnx:DIR' "
        "or 'openai:MODEL[@URL]'"
    )


EmbedderChoice = Embedder | str | None
"""What a user may pass as ``embedder=``: an `Embedder` (theirs: vrom never closes it), a spec
string (see `Embedder.from_spec`), ``"auto"`` (``$VROM_EMBEDDER``, else the default model), or
None (keyword search only)."""
AUTO = "auto"


def resolve_embedder(
    choice: EmbedderChoice, auto_spec: str, *, api_key: str | None = None
) -> tuple[Embedder | None, bool]:
    """Return the embedder a user's choice names, and whether vrom owns it (and closes it).

    ``auto_spec`` is the spec ``"auto"`` stands for and ``api_key`` an ``openai:`` spec's key
    (the faces pass them from `vrom.settings.Settings`: nothing here reads the environment).
    An `Embedder` instance is the caller's: vrom uses it and never closes it.
    """
    if choice is None:
        return None, False
    if isinstance(choice, Embedder):
        return choice, False
    if not isinstance(choice, str):
        raise ValidationError(
            f"embedder must be an Embedder, a spec string or None, not {type(choice).__name__}"
        )
    return _spec_embedder(auto_spec if choice == AUTO else choice, api_key), True


class EmbedderBinding:
    """A user's embedder choice, resolved when first needed (so keyword-only work loads no
    model), closed only if vrom made it."""

    def __init__(
        self,
        choice: EmbedderChoice,
        auto_spec: str,
        *,
        api_key: str | None = None,
        load: Callable[[], Embedder | None] | None = None,
    ) -> None:
        """``auto_spec`` and ``api_key`` as for `resolve_embedder`."""
        self._choice = choice
        self._auto_spec = auto_spec
        self._api_key = api_key
        self._load = load
        self._embedder: Embedder | None = None
        self._owned = False
        self._resolved = False

    @classmethod
    def of(cls, embedder: Embedder | None) -> EmbedderBinding:
        """Return a binding to an embedder already made (the caller's: never closed)."""
        return cls(embedder, "none")

    @classmethod
    def lazy(cls, load: Callable[[], Embedder | None]) -> EmbedderBinding:
        """Return a binding that calls ``load`` for the embedder when first needed (the
        caller's: never closed)."""
        return cls(AUTO, "none", load=load)

    @property
    def configured(self) -> bool:
        """False for keyword search only: the choice None or the spec ``none`` (known without
        loading a model), or a choice that resolved to no embedder."""
        if self._resolved:
            return self._embedder is not None
        if self._choice is None:
            return False
        if isinstance(self._choice, str) and self._load is None:
            spec = self._auto_spec if self._choice == AUTO else self._choice
            return spec.strip() != "none"
        return True

    def get(self) -> Embedder | None:
        """Return the embedder, resolving the choice on the first call."""
        if not self._resolved:
            if self._load is not None:
                self._embedder, self._owned = self._load(), False
            else:
                self._embedder, self._owned = resolve_embedder(
                    self._choice, self._auto_spec, api_key=self._api_key
                )
            self._resolved = True
        return self._embedder

    def close(self) -> None:
        """Close the embedder if vrom made it; a caller's embedder stays open."""
        if self._owned and self._embedder is not None:
            self._embedder.close()
        self._embedder, self._owned, self._resolved = None, False, False


def _checked(texts: Sequence[str]) -> Sequence[str]:
    if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
        raise ValidationError("embed_documents takes a sequence of strings")
    if any(_LONE_SURROGATE.search(t) for t in texts):
        return [_valid_unicode(t) for t in texts]
    return texts


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _valid_unicode(text: str) -> str:
    """Return ``text`` with each lone surrogate replaced by U+FFFD (the replacement character)."""
    return _LONE_SURROGATE.sub("\ufffd", text)
