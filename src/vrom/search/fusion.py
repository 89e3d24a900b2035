"""Fusing rankings and widening candidate pools: the two steps every search mode shares.

Fusion is a convex combination of normalised scores (`fuse`): each ranking's scores are
rescaled so its best is 1 and its `FUSION_DEPTH`-th is 0 (lower ones count 0), and a
candidate's fused score is ``KEYWORD_WEIGHT`` times its keyword part plus the rest times its
vector part. Chosen on the dev sets (docs/benchmarks.md, "Retrieval quality round 2"): against
reciprocal rank fusion it ranks better where one retriever is much stronger (LoCoMo dialogue,
where RRF fell below keyword search alone) and on SciFact, and it depends on the scores of the
first `FUSION_DEPTH` candidates only, so a search asked for 10 hits ranks them as the first 10
of a search asked for 100. Candidates beyond that depth in both rankings tie at 0 and are
ordered by reciprocal rank fusion (k=60), which is kept as ``rrf`` in the parts.

Pool widening asks a retriever for more candidates when one-per-document ranking left fewer
than ``k``: a few long documents can fill a pool with their chunks.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

RRF_K = 60
FUSION_DEPTH = 50
"""Scores are normalised between the best candidate's (1) and this rank's (0); no larger than
`MIN_POOL`, so every search sees this rank when there is one."""
KEYWORD_WEIGHT = 0.5
"""The keyword ranking's share of a fused score; the vector ranking has the rest."""
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


def normalised(ranking: Sequence[tuple[K, float]], depth: int = FUSION_DEPTH) -> dict[K, float]:
    """Return each candidate's score rescaled: 1 for the best, 0 at rank ``depth`` and below.

    ``ranking`` is best first. A ranking shorter than ``depth`` holds every candidate there is
    (retrievers are asked for at least `MIN_POOL`): its floor is 0, BM25's and an orthogonal
    vector's score (or its last score, if lower), so a memory store's second memory is not
    scored 0 for being last of two. A ranking whose scores are all equal gives each 1.
    """
    floor, span = _scale(ranking, depth)
    if span <= 0:
        return {candidate: 1.0 for candidate, _ in ranking}
    return {candidate: max(0.0, (score - floor) / span) for candidate, score in ranking}


def fuse(
    keyword: Sequence[tuple[K, float]],
    vector: Sequence[tuple[K, float]],
    coverage: float = 1.0,
    unseen: Iterable[K] = (),
) -> dict[K, dict[str, float]]:
    """Return each candidate's score parts: ``bm25`` and ``vector`` (its raw score in each
    ranking it is in), ``fused`` (the score) and ``rrf`` (the order among equal ``fused``).

    ``keyword`` and ``vector`` are [(candidate, score), ...] best first. ``fused`` is
    ``w * keyword part + (1 - w) * vector part``, each part the candidate's `normalised` score
    in that ranking (0 when absent) and ``w`` `KEYWORD_WEIGHT`.

    ``coverage`` is the share of the candidates the vector ranking could see (chunks still
    being embedded), in (0, 1]: the vector part's weight shrinks with it, so fusion moves
    smoothly from keyword alone towards full hybrid as vectors arrive. ``unseen`` candidates
    have no vector yet: their keyword part stands in for the vector part, so a candidate is
    neither helped nor hurt by a vector it does not have yet.
    """
    share = min(1.0, max(coverage, 0.0))
    vector_weight = (1.0 - KEYWORD_WEIGHT) * share
    keyword_weight = 1.0 - vector_weight
    stand_ins = set(unseen)
    fused: dict[K, dict[str, float]] = {}
    # one pass a ranking, the parts written in place: this runs on every hybrid search
    floor, span = _scale(keyword)
    for rank, (candidate, score) in enumerate(keyword, start=1):
        part = 1.0 if span <= 0 else max(0.0, (score - floor) / span)
        rrf = 1.0 / (RRF_K + rank)
        if candidate in stand_ins:  # its keyword part and rank stand in for the vector's
            fused[candidate] = {"bm25": score, "rrf": 2 * rrf, "fused": part}
        else:
            fused[candidate] = {"bm25": score, "rrf": rrf, "fused": keyword_weight * part}
    floor, span = _scale(vector)
    for rank, (candidate, score) in enumerate(vector, start=1):
        part = 1.0 if span <= 0 else max(0.0, (score - floor) / span)
        parts = fused.get(candidate)
        if parts is None:
            fused[candidate] = {
                "vector": score,
                "rrf": 1.0 / (RRF_K + rank),
                "fused": vector_weight * part,
            }
        else:
            parts["vector"] = score
            parts["rrf"] += 1.0 / (RRF_K + rank)
            parts["fused"] += vector_weight * part
    return fused


def _scale(ranking: Sequence[tuple[K, float]], depth: int = FUSION_DEPTH) -> tuple[float, float]:
    """Return the (floor, span) `normalised` rescales a ranking's scores with."""
    if not ranking:
        return 0.0, 0.0
    floor = ranking[depth - 1][1] if len(ranking) >= depth else min(0.0, ranking[-1][1])
    return floor, ranking[0][1] - floor


def reciprocal_rank_fusion(
    rankings: Sequence[tuple[str, Sequence[tuple[K, float]]]],
    unseen: Mapping[str, Mapping[K, int]] | None = None,
) -> dict[K, dict[str, float]]:
    """Return each candidate's score parts: its score in every named ranking, and ``rrf``.

    ``rankings`` are (name, [(candidate, score), ...] best first); ``rrf`` sums
    ``1 / (RRF_K + rank)`` over the rankings the candidate is in.

    ``unseen`` names, for a ranking, candidates it could not see (chunks with no vector yet)
    and a rank to count for them instead (their rank in another ranking), so a candidate is
    neither helped nor hurt by a vector it does not have yet: no score part is added for them.
    """
    fused: dict[K, dict[str, float]] = {}
    for name, ranking in rankings:
        for rank, (candidate, score) in enumerate(ranking, start=1):
            parts = fused.setdefault(candidate, {})
            parts[name] = score
            parts["rrf"] = parts.get("rrf", 0.0) + 1.0 / (RRF_K + rank)
    for stand_ins in (unseen or {}).values():
        for candidate, rank in stand_ins.items():
            parts = fused.setdefault(candidate, {})
            parts["rrf"] = parts.get("rrf", 0.0) + 1.0 / (RRF_K + rank)
    return fused
