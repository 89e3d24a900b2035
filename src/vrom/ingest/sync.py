"""Copy one store into another: notes, chunks, links, tags, vectors, memories and metadata.

This is ``vrom sync``'s engine, over the store roles only, so it copies between any two
backends (a local SQLite file and a shared PostgreSQL namespace, either way). The target ends up
holding the source's notes exactly: notes the target already holds with the same content hash
and chunking are left alone, changed ones are rewritten, ones gone from the source are removed.
A chunk is given the source's vector made from what it is embedded from itself (its text, title,
heading path, date and turns: `vrom.store.VectorStore.for_inputs`), so nothing is embedded again
and no vector made for another note (of the same text under another title) is handed out.
Memories are merged, not mirrored: a memory the target lacks, or holds in an older version, is
copied; none is removed (another machine's memories stay).

What the vectors were made by (model, encoding, recipe) is written first, to a target without
vectors of its own, so the copy takes new vectors as the source would; then notes a batch at a
time, each batch one transaction (one `put_many`; a note no store can hold,
`vrom.store.storable`, is skipped and named), then the vectors their chunks lack, a batch at a
time inside one `loading` transaction (so a first sync to PostgreSQL builds its vector index
once), then memories; the metadata that says a sync finished (chunk strategy, vault, last index
time) is written last. A sync interrupted at any point leaves a consistent target, and running
it again ends in the state one uninterrupted run gives. Two stores whose vectors come from
different models are refused before anything is written.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from vrom.embed import Fingerprint
from vrom.errors import ModelError, StorageError, ValidationError
from vrom.ingest.embedding import (
    FINGERPRINT_META_KEY,
    MEMORY_FINGERPRINT_META_KEY,
    MEMORY_VECTOR_META_KEYS,
    VECTOR_META_KEYS,
    embedding_texts,
    input_hash,
    stored_fingerprint,
)
from vrom.ingest.indexer import STRATEGY_META_KEY
from vrom.results import IndexWarning, SyncSummary
from vrom.store import (
    VECTOR_ENCODING_META_KEY,
    ChunkRecord,
    DocumentRecord,
    DocumentState,
    DocumentWrite,
    MemoryFilter,
    MemoryRecord,
    Store,
    check_document,
)

SyncProgress = Callable[[int, int, str], None]
"""Called as ``progress(done, total, path)`` after each note of the source is synced."""

VAULT_ROOT_META_KEY = "vault_root"
COLLECTION_META_KEY = "collection_name"
FINISHED_META_KEYS = (STRATEGY_META_KEY, VAULT_ROOT_META_KEY, "last_indexed_unix")
"""Metadata copied once every note is: what a finished index (or sync) leaves behind."""
BATCH_NOTES = 256
"""Notes written per transaction (a sync of the hub vault, 6,571 notes, is 26 of them)."""
BATCH_ROWS = 256
"""Memories read per batch."""
BATCH_VECTORS = 2048
"""Chunks given vectors per batch (a batch of 384-dimension float32 vectors is about 3 MB)."""


@dataclass
class _Tally:
    added: int = 0
    changed: int = 0
    removed: int = 0
    unchanged: int = 0
    vectors: int = 0
    memories: int = 0
    memory_vectors: int = 0
    warnings: list[IndexWarning] = field(default_factory=list)

    def skip(self, path: str, reason: str) -> None:
        self.warnings.append(IndexWarning(path, f"skipped: {reason}"))


def sync_stores(
    source: Store,
    target: Store,
    *,
    vault_root: str | None = None,
    progress: SyncProgress | None = None,
) -> SyncSummary:
    """Make ``target`` hold what ``source`` holds (see the module's docstring); return what was
    copied.

    ``vault_root`` is recorded as the target's vault folder instead of the source's (a copy
    brought to this machine serves the vault's folder here). Raises `ModelError` when the two
    stores' vectors come from different models or are encoded differently, `StorageError` when
    one holds a vault and the other a collection (or another collection).
    """
    started = time.perf_counter()
    _check_compatible(source, target)
    _adopt_models(source, target)
    tally = _Tally()
    states = source.documents.states()
    _copy_documents(source, target, states, tally, progress)
    with target.vectors.loading():  # one transaction: the first sync's index is built once
        tally.vectors = _fill_vectors(source, target, turns=_kind(source) not in (None, "vault"))
    _merge_memories(source, target, tally)
    with target.transaction():
        for key in (*FINISHED_META_KEYS, COLLECTION_META_KEY):
            value = source.get_meta(key)
            if key == VAULT_ROOT_META_KEY and vault_root is not None:
                value = vault_root
            if value is not None:
                target.set_meta(key, value)
    return SyncSummary(
        source=source.location,
        target=target.location,
        namespace=None,
        notes=len(states),
        added=tally.added,
        changed=tally.changed,
        removed=tally.removed,
        unchanged=tally.unchanged,
        vectors=tally.vectors,
        memories=tally.memories,
        memory_vectors=tally.memory_vectors,
        skipped=len(tally.warnings),
        warnings=tuple(tally.warnings),
        seconds=round(time.perf_counter() - started, 4),
    )


# -- before anything is written --------------------------------------------------------------


def _kind(store: Store) -> str | None:
    """Return what a store holds: ``vault``, ``collection 'name'``, or None (nothing yet)."""
    collection = store.get_meta(COLLECTION_META_KEY)
    if collection is not None:
        return f"collection {collection!r}"
    return "vault" if store.get_meta(VAULT_ROOT_META_KEY) is not None else None


def _check_compatible(source: Store, target: Store) -> None:
    """Refuse a sync that would mix models, vector encodings, or a vault with a collection."""
    source_kind, target_kind = _kind(source), _kind(target)
    if source_kind and target_kind and source_kind != target_kind:
        raise StorageError(
            f"cannot sync {source.location} to {target.location}: one holds a {source_kind},"
            f" the other a {target_kind}: sync to another namespace"
        )
    for key, what in (
        (FINGERPRINT_META_KEY, "vectors"),
        (MEMORY_FINGERPRINT_META_KEY, "memory vectors"),
    ):
        ours, theirs = stored_fingerprint(source, key), stored_fingerprint(target, key)
        if ours is not None and theirs is not None and ours != theirs:
            raise ModelError(_other_model(source, target, what, ours, theirs))
    if source.vectors.has_any() and target.vectors.has_any():
        ours_encoding, theirs_encoding = source.vectors.encoding(), target.vectors.encoding()
        if ours_encoding != theirs_encoding:
            raise ModelError(
                f"cannot sync {source.location} to {target.location}: one holds"
                f" {ours_encoding} vectors, the other {theirs_encoding}: re-encode one"
                f" ('vrom embed --rebuild --vector-encoding {theirs_encoding}') first"
            )


def _other_model(
    source: Store, target: Store, what: str, ours: Fingerprint, theirs: Fingerprint
) -> str:
    return (
        f"cannot sync {source.location} to {target.location}: one holds {what} of"
        f" {ours.describe()}, the other of {theirs.describe()}: re-embed one with the"
        " other's model ('vrom embed --rebuild') first"
    )


def _adopt_models(source: Store, target: Store) -> None:
    """Give a target without vectors of its own what the source's were made by (models,
    vector encoding, recipes), so the vectors copied next are read as what they are and new
    ones are made alike."""
    with target.transaction():
        for keys, held in (
            (VECTOR_META_KEYS, target.vectors.has_any()),
            (MEMORY_VECTOR_META_KEYS, target.memories.vectors.count() > 0),
        ):
            for key in () if held else keys:  # held vectors keep theirs (`_check_compatible`)
                value = source.get_meta(key)
                if value is not None:
                    target.set_meta(key, value)
        if source.vectors.has_any() and not target.vectors.has_any():
            target.set_meta(VECTOR_ENCODING_META_KEY, source.vectors.encoding())


# -- notes -----------------------------------------------------------------------------------


def _copy_documents(
    source: Store,
    target: Store,
    states: dict[str, DocumentState],
    tally: _Tally,
    progress: SyncProgress | None,
) -> None:
    """Write the source's new and changed notes to the target, a batch per transaction (one
    `put_many`), skip those no store can hold with a warning naming each, and remove the
    target's notes the source no longer has.

    The next batch is read from the source (`_read_batch`, in a thread of its own) while this
    one is written: the target's server works while the source is read. Batches are still
    written one after the other, in path order, each one whole or not at all.
    """
    held = target.documents.states()
    paths = sorted(states)
    batches = [paths[start : start + BATCH_NOTES] for start in range(0, len(paths), BATCH_NOTES)]
    done = 0
    with ThreadPoolExecutor(1, thread_name_prefix="vrom-sync-read") as reader:
        pending = [reader.submit(_read_batch, source, states, held, b) for b in batches[:1]]
        for number, batch in enumerate(batches):
            notes = pending.pop().result()
            if number + 1 < len(batches):
                pending.append(
                    reader.submit(_read_batch, source, states, held, batches[number + 1])
                )
            with target.transaction():
                writes = [_apply(target, note, tally) for note in notes]
                target.documents.put_many([w for w in writes if w is not None])
                if progress is not None:  # inside the batch: a progress that raises undoes it
                    for path in batch:
                        done += 1
                        progress(done, len(paths), path)
    gone = [state.document_id for path, state in held.items() if path not in states]
    for start in range(0, len(gone), BATCH_NOTES):
        with target.transaction():
            for document_id in gone[start : start + BATCH_NOTES]:
                target.documents.delete(document_id)
    tally.removed += len(gone)


@dataclass(frozen=True)
class _Note:
    """What one source note asks of the target: nothing (unchanged: ``write`` None, ``problem``
    None), a write, or a removal of the target's copy when no store can hold it (``problem``)."""

    path: str
    ours: DocumentState
    theirs: DocumentState | None
    write: DocumentWrite | None = None
    problem: str | None = None
    unchanged: bool = False


