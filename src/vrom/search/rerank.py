"""The VaultLayer hybrid-search contract: keyword candidates reranked by meaning and quality.

BM25 finds the candidates; each is then scored as a weighted sum of its BM25 score (normalised to
[0, 1] among the candidates), the cosine similarity of its vector to the query's, the note's
human-relevance score, and a text-quality score. Unlike reciprocal rank fusion this never adds
chunks the keyword search did not find, so it keeps keyword precision and fixes keyword order.
"""

from __future__ import annotations

import dataclasses
import re
import time

import numpy as np
import numpy.typing as npt

from vrom.index.codec import decode
from vrom.results import Hit
from vrom.search.fusion import first_k, first_pool, widen
from vrom.search.keyword import KeywordSearch, make_hit
from vrom.search.query import query_words
from vrom.search.ranking import Freshness
from vrom.store import KeywordQuery, KeywordRow, Store, StoredChunk, Where

WEIGHTS = {"fts": 0.45, "vector": 0.35, "human": 0.10, "quality": 0.10}
_LINKISH = re.compile(r"\[\[[^\]]*\]\]|\]\([^)]*\)|https?://\S+")
_CODE_FENCE = re.compile(r"^ {0,3}(```|~~~)", re.MULTILINE)
_Scored = tuple[float, int, KeywordRow, dict[str, float]]
"""A reranked candidate: its score, chunk id, keyword row and score parts."""


def text_quality(text: str) -> float:
    """Return a [0, 1] estimate of how much a chunk is readable prose.

    Long enough to say something, mostly letters, not mostly links or code fences.
    """
    visible = [c for c in text if not c.isspace()]
    if not visible:
        return 0.0
    length = min(1.0, len(text.split()) / 40)
    letters = sum(c.isalpha() for c in visible) / len(visible)
    links = sum(len(m.group(0)) for m in _LINKISH.finditer(text)) / max(1, len(text))
    fenced = 0.5 if _CODE_FENCE.search(text) else 0.0
    score = 0.4 * length + 0.4 * letters + 0.2 * (1.0 - min(1.0, links)) - 0.2 * fenced
    return max(0.0, min(1.0, score))


def rerank_search(
    store: Store,
    query_vector: npt.NDArray[np.float32],
    query: KeywordQuery,
    k: int,
    where: Where | None,
    per_document: bool = False,
    keyword_search: KeywordSearch | None = None,
    freshness: Freshness | None = None,
) -> list[Hit]:
    """Return the ``k`` best keyword candidates after reranking them (see the module docstring).

    ``per_document`` keeps each document's best candidate only, widening the candidate pool
    while a few documents' chunks leave fewer than ``k`` documents. ``keyword_search`` finds
    the candidates (the store's own by default; the search core passes its `KeywordRanker`);
    ``freshness`` marks each hit's ``fresh``, as the other modes do.
    """
    search = keyword_search or store.documents.keyword_search
    started = time.perf_counter()
    chunks: dict[int, StoredChunk] = {}

    def rank(pool: int) -> tuple[list[_Scored], bool]:
        with store.snapshot():  # the chunks and vectors of the rows ranked, as they were
            rows = search(query, pool, where)
            unread = [row.chunk_id for row in rows if row.chunk_id not in chunks]
            chunks.update((c.chunk_id, c) for c in store.documents.get_chunks(unread))
            stored = store.vectors.of([row.chunk_id for row in rows])
        if not rows:
            return [], False
        top_bm25 = max(row.bm25 for row in rows) or 1.0  # the best rows lead every pool
        with_vectors = [row.chunk_id for row in rows if row.chunk_id in stored]
        matrix = decode([stored[i] for i in with_vectors], store.vectors.encoding())
        cosines = dict(zip(with_vectors, (matrix @ query_vector).tolist(), strict=True))
        scored = []
        for row in rows:
            chunk = chunks.get(row.chunk_id)
            if chunk is None:
                continue
            parts = {
                "fts": row.bm25 / top_bm25,
                "vector": cosines.get(row.chunk_id, 0.0),
                "human": chunk.human_relevance_score,
                "quality": text_quality(chunk.text),
            }
            score = sum(WEIGHTS[name] * value for name, value in parts.items())
            scored.append((score, row.chunk_id, row, parts))
        scored.sort(key=lambda item: (-item[0], item[1]))
        document_of = (lambda item: item[2].document_id) if per_document else None
        return first_k(scored, k, document_of), len(rows) == pool

    kept = widen(rank, k, first_pool(k))
    runtime = round((time.perf_counter() - started) * 1000, 3)
    words = query_words(query)
    fresh = {} if freshness is None else freshness(chunks[row.chunk_id] for _, _, row, _ in kept)
    hits = []
    for score, _, row, parts in kept:
        chunk = chunks[row.chunk_id]
        hit = make_hit(
            chunk,
            score,
            {"bm25": row.bm25, **parts},
            words,
            kind="rerank",
            fresh=fresh.get(chunk.path),
        )
        hits.append(
            dataclasses.replace(
                hit,
                fts_score=round(parts["fts"], 6),
                vector_score=round(parts["vector"], 6),
                text_quality_score=round(parts["quality"], 6),
                ranking_runtime=runtime,
            )
        )
    return hits
