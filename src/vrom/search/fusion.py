"""Fusing rankings and widening candidate pools: the two steps every search mode shares.

Reciprocal rank fusion (k=60) adds ``1 / (60 + rank)`` from each ranking a candidate appears
in. Pool widening asks a retriever for more candidates when one-per-document ranking left fewer
than ``k``: a few long documents can fill a pool with their chunks.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

RRF_K = 60
MAX_K = 1000
CANDIDATE_FACTOR = 4
"""Candidates fetched per requested hit, so priors and fusion can reorder a wider pool."""
MIN_POOL = 50
MAX_POOL = MAX_K * CANDIDATE_FACTOR
"""A pool crowded by one document's chunks widens 4x at a time, up to this many."""

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


def first_pool(k: int) -> int:
    """Return how many candidates a retriever is first asked for, to return ``k`` hits."""
    return max(MIN_POOL, k * CANDIDATE_FACTOR)


def first_k(ranked: Iterable[T], k: int, document_of: Callable[[T], Hashable] | None) -> list[T]:
    """Return the first ``k`` of ``ranked``; with ``document_of``, only each document's first."""
    kept: list[T] = []
    seen: set[Hashable] = set()
    for item in ranked:
        if len(kept) == k:
            break
        if document_of is not None:
            document = document_of(item)
            if document in seen:
                continue
            seen.add(document)
        kept.append(item)
    return kept


def widen(rank: Callable[[int], tuple[list[T], bool]], k: int, pool: int) -> list[T]:
    """Return what ``rank(pool)`` keeps, widening the pool while it keeps fewer than ``k``.

    ``rank(pool)`` returns the hits it kept from ``pool`` candidates and whether any retriever
    was full (more candidates exist). The pool grows 4x at a time, up to `MAX_POOL`.
    """
    while True:
        kept, full = rank(pool)
        if len(kept) >= k or not full or pool >= MAX_POOL:
            return kept
        pool = min(pool * 4, MAX_POOL)


def reciprocal_rank_fusion(
    rankings: Sequence[tuple[str, Sequence[tuple[K, float]]]],
    coverage: Mapping[str, float] | None = None,
    unseen: Mapping[str, Mapping[K, int]] | None = None,
) -> dict[K, dict[str, float]]:
    """Return each candidate's score parts: its score in every named ranking, and ``rrf``.

    ``rankings`` are (name, [(candidate, score), ...] best first); ``rrf`` sums
    ``1 / (RRF_K + rank)`` over the rankings the candidate is in.

    ``coverage`` names a ranking that saw only a share of the candidates (vectors of a store
    still being embedded) and that share, in (0, 1]: its rank ``r`` counts as ``r / share``,
    the rank the candidate would expect among them all. So the best of the 1% of chunks that
    have vectors weighs like a rank-100 hit, not like the best of the whole store, and fusion
    moves smoothly from keyword alone towards full hybrid as vectors arrive.

    ``unseen`` names, for a ranking, candidates it could not see (chunks with no vector yet)
    and a rank to count for them instead (their rank in another ranking), so a candidate is
    neither helped nor hurt by a vector it does not have yet: no score part is added for them.
    """
    fused: dict[K, dict[str, float]] = {}
    for name, ranking in rankings:
        share = 1.0 if coverage is None else min(1.0, max(coverage.get(name, 1.0), 1e-6))
        for rank, (candidate, score) in enumerate(ranking, start=1):
            parts = fused.setdefault(candidate, {})
            parts[name] = score
            parts["rrf"] = parts.get("rrf", 0.0) + 1.0 / (RRF_K + rank / share)
    for stand_ins in (unseen or {}).values():
        for candidate, rank in stand_ins.items():
            parts = fused.setdefault(candidate, {})
            parts["rrf"] = parts.get("rrf", 0.0) + 1.0 / (RRF_K + rank)
    return fused
