"""usearch's graph as vrom makes it: empty with vrom's parameters, restored from saved bytes
(viewed in place or loaded), added to on every thread; `vrom.index.hnsw` builds, saves and
searches it."""

from __future__ import annotations

import mmap

import numpy as np
import numpy.typing as npt
from usearch.compiled import (
    Index,
    MetricKind,
    MetricSignature,
    ScalarKind,
    index_dense_metadata_from_buffer,
)

from vrom.index.graph_file import CONNECTIVITY

EXPANSION_ADD = 128
EXPANSION_SEARCH = 128
"""The default search breadth. On real all-MiniLM-L6-v2 vectors (bench/vector_engines.py) 64
gave recall@10 0.987 at 5k vectors, 0.980 at 10k and 0.972 at 20k against exact; 128 gives
0.998, 0.993 and 0.988 for 1.4-1.6x the time (0.15-0.33 ms)."""


class Graph:
    """A usearch index and, when it views the cache file, the mapping of that file."""

    def __init__(self, index: Index, mapping: mmap.mmap | None = None) -> None:
        self.index: Index | None = index
        self.mapping = mapping

    def __del__(self) -> None:
        self.index = None  # gone before the mapping it reads from is unmapped


def new_index(ndim: int, metric: MetricKind, scalar: ScalarKind) -> Index:
    """Return an empty graph (a graph read from a file takes its own parameters from it)."""
    return Index(
        ndim=ndim,
        dtype=scalar,
        connectivity=CONNECTIVITY,
        expansion_add=EXPANSION_ADD,
        expansion_search=EXPANSION_SEARCH,
        metric_kind=metric,
        metric_signature=MetricSignature.ArrayArraySize,
    )


def restore(buffer: memoryview, *, view: bool) -> Index | None:
    """Return the graph saved in ``buffer``: viewed in place or loaded (copied); None if empty.

    Raises `RuntimeError` or `ValueError` for bytes that are not a graph.
    """
    meta = index_dense_metadata_from_buffer(buffer)
    if not meta:
        return None
    index = new_index(meta["dimensions"], meta["kind_metric"], meta["kind_scalar"])
    if view:
        index.view_index_from_buffer(buffer, None)
    else:
        index.load_index_from_buffer(buffer, None)
    return index


def add_rows(index: Index, keys: npt.NDArray[np.uint64], matrix: npt.NDArray[np.float32]) -> None:
    """Add rows to the graph on every thread."""
    index.add_many(keys, matrix, copy=True, threads=0, progress=None, dtype=ScalarKind.Unknown)


def unique_keys(keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """Return the distinct keys, sorted (several times faster than `np.unique` on numpy 2)."""
    keys = np.sort(keys)
    return keys[np.concatenate(([True], keys[1:] != keys[:-1]))] if len(keys) else keys
