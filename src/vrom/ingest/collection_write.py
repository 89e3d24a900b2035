"""Write a collection's documents: chunks, the turns of a conversation, and their vectors.

A collection's document is an id, a text and a metadata mapping (`vrom.documents.Document`; this
engine reads the three through `AddedDocument`). Its chunks are embedded by the collection recipe
(`vrom.ingest.embedding.collection_chunk_text`): a short document from a ``source`` (a turn of a
conversation) with the turns before it. So a change to a conversation (a turn added again with
another text, moved to another source, removed) changes what the turns after it are embedded
from: those are embedded again in the change's own transaction, so no crash leaves a turn with
a vector of its old context. Every vector is made by `vrom.ingest.embedding.embed_missing`,
which reuses a stored vector only for the same embedded input.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

from vrom.embed import Embedder
from vrom.ingest.chunk import ChunkStrategy, chunk_note
from vrom.ingest.embedding import (
    EMBEDDING_RECIPE,
    TURNS_BEFORE,
    check_recipe,
    collection_chunk_text,
    document_turns,
    embed_missing,
    embedding_text,
    is_turn,
    metadata_source,
    stored_recipe,
)
from vrom.ingest.parse import ParsedNote, find_headings, mask_code
from vrom.store import (
    ChunkRecord,
    DocumentRecord,
    DocumentState,
    DocumentWrite,
    Store,
    StoredChunk,
)


class AddedDocument(Protocol):
    """A document as a collection is given it (`vrom.documents.Document`)."""

    @property
    def id(self) -> str: ...

    @property
    def text(self) -> str: ...

    @property
    def metadata(self) -> Mapping[str, Any]: ...


Prepared = Sequence[tuple[AddedDocument, Sequence[ChunkRecord]]]
"""Documents about to be written, each with its chunks."""


def content_hash(text: str) -> str:
    """Return a document text's hash as the store records it."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def document_chunks(document: AddedDocument, strategy: ChunkStrategy) -> list[ChunkRecord]:
    """Return a document's chunks, cut at its Markdown headings as a note's are."""
    note = ParsedNote(
        text=document.text,
        title="",
        frontmatter={},
        body_start=0,
        headings=find_headings(mask_code(document.text), 0),
        links=[],
        tags=[],
    )
    return [
        ChunkRecord(
            position=span.position,
            heading_path=span.heading_path,
            text=span.text,
            char_start=span.char_start,
            char_end=span.char_end,
            content_hash=span.content_hash,
        )
        for span in chunk_note(note, strategy)
    ]


def document_record(document: AddedDocument, strategy_id: str, now: float) -> DocumentRecord:
    """Return the store's record of a document added at ``now``."""
    return DocumentRecord(
        path=document.id,
        path_key=document.id,
        name_key=document.id,
        title="",
        frontmatter=dict(document.metadata),
        content_hash=content_hash(document.text),
        mtime=now,
        size=len(document.text.encode("utf-8")),
        human_relevance_score=0.5,  # neutral: the prior is a vault's, not a collection's
        chunk_strategy=strategy_id,
        text=document.text,  # the store is its only copy: kept once, the chunks read from it
    )


def add_documents(
    store: Store,
    embedder: Embedder | None,
    documents: Sequence[AddedDocument],
    strategy: ChunkStrategy,
    strategy_id: str,
    now: float,
) -> None:
    """Write validated documents, their chunks and vectors, in one transaction.

    A document whose id is held replaces it. The new chunks' vectors are made before the
    transaction (a `ModelError` writes nothing); the turns after a document that changed in its
    conversation are embedded again inside it, from the turns it has just written.
    """
    prepared = [(doc, document_chunks(doc, strategy)) for doc in documents]
    held = store.documents.states([doc.id for doc, _ in prepared])
    vectors = _new_vectors(store, embedder, prepared, held)
    moved = [] if embedder is None else _moved_turns(store, prepared, held)
    # the first vectors of a PostgreSQL store get its HNSW index built once, after them
    loading: AbstractContextManager[None] = (
        nullcontext() if embedder is None else store.vectors.loading()
    )
    with store.transaction(), loading:
        rows: dict[int, tuple[bytes, str]] = {}  # chunk id: its vector, input hash
        written = store.documents.put_many(
            [
                DocumentWrite(document_record(doc, strategy_id, now), chunks, [], [])
                for doc, chunks in prepared
            ]
        )
        if vectors:  # the chunk ids just written, in one read
            ids = store.documents.chunk_ids_of(written)
            for place, document_id in enumerate(written):
                positions = ids.get(document_id, {})
                rows.update((i, vectors[place, position]) for position, i in positions.items())
        rows.update(_turns_after(store, embedder, moved))  # made with the turns just written
        if rows:  # one write (and one change-log prune) for the batch, not per document
            _put_vectors(store, rows)


def remove_document(store: Store, embedder: Embedder | None, id: str) -> bool:
    """Remove a document by id, and embed the turns after it again, in one transaction;
    return True if it was there. A `ModelError` removes nothing."""
    with store.transaction():
        state = store.documents.state(id)
        if state is None:
            return False
        stored = store.documents.get(state.document_id)
        source = None if stored is None else metadata_source(stored.frontmatter)
        store.documents.delete(state.document_id)
        if source is not None:
            refreshed = _turns_after(store, embedder, [(source, state.document_id)])
            if refreshed:
                _put_vectors(store, refreshed)
        return True


