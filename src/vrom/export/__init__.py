"""The analytics sidecar: a store exported as tables DuckDB reads with no vrom installed.

`export_store` writes notes, chunks (with their provenance), links (with the note each resolves
to), tags, frontmatter fields, memories and, when asked, the chunk vectors, as a DuckDB file
(``--format duckdb``) or a folder of Parquet files with a ``manifest.json`` (``--format
parquet``)::

    SELECT path, title FROM 'export/notes.parquet' WHERE path LIKE 'Projects/%';

The export is derived data, like a vector graph: the store stays the truth. When ``out`` already
holds an export of the same store, it is brought up to date: every note's row is read to find
what changed, and only the notes whose content hash changed, or that the store rewrote, have
their chunks, links, tags and fields read and written again, with the notes added and removed;
links elsewhere that an added or removed note resolves differently are resolved again, vectors
follow the store's vector change log, and memories are rewritten whole. The store is read
through its roles, in one snapshot. DuckDB (the ``analytics`` extra) is imported only here,
when an export runs.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vrom.errors import StorageError, ValidationError
from vrom.export.tables import (
    NOTE_COLUMN,
    PER_NOTE,
    TABLES,
    Row,
    chunk_rows,
    field_rows,
    json_lines,
    link_rows,
    memory_rows,
    note_row,
    tag_rows,
    vector_lines,
)
from vrom.export.target import (
    FORMAT_VERSION,
    FORMATS,
    MANIFEST_FORMAT,
    Target,
    export_format,
    import_duckdb,
    open_target,
)
from vrom.ingest.embedding import stored_fingerprint
from vrom.results import ExportSummary
from vrom.search.links import LinkResolver, target_keys
from vrom.store import MemoryFilter, Store, StoredDocument

__all__ = ["FORMATS", "TABLES", "export_store"]

PAGE = 1_000
"""Notes read from the store a page at a time."""
_ANY_TEXT = "(SELECT unnest(CAST(? AS VARCHAR[])))"
"""A parameter holding a list of text values, as a set to test ``IN``."""


def export_store(
    store: Store,
    out: str | os.PathLike[str],
    format: str | None = None,
    *,
    vectors: bool = False,
    full: bool = False,
    source: str | None = None,
) -> ExportSummary:
    """Export ``store`` to ``out`` for analytics; return what was written and what changed.

    ``format``: ``duckdb`` (one file) or ``parquet`` (a folder); None picks ``duckdb`` for a
    path ending in ``.duckdb`` or ``.db``, else ``parquet``. ``vectors`` adds the chunk
    vectors (``FLOAT[]``, with the model's fingerprint id). ``source`` names what was
    exported (a vault's root; the store's location by default): ``out`` holding an export of
    another source is refused unless ``full``, which writes everything again. A file or folder
    that holds no vrom export is never overwritten.
    """
    started = time.perf_counter()
    path = Path(os.fspath(out)).expanduser()
    chosen = export_format(path, format)
    source = source or store.location
    duckdb = import_duckdb()
    target = open_target(duckdb, path, chosen)
    try:
        previous = target.manifest
        if previous is not None and previous.get("source") != source and not full:
            raise ValidationError(
                f"{path} holds an export of {previous.get('source')}, not of {source}: choose"
                " another place, or export in full (--full) to replace it"
            )
        incremental, note = _can_update(target, store.vectors.identity(), full)
        tables = [t for t in TABLES if t != "vectors" or vectors]
        try:
            target.start(incremental, tables)
            with store.snapshot():
                plan = _read(store, target, source, incremental, note, vectors=vectors)
            counts = _write(target, plan, tables)
        except duckdb.Error as exc:
            target.abort()
            raise StorageError(f"cannot write the export {path}: {exc}") from exc
        except BaseException:
            target.abort()
            raise
    finally:
        target.close()
    return ExportSummary(
        out=str(path),
        format=chosen,
        notes=len(plan.notes),
        added=plan.added,
        changed=len(plan.rewrite) - plan.added,
        removed=len(plan.removed),
        unchanged=len(plan.notes) - len(plan.rewrite),
        incremental=plan.incremental,
        tables=counts,
        vectors=vectors,
        seconds=round(time.perf_counter() - started, 4),
        note=plan.note,
    )


@dataclass
class _Plan:
    """What one export writes, read from one snapshot of the store."""

    manifest: dict[str, Any]
    incremental: bool
    note: str | None
    notes: list[StoredDocument]
    rewrite: list[StoredDocument]
    added: int
    removed: list[str]
    touched: list[StoredDocument]  # only the modified time or size changed
    rows: dict[str, list[Row]] = field(default_factory=dict)
    relinked: list[Row] = field(default_factory=list)  # (source_path, target_key, resolved)
    vector_ids: list[int] = field(default_factory=list)
    vector_blobs: list[bytes] = field(default_factory=list)
    vectors_changed: tuple[int, ...] | None = None  # None: all vectors are written again


def _can_update(target: Target, identity: str, full: bool) -> tuple[bool, str | None]:
    """Return whether the export the target holds can be brought up to date, and if it is
    there but cannot, why it is written again in full."""
    previous = target.manifest
    if previous is None or full:
        return False, None
    if previous.get("store_identity") != identity:
        why = "it was exported from an earlier store of this vault"
    elif previous.get("format_version") != FORMAT_VERSION:
        why = f"its layout is version {previous.get('format_version')}, not {FORMAT_VERSION}"
    elif target.problem is not None:
        why = target.problem
    else:
        return True, None
    return False, f"the export there was written again in full: {why}"


def _read(
    store: Store,
    target: Target,
    source: str,
    incremental: bool,
    note: str | None,
    *,
    vectors: bool,
) -> _Plan:
    """Read what the export needs from the store (inside the caller's snapshot)."""
    previous = target.manifest or {}
    identity = store.vectors.identity()
    notes = _all_notes(store)
    known = _versions(target) if incremental else {}
    current = {doc.path for doc in notes}
    rewrite, touched = [], []
    for doc in notes:
        version = known.get(doc.path)
        if version is None or version[:2] != (doc.content_hash, doc.indexed_at):
            rewrite.append(doc)
        elif version[2:] != (doc.mtime, doc.size):
            touched.append(doc)  # modified time or size changed, the content did not
    added = sum(doc.path not in known for doc in rewrite)
    removed = sorted(path for path in known if path not in current)
    plan = _Plan({}, incremental, note, notes, rewrite, added, removed, touched)

    resolver = LinkResolver(store, notes)
    rows: dict[str, list[Row]] = {table: [] for table in (*PER_NOTE, "notes", "fields")}
    for doc in (*rewrite, *touched):
        rows["notes"].append(note_row(doc))
    for doc in rewrite:
        rows["fields"].extend(field_rows(doc))
        rows["chunks"].extend(chunk_rows(store.documents.chunks_of(doc.document_id)))
        links = [link for _, link in store.documents.links(sources=[doc.document_id])]
        resolved = [resolver.path(link.target_key, doc.path) for link in links]
        rows["links"].extend(link_rows(doc, links, resolved))
        rows["tags"].extend(tag_rows(doc, store.documents.tags_of(doc.document_id)))
    total = store.memories.counts().total
    rows["memories"] = memory_rows(store.memories.list(MemoryFilter(), total) if total else [])
    plan.rows = rows
    if incremental and (plan.added or removed):
        rewritten = {doc.path for doc in rewrite}
        plan.relinked = [
            (source_path, key, resolver.path(key, source_path))
            for source_path, key in _links_to_recheck(target, rewrite, removed)
            if source_path not in rewritten
        ]
    plan.manifest = {
        "format": MANIFEST_FORMAT,
        "format_version": FORMAT_VERSION,
        "source": source,
        "store": store.location,
        "store_identity": identity,
        "exported_unix": time.time(),
        "vectors": _read_vectors(store, plan, previous if incremental else {}) if vectors else None,
    }
    return plan


def _all_notes(store: Store) -> list[StoredDocument]:
    """Return every note of the store, by path."""
    notes: list[StoredDocument] = []
    while page := store.documents.after_path(notes[-1].path if notes else "", PAGE):
        notes.extend(page)
    return notes


def _versions(target: Target) -> dict[str, tuple[str, float, float, int]]:
    """Return path → (content hash, when the store wrote it, modified time, size) for each
    note of the export."""
    rows = target.con.execute(
        "SELECT path, content_hash, indexed_unix, modified_unix, size FROM notes"
    ).fetchall()
    return {row[0]: tuple(row[1:]) for row in rows}


def _links_to_recheck(
    target: Target, added: Iterable[StoredDocument], removed: list[str]
) -> list[tuple[str, str]]:
    """Return (source path, target key) of the exported links an added or removed note may
    resolve differently: those resolved to a removed note, and those whose key can find an
    added one."""
    keys = sorted(set().union(*(target_keys(doc) for doc in added)))
    return [
        (row[0], row[1])
        for row in target.con.execute(
            "SELECT DISTINCT source_path, target_key FROM links"
            f" WHERE target_key IN {_ANY_TEXT} OR resolved_path IN {_ANY_TEXT}",
            [keys, removed],
        ).fetchall()
    ]


def _read_vectors(store: Store, plan: _Plan, previous: dict[str, Any]) -> dict[str, Any]:
    """Read the vectors to write into ``plan`` (those changed since the last export, or all)
    and return the manifest's description of them."""
    fingerprint = stored_fingerprint(store)
    encoding = store.vectors.encoding()
    fingerprint_id = None if fingerprint is None else fingerprint.digest()
    latest = store.vectors.change_number()
    last = previous.get("vectors") or {}
    changes = None
    if last.get("fingerprint_id") == fingerprint_id and last.get("encoding") == encoding:
        changes = store.vectors.changes(int(last.get("change_number", -1)))
    if changes is None:
        rows = store.vectors.rows()
    else:
        latest = changes.latest
        plan.vectors_changed = changes.keys
        rows = sorted(store.vectors.of(changes.keys).items())
    plan.vector_ids = [key for key, _ in rows]
    plan.vector_blobs = [blob for _, blob in rows]
    return {
        "model": None if fingerprint is None else fingerprint.describe(),
        "fingerprint": None if fingerprint is None else dataclasses.asdict(fingerprint),
        "fingerprint_id": fingerprint_id,
        "dims": None if fingerprint is None else fingerprint.dims,
        "encoding": encoding,
        "change_number": latest,
    }


def _write(target: Target, plan: _Plan, tables: list[str]) -> dict[str, int]:
    """Write the plan's rows into the target's tables and save it; return the rows per table."""
    vectors = plan.manifest["vectors"]
    con = target.con
    if plan.incremental:
        gone = [doc.path for doc in plan.rewrite] + plan.removed
        for table in (*PER_NOTE, "fields"):
            con.execute(f"DELETE FROM {table} WHERE {NOTE_COLUMN[table]} IN {_ANY_TEXT}", [gone])
        retouched = gone + [doc.path for doc in plan.touched]
        con.execute(f"DELETE FROM notes WHERE path IN {_ANY_TEXT}", [retouched])
        con.execute("DELETE FROM memories")
    for table, rows in plan.rows.items():
        target.load(table, json_lines(table, rows))
    if plan.relinked:
        target.create(["relinked"], replace=True)
        target.load("relinked", json_lines("relinked", plan.relinked))
        con.execute(
            "UPDATE links SET resolved_path = r.resolved_path FROM relinked r"
            " WHERE links.source_path = r.source_path AND links.target_key = r.target_key"
        )
        con.execute("DROP TABLE relinked")
    if vectors is not None:
        if plan.vectors_changed is None:
            con.execute("DELETE FROM vectors")
        else:
            con.execute(
                "DELETE FROM vectors WHERE chunk_id IN (SELECT unnest(CAST(? AS BIGINT[])))",
                [list(plan.vectors_changed)],
            )
        if plan.vector_ids:
            from vrom.index.codec import decode  # numpy: only when vectors are exported

            matrix = decode(plan.vector_blobs, vectors["encoding"])
            target.load("vectors", vector_lines(plan.vector_ids, matrix, vectors["fingerprint_id"]))
    counts = {table: target.count(table) for table in tables}
    target.finish({**plan.manifest, "tables": counts})
    return counts
