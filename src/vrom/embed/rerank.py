"""Rerankers: a model that reads a query and a passage together and scores how well the passage
answers it (a cross-encoder), so a search can reorder its first candidates by those scores.

A search asks for it with ``rerank`` (`vrom.search.reranking`): its first ``N`` hits (30 by
default) are scored and the best ``k`` of them come back in the reranker's order, each hit's
``score`` the reranker's. No cross-encoder ships inside a package of the registries vrom
installs from (docs/models.md says what was searched), so ``default`` names none yet: a user
brings one as ``onnx:DIR``, a folder holding ``model.onnx`` and its ``tokenizer.json``.

    reranker = Reranker.from_spec("onnx:~/models/ms-marco-MiniLM-L-6-v2")
    collection = Collection.open("docs", reranker=reranker)
    collection.search("how do I reset it", k=5, mode="hybrid", rerank=True)
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from vrom.errors import ModelError, ValidationError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "NO_PACKAGED_RERANKER",
    "FakeReranker",
    "Reranker",
    "RerankerChoice",
    "Reranking",
]

NO_PACKAGED_RERANKER = (
    "no cross-encoder reranker ships in a package vrom can install yet (docs/models.md):"
    " bring one as --reranker onnx:DIR, a folder holding model.onnx and tokenizer.json"
)
_WORD = re.compile(r"\w+")


class Reranker(ABC):
    """Scores (query, passage) pairs: higher is a better answer, comparable within one call.

    A subclass sets `name` and implements `_score`; `score` checks what it returns.
    """

    name: str
    """What the reranker is, as a search report names it (``onnx:ms-marco-MiniLM-L-6-v2``)."""

    def score(self, query: str, passages: Sequence[str]) -> npt.NDArray[np.float32]:
        """Return one score per passage for ``query``, in the passages' order.

        A model that fails is a `ModelError`; no passage gives an empty array.
        """
        import numpy as np

        if not passages:
            return np.zeros(0, dtype=np.float32)
        scores = np.asarray(self._score(query, list(passages)), dtype=np.float32).reshape(-1)
        if scores.shape != (len(passages),):
            raise ModelError(
                f"reranker {self.name} gave {scores.size} scores for {len(passages)} passages"
            )
        return scores

    @abstractmethod
    def _score(self, query: str, passages: list[str]) -> Any:
        """Return the scores of ``passages`` (a sequence of numbers, one each)."""

    def close(self) -> None:  # noqa: B027 - a model holding nothing has nothing to let go of
        """Let go of what the model holds."""

    @staticmethod
    def from_spec(spec: str) -> Reranker | None:
        """Return the reranker a short spec names: ``none`` (None: no reranking), ``onnx:DIR``
        (a cross-encoder folder: `vrom.embed.onnx.OnnxReranker`), ``fake`` (word overlap, for
        tests); ``default`` is a `ModelError` until a packaged cross-encoder exists."""
        if not isinstance(spec, str):
            raise ValidationError(f"a reranker spec must be a string, not {type(spec).__name__}")
        kind, _, argument = spec.strip().partition(":")
        if kind == "none" and not argument:
            return None
        if kind == "fake" and not argument:
            return FakeReranker()
        if kind == "default" and not argument:
            raise ModelError(NO_PACKAGED_RERANKER)
        if kind == "onnx" and argument:
            from vrom.embed.onnx import OnnxReranker

            return OnnxReranker.from_dir(argument)
        raise ValidationError(
            f"unknown reranker {spec!r}: use 'none', 'onnx:DIR', 'default' or 'fake'"
        )


RerankerChoice = Reranker | str | None
"""What a user may pass as ``reranker=``: a `Reranker` (theirs: vrom never closes it), a spec
string (`Reranker.from_spec`), or None (searches cannot rerank)."""


def resolve_reranker(choice: RerankerChoice) -> tuple[Reranker | None, bool]:
    """Return the reranker a user's choice names, and whether vrom owns it (and closes it)."""
    if choice is None or isinstance(choice, Reranker):
        return choice, False
    if isinstance(choice, str):
        made = Reranker.from_spec(choice)
        return made, made is not None
    raise ValidationError(
        f"reranker must be a Reranker, a spec string or None, not {type(choice).__name__}"
    )


class Reranking:
    """The reranker a search core reorders with (``rerank``), made from a user's choice
    (`RerankerChoice`), and closed with the core when vrom made it (from a spec)."""

    def __init__(self, choice: RerankerChoice = None) -> None:
        self.reranker, self._owned = resolve_reranker(choice)

    def close(self) -> None:
        """Close the reranker if vrom made it; one the caller passed in stays theirs."""
        if self._owned and self.reranker is not None:
            self._owned = False
            self.reranker.close()


class FakeReranker(Reranker):
    """A deterministic stand-in for tests: the share of the query's distinct words (lower-cased)
    a passage holds. Not meaning: it only proves the stage orders by its scores."""

    name = "fake"

    def _score(self, query: str, passages: list[str]) -> list[float]:
        wanted = set(_WORD.findall(query.lower()))
        if not wanted:
            return [0.0] * len(passages)
        return [len(wanted & set(_WORD.findall(p.lower()))) / len(wanted) for p in passages]