def _new_vectors(
    store: Store, embedder: Embedder | None, prepared: Prepared, held: Mapping[str, DocumentState]
) -> dict[tuple[int, int], tuple[bytes, str]]:
    """Return the encoded vector of each chunk and the hash of what it is embedded from, by
    (document's place in ``prepared``, chunk position) (`embed_missing`: a chunk whose
    embedded input a stored vector was made from keeps that vector)."""
    if embedder is None or not prepared:
        return {}
    turns = _turns(store, prepared, held)
    texts = {
        (place, chunk.position): collection_chunk_text(
            chunk.text, chunk.heading_path, doc.metadata, turns[place]
        )
        for place, (doc, chunks) in enumerate(prepared)
        for chunk in chunks
    }

    def stored(hashes: Sequence[str]) -> Mapping[str, bytes]:
        kept = store.vectors.for_inputs(hashes)
        if len(kept) < len(hashes):  # something to embed: only this recipe's vectors may join
            check_recipe(store, turns=True)
        return kept

    return embed_missing(embedder, texts, store.vectors.encoding(), stored)


def _turns(store: Store, prepared: Prepared, held: Mapping[str, DocumentState]) -> list[list[str]]:
    """Return the turns each document is embedded with (`document_turns`), by place.

    A document already ``held`` (by id) keeps its place in its conversation (its turns are
    the ones stored before it); a new one follows the documents stored from its source and
    the new ones before it in ``prepared``.
    """
    stored: dict[str, list[str]] = {}  # source -> its last stored texts, read for a turn only
    added: dict[str, list[str]] = {}  # source -> its new documents' texts, in order
    turns = []
    for doc, chunks in prepared:
        state = held.get(doc.id)
        source = metadata_source(doc.metadata)
        texts = [chunk.text for chunk in chunks]
        if state is not None or source is None:
            document_id = None if state is None else state.document_id
            turns.append(document_turns(store, doc.metadata, document_id, texts))
            continue
        new = added.setdefault(source, [])
        if is_turn(texts):
            if source not in stored:  # the batch is not written yet: these come before it
                held_texts = store.documents.field_texts("source", source, limit=TURNS_BEFORE)
                stored[source] = [text for _, text in held_texts]
            turns.append((stored[source] + new[-TURNS_BEFORE:])[-TURNS_BEFORE:])
        else:
            turns.append([])
        new.append(doc.text)  # a turn of the next, long or not
    return turns


def _moved_turns(
    store: Store, prepared: Prepared, held: Mapping[str, DocumentState]
) -> list[tuple[str, int]]:
    """Return (source, document id) for each turn about to change in its conversation: a
    document added again with another text or another source, at its place in its old
    source and in its new one. The turns after it are embedded with it."""
    moved: list[tuple[str, int]] = []
    for doc, _ in prepared:
        state = held.get(doc.id)
        stored = None if state is None else store.documents.get(state.document_id)
        if state is None or stored is None:
            continue
        sources = dict.fromkeys(
            [metadata_source(stored.frontmatter), metadata_source(doc.metadata)]
        )
        if len(sources) == 1 and stored.content_hash == content_hash(doc.text):
            continue
        moved += [(source, state.document_id) for source in sources if source is not None]
    return moved


def _turns_after(
    store: Store, embedder: Embedder | None, moved: Sequence[tuple[str, int]]
) -> dict[int, tuple[bytes, str]]:
    """Return the vectors (and their input hashes), by chunk id, of the turns that follow each
    (source, document id) place in ``moved``, made again with the turns before them as the
    caller's open transaction has just written them.

    Called inside the change's transaction, so the change and these vectors commit together:
    an embedding failure (a `ModelError`) rolls the change back, and a process killed
    meanwhile leaves the store as it was before. A store of an older recipe gets none
    (`Collection.reembed` makes every vector again).
    """
    if embedder is None or not moved or stored_recipe(store) != EMBEDDING_RECIPE:
        return {}
    followers = dict.fromkeys(
        document_id
        for source, place in moved
        for document_id, _ in store.documents.field_texts(
            "source", source, after=place, limit=TURNS_BEFORE
        )
    )
    texts: dict[int, str] = {}  # each turn's chunk and what it is embedded as now
    for document_id in followers:
        chunks, turns = _chunks_and_turns(store, document_id)
        if chunks and is_turn([chunk.text for chunk in chunks]):
            texts[chunks[0].chunk_id] = embedding_text(chunks[0], turns)
    if not texts:
        return {}
    return embed_missing(embedder, texts, store.vectors.encoding(), store.vectors.for_inputs)


def _put_vectors(store: Store, rows: Mapping[int, tuple[bytes, str]]) -> None:
    """Store vectors by chunk id, each with the hash of what it was embedded from."""
    store.vectors.put(
        [(chunk_id, blob) for chunk_id, (blob, _) in rows.items()],
        [made_from for _, made_from in rows.values()],
    )


def _chunks_and_turns(store: Store, document_id: int) -> tuple[list[StoredChunk], list[str]]:
    """Return a stored document's chunks and the turns they are embedded with now
    (`document_turns`, read from the store)."""
    chunks = store.documents.chunks_of(document_id)
    if not chunks:
        return [], []
    texts = [chunk.text for chunk in chunks]
    return chunks, document_turns(store, chunks[0].metadata, document_id, texts)
