"""Approximate vector search with an HNSW graph (usearch), for stores too large for exact search.

The graph is a cache of what the store holds, never the truth: it is saved beside the database
(``<db>.hnsw.usearch`` plus a ``<db>.hnsw.json`` sidecar naming the store change it reflects;
the memories' graph likewise under ``<db>.memories.hnsw.usearch``).
Opening reads the sidecar: a graph that reflects the latest change is memory-mapped as it is; one
a few changes behind is loaded and caught up by replaying the store's vector change log (each
changed chunk is removed and its current vector added back); one too far behind, unreadable or
missing is rebuilt from ``vector_rows()``. A graph is saved through a temporary file renamed
over it; the temporaries a killed save left behind are removed when the graph is next opened
(`vrom.index.cache_files`). So a deleted or re-embedded chunk is never answered
from an old graph, and adding a few documents to a large store costs a few graph insertions, not
a rebuild. A graph changed in memory is saved again once its unsaved changes reach a tenth of its
size, and on `HnswIndex.close`.

Filtered searches resolve the allowed ids first. A narrow filter is searched exactly over those
rows (the vectors come from the graph's own storage); a broad one asks the graph for
``OVERSAMPLE·k/selectivity`` candidates (with twice that search expansion) and keeps the allowed
ones, falling back to exact search if fewer than ``k`` survive.
"""

from __future__ import annotations

import json
import math
import mmap
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import cast

import numpy as np
import numpy.typing as npt
from usearch.compiled import (
    Index,
    MetricKind,
    ScalarKind,
)

from vrom.errors import StorageError, ValidationError
from vrom.index import GRAPH_SUFFIX, METRICS, replay_limit
from vrom.index.background import BuildStopped, exiting
from vrom.index.cache_files import remove_stale_temporaries, temporary
from vrom.index.codec import decode
from vrom.index.graph_file import (
    CONNECTIVITY,
    FORMAT_VERSION,
    GRAPH_DTYPE,
    file_identity,
    read_sidecar,
    sidecar_matches,
    sidecar_path,
)
from vrom.index.scoring import nearest_rows
from vrom.index.usearch_graph import EXPANSION_ADD as EXPANSION_ADD  # the builders' name
from vrom.index.usearch_graph import EXPANSION_SEARCH as EXPANSION_SEARCH
from vrom.index.usearch_graph import Graph, add_rows, new_index, restore, unique_keys
from vrom.store import Sidecar, Store, VectorChanges, VectorSource

_GRAPH_SCALAR = ScalarKind.F16
_BUILD_PART = 1_024
"""A graph built beside searches adds this many vectors at a time (~0.1 s), checking between
them whether the process exits (`vrom.index.background`)."""
OVERSAMPLE = 3
"""A filtered graph search gathers ``OVERSAMPLE·k/selectivity`` candidates before filtering."""
FILTER_EXPANSION = 2
"""A filtered graph search expands to this many times its candidates: at 100k clustered vectors
and 2-10% selectivity, recall@10 rose from 0.95-0.97 to 0.99 for 1.3-1.5x the time."""
EXACT_FILTER_ROWS = 2_000
"""Filters allowing at most this many rows are always searched exactly (a few ms)."""
EXACT_FILTER_COST = 2.0
"""Beyond that, exact wins while ``rows² ≤ EXACT_FILTER_COST·OVERSAMPLE·k·total`` (measured)."""

# Vectors are L2-normalised (the embedder contract), so cosine is the inner product, as in
# `ExactIndex`: the graph and the exact path over a filter then score alike.
_USEARCH_METRICS = {"cosine": MetricKind.IP, "dot": MetricKind.IP, "euclidean": MetricKind.L2sq}
# usearch's compiled index is used directly: its Python wrapper (`usearch.index`) imports tqdm
# for progress bars vrom never shows, 20-30 ms of every open, and wraps each search in checks
# and result objects (~40 µs a search).


