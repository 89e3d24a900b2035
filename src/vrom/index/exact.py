"""Exact vector search over an in-memory float32 matrix (numpy), optionally over a subset."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from vrom.errors import ValidationError
from vrom.index import METRICS, stored_encoding
from vrom.index.codec import decode
from vrom.store import Store


class ExactIndex:
    """All vectors of a store in one matrix; scores are cosine/dot similarity or -distance."""

    def __init__(self, store: Store, metric: str = "cosine") -> None:
        if metric not in METRICS:
            raise ValidationError(f"metric must be one of {', '.join(METRICS)}, not {metric!r}")
        self._store = store
        self._metric = metric
        self._generation = -1
        self._ids: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._matrix: npt.NDArray[np.float32] = np.zeros((0, 0), dtype=np.float32)
        self._positions: dict[int, int] = {}

    def __len__(self) -> int:
        self.refresh()
        return len(self._ids)

    def refresh(self) -> bool:
        """Reload the vectors if the store's changed since the last load; True if it reloaded."""
        generation = self._store.vector_generation()
        if generation == self._generation:
            return False
        rows = self._store.vector_rows()
        self._ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        self._matrix = decode([row[1] for row in rows], stored_encoding(self._store))
        self._positions = {int(i): n for n, i in enumerate(self._ids)}
        self._generation = generation
        return True

    def search(
        self,
        query: npt.NDArray[np.float32],
        k: int,
        allowed: Sequence[int] | None = None,
        ef_search: int | None = None,
    ) -> list[tuple[int, float]]:
        """Return up to ``k`` (chunk id, score) pairs, best first, among ``allowed`` ids if given.

        ``ef_search`` is accepted for the approximate index's sake and ignored: this is exact.
        """
        self.refresh()
        if not len(self._ids):
            return []
        if query.shape[-1] != self._matrix.shape[1]:
            raise ValidationError(
                f"query has {query.shape[-1]} dimensions, the index {self._matrix.shape[1]}"
            )
        if allowed is None:
            ids, matrix = self._ids, self._matrix
        else:
            rows = np.fromiter(
                (self._positions[i] for i in allowed if i in self._positions), dtype=np.int64
            )
            ids, matrix = self._ids[rows], self._matrix[rows]
        return nearest_rows(ids, matrix, query, k, self._metric)


def nearest_rows(
    ids: npt.NDArray[np.int64],
    matrix: npt.NDArray[np.float32],
    query: npt.NDArray[np.float32],
    k: int,
    metric: str,
) -> list[tuple[int, float]]:
    """Return the ``k`` (id, score) pairs of the rows nearest to ``query``, best first (exact).

    Scores are the dot product for ``cosine`` and ``dot`` (vectors are L2-normalised, so the
    dot product is the cosine) and the negated distance for ``euclidean``: higher is better.
    """
    if not len(ids):
        return []
    scores = -np.linalg.norm(matrix - query, axis=1) if metric == "euclidean" else matrix @ query
    k = min(k, len(ids))
    top = np.argpartition(-scores, k - 1)[:k]
    top = top[np.argsort(-scores[top], kind="stable")]
    return [(int(ids[i]), float(scores[i])) for i in top]
