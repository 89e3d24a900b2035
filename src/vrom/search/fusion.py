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

A search for documents (one hit each) fuses by document (`FusedCandidates.by_group`): a
document's keyword part is its best chunk's in the keyword ranking and its vector part its best
chunk's in the vector ranking, so a document that matches the words in one chunk and the
meaning in another is matched both ways; it is cited at its best fused chunk. Against ranking
documents by their best fused chunk, on the same candidates (`bench/fusion_variants.py`),
nDCG@10 rose 0.7359 -> 0.7401 on SciFact and 0.3293 -> 0.3331 on NFCorpus (dialogue turns,
one chunk each, do not change).

The fusion itself runs on arrays (`fuse_arrays`, numpy): a hybrid search at depth 100 fuses 400
+ 400 candidates, and building a dict of parts for each cost more than the rest of the fusion.
Parts are built only for the hits returned (`FusedCandidates.parts`).

Pool widening asks a retriever for more candidates when one-per-document ranking left fewer
than ``k``: a few long documents can fill a pool with their chunks.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

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
    floor, span = _scale([score for _, score in ranking], depth)
    if span <= 0:
        return {candidate: 1.0 for candidate, _ in ranking}
    return {candidate: max(0.0, (score - floor) / span) for candidate, score in ranking}


@dataclass(frozen=True)
class FusedCandidates:
    """The candidates of two rankings fused, as arrays in candidate-id order (not ranked).

    ``fused`` is the score, ``rrf`` orders equal scores; ``bm25`` and ``vector`` are each
    candidate's raw score in that ranking, NaN where it is absent. ``keyword_part`` and
    ``vector_part`` are the `normalised` scores ``fused`` weighs (a candidate with no vector
    yet has its keyword part as its vector part), with ``weights`` (keyword, vector).
    """

    ids: npt.NDArray[np.int64]
    fused: npt.NDArray[np.float64]
    rrf: npt.NDArray[np.float64]
    bm25: npt.NDArray[np.float64]
    vector: npt.NDArray[np.float64]
    keyword_part: npt.NDArray[np.float64]
    vector_part: npt.NDArray[np.float64]
    weights: tuple[float, float]

    def take(self, mask: npt.NDArray[np.bool_]) -> FusedCandidates:
        """Return the candidates ``mask`` keeps."""
        return FusedCandidates(
            self.ids[mask],
            self.fused[mask],
            self.rrf[mask],
            self.bm25[mask],
            self.vector[mask],
            self.keyword_part[mask],
            self.vector_part[mask],
            self.weights,
        )

    def by_group(
        self, groups: npt.NDArray[np.int64]
    ) -> tuple[FusedCandidates, npt.NDArray[np.int64]]:
        """Return the candidates fused by group (a chunk's document), and each group's best
        candidate (its cited chunk), in group-id order.

        A group's keyword and vector parts are its best candidate's in each ranking, which
        need not be the same candidate: a document that matches the words in one chunk and
        the meaning in another is matched both ways. Its ``bm25``, ``vector`` and ``rrf`` are
        the highest of its candidates'. The best candidate is the highest fused (then RRF,
        then lowest id). Parts stay normalised per candidate, so a search for 10 documents
        ranks them as the first 10 of a search for 100.
        """
        import numpy as np

        ids, where = np.unique(groups, return_inverse=True)
        keyword_part, vector_part = np.zeros(len(ids)), np.zeros(len(ids))
        rrf = np.zeros(len(ids))
        bm25, vector = np.full(len(ids), np.nan), np.full(len(ids), np.nan)
        np.maximum.at(keyword_part, where, self.keyword_part)
        np.maximum.at(vector_part, where, self.vector_part)
        np.maximum.at(rrf, where, self.rrf)
        np.fmax.at(bm25, where, self.bm25)
        np.fmax.at(vector, where, self.vector)
        keyword_weight, vector_weight = self.weights
        fused = keyword_weight * keyword_part + vector_weight * vector_part
        best = np.lexsort((self.ids, -self.rrf, -self.fused))
        first = np.unique(where[best], return_index=True)[1]
        grouped = FusedCandidates(
            ids, fused, rrf, bm25, vector, keyword_part, vector_part, self.weights
        )
        return grouped, self.ids[best[first]]

    def parts(self, at: int) -> dict[str, float]:
        """Return the score parts of the candidate at position ``at``: ``bm25`` and ``vector``
        (where it is in that ranking), ``fused`` and ``rrf``."""
        parts = {}
        if (bm25 := float(self.bm25[at])) == bm25:  # NaN is not equal to itself
            parts["bm25"] = bm25
        if (vector := float(self.vector[at])) == vector:
            parts["vector"] = vector
        parts["fused"] = float(self.fused[at])
        parts["rrf"] = float(self.rrf[at])
        return parts