class GraphBehind(StorageError):
    """Raised by a graph that may not rebuild itself (``HnswIndex(rebuilds=False)``) when only a
    build would bring it up to the store: the caller searches exactly and builds one beside."""


class HnswIndex:
    """An HNSW graph over a store's vectors; scores follow `ExactIndex` (higher is better).

    ``path`` is where the graph is cached: beside the store's database file (None for a store
    without one; the graph then lives in memory only). ``build_count`` counts the graphs this
    object built from the store rather than opened from the cache. With ``rebuilds=False`` a
    graph never builds itself: where it would, its search raises `GraphBehind`.
    """

    def __init__(
        self,
        vectors: VectorSource,
        metric: str = "cosine",
        *,
        cache: Sidecar | None = None,
        expansion_search: int = EXPANSION_SEARCH,
        rebuilds: bool = True,
    ) -> None:
        if metric not in METRICS:
            raise ValidationError(f"metric must be one of {', '.join(METRICS)}, not {metric!r}")
        self._vectors = vectors
        self._metric = metric
        self._expansion_search = _check_ef(expansion_search)
        self._cache = cache
        self.path = None if cache is None else cache.path
        self.build_count = 0
        self._generation = -1
        self._change_number: int | None = None  # the store change the graph reflects
        self._unsaved = 0  # changes replayed into the graph since it was last saved
        self._graph: Graph | None = None
        self._swept = False  # the stale temporaries beside the cache file were removed
        self._rebuilds = rebuilds

    @classmethod
    def built(
        cls,
        vectors: VectorSource,
        rows: Callable[[], tuple[npt.NDArray[np.int64], Iterator[npt.NDArray[np.float32]]]],
        change_number: int,
        identity: str,
        metric: str = "cosine",
        *,
        cache: Sidecar | None = None,
        expansion_search: int = EXPANSION_SEARCH,
    ) -> HnswIndex:
        """Return a graph built from ``rows()`` (ids ascending, their vectors a block at a
        time): the store's vectors as of ``change_number``, its ``identity`` given. It reads
        nothing from the store, so it can be built in another thread (`VectorIndex` does); it
        catches up with later changes on its first search, and never rebuilds itself."""
        index = cls(vectors, metric, cache=cache, expansion_search=expansion_search, rebuilds=False)
        ids, blocks = rows()
        graph: Index | None = None
        start = 0
        for block in blocks:
            if graph is None:
                graph = new_index(block.shape[1], _USEARCH_METRICS[metric], _GRAPH_SCALAR)
                graph.expansion_search = index._expansion_search
            for at in range(0, len(block), _BUILD_PART):
                if exiting():  # usearch's threads must be done before the process exits
                    raise BuildStopped
                part = block[at : at + _BUILD_PART]
                keys = ids[start : start + len(part)].astype(np.uint64)
                add_rows(graph, keys, np.ascontiguousarray(part, dtype=np.float32))
                start += len(part)
        index._change_number = change_number
        index.build_count = 1
        if graph is not None:
            index._graph = Graph(graph)
            index._save(graph, identity)
        return index

    @classmethod
    def for_chunks(
        cls, store: Store, metric: str = "cosine", *, expansion_search: int = EXPANSION_SEARCH
    ) -> HnswIndex:
        """Return the graph over a store's chunk vectors, cached beside it when it can be."""
        return cls(
            store.vectors,
            metric,
            cache=store.sidecar(GRAPH_SUFFIX),
            expansion_search=expansion_search,
        )

    @classmethod
    def open_file(
        cls,
        vectors: VectorSource,
        path: Path,
        metric: str = "cosine",
        *,
        expansion_search: int = EXPANSION_SEARCH,
    ) -> HnswIndex:
        """Return the graph saved at ``path`` for an immutable store (a pack), memory-mapped.

        The graph is taken as it is (a pack's files were verified against its manifest); it
        must hold as many vectors as the store. It is never rebuilt or saved.
        """
        index = cls(vectors, metric, expansion_search=expansion_search)
        try:
            with open(path, "rb") as file:
                mapping = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as exc:
            raise StorageError(f"cannot open the vector index {path}: {exc}") from exc
        buffer = memoryview(mapping)
        problem: Exception | None = None
        try:
            graph = restore(buffer, view=True)
        except (RuntimeError, ValueError) as exc:  # usearch's words for a corrupt file
            graph, problem = None, exc
        finally:
            buffer.release()  # before the mapping can close
        if problem is not None:
            mapping.close()
            raise StorageError(f"the vector index {path} is unreadable: {problem}") from problem
        expected = vectors.count()
        if graph is None or len(graph) != expected:
            found = 0 if graph is None else len(graph)
            del graph
            mapping.close()
            raise StorageError(
                f"the vector index {path} holds {found} vectors but its store {expected}"
            )
        index._graph = Graph(graph, mapping)
        index._generation = vectors.generation()
        index._change_number = vectors.change_number()
        return index

    def __len__(self) -> int:
        self.refresh()
        return 0 if self._graph is None or self._graph.index is None else len(self._graph.index)

    def refresh(self) -> bool:
        """Bring the graph up to the store's vectors if they changed since; True if it did."""
        # Read the generation before the rows: a write in between makes the graph look older
        # than it is (one needless catch-up later), never newer.
        generation = self._vectors.generation()
        if generation == self._generation:
            return False
        if not (self._replay_current() or self._open_cached()):
            if not self._rebuilds:
                raise GraphBehind(
                    f"the vector graph {self.path or '(in memory)'} is too far behind its store "
                    "to catch up: search exactly while one is built"
                )
            self._build()
        self._generation = generation
        return True

    def close(self) -> None:
        """Save the graph if it holds unsaved changes, and let it go."""
        graph = self._graph
        if graph is not None and graph.index is not None and self._unsaved:
            self._save(graph.index)
        self._graph = None
        self._generation = -1
        self._change_number = None

    def search(
        self,
        query: npt.NDArray[np.float32],
        k: int,
        allowed: Sequence[int] | None = None,
        ef_search: int | None = None,
    ) -> list[tuple[int, float]]:
        """Return up to ``k`` (chunk id, score) pairs, best first, among ``allowed`` ids if given.

        ``ef_search`` widens (or narrows) the graph search for this query; the default is
        ``expansion_search``. Larger is slower and closer to exact.
        """
        self.refresh()
        graph = self._graph  # held for the whole search: a refresh elsewhere can't unmap it
        index = None if graph is None else graph.index
        if index is None or not len(index):
            return []
        if query.shape[-1] != index.ndim:
            raise ValidationError(f"query has {query.shape[-1]} dimensions, the index {index.ndim}")
        ef = self._expansion_search if ef_search is None else _check_ef(ef_search)
        query = np.asarray(query, dtype=np.float32)
        if allowed is None:
            if ef >= len(index):  # a beam as wide as the graph costs what exact search does
                keys = np.sort(index.get_keys_in_slice())
                return self._exact(index, query, keys, k)  # and reaches a node no link leads to
            return self._approximate(index, query, k, ef)
        keys = unique_keys(np.asarray(allowed, dtype=np.uint64))  # a list, or ids numpy reads as is
        keys = keys[index.contains_many(keys)] if len(keys) else keys
        if not len(keys):
            return []
        total = len(index)
        if _prefers_exact(len(keys), total, k):
            return self._exact(index, query, keys, k)
        wanted = min(total, math.ceil(OVERSAMPLE * k * total / len(keys)))
        hits = self._approximate(index, query, wanted, max(ef, FILTER_EXPANSION * wanted))
        found = np.fromiter((i for i, _ in hits), dtype=np.uint64, count=len(hits))
        kept = [hit for hit, ok in zip(hits, np.isin(found, keys), strict=True) if ok]
        if len(kept) < min(k, len(keys)):
            return self._exact(index, query, keys, k)
        return kept[:k]

    # -- searching -------------------------------------------------------------------------

    def _approximate(
        self, index: Index, query: npt.NDArray[np.float32], count: int, ef: int
    ) -> list[tuple[int, float]]:
        index.expansion_search = max(ef, count)
        # one query, one thread: a pool of threads costs more than it shares at this size
        keys, distances, counts, _, _ = index.search_many(
            query.reshape(1, -1), count=count, exact=False, threads=1, dtype=ScalarKind.Unknown
        )
        found = int(counts[0])
        distances = distances[0, :found].astype(np.float64)
        if self._metric == "euclidean":
            scores = -np.sqrt(np.maximum(distances, 0.0))  # usearch's l2sq is squared
        else:
            scores = 1.0 - distances  # usearch's ip distance is 1 - dot product
        return list(zip(keys[0, :found].tolist(), scores.tolist(), strict=True))

    def _exact(
        self,
        index: Index,
        query: npt.NDArray[np.float32],
        keys: npt.NDArray[np.uint64],
        k: int,
    ) -> list[tuple[int, float]]:
        vectors = cast("tuple[npt.NDArray[np.float32], ...]", index.get_many(keys, ScalarKind.F32))
        matrix = np.concatenate(vectors).view(np.float32).reshape(len(keys), index.ndim)
        return nearest_rows(keys.astype(np.int64), matrix, query, k, self._metric)

    # -- keeping up with the store ---------------------------------------------------------

    def _replay_current(self) -> bool:
        """Replay the store's changes into the graph held now; False if a rebuild is due."""
        graph = self._graph
        if graph is None or graph.index is None or self._change_number is None:
            return False
        changes = self._vectors.changes(self._change_number)
        if changes is None or len(changes.keys) > replay_limit(len(graph.index)):
            return False
        self._replay(graph, changes)
        return True

    def _replay(self, graph: Graph, changes: VectorChanges) -> None:
        """Remove each changed chunk from the graph and add back its current vector."""
        if changes.keys:
            index: Index | None = graph.index
            assert index is not None
            if graph.mapping is not None:  # a memory-mapped graph is read-only: copy it first
                # (usearch crashes the process when a viewed graph is written to)
                index = restore(memoryview(graph.mapping), view=False)
                assert index is not None
                graph = self._graph = Graph(index)
            keys = np.asarray(changes.keys, dtype=np.uint64)
            present = keys[index.contains_many(keys)]
            if len(present):
                index.remove_many(present.tolist(), compact=False, threads=0)
            current = self._vectors.of(changes.keys)
            if current:
                added = np.fromiter(current, dtype=np.uint64, count=len(current))
                matrix = decode(list(current.values()), self._vectors.encoding())
                if matrix.shape[1] != index.ndim:
                    raise ValidationError(
                        f"the store's vectors have {matrix.shape[1]} dimensions, the index "
                        f"{index.ndim}: rebuild the index"
                    )
                add_rows(index, added, matrix)
            self._unsaved += len(changes.keys)
        self._change_number = changes.latest
        saved = graph.index
        if saved is not None and self._unsaved and self._unsaved >= max(1_000, len(saved) // 10):
            self._save(saved)

    # -- the cache file --------------------------------------------------------------------

    def _open_cached(self) -> bool:
        """Open the cached graph and catch it up with the store; True if it could."""
        if self.path is None:
            return False
        if not self._swept:
            self._swept = True
            remove_stale_temporaries(self.path, sidecar_path(self.path))
        meta = read_sidecar(self.path)
        if meta is None or not sidecar_matches(meta, self._vectors, self._metric):
            return False
        changes = self._vectors.changes(meta["changes"])
        count = meta.get("count")
        if changes is None or not isinstance(count, int):
            return False
        if len(changes.keys) > replay_limit(count):
            return False
        try:
            with open(self.path, "rb") as file:
                if file_identity(os.fstat(file.fileno())) != meta.get("file"):
                    return False
                # Map the file we checked, not the path: another process may replace it.
                mapping = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            return False
        buffer = memoryview(mapping)
        try:
            index = restore(buffer, view=True)
        except (RuntimeError, ValueError):  # usearch's words for a corrupt file
            index = None
        finally:
            buffer.release()  # usearch keeps a pointer, not the buffer: the mapping must live on
        if index is None or len(index) != count or index.ndim != meta.get("dims"):
            del index
            mapping.close()
            return False
        self._graph = Graph(index, mapping)
        self._unsaved = 0
        self._replay(self._graph, changes)
        return True

    def _build(self) -> None:
        """Build the graph from the store's vectors and cache it (an empty store has none)."""
        # the change number is read before the rows: a change in between is replayed later
        change_number = self._vectors.change_number()
        rows = self._vectors.rows()
        self._change_number = change_number
        self._unsaved = 0
        if not rows:
            self._graph = None
            return
        ids = np.fromiter((row[0] for row in rows), dtype=np.uint64, count=len(rows))
        matrix = decode([row[1] for row in rows], self._vectors.encoding())
        del rows
        index = new_index(matrix.shape[1], _USEARCH_METRICS[self._metric], _GRAPH_SCALAR)
        index.expansion_search = self._expansion_search
        add_rows(index, ids, matrix)
        self.build_count += 1
        self._graph = Graph(index)  # the old view goes first: some systems can't replace it
        self._save(index)

    def _save(self, index: Index, store: str | None = None) -> None:
        """Write the graph, then its sidecar, each via a temporary file and an atomic rename
        (``store``: the store's identity, when known already)."""
        if self.path is None or self._change_number is None:
            return
        sidecar = sidecar_path(self.path)
        temporaries: list[str] = []
        try:
            graph_tmp = temporary(self.path, temporaries, self._cache)
            index.save_index_to_path(graph_tmp, None)
            with open(graph_tmp, "rb") as file:
                os.fsync(file.fileno())
                identity = file_identity(os.fstat(file.fileno()))
            meta = {
                "format": FORMAT_VERSION,
                "store": self._vectors.identity() if store is None else store,
                "changes": self._change_number,
                "count": len(index),
                "dims": index.ndim,
                "metric": self._metric,
                "dtype": GRAPH_DTYPE,
                "connectivity": CONNECTIVITY,
                "file": identity,
            }
            sidecar_tmp = temporary(sidecar, temporaries, self._cache)
            Path(sidecar_tmp).write_text(json.dumps(meta, indent=1), encoding="utf-8")
            os.replace(graph_tmp, self.path)
            os.replace(sidecar_tmp, sidecar)
            self._unsaved = 0
        except (OSError, RuntimeError) as exc:
            warnings.warn(
                f"cannot save the vector index cache {self.path}: {exc}; it will be rebuilt "
                "the next time the store is opened",
                RuntimeWarning,
                stacklevel=4,
            )
        finally:
            for leftover in temporaries:
                Path(leftover).unlink(missing_ok=True)


def _prefers_exact(rows: int, total: int, k: int) -> bool:
    """True when scanning ``rows`` allowed vectors is about as fast as oversampling the graph.

    Exact search costs ~5 µs a row (fetching each vector from the graph dominates); the graph's
    cost grows with the ``OVERSAMPLE·k·total/rows`` candidates it gathers. At 100k vectors of
    384 dims the two met near 2,500 rows for k=10 and 5,000 for k=50, where
    ``rows² ≈ 2·OVERSAMPLE·k·total``. Exact also means recall 1.0, so ties go to it.
    """
    return rows <= EXACT_FILTER_ROWS or rows * rows <= EXACT_FILTER_COST * OVERSAMPLE * k * total


def _check_ef(ef: int) -> int:
    if isinstance(ef, bool) or not isinstance(ef, int) or ef < 1:
        raise ValidationError(f"ef_search must be a positive integer, not {ef!r}")
    return ef
