"""Give every chunk in a store a vector from one embedder, and keep models from mixing.

The store remembers the fingerprint of the embedder that wrote its vectors; opening it with a
different one is refused unless the caller asks to rebuild (which clears the old vectors).
"""

from __future__ import annotations

from collections.abc import Callable

from vrom.embed import Embedder, Fingerprint
from vrom.errors import ModelError
from vrom.store import Store, StoredChunk

FINGERPRINT_META_KEY = "embedding_fingerprint"
EMBED_BATCH = 64

EmbedProgress = Callable[[int, int], None]
"""Called as ``progress(embedded, total)`` while embedding."""


def stored_fingerprint(store: Store) -> Fingerprint | None:
    """Return the fingerprint of the embedder whose vectors the store holds, if any."""
    text = store.get_meta(FINGERPRINT_META_KEY)
    return None if text is None else Fingerprint.from_json(text)


def bind_embedder(store: Store, embedder: Embedder, *, rebuild: bool = False) -> None:
    """Make ``embedder`` the store's model, or refuse if the store holds another model's vectors.

    With ``rebuild`` the old vectors are dropped (to be re-embedded with the new model).
    """
    current = embedder.fingerprint
    stored = stored_fingerprint(store)
    if stored == current:
        return
    if stored is not None and not rebuild and store.counts().vectors:
        raise ModelError(
            f"store {store.location} holds vectors of {stored.describe()} but "
            f"{current.describe()} is configured: run 'vrom embed --rebuild' to re-embed "
            f"with it, or configure {stored.model} again"
        )
    with store.transaction():
        store.clear_vectors()
        store.set_meta(FINGERPRINT_META_KEY, current.to_json())


def embedding_text(chunk: StoredChunk) -> str:
    """Return the text embedded for a chunk: the note's title, then the chunk's own text."""
    if chunk.text.lstrip("# ").startswith(chunk.title):
        return chunk.text
    return f"{chunk.title}\n\n{chunk.text}"


def embed_missing(
    store: Store,
    embedder: Embedder,
    progress: EmbedProgress | None = None,
    batch: int = EMBED_BATCH,
) -> int:
    """Embed every chunk that has no vector yet, in batches; return how many were embedded.

    Each batch is committed on its own, so an interrupted run keeps what it finished.
    """
    counts = store.counts()
    total = counts.chunks - counts.vectors
    done = 0
    while True:
        chunks = store.chunks_missing_vectors(batch)
        if not chunks:
            return done
        matrix = embedder.embed_documents([embedding_text(c) for c in chunks])
        rows = matrix.astype("<f4", copy=False)
        store.put_vectors([(c.chunk_id, rows[i].tobytes()) for i, c in enumerate(chunks)])
        done += len(chunks)
        if progress is not None:
            progress(done, max(total, done))
