"""Whether a note on disk still holds what the store indexed: so a search hit is never cited as
the note's text once the note has changed under it.

The check is the indexer's own: a file whose size and modification time are those indexed is
unchanged (no read); one of another size has changed (no read either: its bytes differ); one of
the same size but another time is read and hashed, and is unchanged when its SHA-256 is the
one indexed (a note touched, or saved without a change). A file that is gone, unreadable, no
longer a regular file, or no longer inside the vault has changed. Like the indexer, it cannot
see an edit that keeps both the size and the time (a tool that restores the time on purpose):
``vrom index`` would not re-read that note either.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from vrom.ingest.walk import is_note_in_vault, read_regular_file
from vrom.store import StoredChunk


class IndexedFile(NamedTuple):
    """What the store indexed of a note file: its size, modification time and SHA-256."""

    size: int
    mtime: float
    sha256: str


def fresh_notes(root: Path, chunks: Iterable[StoredChunk]) -> dict[str, bool]:
    """Return, for each distinct note the chunks are of (by vault-relative path), whether the
    file still holds what the store indexed (see the module docstring): the indexed state
    comes with each chunk, read in the search's own snapshot; one ``stat`` a note."""
    indexed = {c.path: IndexedFile(c.document_size, c.mtime, c.document_hash) for c in chunks}
    return {path: note_is_fresh(root, path, state) for path, state in indexed.items()}


def note_is_fresh(root: Path, path: str, indexed: IndexedFile) -> bool:
    """Return True when the note at ``path`` (relative to the resolved vault ``root``) still
    holds what ``indexed`` says was indexed; False when it changed or is gone."""
    file = root / path
    try:
        now = os.stat(file)  # through a symlink, as the walk that indexed it
    except (OSError, ValueError):
        return False
    if now.st_size != indexed.size:
        return False
    if now.st_mtime == indexed.mtime:
        return True
    if not is_note_in_vault(root, file):  # a symlink now leading elsewhere is not this note
        return False
    try:
        data = read_regular_file(file)
    except OSError:
        return False
    return hashlib.sha256(data).hexdigest() == indexed.sha256
