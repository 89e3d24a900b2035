"""Scoring vectors exactly: each row against a query (numpy), the best kept, ties by id.

Scoring one query is a matrix-vector product, bound by memory speed rather than arithmetic; it
runs on one BLAS thread (`one_blas_thread`). On a busy two-core machine (bench/blas_threads.py)
one thread answered 10k vectors in 0.8 ms where two took 4.2 ms waiting for each other (16 ms
beside one more busy process), and was as fast or faster at 50k and 100k.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt


def score_rows(
    matrix: npt.NDArray[np.float32], query: npt.NDArray[np.float32], metric: str
) -> npt.NDArray[np.float32]:
    """Return each row's score against ``query``: the dot product for ``cosine`` and ``dot``
    (vectors are L2-normalised, so the dot product is the cosine) and the negated distance for
    ``euclidean``. Higher is better."""
    if not len(matrix):
        return np.zeros(0, dtype=np.float32)
    if metric == "euclidean":
        distances: npt.NDArray[np.float32] = np.linalg.norm(matrix - query, axis=1)
        return -distances
    with one_blas_thread():
        scores: npt.NDArray[np.float32] = matrix @ query
    return scores


def best_rows(
    ids: npt.NDArray[np.int64], scores: npt.NDArray[np.float32], k: int
) -> npt.NDArray[np.intp]:
    """Return the positions of the ``k`` highest ``scores``, best first.

    Equal scores go by id, lowest first, the ones cut at the ``k``-th score included: the
    answer depends on the (id, score) pairs only, not on the order they come in.
    """
    k = min(k, len(ids))
    if k <= 0:
        return np.zeros(0, dtype=np.intp)
    candidates: npt.NDArray[np.intp] = np.arange(len(ids))
    if k < len(ids):
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]
        candidates = np.flatnonzero(scores >= kth)
    order = np.lexsort((ids[candidates], -scores[candidates]))[:k]
    best: npt.NDArray[np.intp] = candidates[order]
    return best


def nearest_rows(
    ids: npt.NDArray[np.int64],
    matrix: npt.NDArray[np.float32],
    query: npt.NDArray[np.float32],
    k: int,
    metric: str,
) -> list[tuple[int, float]]:
    """Return the ``k`` (id, score) pairs of the rows nearest to ``query``, best first (exact;
    scores as `score_rows` gives them, equal ones by id)."""
    scores = score_rows(matrix, query, metric)
    return [(int(ids[i]), float(scores[i])) for i in best_rows(ids, scores, k)]


class _OneBlasThread:
    """Limits BLAS to one thread while any search in the process scores, then restores it.

    A count, not a plain limit per call: two threads searching at once would otherwise restore
    each other's limit and leave BLAS on one thread for good. Without threadpoolctl (an
    environment installed without it) BLAS keeps its own threads.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._blas: Any = None  # threadpoolctl's BLAS libraries, found on first use
        self._limiter: Any = None

    @contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._users == 0:
                self._limiter = self._limit()
            self._users += 1
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0 and self._limiter is not None:
                    self._limiter.restore_original_limits()
                    self._limiter = None

    def _limit(self) -> Any:
        if self._blas is None:
            try:
                from threadpoolctl import ThreadpoolController  # only exact search needs it
            except ImportError:
                self._blas = False
            else:
                self._blas = ThreadpoolController().select(user_api="blas")
        return self._blas.limit(limits=1) if self._blas else None


one_blas_thread = _OneBlasThread()
"""``with one_blas_thread():`` runs the block's BLAS calls on one thread (see `_OneBlasThread`)."""
