"""Vector index engine: nearest chunks to a query vector, over what the store holds.

The index is derived data: it is (re)built from the store's vectors and reloaded whenever the
store's vector generation changes, so deleted or updated chunks never come back in results.
"""

METRICS = ("cosine", "dot", "euclidean")
"""Similarity measures the indexes support (vectors are L2-normalised, so cosine is a dot)."""
