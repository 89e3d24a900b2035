"""Adding a BEIR corpus to a collection and running its queries, timed.

`add_corpus` adds one document per corpus entry and times the model's share apart from the rest;
`search_queries` runs every query in each search mode and times each search.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vrom.collection import Collection
from vrom.documents import MAX_TEXT_CHARS, Document
from vrom.embed import Embedder, Fingerprint
from vrom.evaluation.beir import corpus_documents, count_corpus

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
            doc = Document(doc.id, doc.text[:MAX_TEXT_CHARS])
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
) -> dict[str, ModeRun]:
    """Run every query in every mode (modes taking turns per query); return each mode's run.

    Each search returns up to ``depth`` documents. One search per mode runs first, untimed, so
    loading the vector index and warming caches is not counted in the latencies.
    """
    runs = {mode: ModeRun(mode, {}, []) for mode in modes}
    warm_up = next((text for _, text in queries if text.strip()), "")
    for mode in modes:
        if warm_up:
            collection.search(warm_up, k=depth, mode=mode)
    for done, (qid, text) in enumerate(queries, start=1):
        for mode, run in runs.items():
            started = time.perf_counter()
            # a blank query finds nothing (search refuses it): it scores 0, as it should
            hits = collection.search(text, k=depth, mode=mode) if text.strip() else []
            run.latencies_s.append(time.perf_counter() - started)
            run.rankings[qid] = [hit.id for hit in hits]
        if progress is not None:
            progress("searching", done, len(queries))
    return runs
