"""What `vrom.memories.Memories` returns: a `Memory`, a recalled `MemoryHit`, `MemoryStats`,
and a memory as the read half's `Hit` (`memory_as_hit`), all made from a store's `MemoryRecord`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from vrom.embed.rerank import Reranker
from vrom.results import Hit
from vrom.search.excerpt import excerpt
from vrom.search.reranking import reordered, titled
from vrom.store import MemoryRecord

__all__ = ["Memory", "MemoryHit", "MemoryStats", "memory_as_hit", "memory_hit", "memory_of"]


@dataclass(frozen=True)
class Memory:
    """A memory as the API returns it.

    ``id`` (``mem_`` then 20 hex digits; ids sort by creation time), ``timestamp`` (creation,
    ISO 8601 UTC) and ``created_unix``, ``updated_unix`` (the last status change), ``project``
    (None: none), ``type`` (see `vrom.memories.MEMORY_TYPES`), ``title``, ``content``,
    ``tags``, ``related`` (note paths), ``source`` (where it came from: a URL, a session, a tool), ``status``
    (``active``, ``archived`` or ``superseded``) and ``superseded_by`` (the id of the memory
    that replaced it, only when superseded).
    """

    id: str
    timestamp: str
    created_unix: float
    updated_unix: float
    project: str | None
    type: str
    title: str
    content: str
    tags: tuple[str, ...] = ()
    related: tuple[str, ...] = ()
    source: str | None = None
    status: str = "active"
    superseded_by: str | None = None


@dataclass(frozen=True)
class MemoryHit:
    """A recalled memory: ``score`` ranks hits (higher is better); ``scores`` holds its parts.

    Parts: ``bm25`` (keyword match), ``vector`` (cosine similarity) when it was found that way,
    and ``fused`` (the score: both normalised and combined, `vrom.search.fusion.fuse`) and
    ``rrf`` (their reciprocal rank fusion, which orders equal ``fused`` scores) when an
    embedder took part. ``score_kind`` says what ``score`` is: ``fused``, or ``bm25`` when no
    embedder took part.
    """

    memory: Memory
    score: float
    scores: Mapping[str, float] = field(default_factory=dict)
    score_kind: str = ""


@dataclass(frozen=True)
class MemoryStats:
    """How many memories there are: in all, by status, by type, by project, and embedded.

    Memories without a project are not counted in ``by_project``.
    """

    total: int
    by_status: Mapping[str, int]
    by_type: Mapping[str, int]
    by_project: Mapping[str, int]
    embedded: int


def memory_of(record: MemoryRecord) -> Memory:
    """Return a stored memory as the API gives it."""
    timestamp = dt.datetime.fromtimestamp(record.created_unix, dt.timezone.utc)
    return Memory(
        id=record.id,
        timestamp=timestamp.isoformat(timespec="seconds"),
        created_unix=record.created_unix,
        updated_unix=record.updated_unix,
        project=record.project,
        type=record.type,
        title=record.title,
        content=record.content,
        tags=record.tags,
        related=record.related,
        source=record.source,
        status=record.status,
        superseded_by=record.superseded_by,
    )


def _score_kind(parts: Mapping[str, float]) -> str:
    """Return what a recalled memory's score is, from the parts that made it."""
    if "fused" in parts:
        return "fused"
    return "bm25" if "bm25" in parts else "cosine"


def memory_hit(record: MemoryRecord, score: float, parts: Mapping[str, float]) -> MemoryHit:
    """Return a recalled memory (`vrom.corpus.Corpus.recall`'s row) as a `MemoryHit`."""
    rounded = {name: round(value, 6) for name, value in parts.items()}
    return MemoryHit(memory_of(record), round(score, 6), rounded, _score_kind(parts))


def memory_as_hit(found: MemoryHit, words: list[str]) -> Hit:
    """Return a recalled memory as the read half's `Hit`, by `Hit`'s convention for memories
    (its id as ``id`` and ``path``, chunk and note ids 0, its content as ``text``, its fields
    as ``metadata``); ``words`` are the query's, for the excerpt."""
    memory = found.memory
    return Hit(
        chunk_id=0,
        path=memory.id,
        title=memory.title,
        heading_path="",
        excerpt=excerpt(memory.content, words),
        score=found.score,
        content_hash=hashlib.sha256(memory.content.encode()).hexdigest(),
        modified_unix=memory.created_unix,
        human_relevance_score=0.5,
        note_id=0,
        position=0,
        char_start=0,
        char_end=len(memory.content),
        text=memory.content,
        scores=found.scores,
        id=memory.id,
        metadata={
            "project": memory.project,
            "type": memory.type,
            "status": memory.status,
            "tags": list(memory.tags),
            "related": list(memory.related),
            "source": memory.source,
            "timestamp": memory.timestamp,
            "superseded_by": memory.superseded_by,
        },
        score_kind=found.score_kind,
    )


def reranked_memories(
    hits: Sequence[MemoryHit], reranker: Reranker | None, query: str, k: int, rerank: bool | int
) -> list[MemoryHit]:
    """Return recalled memories as `reranked` returns hits: the first ``k`` once the first N
    are in the reranker's order, each reranked one's ``score`` the reranker's (its passage:
    the memory's title, then its content)."""
    passages = [titled(hit.memory.title, hit.memory.content) for hit in hits]
    order, scores = reordered(reranker, query, passages, k, rerank)
    return [
        hits[i]
        if i >= len(scores)
        else MemoryHit(
            hits[i].memory,
            scores[i],
            {**hits[i].scores, "before_rerank": hits[i].score, "reranker": scores[i]},
            "reranker",
        )
        for i in order
    ]