def fuse_arrays(
    keyword_ids: npt.NDArray[np.int64],
    keyword_scores: npt.NDArray[np.float64],
    vector_ids: npt.NDArray[np.int64],
    vector_scores: npt.NDArray[np.float64],
    coverage: float = 1.0,
    unseen: npt.NDArray[np.bool_] | None = None,
) -> FusedCandidates:
    """Return the two rankings' candidates fused: ``fused`` is ``w * keyword part + (1 - w) *
    vector part``, each part the candidate's `normalised` score in that ranking (0 when
    absent) and ``w`` `KEYWORD_WEIGHT`; ``rrf``, which orders equal fused scores, sums the
    candidate's reciprocal rank in each ranking (`_rrf_array`: a tie shares one rank).

    Each ranking is its candidates' ids and scores, best first, no id twice. ``coverage`` is
    the share of the candidates the vector ranking could see (chunks still being embedded), in
    (0, 1]: the vector part's weight shrinks with it, so fusion moves smoothly from keyword
    alone towards full hybrid as vectors arrive. ``unseen`` marks the keyword candidates with
    no vector yet: their keyword part (and rank) stands in for the vector part, so a candidate
    is neither helped nor hurt by a vector it does not have yet.
    """
    import numpy as np

    share = min(1.0, max(coverage, 0.0))
    vector_weight = (1.0 - KEYWORD_WEIGHT) * share
    keyword_weight = 1.0 - vector_weight
    ids, where = np.unique(np.concatenate((keyword_ids, vector_ids)), return_inverse=True)
    in_keyword, in_vector = where[: len(keyword_ids)], where[len(keyword_ids) :]
    keyword_part, vector_part, rrf = np.zeros(len(ids)), np.zeros(len(ids)), np.zeros(len(ids))
    bm25, vector = np.full(len(ids), np.nan), np.full(len(ids), np.nan)
    keyword_rrf = _rrf_array(keyword_scores)
    keyword_part[in_keyword] = _normalised_array(keyword_scores)
    vector_part[in_vector] = _normalised_array(vector_scores)
    if unseen is not None:  # no vector yet: the keyword part and rank stand in for it
        vector_part[in_keyword[unseen]] = keyword_part[in_keyword[unseen]]
        keyword_rrf = np.where(unseen, 2 * keyword_rrf, keyword_rrf)
    rrf[in_keyword] = keyword_rrf
    bm25[in_keyword] = keyword_scores
    rrf[in_vector] += _rrf_array(vector_scores)
    vector[in_vector] = vector_scores
    fused = keyword_weight * keyword_part + vector_weight * vector_part
    return FusedCandidates(
        ids, fused, rrf, bm25, vector, keyword_part, vector_part, (keyword_weight, vector_weight)
    )


def _rrf_array(scores: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Return ``1 / (RRF_K + rank)`` for each candidate of a ranking's scores, best first.

    Candidates of equal score share the rank of the first of them (a competition rank: 1, 2,
    2, 4), so the order a retriever lists a tie in (by id, oldest first) is not turned into
    a preference: a tie goes on to what orders candidates after RRF (the newer memory, the
    lower chunk id), as in keyword and vector search alone.
    """
    import numpy as np

    positions = np.arange(len(scores))
    if len(scores) > 1:
        starts = np.empty(len(scores), dtype=bool)
        starts[0] = True
        np.not_equal(scores[1:], scores[:-1], out=starts[1:])
        positions = np.maximum.accumulate(np.where(starts, positions, 0))
    return 1.0 / (RRF_K + 1 + positions)


def fuse_rankings(
    keyword: Sequence[tuple[K, float]],
    vector: Sequence[tuple[K, float]],
    coverage: float = 1.0,
    unseen: Iterable[K] = (),
) -> tuple[list[K], FusedCandidates]:
    """Return rankings of any hashable candidates ([(candidate, score), ...] best first) fused
    by `fuse_arrays`, with the candidates numbered: candidate ``n`` is the first list's
    ``n``-th, and the fused ``ids`` are those numbers. ``unseen`` candidates have no vector yet."""
    import numpy as np

    number: dict[K, int] = {}
    for candidate, _ in (*keyword, *vector):
        number.setdefault(candidate, len(number))
    stand_ins = set(unseen)
    fused = fuse_arrays(
        np.array([number[c] for c, _ in keyword], dtype=np.int64),
        np.array([score for _, score in keyword], dtype=np.float64),
        np.array([number[c] for c, _ in vector], dtype=np.int64),
        np.array([score for _, score in vector], dtype=np.float64),
        coverage,
        np.array([c in stand_ins for c, _ in keyword], dtype=bool) if stand_ins else None,
    )
    return list(number), fused


def fuse(
    keyword: Sequence[tuple[K, float]],
    vector: Sequence[tuple[K, float]],
    coverage: float = 1.0,
    unseen: Iterable[K] = (),
) -> dict[K, dict[str, float]]:
    """Return each candidate's score parts, as `fuse_arrays` fuses them, for rankings of any
    hashable candidates (`fuse_rankings`)."""
    candidates, fused = fuse_rankings(keyword, vector, coverage, unseen)
    return {candidates[n]: fused.parts(at) for at, n in enumerate(fused.ids.tolist())}


def _normalised_array(scores: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Return `normalised` for a ranking's scores, best first."""
    import numpy as np

    floor, span = _scale(scores)
    if span <= 0:
        return np.ones(len(scores))
    return np.maximum(0.0, (scores - floor) / span)


def _scale(
    scores: Sequence[float] | npt.NDArray[np.float64], depth: int = FUSION_DEPTH
) -> tuple[float, float]:
    """Return the (floor, span) `normalised` rescales a ranking's scores (best first) with."""
    if not len(scores):
        return 0.0, 0.0
    floor = float(scores[depth - 1]) if len(scores) >= depth else min(0.0, float(scores[-1]))
    return floor, float(scores[0]) - floor


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
