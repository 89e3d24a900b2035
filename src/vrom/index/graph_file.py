"""The HNSW graph's file beside a store, read without loading the graph (nor usearch).

A graph saved beside the database (`vrom.index.hnsw`) has a JSON sidecar naming the store, the
store change the graph reflects, its vector count, metric, dtype and connectivity, and the
size, mtime and inode of the one graph file it describes. This module reads that sidecar:
whether a saved graph is current, behind or due for a rebuild, and how many vectors it holds.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from vrom.index import replay_limit
from vrom.store import Sidecar, VectorSource

FORMAT_VERSION = 2
CONNECTIVITY = 16
GRAPH_DTYPE = "f16"
"""The graph holds each vector as float16: half the space of float32."""


def file_identity(info: os.stat_result) -> list[int]:
    # A sidecar describes exactly one graph file: two writers racing can't pair it with another.
    return [info.st_size, info.st_mtime_ns, info.st_ino]


def cached_vector_count(vectors: VectorSource, cache: Sidecar | None) -> int | None:
    """Return how many vectors the cached graph holds if it is current, else None."""
    meta = None if cache is None else read_sidecar(cache.path)
    if meta is None or not sidecar_matches(meta, vectors):
        return None
    if meta.get("changes") != vectors.change_number():
        return None
    count = meta.get("count")
    return count if isinstance(count, int) else None


def graph_facts(vectors: VectorSource, cache: Sidecar | None, metric: str) -> dict[str, Any]:
    """Return what the graph file cached for ``vectors`` is, without loading it.

    Keys: ``path``, ``bytes``, ``vectors`` (in the graph), ``changes_behind`` (vectors changed
    in the store since the graph was saved) and ``state``: ``current`` (it reflects the
    store's latest vector change), ``behind`` (the next search replays those few changes into
    it), ``rebuild`` (too far behind, unreadable, or of another store or metric: the next
    search that needs it builds it again from the store), ``missing`` (none saved yet), or
    ``none`` (the store keeps no file beside it: in memory, or encrypted).
    """
    facts: dict[str, Any] = {
        "path": None if cache is None else str(cache.path),
        "state": "none" if cache is None else "missing",
        "bytes": None,
        "vectors": None,
        "changes_behind": None,
    }
    if cache is None:
        return facts
    try:
        info = cache.path.stat()
    except OSError:
        return facts
    facts.update(bytes=info.st_size, state="rebuild")
    meta = read_sidecar(cache.path)
    if meta is None or not sidecar_matches(meta, vectors, metric):
        return facts
    count = meta.get("count")
    if not isinstance(count, int):
        return facts
    facts["vectors"] = count
    changes = vectors.changes(meta["changes"])
    if file_identity(info) != meta.get("file") or changes is None:
        return facts
    facts["changes_behind"] = len(changes.keys)
    if len(changes.keys) <= replay_limit(count):
        facts["state"] = "behind" if changes.keys else "current"
    return facts


def sidecar_path(path: Path) -> Path:
    return path.with_suffix(".json")


def read_sidecar(path: Path) -> dict[str, Any] | None:
    try:
        meta = json.loads(sidecar_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def sidecar_matches(meta: dict[str, Any], vectors: VectorSource, metric: str | None = None) -> bool:
    expected: dict[str, Any] = {
        "format": FORMAT_VERSION,
        "store": vectors.identity(),
        "dtype": GRAPH_DTYPE,
        "connectivity": CONNECTIVITY,
    }
    if metric is not None:
        expected["metric"] = metric
    return all(meta.get(key) == value for key, value in expected.items()) and isinstance(
        meta.get("changes"), int
    )
