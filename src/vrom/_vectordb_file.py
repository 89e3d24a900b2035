"""The file a `vrom.vectordb.VectorDB` is saved to, written atomically and checked when read.

One uncompressed zip file (written to a temporary file, then renamed over the target) holding
``vectordb.json`` (format and settings), ``graph.usearch`` (the usearch index) and
``metadata.jsonl`` (one JSON line per id, ``null`` for none). The zip's CRC-32 of each member
catches a corrupted file, which usearch alone would load without complaint.

This module knows the format; `VectorDB` knows what the settings mean and builds itself from them.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from usearch.compiled import MetricKind, ScalarKind
from usearch.index import Index

from vrom.errors import StorageError

FILE_FORMAT = "vrom.vectordb"
FILE_VERSION = 1
_SETTINGS_MEMBER = "vectordb.json"
_GRAPH_MEMBER = "graph.usearch"
_METADATA_MEMBER = "metadata.jsonl"


@dataclass(frozen=True)
class SavedVectorDB:
    """What a VectorDB file holds, its format and version already checked.

    ``settings`` are the constructor's (``dim``, ``metric``, ``m``, ``ef_construction``,
    ``ef_search``) plus ``count``; ``metadata_lines`` has ``count`` lines, one per id.
    """

    settings: dict[str, Any]
    graph: bytes
    metadata_lines: list[str]


def write_vectordb_file(
    target: Path, settings: dict[str, Any], graph: bytes, metadata: Sequence[str | None]
) -> None:
    """Write a VectorDB file at ``target``, replacing it atomically if it exists.

    ``metadata`` holds each id's compact JSON (None for none). A new file is readable by its
    owner only (0600); a replaced one keeps its permissions.
    """
    header = {"format": FILE_FORMAT, "version": FILE_VERSION, **settings, "count": len(metadata)}
    lines = "".join(("null" if text is None else text) + "\n" for text in metadata)
    temporary: str | None = None
    try:
        fd, temporary = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "wb") as file:
            with zipfile.ZipFile(file, "w", compression=zipfile.ZIP_STORED) as archive:
                archive.writestr(_SETTINGS_MEMBER, json.dumps(header, indent=1))
                archive.writestr(_GRAPH_MEMBER, graph)
                archive.writestr(_METADATA_MEMBER, lines)
            file.flush()
            os.fsync(file.fileno())
        if target.exists():  # mkstemp makes the file private; a replaced one keeps its mode
            os.chmod(temporary, stat.S_IMODE(target.stat().st_mode))
        os.replace(temporary, target)
        temporary = None
    except OSError as exc:
        raise StorageError(f"cannot save the vector database to {target}: {exc}") from exc
    finally:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)


def read_vectordb_file(source: Path) -> SavedVectorDB:
    """Return what the VectorDB file at ``source`` holds, or raise `StorageError`."""
    try:
        with zipfile.ZipFile(source) as archive:
            settings = json.loads(archive.read(_SETTINGS_MEMBER))
            graph = archive.read(_GRAPH_MEMBER)
            text = archive.read(_METADATA_MEMBER).decode("utf-8")
    except FileNotFoundError:
        raise StorageError(f"no vector database at {source}: check the path") from None
    except (OSError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise unreadable(source, str(exc)) from exc
    if not isinstance(settings, dict) or settings.get("format") != FILE_FORMAT:
        raise unreadable(source, "not a VectorDB file")
    if settings.get("version") != FILE_VERSION:
        raise StorageError(
            f"{source} is a VectorDB file of version {settings.get('version')!r}; this vrom "
            f"reads version {FILE_VERSION}: upgrade vrom or save it again"
        )
    lines = text.removesuffix("\n").split("\n") if text else []
    count = settings.get("count")
    if isinstance(count, bool) or count != len(lines):
        raise unreadable(source, f"{len(lines)} metadata lines for {count!r} vectors")
    return SavedVectorDB(settings, graph, lines)


def restore_graph(
    source: Path,
    graph: bytes,
    *,
    count: int,
    dim: int,
    metric: MetricKind,
    m: int,
    ef_construction: int,
    ef_search: int,
) -> Index:
    """Return the usearch index saved in ``graph``, checked against the file's settings."""
    try:
        index = Index.restore(graph, view=False)
    except (RuntimeError, ValueError) as exc:  # usearch's words for a corrupt graph
        raise unreadable(source, f"graph: {exc}") from exc
    if index is None:
        raise unreadable(source, "graph: not a usearch index")
    found = {
        "vectors": len(index),
        "dimensions": index.ndim,
        "metric": index.metric_kind,
        "dtype": index.dtype,
        "m": index.connectivity,
    }
    expected = {
        "vectors": count,
        "dimensions": dim,
        "metric": metric,
        "dtype": ScalarKind.F32,
        "m": m,
    }
    wrong = [name for name in found if found[name] != expected[name]]
    keys = np.sort(np.asarray(index.keys, dtype=np.uint64))
    if not wrong and not np.array_equal(keys, np.arange(count, dtype=np.uint64)):
        wrong = ["ids"]
    if wrong:
        raise unreadable(source, f"the graph's {', '.join(wrong)} disagree with its settings")
    index.expansion_add = ef_construction  # type: ignore[misc]
    index.expansion_search = ef_search  # type: ignore[misc]
    return index


def unreadable(source: Path, reason: str) -> StorageError:
    """Return the error for a file that is not a readable VectorDB file, and why."""
    return StorageError(
        f"{source} is not a readable VectorDB file ({reason}): it is corrupt or was not "
        "written by VectorDB.save"
    )
