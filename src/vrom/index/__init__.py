"""Vector index engine: nearest chunks to a query vector, over what the store holds.

The index is derived data, built from the store's vectors. When the store's vector generation
changes, an index replays the store's log of changed chunks (dropping each one and adding back
its current vector) or, when the log no longer reaches back or holds more changes than
`replay_limit`, rebuilds from scratch; either way deleted or updated chunks never come back in
results.
"""

from __future__ import annotations

from collections.abc import Callable

from vrom.store import VECTOR_ENCODING_META_KEY

METRICS = ("cosine", "dot", "euclidean")
"""Similarity measures the indexes support (vectors are L2-normalised, so cosine is a dot)."""

ENCODINGS = ("float32", "int8")
"""How vectors can be stored: float32, or int8 with a per-vector scale (see `codec`)."""
ENCODING_META_KEY = VECTOR_ENCODING_META_KEY
ENCODED_BYTES: dict[str, Callable[[int], int]] = {
    "float32": lambda dims: 4 * dims,
    "int8": lambda dims: dims + 4,  # one byte a dimension, then the float32 scale
}
"""How many bytes one stored vector of so many dimensions takes, by encoding (see `codec`)."""


GRAPH_SUFFIX = ".hnsw.usearch"
"""A store's chunk graph is cached at ``<database file>.hnsw.usearch``."""
MEMORY_GRAPH_SUFFIX = ".memories.hnsw.usearch"
"""A store's memory graph is cached at ``<database file>.memories.hnsw.usearch``."""
MATRIX_SUFFIX = ".matrix"
"""A store's chunk vectors, for exact search, are cached at ``<database file>.matrix``."""
MEMORY_MATRIX_SUFFIX = ".memories.matrix"
"""A store's memory vectors, for exact search, are cached at ``<database file>.memories.matrix``."""


def replay_limit(size: int) -> int:
    """Return how many changed chunks an index of ``size`` vectors replays rather than rebuild."""
    return max(1_000, size // 2)
