"""Bring a vault's store up to date with its files, touching only what changed.

A note whose size and mtime match the store is skipped without being read; one whose bytes hash
to the stored content hash only gets its mtime updated; a new path whose hash matches a vanished
path is a rename and keeps its note id. Notes are written in batched transactions (each note whole
or not at all), so a process killed at any moment leaves a consistent store, and the next run
finishes the job.

One note never stops the run: a note that cannot be read, named, parsed, chunked or written is
skipped with a warning that names it (printable, `shown_path`) and the reason, the exception
included, and every other note is indexed.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from vrom.ingest.chunk import ChunkStrategy, chunk_note
from vrom.ingest.confine import confine
from vrom.ingest.embedding import input_hash, note_chunk_text
from vrom.ingest.parse import (
    is_utf8,
    name_key,
    name_problem,
    note_key,
    parse_note,
    shown_path,
)
from vrom.ingest.relevance import human_relevance_score
from vrom.ingest.walk import (
    DEFAULT_MAX_FILE_BYTES,
    NoteFile,
    is_ignored_path,
    is_note_name,
    read_note_text,
    read_regular_file,
    too_large,
    walk_vault,
)
from vrom.results import IndexSummary, IndexWarning
from vrom.store import (
    ChunkRecord,
    DocumentRecord,
    DocumentState,
    DocumentWrite,
    LinkRecord,
    Store,
)

ProgressCallback = Callable[[int, int, str], None]
"""Called as ``progress(done, total, path)`` while indexing."""

STRATEGY_META_KEY = "chunk_strategy"
# a commit costs ~8 ms of CPU (FTS5 writes its pending terms as a segment, merges follow): 512
# notes a batch commit ~15 times for the hub vault's 6.5k notes where 128 or half a second
# (on a loaded machine) committed 50-500 times. The batch's writes run only at its flush, so
# the write lock is held as long as writing 512 notes takes (~0.2 s), not the 2 s of reading.
BATCH_NOTES = 512
BATCH_SECONDS = 2.0

Counted = Literal["added", "changed", "renamed", "removed", "unchanged"]


@dataclass(frozen=True)
class IndexOptions:
    """How a vault is indexed: the file size limit and the chunk strategy."""

    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    strategy: ChunkStrategy = field(default_factory=ChunkStrategy)


@dataclass
class _Tally:
    added: int = 0
    changed: int = 0
    removed: int = 0
    renamed: int = 0
    unchanged: int = 0
    skipped: int = 0
    parse_seconds: float = 0.0  # reading, decoding, parsing and chunking notes
    warnings: list[IndexWarning] = field(default_factory=list)

    def skip(self, path: str, reason: str) -> None:
        self.skipped += 1
        self.warn(path, reason)

    def warn(self, path: str, reason: str) -> None:
        self.warnings.append(IndexWarning(path, " ".join(reason.split())))  # one line

    def count(self, counted: Counted, by: int = 1) -> None:
        setattr(self, counted, getattr(self, counted) + by)


class Indexer:
    """Writes a vault's notes into a store; one instance per vault and store."""

    def __init__(self, store: Store, root: Path, options: IndexOptions) -> None:
        self._store = store
        self._root = root.resolve()
        self._options = options
        self._strategy_json = json.dumps(options.strategy.as_dict(), sort_keys=True)
        # each note records the strategy it was chunked with, so a changed strategy re-chunks
        # every note even across interrupted runs
        self._strategy_id = hashlib.sha256(self._strategy_json.encode()).hexdigest()[:16]

    def _is_current(self, state: DocumentState | None) -> bool:
        return state is not None and state.chunk_strategy == self._strategy_id

    def index(self, progress: ProgressCallback | None = None, force: bool = False) -> IndexSummary:
        """Index the whole vault; ``force`` rewrites every note even when unchanged."""
        started = time.perf_counter()
        walked_files, walk_warnings = walk_vault(self._root, self._options.max_file_bytes)
        tally = _Tally()
        for warning in walk_warnings:
            tally.skip(shown_path(warning.path), warning.reason)
        files = []
        for note_file in walked_files:
            problem = name_problem(note_file.path)
            if problem is None:
                files.append(note_file)
            else:  # if an older vrom stored it, it is among the vanished notes removed below
                tally.skip(shown_path(note_file.path), f"skipped: {problem}")
        states = self._store.documents.states()
        rewrite_all = force
        walked = {f.path for f in files}
        vanished = {path: state for path, state in states.items() if path not in walked}
        by_hash: dict[str, list[str]] = {}
        for path, gone in vanished.items():
            by_hash.setdefault(gone.content_hash, []).append(path)

        batch = _Batch(self._store, tally)
        for done, note_file in enumerate(files, start=1):
            state = states.get(note_file.path)
            if (
                state is not None
                and not rewrite_all
                and self._is_current(state)
                and state.mtime == note_file.mtime
                and state.size == note_file.size
            ):
                tally.unchanged += 1
            else:
                with _parsing(tally, batch):
                    self._index_file(note_file, state, by_hash, vanished, rewrite_all, batch, tally)
            if progress is not None:
                progress(done, len(files), note_file.path)
        batch.flush()
        with self._store.transaction():
            for gone in vanished.values():
                self._store.documents.delete(gone.document_id)
                tally.removed += 1
            self._store.set_meta(STRATEGY_META_KEY, self._strategy_json)
            self._store.set_meta("vault_root", str(self._root))
            self._store.set_meta("last_indexed_unix", repr(time.time()))
        return self._summary(tally, started)

    def reindex_paths(self, paths: Iterable[str | os.PathLike[str]]) -> IndexSummary:
        """Re-index just these notes (added, changed or deleted on disk); cheap for a few paths."""
        started = time.perf_counter()
        tally = _Tally()
        batch = _Batch(self._store, tally)
        for raw in paths:
            confined = confine(self._root, os.fspath(raw), "reindex")
            rel, absolute = confined.relative, confined.absolute
            problem = name_problem(rel)
            if problem is not None:
                tally.skip(shown_path(rel), f"skipped: {problem}")
                stored = _stored_state(self._store, rel)
                if stored is not None:  # stored by an older vrom: goes, as if deleted
                    batch.delete(rel, stored.document_id)
                continue
            state = self._store.documents.state(rel)
            if is_ignored_path(rel) or not is_note_name(absolute.name):
                tally.skip(
                    rel, "skipped: not a note vrom indexes (hidden, ignored or not Markdown)"
                )
                continue
            try:
                stat = absolute.stat()
            except FileNotFoundError:
                stat = None
            except OSError as exc:
                tally.skip(rel, f"unreadable: {exc.strerror or exc}")
                continue
            if stat is not None and stat.st_size > self._options.max_file_bytes:
                tally.skip(rel, too_large(stat.st_size, self._options.max_file_bytes))
                stat = None  # no longer a note vrom indexes, like a deleted one
            if stat is None:
                if state is not None:
                    batch.delete(rel, state.document_id)
                continue
            note_file = NoteFile(rel, absolute, stat.st_size, stat.st_mtime)
            with _parsing(tally, batch):
                self._index_file(note_file, state, {}, {}, False, batch, tally)
        batch.flush()
        return self._summary(tally, started)

    def _index_file(
        self,
        note_file: NoteFile,
        state: DocumentState | None,
        by_hash: dict[str, list[str]],
        vanished: dict[str, DocumentState],
        rewrite_all: bool,
        batch: _Batch,
        tally: _Tally,
    ) -> None:
        try:
            data = read_regular_file(note_file.abs_path)
        except OSError as exc:
            tally.skip(note_file.path, f"unreadable: {exc.strerror or exc}")
            return
        text, problem = read_note_text(data)
        if text is None:
            tally.skip(note_file.path, problem or "skipped")
            if state is not None:  # it was a note once; it is not one now
                batch.delete(note_file.path, state.document_id)
            return
        if problem:
            tally.warn(note_file.path, problem)
        content_hash = hashlib.sha256(data).hexdigest()
        if (
            state is not None
            and state.content_hash == content_hash
            and self._is_current(state)
            and not rewrite_all
        ):
            batch.touch(note_file.path, state.document_id, note_file.mtime, note_file.size)
            return
        try:
            record, chunks, links, tags, warnings = self._prepare(note_file, text, content_hash)
        except Exception as exc:  # a parser bug must cost one note, never the whole run
            tally.skip(note_file.path, f"could not be parsed ({_named(exc)})")
            return
        document_id = state.document_id if state is not None else None
        counted: Counted = "added" if state is None else "changed"
        if document_id is None and by_hash.get(content_hash):
            old_path = by_hash[content_hash].pop()
            document_id = vanished.pop(old_path).document_id
            counted = "renamed"
        for warning in warnings:
            tally.warn(note_file.path, warning)
        batch.put(record, chunks, links, tags, document_id, counted)

    def _prepare(
        self, note_file: NoteFile, text: str, content_hash: str
    ) -> tuple[DocumentRecord, list[ChunkRecord], list[LinkRecord], list[str], list[str]]:
        note = parse_note(text, note_file.path)
        spans = chunk_note(note, self._options.strategy)
        record = DocumentRecord(
            path=note_file.path,
            path_key=note_key(note_file.path),
            name_key=name_key(note_file.path),
            title=note.title,
            frontmatter=note.frontmatter,
            content_hash=content_hash,
            mtime=note_file.mtime,
            size=note_file.size,
            human_relevance_score=human_relevance_score(note.frontmatter, note_file.path),
            chunk_strategy=self._strategy_id,
        )
        chunks = [
            ChunkRecord(
                s.position,
                s.heading_path,
                s.text,
                s.char_start,
                s.char_end,
                s.content_hash,
                # what its vector is embedded from: a vector made from the same is reused
                input_hash(note_chunk_text(s.text, note.title, s.heading_path, note.frontmatter)),
            )
            for s in spans
        ]
        links = [
            LinkRecord(
                link.kind, link.target, link.target_key, link.heading, link.alias, link.position
            )
            for link in note.links
        ]
        return record, chunks, links, note.tags, note.warnings

    def _summary(self, tally: _Tally, started: float) -> IndexSummary:
        counts = self._store.counts()
        return IndexSummary(
            added=tally.added,
            changed=tally.changed,
            removed=tally.removed,
            renamed=tally.renamed,
            unchanged=tally.unchanged,
            skipped=tally.skipped,
            notes=counts.documents,
            chunks=counts.chunks,
            seconds=round(time.perf_counter() - started, 4),
            warnings=tuple(tally.warnings),
            parse_seconds=round(tally.parse_seconds, 4),
        )