def _read_batch(
    source: Store,
    states: dict[str, DocumentState],
    held: dict[str, DocumentState],
    batch: list[str],
) -> list[_Note]:
    """Return what each note of ``batch`` asks of the target (reads the source only)."""
    notes: list[_Note] = []
    for path in batch:
        ours, theirs = states[path], held.get(path)
        if (
            theirs is not None
            and theirs.content_hash == ours.content_hash
            and theirs.chunk_strategy == ours.chunk_strategy
        ):
            notes.append(_Note(path, ours, theirs, unchanged=True))
            continue
        write = _read_document(source, ours, theirs)
        if write is None:
            continue
        try:
            check_document(write.document, write.chunks, write.links, write.tags)
        except ValidationError as exc:
            notes.append(_Note(path, ours, theirs, problem=str(exc)))
            continue
        notes.append(_Note(path, ours, theirs, write))
    return notes


def _apply(target: Store, note: _Note, tally: _Tally) -> DocumentWrite | None:
    """Do what ``note`` asks of the target but its write, and count it; return the write."""
    ours, theirs = note.ours, note.theirs
    if note.unchanged:
        assert theirs is not None
        if (theirs.mtime, theirs.size) != (ours.mtime, ours.size):
            target.documents.touch(theirs.document_id, ours.mtime, ours.size)
        tally.unchanged += 1
        return None
    if note.problem is not None:
        tally.skip(note.path, note.problem)
        if theirs is not None:  # the target's copy is no longer the source's
            target.documents.delete(theirs.document_id)
        return None
    if theirs is None:
        tally.added += 1
    else:
        tally.changed += 1
    return note.write


