"""Give every chunk in a store a vector from one embedder, and keep models from mixing.

The store remembers the fingerprint of the embedder that wrote its vectors; opening it with a
different one is refused unless the caller asks to rebuild (which clears the old vectors).
"""

from __future__ import annotations

from collections.abc import Callable

from vrom.embed import Embedder, Fingerprint
from vrom.errors import ModelError, ValidationError
from vrom.index import ENCODING_META_KEY, ENCODINGS, stored_encoding
from vrom.store import Store, StoredChunk

FINGERPRINT_META_KEY = "embedding_fingerprint"
EMBED_BATCH = 64

EmbedProgress = Callable[[int, int], None]
"""Called as ``progress(embedded, total)`` while embedding."""


def stored_fingerprint(store: Store) -> Fingerprint | None:
    """Return the fingerprint of the embedder whose vectors the store holds, if any."""
    text = store.get_meta(FINGERPRINT_META_KEY)
    return None if text is None else Fingerprint.from_json(text)


def bind_embedder(
    store: Store, embedder: Embedder, *, rebuild: bool = False, encoding: str | None = None
) -> None:
    """Make ``embedder`` the store's model, or refuse if the store holds another model's vectors.

    ``encoding`` (``float32`` or ``int8``; None keeps the store's) must also match the stored
    vectors. With ``rebuild`` the old vectors are dropped (to be re-embedded).
    """
    current = embedder.fingerprint
    stored = stored_fingerprint(store)
    encoding = encoding or stored_encoding(store)
    if encoding not in ENCODINGS:
        raise ValidationError(f"vector encoding must be one of {', '.join(ENCODINGS)}")
    if stored == current and encoding == stored_encoding(store) and not rebuild:
        return
    if stored is not None and not rebuild and store.has_vectors():
        if stored != current:
            raise ModelError(
                f"store {store.location} holds vectors of {stored.describe()} but "
                f"{current.describe()} is configured: run 'vrom embed --rebuild' to re-embed "
                f"with it, or configure {stored.model} again"
            )
        raise ModelError(
            f"store {store.location} holds {stored_encoding(store)} vectors but {encoding} is "
            "configured: run 'vrom embed --rebuild' to re-encode them"
        )
    with store.transaction():
        store.clear_vectors()
        store.set_meta(FINGERPRINT_META_KEY, current.to_json())
        store.set_meta(ENCODING_META_KEY, encoding)


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
    total = 0
    if progress is not None:  # counting costs a pass over the store: only for a progress bar
        counts = store.counts()
        total = counts.chunks - counts.vectors
    encoding = stored_encoding(store)
    done = after = 0
    while True:
        # a cursor, so each batch starts where the last ended instead of rescanning the store
        chunks = store.chunks_missing_vectors(batch, after)
        if not chunks:
            return done
        after = chunks[-1].chunk_id
        from vrom.index.codec import encode  # numpy: loaded already by any embedder

        blobs = encode(embedder.embed_documents([embedding_text(c) for c in chunks]), encoding)
        store.put_vectors([(c.chunk_id, blob) for c, blob in zip(chunks, blobs, strict=True)])
        done += len(chunks)
        if progress is not None:
            progress(done, max(total, done))
