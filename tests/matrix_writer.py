"""A second process writing a store's vectors, for the tests of the exact index's matrix file.

    python matrix_writer.py STORE

It adds a note, deletes one, re-embeds some chunks of another and rewrites a fourth (new chunk
ids), each in its own transaction, as another process on the same SQLite file would: an index
that cached the vectors before must catch up with all of it. The helpers fill a store with
seeded unit vectors, one chunk each.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt
from store_records import note_record

from vrom.store import ChunkRecord
from vrom.store.sqlite import SQLiteStore

DIMS = 32
NOTES = 30
CHUNKS_PER_NOTE = 100  # 3,000 vectors


def unit_vectors(count: int, seed: int) -> npt.NDArray[np.float32]:
    """Return ``count`` seeded random unit vectors of `DIMS` dimensions."""
    vectors = np.random.default_rng(seed).standard_normal((count, DIMS)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def add_note(
    store: SQLiteStore,
    path: str,
    vectors: npt.NDArray[np.float32],
    document_id: int | None = None,
) -> list[int]:
    """Write a note with one chunk per vector (replacing ``document_id``), then the vectors;
    return the chunk ids."""
    chunks = [
        ChunkRecord(i, "H", f"chunk {i}", 0, 7, f"{path}-{i}-{vectors[i, 0]}")
        for i in range(len(vectors))
    ]
    document_id = store.documents.put(note_record(path), chunks, [], [], document_id)
    ids = [c.chunk_id for c in store.documents.chunks_of(document_id)]
    store.vectors.put([(i, v.tobytes()) for i, v in zip(ids, vectors, strict=True)])
    return ids


def fill(store: SQLiteStore) -> None:
    """Fill a store with `NOTES` notes ``n/0.md``... of `CHUNKS_PER_NOTE` seeded vectors each."""
    vectors = unit_vectors(NOTES * CHUNKS_PER_NOTE, seed=1)
    for n in range(NOTES):
        add_note(store, f"n/{n}.md", vectors[n * CHUNKS_PER_NOTE : (n + 1) * CHUNKS_PER_NOTE])


def chunk_ids(store: SQLiteStore, key: str) -> list[int]:
    """Return the chunk ids of the note at path key ``key``."""
    (document,) = store.documents.find(key)
    return [c.chunk_id for c in store.documents.chunks_of(document.document_id)]


def write_changes(store: SQLiteStore) -> None:
    """Add ``new/added.md``, delete ``n/3``, re-embed 25 chunks of ``n/4``, rewrite ``n/5``."""
    add_note(store, "new/added.md", unit_vectors(60, seed=101))
    store.documents.delete(store.documents.find("n/3")[0].document_id)
    edited = chunk_ids(store, "n/4")[:25]
    store.vectors.put(
        [(i, v.tobytes()) for i, v in zip(edited, unit_vectors(25, 102), strict=True)]
    )
    rewritten = store.documents.find("n/5")[0].document_id
    add_note(store, "n/5.md", unit_vectors(40, seed=103), document_id=rewritten)


if __name__ == "__main__":
    writer = SQLiteStore(Path(sys.argv[1]), create=False)
    write_changes(writer)
    writer.close()