def _read_document(
    source: Store, ours: DocumentState, theirs: DocumentState | None
) -> DocumentWrite | None:
    """Return one source note (chunks, links, tags) to write over the target's; None when the
    note left the source since it was listed (the next sync removes it). Its vectors follow in
    `_fill_vectors`."""
    documents = source.documents
    with source.snapshot():
        document = documents.get(ours.document_id)
        if document is None:
            return None
        chunks = documents.chunks_of(ours.document_id)
        links = [link for _, link in documents.links(sources=[ours.document_id])]
        tags = documents.tags_of(ours.document_id)
        text = documents.texts([ours.document_id]).get(ours.document_id)
    record = DocumentRecord(
        path=document.path,
        path_key=document.path_key,
        name_key=document.name_key,
        title=document.title,
        frontmatter=document.frontmatter,
        content_hash=document.content_hash,
        mtime=document.mtime,
        size=document.size,
        human_relevance_score=document.human_relevance_score,
        chunk_strategy=ours.chunk_strategy,
        text=text,
    )
    chunk_records = [
        ChunkRecord(c.position, c.heading_path, c.text, c.char_start, c.char_end, c.content_hash)
        for c in chunks
    ]
    return DocumentWrite(
        record, chunk_records, links, tags, None if theirs is None else theirs.document_id
    )


