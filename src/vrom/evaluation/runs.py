"""Adding a BEIR corpus to a collection or a memory store and running its queries, timed.

`add_corpus` adds one document per corpus entry and times the model's share apart from the rest;
`search_queries` runs every query in each search mode and times each search. `add_memories`
and `recall_queries` do the same through `Memories.remember` and `Memories.recall`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from vrom.collection import Collection
from vrom.documents import MAX_TEXT_CHARS, Document
from vrom.embed import Embedder, Fingerprint
from vrom.errors import ValidationError
from vrom.evaluation.beir import (
    CorpusEntry,
    corpus_documents,
    corpus_entries,
    count_corpus,
    entry_source,
)
from vrom.ingest.embedding import metadata_date
from vrom.memories import MAX_CONTENT_CHARS, MAX_SOURCE_CHARS, MAX_TITLE_CHARS, Memories

if TYPE_CHECKING:
    from vrom.embed import Matrix

Progress = Callable[[str, int, int], None]
"""``progress(stage, done, total)``: stage ``indexing`` (documents) or ``searching`` (queries)."""
ADD_BATCH = 256
"""Documents added (and embedded) per `Collection.add` call."""


class TimedEmbedder(Embedder):
    """Delegates to another embedder and adds up the wall time spent embedding documents."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.document_seconds = 0.0

    @property
    def fingerprint(self) -> Fingerprint:
        return self.inner.fingerprint

    def _embed(self, texts: Sequence[str], kind: str) -> Matrix:
        return self.inner._embed(texts, kind)

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        started = time.perf_counter()
        try:
            return self.inner.embed_documents(texts)
        finally:
            self.document_seconds += time.perf_counter() - started

    def embed_query(self, text: str) -> Matrix:
        return self.inner.embed_query(text)


@dataclass(frozen=True)
class IndexTimings:
    """How long adding the corpus took.

    Fields:
        documents: documents added (corpus entries with a title or a text).
        total_s: wall time of adding them all.
        keyword_s: of that, everything but the embedding model: chunking, the keyword (FTS5)
            index, storing texts and vectors.
        embedding_s: of that, the time inside the embedding model (None without one).
        truncated: documents cut at 100,000 characters (a collection document's limit).
    """

    documents: int
    total_s: float
    keyword_s: float
    embedding_s: float | None
    truncated: int = 0


def add_corpus(
    collection: Collection,
    folder: str | Path,
    progress: Progress | None = None,
    embedding_seconds: Callable[[], float] | None = None,
) -> IndexTimings:
    """Add a BEIR corpus to ``collection`` in batches; return the documents added and timings.

    A text longer than a collection document may be (100,000 characters) is cut there.
    ``embedding_seconds()`` reports the time spent in the model so far (None: no model).
    """
    total = count_corpus(folder)
    done = truncated = 0
    total_s = 0.0
    batch: list[Document] = []

    def flush() -> None:
        nonlocal total_s
        started = time.perf_counter()
        collection.add(batch)
        total_s += time.perf_counter() - started
        batch.clear()
        if progress is not None:
            progress("indexing", done, total)

    for doc in corpus_documents(folder):
        if len(doc.text) > MAX_TEXT_CHARS:
            doc = Document(doc.id, doc.text[:MAX_TEXT_CHARS], doc.metadata)
            truncated += 1
        batch.append(doc)
        done += 1
        if len(batch) >= ADD_BATCH:
            flush()
    if batch:
        flush()
    if progress is not None and done < total:
        progress("indexing", total, total)  # entries without text were skipped, not left unread
    embedding_s = embedding_seconds() if embedding_seconds is not None else None
    return IndexTimings(
        documents=done,
        total_s=total_s,
        keyword_s=total_s - (embedding_s or 0.0),
        embedding_s=embedding_s,
        truncated=truncated,
    )


@dataclass(frozen=True)
class ModeRun:
    """What one search mode returned for every query.

    Fields:
        mode: ``keyword``, ``vector`` or ``hybrid``.
        rankings: query id → document ids, best first (one per document, at its best chunk).
        latencies_s: the wall time of each query's search (query embedding included).
    """

    mode: str
    rankings: dict[str, list[str]]
    latencies_s: list[float]


def search_queries(
    collection: Collection,
    queries: Sequence[tuple[str, str]],
    modes: Sequence[str],
    depth: int,
    progress: Progress | None = None,
    *,
    rerank: bool = False,
) -> dict[str, ModeRun]:
    """Run every query in every mode (modes taking turns per query); return each mode's run.

    Each search returns up to ``depth`` documents (with ``rerank``, its first 30 reordered by
    the collection's reranker). One search per mode runs first, untimed, so loading the
    vector index and the reranker and warming caches is not counted in the latencies.
    """
    runs = {mode: ModeRun(mode, {}, []) for mode in modes}
    warm_up = next((text for _, text in queries if text.strip()), "")
    for mode in modes:
        if warm_up:
            collection.search(warm_up, k=depth, mode=mode, rerank=rerank)
    for done, (qid, text) in enumerate(queries, start=1):
        for mode, run in runs.items():
            started = time.perf_counter()
            # a blank query finds nothing (search refuses it): it scores 0, as it should
            hits = (
                collection.search(text, k=depth, mode=mode, rerank=rerank) if text.strip() else []
            )
            run.latencies_s.append(time.perf_counter() - started)
            run.rankings[qid] = [hit.id for hit in hits]
        if progress is not None:
            progress("searching", done, len(queries))
    return runs