@contextmanager
def _parsing(tally: _Tally, batch: _Batch) -> Iterator[None]:
    """Count the block's time as parsing, less what the batch spent committing meanwhile."""
    started = time.perf_counter()
    try:
        yield
    finally:
        tally.parse_seconds += time.perf_counter() - started - batch.take_write_seconds()


def _named(exc: BaseException) -> str:
    """Return an exception as ``Type: message`` for a warning."""
    return f"{type(exc).__name__}: {exc}"


def _stored_state(store: Store, path: str) -> DocumentState | None:
    """Return the stored state of ``path``; None for a path no store can hold (not UTF-8)."""
    return store.documents.state(path) if is_utf8(path) else None


@dataclass(frozen=True)
class _Write:
    """One note's pending write: its path, the tally count it made, and the write itself: a
    note's rows (``document``, written with its neighbours) or another step (``run``)."""

    path: str
    counted: Counted
    run: Callable[[], object] | None = None
    document: DocumentWrite | None = None


class _Batch:
    """Collects writes and commits them together every `BATCH_NOTES` notes or `BATCH_SECONDS`.

    Each note is written whole inside one transaction, so a crash loses at most the open batch.
    Notes written one after another go to the store together (`put_many`: new notes in a few
    statements, not ~10 each). A note whose write raises is rolled back with the batch, which
    is then written again without it: the note is skipped with a warning naming the exception,
    its count taken back (a failure among notes written together is found by writing them one
    at a time). Starting or committing the transaction failing is the store's problem, not a
    note's: it raises.
    """

    def __init__(self, store: Store, tally: _Tally) -> None:
        self._store = store
        self._tally = tally
        self._writes: list[_Write] = []
        self._opened = time.perf_counter()
        self._write_seconds = 0.0

    def put(
        self,
        record: DocumentRecord,
        chunks: list[ChunkRecord],
        links: list[LinkRecord],
        tags: list[str],
        document_id: int | None,
        counted: Counted,
    ) -> None:
        write = DocumentWrite(record, chunks, links, tags, document_id)
        self._add(_Write(record.path, counted, document=write))

    def touch(self, path: str, document_id: int, mtime: float, size: int) -> None:
        def run() -> None:
            self._store.documents.touch(document_id, mtime, size)

        self._add(_Write(path, "unchanged", run=run))

    def delete(self, path: str, document_id: int) -> None:
        def run() -> None:
            self._store.documents.delete(document_id)

        self._add(_Write(path, "removed", run=run))

    def take_write_seconds(self) -> float:
        """Return the seconds spent committing since the last call (and start again at 0)."""
        spent, self._write_seconds = self._write_seconds, 0.0
        return spent

    def _add(self, write: _Write) -> None:
        if not self._writes:
            self._opened = time.perf_counter()
        self._writes.append(write)
        self._tally.count(write.counted)
        if len(self._writes) >= BATCH_NOTES or time.perf_counter() - self._opened >= BATCH_SECONDS:
            self.flush()

    def flush(self) -> None:
        """Commit what is pending in one transaction, leaving out each note whose write fails."""
        writes, self._writes = self._writes, []
        writing = time.perf_counter()
        try:
            together = True
            while writes:
                failed = self._commit(writes, together)
                if failed is None:
                    break
                position, error = failed
                together = position is not None  # else find which of those together failed
                if position is not None:
                    lost = writes.pop(position)
                    self._tally.count(lost.counted, -1)
                    self._tally.skip(lost.path, f"could not be stored ({_named(error)})")
        finally:
            self._write_seconds += time.perf_counter() - writing

    def _commit(self, writes: list[_Write], together: bool) -> tuple[int | None, Exception] | None:
        """Run ``writes`` in one transaction, consecutive notes in one `put_many` if
        ``together``; return the position and error of one that failed (the transaction then
        rolled back; no position when it was among notes written together), or None once all
        are committed."""
        failed: tuple[int | None, Exception] | None = None
        try:
            with self._store.transaction():
                position = 0
                while position < len(writes):
                    group = _notes_from(writes, position) if together else writes[position:][:1]
                    try:
                        self._run(group)
                    except Exception as exc:
                        failed = (position if len(group) == 1 else None, exc)
                        raise
                    position += len(group)
        except Exception:
            if failed is None:  # starting or committing: the store failed, not a note
                raise
        return failed

    def _run(self, group: list[_Write]) -> None:
        """Write one step, or notes together."""
        if group[0].run is not None:
            group[0].run()
        else:
            self._store.documents.put_many([w.document for w in group if w.document])


def _notes_from(writes: list[_Write], position: int) -> list[_Write]:
    """Return the notes' writes from ``position`` up to the next other step (or that step)."""
    end = position
    while end < len(writes) and writes[end].document is not None:
        end += 1
    return writes[position : max(end, position + 1)]
