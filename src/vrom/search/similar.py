"""Notes similar in meaning: the cosine between notes' mean chunk vectors."""

from __future__ import annotations

import numpy as np

from vrom.index.codec import decode
from vrom.store import Store


def similar_notes(store: Store, document_id: int, k: int) -> list[tuple[int, float]]:
    """Return up to ``k`` (note id, cosine) pairs for the notes nearest ``document_id``."""
    owners = dict(store.vectors.document_ids())
    rows = store.vectors.rows()
    if not rows or document_id not in owners.values():
        return []
    matrix = decode([data for _, data in rows], store.vectors.encoding())
    notes = np.fromiter((owners.get(chunk_id, -1) for chunk_id, _ in rows), dtype=np.int64)
    perm = np.argsort(notes, kind="stable")  # rows grouped by note, so each group is contiguous
    order, starts = np.unique(notes[perm], return_index=True)
    sums = np.add.reduceat(matrix[perm], starts, axis=0)
    centroids = sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)
    mine = int(np.searchsorted(order, document_id))
    scores = centroids @ centroids[mine]
    ranked = [
        (int(order[i]), float(scores[i]))
        for i in np.argsort(-scores, kind="stable")
        if order[i] != document_id and order[i] >= 0
    ]
    return ranked[:k]