@dataclass(frozen=True)
class MemoryLoad:
    """What `add_memories` stored: the timings, and which memory holds which document.

    Fields:
        timings: as for `add_corpus` (``keyword_s``: remembering; ``embedding_s``: embedding
            them all afterwards, in batches).
        documents: memory id → corpus document id.
        dated: memories whose timestamp came from the entry's metadata (`DATE_KEYS`).
        cut: memories whose title or content was cut to a memory's limits.
    """

    timings: IndexTimings
    documents: dict[str, str]
    dated: int
    cut: int


class MemoryFields(NamedTuple):
    """What a corpus entry is remembered as (`memory_fields`)."""

    title: str
    content: str
    tags: list[str]
    timestamp: object
    source: str | None
    cut: bool


def memory_fields(entry: CorpusEntry) -> MemoryFields:
    """Return what a corpus entry is remembered as.

    The title is the entry's title, else its text's first line, cut to `MAX_TITLE_CHARS`; the
    content is its text (its title when it has none), cut to `MAX_CONTENT_CHARS`; tags are the
    metadata's ``tags`` when a list of strings; the timestamp is the first of `DATE_KEYS` in
    the metadata (None: the memory is timed now). The source is `entry_source` (cut to
    `MAX_SOURCE_CHARS`; None for none): a conversation, whose memories' vectors include the
    turns before them (`vrom.ingest.embedding.memory_text`).
    """
    first_line = entry.text.strip().split("\n", 1)[0]
    title = " ".join((entry.title or first_line).split())
    content = entry.text or entry.title
    cut = len(title) > MAX_TITLE_CHARS or len(content) > MAX_CONTENT_CHARS
    tags = entry.metadata.get("tags")
    tag_list = (
        [t for t in tags if isinstance(t, str) and t.strip()] if isinstance(tags, list) else []
    )
    source = entry_source(entry)
    return MemoryFields(
        title[:MAX_TITLE_CHARS],
        content[:MAX_CONTENT_CHARS],
        tag_list,
        metadata_date(entry.metadata),
        source[:MAX_SOURCE_CHARS] or None,
        cut,
    )


def add_memories(
    memories: Memories,
    embedded: Memories | None,
    folder: str | Path,
    progress: Progress | None = None,
    embedding_seconds: Callable[[], float] | None = None,
) -> MemoryLoad:
    """Remember each corpus entry through ``memories`` (no embedder: one keyword write each),
    then embed them all through ``embedded`` (the same store with the model), in batches.

    A timestamp the metadata holds but `Memories.remember` cannot read is left out (the memory
    is timed now) rather than failing the run.
    """
    total = count_corpus(folder)
    documents: dict[str, str] = {}
    dated = cut = 0
    started = time.perf_counter()
    for done, entry in enumerate(corpus_entries(folder), start=1):
        fields = memory_fields(entry)
        remember = functools.partial(
            memories.remember, fields.title, fields.content, tags=fields.tags, source=fields.source
        )
        try:
            memory = remember(timestamp=fields.timestamp)
            dated += fields.timestamp is not None
        except ValidationError:
            if fields.timestamp is None:
                raise
            memory = remember()
        documents[memory.id] = entry.id
        cut += fields.cut
        if progress is not None and done % ADD_BATCH == 0:
            progress("indexing", done, total)
    if embedded is not None:
        embedded.embed()
    total_s = time.perf_counter() - started
    if progress is not None:
        progress("indexing", total, total)
    embedding_s = embedding_seconds() if embedding_seconds is not None else None
    timings = IndexTimings(
        documents=len(documents),
        total_s=total_s,
        keyword_s=total_s - (embedding_s or 0.0),
        embedding_s=embedding_s,
        truncated=cut,
    )
    return MemoryLoad(timings, documents, dated, cut)


def recall_queries(
    memories: Memories,
    documents: dict[str, str],
    queries: Sequence[tuple[str, str]],
    modes: Sequence[str],
    depth: int,
    progress: Progress | None = None,
    *,
    rerank: bool = False,
) -> dict[str, ModeRun]:
    """Run every query through `Memories.recall` in every mode, as `search_queries` does
    (``rerank`` too).

    Rankings are the recalled memories' corpus document ids (``documents``), best first.
    """
    runs = {mode: ModeRun(mode, {}, []) for mode in modes}
    warm_up = next((text for _, text in queries if text.strip()), "")
    asked: dict[str, Any] = {"k": depth, "status": "any", "rerank": rerank}
    for mode in modes:
        if warm_up:
            memories.recall(warm_up, mode=mode, **asked)
    for done, (qid, text) in enumerate(queries, start=1):
        for mode, run in runs.items():
            started = time.perf_counter()
            hits = memories.recall(text, mode=mode, **asked) if text.strip() else []
            run.latencies_s.append(time.perf_counter() - started)
            run.rankings[qid] = [documents[hit.memory.id] for hit in hits]
        if progress is not None:
            progress("searching", done, len(queries))
    return runs
