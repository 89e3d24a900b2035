"""An embedder whose model loads on first use, with a fingerprint known before that.

A store checks its model by fingerprint; a re-index with nothing new to embed, a keyword search
or `vrom index` on an unchanged vault then never load the model (0.4 s and ~230 MB for the
default one). `Embedder.default` returns one of these.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from vrom.embed import Embedder, Fingerprint
from vrom.errors import ModelError

if TYPE_CHECKING:
    from vrom.embed import Matrix


class DeferredEmbedder(Embedder):
    """Stands for the embedder ``load()`` returns, loading it the first time a text is embedded.

    The loaded model's fingerprint must be ``fingerprint``, or `ModelError`: vectors are never
    written under a fingerprint other than the model's own.
    """

    def __init__(self, fingerprint: Fingerprint, load: Callable[[], Embedder]) -> None:
        self._fingerprint = fingerprint
        self._load = load
        self._model: Embedder | None = None
        self._lock = threading.Lock()  # two threads' first texts load the model once

    @property
    def fingerprint(self) -> Fingerprint:
        """The model's fingerprint (known without loading it)."""
        return self._fingerprint

    @property
    def loaded(self) -> bool:
        """True once the model has been loaded (and not closed since)."""
        return self._model is not None

    def model(self) -> Embedder:
        """Return the loaded model, loading it now if needed."""
        with self._lock:
            if self._model is None:
                model = self._load()
                if model.fingerprint != self._fingerprint:
                    model.close()
                    raise ModelError(
                        f"the model loaded is {model.fingerprint.describe()} "
                        f"({model.fingerprint.revision}), not {self._fingerprint.describe()} "
                        f"({self._fingerprint.revision}) as expected: reinstall it"
                    )
                self._model = model
            return self._model

    def _embed(self, texts: Sequence[str], kind: str) -> Matrix:
        return self.model()._embed(texts, kind)

    # the public methods are forwarded too, so a model's own query handling is kept

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        """Return one normalised float32 row per document text (loading the model first)."""
        return self.model().embed_documents(texts)

    def embed_query(self, text: str) -> Matrix:
        """Return the normalised vector of a query (loading the model first)."""
        return self.model().embed_query(text)

    def close(self) -> None:
        """Release the model if it was loaded; the next text loads it again."""
        with self._lock:
            model, self._model = self._model, None
        if model is not None:
            model.close()
