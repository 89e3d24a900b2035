"""A standalone HNSW vector index with a metadata dict per vector: vrom's low-level vector API.

A port of a browser SDK's ``VectorDB``: vectors go in, get ids ``0, 1, 2, ...`` in insertion
order, and come back nearest first with their metadata. Unlike a vault's index it has no store
behind it: the saved file is the only copy, not a cache to rebuild.

    db = VectorDB(384, metric="cosine")
    first = db.insert_batch(matrix, [{"title": t} for t in titles])
    db.search(query, k=5)  # [{"id": 3, "distance": 0.12, "metadata": {"title": ...}}, ...]
    db.save("notes.vdb")
    db = VectorDB.load("notes.vdb")

Distances (smaller is nearer, whatever the metric):

- ``cosine``: ``1 - cos(a, b)``, in [0, 2]. Vectors need not be normalised: usearch's ``cos``
  metric divides by the norms itself, so `get_vector` returns what was inserted. A zero vector
  has no direction and is rejected.
- ``euclidean``: the L2 distance ``‖a - b‖`` (usearch keeps it squared; the square root is taken
  here).
- ``dot_product``: ``1 - a·b``, usearch's inner-product distance. For unit vectors it equals the
  cosine distance; for others it can be negative (a larger dot product is nearer).

Vectors are stored as float32, so `get_vector` gives back exactly what was inserted (after the
cast to float32) and distances carry only float32 rounding; float16 would halve the memory but
round every stored value to about three significant digits.

A saved database is one zip file of its settings, graph and metadata; `vrom._vectordb_file`
writes and checks it.

Every method is safe to call from several threads: calls run one at a time under a lock
(searches too, since a search sets the graph's expansion).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, TypedDict, cast

import numpy as np
import numpy.typing as npt
from usearch.compiled import MetricKind
from usearch.index import Index

from vrom._vectordb_file import (
    read_vectordb_file,
    restore_graph,
    unreadable,
    write_vectordb_file,
)
from vrom.errors import NotFoundError, StorageError, ValidationError, shown
from vrom.queryable import Closing

__all__ = ["METRICS", "Metric", "Neighbor", "VectorDB", "VectorDBStats"]

Metric = Literal["cosine", "euclidean", "dot_product"]
METRICS: tuple[Metric, ...] = ("cosine", "euclidean", "dot_product")

_USEARCH_METRICS = {
    "cosine": MetricKind.Cos,
    "euclidean": MetricKind.L2sq,
    "dot_product": MetricKind.IP,
}
_SLOT_BYTES = 8  # one pointer in the metadata list


class Neighbor(TypedDict):
    """One search result: the vector's ``id``, its ``distance`` to the query and its metadata."""

    id: int
    distance: float
    metadata: dict[str, Any] | None


class VectorDBStats(TypedDict):
    """What `VectorDB.stats` reports; see there for each field."""

    num_vectors: int
    dimensions: int
    max_layer: int
    total_connections: int
    avg_connections_per_node: float
    memory_bytes: int