def _fill_vectors(source: Store, target: Store, *, turns: bool) -> int:
    """Give every target chunk without a vector the source's vector made from the text the
    chunk is embedded from (`embedding_texts`; ``turns``: a collection's); return how many
    were given.

    The notes just copied get theirs so, and so do notes copied earlier before the source had
    embedded them, or by a sync interrupted before this pass. A source vector stored without
    its input's hash (by an older vrom) is not given: the target embeds that chunk itself. A
    batch is one transaction.
    """
    if not source.vectors.has_any():
        return 0
    copied = after = 0
    while chunks := target.vectors.missing(BATCH_VECTORS, after):
        after = chunks[-1].chunk_id
        inputs = [input_hash(text) for text in embedding_texts(target, chunks, turns=turns)]
        vectors = source.vectors.for_inputs(inputs)
        found = [(c.chunk_id, h) for c, h in zip(chunks, inputs, strict=True) if h in vectors]
        if found:  # counted here: a backend's own count may include its change log's rows
            target.vectors.put([(key, vectors[h]) for key, h in found], [h for _, h in found])
            copied += len(found)
    return copied


# -- memories --------------------------------------------------------------------------------


def _merge_memories(source: Store, target: Store, tally: _Tally) -> None:
    """Copy the memories the target lacks or holds in an older version, with their vectors,
    then fill in vectors the target's copies lack."""
    keys = source.memories.keys_matching(MemoryFilter())
    key_of: dict[str, int] = {}
    for start in range(0, len(keys), BATCH_ROWS):
        batch = keys[start : start + BATCH_ROWS]
        memories = source.memories.by_keys(batch)
        vectors = source.memories.vectors.of(batch)
        with target.transaction():
            for key, memory in memories.items():
                key_of[memory.id] = key
                if not _newer(memory, target.memories.get(memory.id)):
                    continue
                target.memories.put(memory)
                tally.memories += 1
                if key in vectors:
                    target.memories.vectors.put([(memory.id, vectors[key])])
                    tally.memory_vectors += 1
    after = ""
    while missing := target.memories.vectors.missing(BATCH_ROWS, after):
        after = missing[-1].id
        wanted = {m.id: key_of[m.id] for m in missing if m.id in key_of}
        found = source.memories.vectors.of(list(wanted.values()))
        same = source.memories.by_keys(list(wanted.values()))
        rows = [
            (m.id, found[wanted[m.id]])
            for m in missing
            if m.id in wanted and wanted[m.id] in found and same.get(wanted[m.id]) == m
        ]
        if rows:
            target.memories.vectors.put(rows)
            tally.memory_vectors += len(rows)


def _newer(memory: MemoryRecord, held: MemoryRecord | None) -> bool:
    """True when ``memory`` should replace the target's copy: it has none, or an older or
    equally old different one (the source wins a tie)."""
    return held is None or (held != memory and memory.updated_unix >= held.updated_unix)
