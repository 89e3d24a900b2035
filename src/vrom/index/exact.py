"""Exact vector search over an in-memory float32 matrix (numpy), optionally over a subset of keys."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from vrom.errors import ValidationError
from vrom.index import METRICS, replay_limit
from vrom.index.codec import decode
from vrom.store import VectorChanges, VectorSource


class ExactIndex:
    """All vectors of a source in one matrix; scores are cosine/dot similarity or -distance."""

    def __init__(self, vectors: VectorSource, metric: str = "cosine") -> None:
        if metric not in METRICS:
            raise ValidationError(f"metric must be one of {', '.join(METRICS)}, not {metric!r}")
        self._vectors = vectors
        self._metric = metric
        self._generation = -1
        self._change_number: int | None = None  # the store change the vectors reflect
        self._ids: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._matrix: npt.NDArray[np.float32] = np.zeros((0, 0), dtype=np.float32)
        # rows are kept in chunk id order, so ids are found by binary search (np.searchsorted)

    def __len__(self) -> int:
        self.refresh()
        return len(self._ids)

    def refresh(self) -> bool:
        """Catch up with the store's vectors if they changed since; True if anything was read."""
        generation = self._vectors.generation()
        if generation == self._generation:
            return False
        changes = (
            None if self._change_number is None else self._vectors.changes(self._change_number)
        )
        if changes is not None and len(changes.keys) <= replay_limit(len(self._ids)):
            self._replay(changes)
        else:
            self._load()
        self._generation = generation
        return True

    def close(self) -> None:
        """Let the vectors go (they load again on the next search)."""
        self._generation = -1
        self._change_number = None
        self._ids = np.zeros(0, dtype=np.int64)
        self._matrix = np.zeros((0, 0), dtype=np.float32)

    def _load(self) -> None:
        # the change number is read before the rows: a change in between is replayed later
        change_number = self._vectors.change_number()
        rows = self._vectors.rows()
        self._ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        self._matrix = decode([row[1] for row in rows], self._vectors.encoding())
        self._change_number = change_number  # vector_rows() come in chunk id order

    def _replay(self, changes: VectorChanges) -> None:
        """Drop each changed chunk's row and append its current vector, if it has one."""
        current = self._vectors.of(changes.keys)
        changed = np.asarray(changes.keys, dtype=np.int64)
        ids, matrix = self._ids, self._matrix
        if len(ids) and len(changed):
            keep = ~np.isin(ids, changed)
            ids, matrix = ids[keep], matrix[keep]
        if current:
            added = np.fromiter(current, dtype=np.int64, count=len(current))
            vectors = decode(list(current.values()), self._vectors.encoding())
            if len(ids):
                ids, matrix = np.concatenate([ids, added]), np.concatenate([matrix, vectors])
                order = np.argsort(ids, kind="stable")
                ids, matrix = ids[order], matrix[order]
            else:
                ids, matrix = added, vectors
        self._ids, self._matrix = ids, matrix
        self._change_number = changes.latest

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
            rows = _present(self._ids, np.asarray(allowed, dtype=np.int64))
            ids, matrix = self._ids[rows], self._matrix[rows]
        return nearest_rows(ids, matrix, query, k, self._metric)


def _present(ids: npt.NDArray[np.int64], wanted: npt.NDArray[np.int64]) -> npt.NDArray[np.intp]:
    """Return the rows of sorted ``ids`` that hold one of ``wanted`` (missing ones are skipped)."""
    rows = np.searchsorted(ids, wanted)
    inside = rows < len(ids)
    rows, wanted = rows[inside], wanted[inside]
    found: npt.NDArray[np.intp] = rows[ids[rows] == wanted]
    return found


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