class VectorDB(Closing):
    """An in-memory HNSW index (usearch, float32) of vectors with optional metadata dicts.

    ``m`` is the links a node keeps per layer (twice that on the bottom layer),
    ``ef_construction`` the candidates weighed when a vector is linked in, and ``ef_search`` the
    candidates a search keeps (at least ``k``); larger is slower and closer to exact.
    """

    def __init__(
        self,
        dim: int,
        metric: Metric = "cosine",
        m: int = 16,
        ef_construction: int = 128,
        ef_search: int = 40,
    ) -> None:
        self._dim = _positive_int(dim, "dim")
        if metric not in METRICS:
            raise ValidationError(
                f"metric must be one of {', '.join(METRICS)}, not {shown(metric)}"
            )
        if isinstance(m, bool) or not isinstance(m, int) or m < 2:
            raise ValidationError(f"m must be an integer of at least 2, not {shown(m)}")
        self._metric: Metric = metric
        self._m = m
        self._ef_construction = _positive_int(ef_construction, "ef_construction")
        self._ef_search = _positive_int(ef_search, "ef_search")
        self._index: Index | None = Index(
            ndim=self._dim,
            metric=_USEARCH_METRICS[metric],
            dtype="f32",
            connectivity=m,
            expansion_add=self._ef_construction,
            expansion_search=self._ef_search,
        )
        self._metadata: list[str | None] = []  # compact JSON per id, decoded on the way out
        self._metadata_bytes = 0
        self._lock = threading.Lock()

    # -- settings --------------------------------------------------------------------------

    @property
    def metric(self) -> Metric:
        """The distance the database was created with."""
        return self._metric

    @property
    def m(self) -> int:
        """Links a node keeps per layer (``2·m`` on the bottom layer)."""
        return self._m

    @property
    def ef_construction(self) -> int:
        """Candidates weighed when a vector is linked into the graph."""
        return self._ef_construction

    @property
    def ef_search(self) -> int:
        """Candidates `search` keeps (raised to ``k`` when smaller)."""
        return self._ef_search

    def dim(self) -> int:
        """Return how many values each vector holds."""
        with self._lock:
            self._open_index()
            return self._dim

    def __len__(self) -> int:
        with self._lock:
            self._open_index()
            return len(self._metadata)

    # -- adding ----------------------------------------------------------------------------

    def insert(self, vector: object, metadata: dict[str, Any] | None = None) -> int:
        """Add one vector (a list, tuple or 1-d array of ``dim`` numbers); return its id."""
        row = self._as_vectors(vector, "vector", batch=False)
        text = _encode_metadata(metadata, "metadata")
        with self._lock:
            index = self._open_index()
            new_id = len(self._metadata)
            _add(index, np.array([new_id], dtype=np.uint64), row)
            self._remember([text])
            return new_id

    def insert_batch(
        self, matrix: object, metadatas: Sequence[dict[str, Any] | None] | None = None
    ) -> int:
        """Add the rows of ``matrix`` (2-d, ``dim`` columns) with consecutive ids; return the first.

        ``metadatas``, if given, holds one dict (or None) per row. Nothing is added unless every
        row and every metadata is valid.
        """
        rows = self._as_vectors(matrix, "matrix", batch=True)
        if metadatas is None:
            texts: list[str | None] = [None] * len(rows)
        else:
            if isinstance(metadatas, (str, bytes, dict)) or not isinstance(metadatas, Sequence):
                raise ValidationError(
                    f"metadatas must be a list of dicts (or None), one per row, not "
                    f"{type(metadatas).__name__}"
                )
            if len(metadatas) != len(rows):
                raise ValidationError(
                    f"metadatas has {len(metadatas)} entries but the matrix {len(rows)} rows: "
                    "give one per row"
                )
            texts = [_encode_metadata(item, f"metadatas[{i}]") for i, item in enumerate(metadatas)]
        with self._lock:
            index = self._open_index()
            first = len(self._metadata)
            # One thread: usearch's parallel insertion leaves a few nodes unreachable (5 of 5,000
            # random 64-d vectors, measured: their own vector no longer finds them even at
            # ef = size), and its graph varies from run to run. Sequential is 2x slower on two
            # cores, and every vector stays findable.
            _add(index, np.arange(first, first + len(rows), dtype=np.uint64), rows)
            self._remember(texts)
            return first

    def _remember(self, texts: list[str | None]) -> None:
        self._metadata.extend(texts)
        self._metadata_bytes += sum(
            _SLOT_BYTES + (0 if text is None else sys.getsizeof(text)) for text in texts
        )

    # -- reading ---------------------------------------------------------------------------

    def search(self, query: object, k: int) -> list[Neighbor]:
        """Return the ``k`` vectors nearest ``query`` (fewer if the database holds fewer).

        The graph search keeps ``max(ef_search, k)`` candidates; see `search_with_ef`.
        """
        _check_k(k)
        with self._lock:
            return self._search(self._open_index(), query, k, max(self._ef_search, k))

    def search_with_ef(self, query: object, k: int, ef: int) -> list[Neighbor]:
        """Return the ``k`` vectors nearest ``query``, keeping ``ef`` (≥ k) candidates."""
        _check_k(k)
        if isinstance(ef, bool) or not isinstance(ef, int) or ef < k:
            raise ValidationError(f"ef must be an integer of at least k={k}, not {shown(ef)}")
        with self._lock:
            return self._search(self._open_index(), query, k, ef)

    def _search(self, index: Index, query: object, k: int, ef: int) -> list[Neighbor]:
        row = self._as_vectors(query, "query", batch=False)[0]
        total = len(self._metadata)
        if not total:
            return []
        count = min(k, total)  # usearch allocates room for ``count`` (and ``ef``) results
        # usearch declares this property before its setter, which mypy reads as read-only
        index.expansion_search = max(count, min(ef, total))  # type: ignore[misc]
        try:
            matches = index.search(row, count)
        finally:
            index.expansion_search = self._ef_search  # type: ignore[misc]
        distances = np.asarray(matches.distances, dtype=np.float64)
        if self._metric == "cosine":
            distances = np.clip(distances, 0.0, 2.0)  # float rounding strays just outside
        elif self._metric == "euclidean":
            distances = np.sqrt(np.maximum(distances, 0.0))
        return [
            {"id": int(key), "distance": float(distance), "metadata": self._decode(int(key))}
            for key, distance in zip(matches.keys, distances, strict=True)
        ]

    def get_vector(self, vector_id: int) -> npt.NDArray[np.float32]:
        """Return a copy of the vector stored under ``vector_id`` (float32, ``dim`` values)."""
        with self._lock:
            index = self._open_index()
            key = self._check_id(vector_id)
            vector = index.get(key, dtype="f32")
            return np.array(vector, dtype=np.float32).reshape(self._dim)

    def get_metadata(self, vector_id: int) -> dict[str, Any] | None:
        """Return (a copy of) the metadata stored with ``vector_id``, or None if it has none."""
        with self._lock:
            self._open_index()
            return self._decode(self._check_id(vector_id))

    def _decode(self, key: int) -> dict[str, Any] | None:
        text = self._metadata[key]
        return None if text is None else cast("dict[str, Any]", json.loads(text))

    def _check_id(self, vector_id: object) -> int:
        if isinstance(vector_id, bool) or not isinstance(vector_id, (int, np.integer)):
            raise ValidationError(f"an id must be an integer, not {vector_id!r}")
        key = int(vector_id)
        if not 0 <= key < len(self._metadata):
            span = f"0 to {len(self._metadata) - 1}" if self._metadata else "none yet"
            raise NotFoundError(f"no vector with id {key} in the database (ids: {span})")
        return key

    def stats(self) -> VectorDBStats:
        """Return the size and shape of the graph, from usearch's own statistics.

        - ``num_vectors``, ``dimensions``: as `len` and `dim`.
        - ``max_layer``: the highest graph layer (0 when every node is on the bottom one).
        - ``total_connections``: directed links over all layers.
        - ``avg_connections_per_node``: links per node per layer it lives on, i.e.
          ``total_connections`` over the node count of every layer summed; at most ``2·m``
          (a bottom-layer node keeps up to ``2·m`` links, a node above up to ``m``).
        - ``memory_bytes``: usearch's memory use (vectors, graph and reserved capacity) plus an
          estimate of the metadata's (the size of each stored JSON string and a list slot per id).
        """
        with self._lock:
            index = self._open_index()
            total = len(self._metadata)
            links = int(index.stats.edges)
            layer_nodes = sum(int(level.nodes) for level in index.levels_stats)
            return {
                "num_vectors": total,
                "dimensions": self._dim,
                "max_layer": int(index.max_level) if total else 0,
                "total_connections": links,
                "avg_connections_per_node": links / layer_nodes if layer_nodes else 0.0,
                "memory_bytes": int(index.memory_usage) + self._metadata_bytes,
            }

    # -- saving, loading, closing ----------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the database to one file at ``path``, replacing it atomically if it exists.

        A new file is readable by its owner only (0600); a replaced one keeps its permissions.
        """
        target = Path(path)
        with self._lock:
            index = self._open_index()
            settings = {
                "dim": self._dim,
                "metric": self._metric,
                "m": self._m,
                "ef_construction": self._ef_construction,
                "ef_search": self._ef_search,
                "dtype": "f32",
            }
            graph = index.save()
            if graph is None:
                raise StorageError(
                    f"cannot save the vector database to {target}: usearch gave no data"
                )
            metadata = list(self._metadata)
        write_vectordb_file(target, settings, graph, metadata)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> VectorDB:
        """Return the database saved at ``path``, with the settings it was saved with."""
        source = Path(path)
        saved = read_vectordb_file(source)
        settings = saved.settings
        try:
            db = cls(
                settings["dim"],
                settings["metric"],
                settings["m"],
                settings["ef_construction"],
                settings["ef_search"],
            )
        except (KeyError, ValidationError) as exc:
            raise unreadable(source, f"bad settings: {exc}") from exc
        db._metadata_from_lines(source, saved.metadata_lines)
        count = len(saved.metadata_lines)
        if count:
            db._index = restore_graph(
                source,
                saved.graph,
                count=count,
                dim=db._dim,
                metric=_USEARCH_METRICS[db.metric],
                m=db.m,
                ef_construction=db.ef_construction,
                ef_search=db.ef_search,
            )
        return db

    def _metadata_from_lines(self, source: Path, lines: list[str]) -> None:
        texts: list[str | None] = []
        for number, line in enumerate(lines):
            try:
                value = json.loads(line)
            except ValueError as exc:
                raise unreadable(source, f"metadata of id {number}: {exc}") from exc
            if value is not None and not isinstance(value, dict):
                raise unreadable(source, f"metadata of id {number} is not a dict")
            texts.append(None if value is None else line)
        self._remember(texts)

    def close(self) -> None:
        """Free the graph; any later call but `close` raises `StorageError`."""
        with self._lock:
            self._index = None  # usearch frees the graph when its last reference goes
            self._metadata = []
            self._metadata_bytes = 0

    def _open_index(self) -> Index:
        if self._index is None:
            raise StorageError("this VectorDB is closed: load or create it again")
        return self._index

    def _as_vectors(self, values: object, what: str, *, batch: bool) -> npt.NDArray[np.float32]:
        """Return ``values`` as a C-contiguous float32 matrix, or raise `ValidationError`."""
        shape = f"a 2-d array with {self._dim} columns" if batch else f"{self._dim} numbers"
        if isinstance(values, (str, bytes)):
            raise ValidationError(f"{what} must be {shape}, not a string")
        try:
            array = np.asarray(values)
        except (TypeError, ValueError) as exc:  # ragged nesting, or objects numpy can't take
            raise ValidationError(f"{what} must be {shape}: {exc}") from exc
        if array.dtype.kind not in "iuf":
            raise ValidationError(f"{what} must hold numbers, not {array.dtype} values")
        if array.ndim != (2 if batch else 1) or array.shape[-1] != self._dim:
            raise ValidationError(f"{what} must be {shape}, not of shape {array.shape}")
        if batch and not len(array):
            raise ValidationError(f"{what} has no rows: give at least one vector")
        with np.errstate(over="ignore"):  # values beyond float32 become inf, rejected below
            matrix = np.ascontiguousarray(array, dtype=np.float32).reshape(-1, self._dim)
        finite = np.asarray(np.isfinite(matrix).all(axis=1))
        if not finite.all():
            raise ValidationError(
                f"{what}{_row(finite, batch)} holds NaN or infinite values (or ones beyond "
                "float32's range)"
            )
        if self._metric == "cosine":
            nonzero = np.asarray(np.any(matrix != 0, axis=1))
            if not nonzero.all():
                raise ValidationError(
                    f"{what}{_row(nonzero, batch)} is all zeros, which has no cosine distance"
                )
        return matrix


def _row(ok: npt.NDArray[np.bool_], batch: bool) -> str:
    """Name the first failing row of a batch (" row 3"), nothing for a single vector."""
    return f" row {int(np.argmin(ok))}" if batch else ""


def _add(index: Index, keys: npt.NDArray[np.uint64], rows: npt.NDArray[np.float32]) -> None:
    """Add ``rows`` under ``keys``, turning usearch's failures into `StorageError`."""
    try:
        index.add(keys, rows, threads=1)  # see insert_batch
    except (RuntimeError, MemoryError) as exc:
        raise StorageError(f"cannot add to the vector database: {exc}") from exc


def _encode_metadata(metadata: object, where: str) -> str | None:
    """Return ``metadata`` as compact JSON (None stays None), or raise `ValidationError`."""
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        raise ValidationError(f"{where} must be a dict or None, not {type(metadata).__name__}")
    try:
        text = json.dumps(metadata, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{where} is not JSON-ready ({exc})") from exc
    # json.dumps quietly turns int keys into strings and tuples into lists
    if json.loads(text) != metadata:
        raise ValidationError(
            f"{where} would change through JSON (non-string keys or tuples?): use string keys "
            "and lists"
        )
    return text


def _positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"{name} must be a positive integer, not {value!r}")
    return value


def _check_k(k: object) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValidationError(f"k must be a positive integer, not {shown(k)}")
