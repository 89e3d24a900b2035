"""Vector index engine: nearest chunks to a query vector, over what the store holds.

The index is derived data, built from the store's vectors. When the store's vector generation
changes, an index replays the store's log of changed chunks (dropping each one and adding back
its current vector) or, when the log no longer reaches back or holds more changes than
`replay_limit`, rebuilds from scratch; either way deleted or updated chunks never come back in
results.
"""

from __future__ import annotations

from vrom.store import Store

METRICS = ("cosine", "dot", "euclidean")
"""Similarity measures the indexes support (vectors are L2-normalised, so cosine is a dot)."""

ENCODINGS = ("float32", "int8")
"""How vectors can be stored: float32, or int8 with a per-vector scale (see `codec`)."""
ENCODING_META_KEY = "vector_encoding"


def stored_encoding(store: Store) -> str:
    """Return how the store's vectors are encoded: ``float32`` (the default) or ``int8``."""
    return store.get_meta(ENCODING_META_KEY) or "float32"


def replay_limit(size: int) -> int:
    """Return how many changed chunks an index of ``size`` vectors replays rather than rebuild."""
    return max(1_000, size // 2)
