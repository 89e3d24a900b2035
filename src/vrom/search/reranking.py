"""The reranking stage of a search: its first candidates reordered by a cross-encoder.

A search asked with ``rerank`` ranks ``max(k, N)`` hits as it would without it (``N`` = 30 for
``rerank=True``), in its mode and with its filter. `reranked` then scores the first N hits'
passages (each hit's title, then its chunk) against the query with the facade's
`vrom.embed.Reranker` and puts them in the reranker's order, equal scores keeping the search's;
the hits after them (when ``k`` is over N) follow as they were, and the first ``k`` are kept.
Each reranked hit's ``score`` is the reranker's (``score_kind`` ``reranker``); its ``scores``
keep the parts the search gave it, with ``reranker`` and ``before_rerank`` (the score it had).
The stage is the same for every mode and face; its wall time is the report's ``rerank_ms``.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence

from vrom.embed.rerank import Reranker
from vrom.errors import ModelError, ValidationError, shown
from vrom.results import Hit, SearchReport, changed_hit
from vrom.search.vector import check_ef_search

__all__ = ["RERANK_CANDIDATES", "reordered", "rerank_depth", "reranked", "titled"]

RERANK_CANDIDATES = 30
"""How many of a search's first hits ``rerank=True`` reorders."""
MAX_RERANK_CANDIDATES = 1000


def rerank_depth(
    rerank: bool | int, k: int, reranker: Reranker | None, ef_search: int | None = None
) -> tuple[int, int | None]:
    """Return how many hits a search ranks before reranking, and the HNSW breadth to rank them
    with: (0, ``ef_search``) for ``rerank`` False (no stage), else ``max(k, N)`` (N =
    `RERANK_CANDIDATES` for True, or the N given) and ``ef_search`` widened to it. Asking for
    the stage without a ``reranker`` is a `ValidationError` before anything is read, as is an
    ``ef_search`` under ``k``."""
    if rerank is False:
        return 0, ef_search
    if rerank is not True and not (
        isinstance(rerank, int) and 1 <= rerank <= MAX_RERANK_CANDIDATES
    ):
        raise ValidationError(
            f"rerank must be True, False or a number of candidates from 1 to "
            f"{MAX_RERANK_CANDIDATES}, not {shown(rerank)}"
        )
    if reranker is None:
        raise ValidationError(
            "rerank needs a reranker, and none is configured: open with reranker="
            "'onnx:DIR' (a cross-encoder folder; --reranker on the command line)"
        )
    check_ef_search(ef_search, k)
    depth = max(k, RERANK_CANDIDATES if rerank is True else rerank)
    return depth, None if ef_search is None else max(ef_search, depth)


def reranked(
    report: SearchReport, reranker: Reranker | None, query: str, k: int, rerank: bool | int
) -> SearchReport:
    """Return ``report``'s first ``k`` hits once its first N (``rerank``: True for
    `RERANK_CANDIDATES`, or N) are in ``reranker``'s order for ``query``, the hits after them
    following as they were (see the module docstring), naming the reranker and its time."""
    started = time.perf_counter()
    hits = report.results
    order, scores = reordered(reranker, query, [_passage(hit) for hit in hits], k, rerank)
    kept = [
        hits[i]
        if i >= len(scores)
        else changed_hit(
            hits[i],
            score=scores[i],
            score_kind="reranker",
            scores={**hits[i].scores, "before_rerank": hits[i].score, "reranker": scores[i]},
        )
        for i in order
    ]
    ms = round((time.perf_counter() - started) * 1000, 3)
    assert reranker is not None  # `reordered` refuses to run without one
    return dataclasses.replace(report, results=kept, reranker=reranker.name, rerank_ms=ms)


def reordered(
    reranker: Reranker | None, query: str, passages: Sequence[str], k: int, rerank: bool | int
) -> tuple[list[int], list[float]]:
    """Return the places of the first ``k`` of ``passages`` (a ranking's items' texts, best
    first) once its first N (``rerank``: True for `RERANK_CANDIDATES`, or N) are in
    ``reranker``'s order for ``query`` (equal scores keep theirs), the items after them
    following as they were; and the reranker's score of each of those N, by place.

    What every face's stage is made of: `reranked` for hits,
    `vrom._memory_results.reranked_memories` for recalled memories."""
    if reranker is None:  # `rerank_depth` refuses the stage first
        raise ValidationError("rerank needs a reranker, and none is configured")
    candidates = min(len(passages), RERANK_CANDIDATES if rerank is True else int(rerank))
    scores = [float(s) for s in reranker.score(query, passages[:candidates])]
    if not all(math.isfinite(s) for s in scores):
        raise ModelError(f"reranker {reranker.name} gave a score that is not a finite number")
    order = sorted(range(candidates), key=lambda i: -scores[i])  # stable: ties keep the order
    return [*order, *range(candidates, len(passages))][:k], scores


def _passage(hit: Hit) -> str:
    """Return what the reranker reads of a hit: its title, then its chunk's text."""
    return titled(hit.title, hit.text if hit.chunk_text is None else hit.chunk_text)


def titled(title: str, text: str) -> str:
    """Return what a reranker reads of an item with ``title`` and ``text``."""
    return f"{title}\n{text}" if title else text
