"""Fake models for tests that must prove nothing was embedded again."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vrom import Embedder, Fingerprint


class QueriesOnly(Embedder):
    """The fake model (16 d) for queries only: embedding anything else fails the test, so a
    store searched with it is searched with the vectors it was given."""

    def __init__(self) -> None:
        self._inner = Embedder.fake(16)

    @property
    def fingerprint(self) -> Fingerprint:
        return self._inner.fingerprint

    def _embed(self, texts: Sequence[str], kind: str) -> Any:
        assert kind == "query", f"embedded {len(texts)} texts again"
        return self._inner.embed_documents(texts)  # the fake embeds both kinds alike
