"""Give chunks and memories vectors from one embedder, and keep models from mixing.

A store remembers the fingerprint of the embedder that wrote its chunk vectors, and separately
of the one that wrote its memory vectors. Using it with a different embedder is refused, with a
message naming both models, while vectors of the other exist; only an explicit rebuild drops
them (to be embedded again). Nothing is ever deleted silently.

Every vector is made by `embed_missing` (a vault's chunks, a collection's documents and the
turns after a changed one, memories), from the text of one recipe per kind: `note_chunk_text`,
`collection_chunk_text` (both `context_text`) and `memory_text`.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, TypeVar

from vrom.embed import Embedder, Fingerprint
from vrom.errors import ModelError, ValidationError
from vrom.index import ENCODING_META_KEY, ENCODINGS
from vrom.store import MemoryFilter, MemoryRecord, Store, StoredChunk

FINGERPRINT_META_KEY = "embedding_fingerprint"
MEMORY_FINGERPRINT_META_KEY = "memory_embedding_fingerprint"
"""The fingerprint of the embedder every stored memory vector comes from."""
EMBED_BATCH = 64
MEMORY_ENCODING = "float32"
"""How memory vectors are stored (they are few: no int8)."""

K = TypeVar("K", bound=Hashable)

EmbedProgress = Callable[[int, int], None]
"""Called as ``progress(embedded, total)`` while embedding."""


def stored_fingerprint(store: Store, key: str = FINGERPRINT_META_KEY) -> Fingerprint | None:
    """Return the fingerprint of the embedder whose vectors the store holds, if any."""
    text = store.get_meta(key)
    return None if text is None else Fingerprint.from_json(text)


def _refuse_other_model(store: Store, what: str, stored: Fingerprint, current: Fingerprint) -> None:
    raise ModelError(
        f"store {store.location} holds {what} of {stored.describe()} but {current.describe()} is "
        f"configured: run 'vrom embed --rebuild' to re-embed with it, or configure "
        f"{stored.model} again"
    )


def bind_embedder(
    store: Store, embedder: Embedder, *, rebuild: bool = False, encoding: str | None = None
) -> None:
    """Make ``embedder`` the model of the store's chunk vectors, or refuse another model's.

    ``encoding`` (``float32`` or ``int8``; None keeps the store's) must also match the stored
    vectors. With ``rebuild`` the old vectors are dropped (to be re-embedded).
    """
    current = embedder.fingerprint
    stored = stored_fingerprint(store)
    have = store.vectors.encoding()
    encoding = encoding or have
    if encoding not in ENCODINGS:
        raise ValidationError(f"vector encoding must be one of {', '.join(ENCODINGS)}")
    if stored == current and encoding == have and not rebuild:
        return
    if stored is not None and not rebuild and store.vectors.has_any():
        if stored != current:
            _refuse_other_model(store, "vectors", stored, current)
        raise ModelError(
            f"store {store.location} holds {have} vectors but {encoding} is "
            "configured: run 'vrom embed --rebuild' to re-encode them"
        )
    with store.transaction():
        store.vectors.clear()
        store.set_meta(FINGERPRINT_META_KEY, current.to_json())
        store.set_meta(ENCODING_META_KEY, encoding)
        store.set_meta(RECIPE_META_KEY, EMBEDDING_RECIPE)


def stored_recipe(store: Store) -> str:
    """Return the recipe the store's chunk vectors were made with (`LEGACY_RECIPE` if none is
    recorded: the store predates recipes)."""
    return store.get_meta(RECIPE_META_KEY) or LEGACY_RECIPE


def check_recipe(store: Store, *, turns: bool = False) -> None:
    """Raise `ModelError` if the store holds chunk vectors made by another recipe than
    `EMBEDDING_RECIPE`: vectors about to be added would not be comparable with them.

    ``turns``: the store's documents are embedded with the turns before them (a collection's;
    see `context_text`). A store of `PREVIOUS_RECIPE` is brought up to date at once when the
    change leaves every text it embedded as it was: no turns, or no source with two documents.
    """
    recipe = stored_recipe(store)
    if recipe == EMBEDDING_RECIPE:
        return
    unchanged = recipe == PREVIOUS_RECIPE and not (
        turns and store.documents.has_shared_value("source")
    )
    if unchanged or not store.vectors.has_any():
        store.set_meta(RECIPE_META_KEY, EMBEDDING_RECIPE)
        return
    raise ModelError(
        f"store {store.location} holds vectors embedded by recipe {recipe!r} (the chunk's text"
        f"{' and its note title' if recipe == LEGACY_RECIPE else ''}); this version embeds "
        f"by {EMBEDDING_RECIPE!r} (the title, heading path and date before each chunk, and "
        "a collection document's turns before it from its source), and "
        "mixing the two would rank unevenly: re-embed with 'vrom embed --rebuild' (a vault) "
        "or Collection.reembed() (a collection); searching needs no rebuild"
    )


def bind_memory_embedder(store: Store, embedder: Embedder, *, rebuild: bool = False) -> None:
    """Make ``embedder`` the model of the store's memory vectors, or refuse another model's.

    With ``rebuild`` the old memory vectors are dropped (to be re-embedded). Vectors made by
    another recipe than `MEMORY_RECIPE` are dropped too when it changes their text (memories
    are few and each recall embeds those without a vector), and the recipe is recorded.
    """
    current = embedder.fingerprint

    def bound() -> bool:
        return (
            not rebuild
            and stored_fingerprint(store, MEMORY_FINGERPRINT_META_KEY) == current
            and store.get_meta(MEMORY_RECIPE_META_KEY) == MEMORY_RECIPE
        )

    if bound():
        return
    with store.transaction():  # checked and switched at once: another process may embed too
        if bound():
            return
        stored = stored_fingerprint(store, MEMORY_FINGERPRINT_META_KEY)
        vectors = store.memories.vectors.count()
        if stored is not None and stored != current and not rebuild and vectors:
            _refuse_other_model(store, "memory vectors", stored, current)
        if rebuild or stored != current or _made_by_another_recipe(store):
            store.memories.vectors.clear()  # embedded again by the next recall
        store.set_meta(MEMORY_FINGERPRINT_META_KEY, current.to_json())
        store.set_meta(MEMORY_RECIPE_META_KEY, MEMORY_RECIPE)


MEMORY_RECIPE = "turns/1"
"""What a memory's vector is made from (`memory_text`), stored in the store's meta; before it
was recorded, a memory's title and content alone."""
MEMORY_RECIPE_META_KEY = "memory_embedding_recipe"
TURNS_BEFORE = 2
"""How many turns before it from the same source (a conversation) a memory's or a collection
document's vector includes."""
TURN_CHARS = 300
"""How much of each of those (its end) is included."""
TURN_MAX_CHARS = 600
"""A memory or document is a turn, embedded with the turns before it, when its text is at most
this long (a document: in one chunk): what is embedded then stays within the model's window
(all-MiniLM-L6-v2 reads 256 tokens, ~1,000 characters), its own words last. A longer one (a
page of a file whose path is its source) is embedded alone: context first would push its own
text out of the window. LoCoMo's dialogue turns are at most 444 characters."""


def _made_by_another_recipe(store: Store) -> bool:
    """True if the store holds memory vectors whose text `MEMORY_RECIPE` changes. Before
    recipes were recorded a memory's text was its title and content, which this recipe
    keeps unless a source has two memories or more (the later ones now include the earlier)."""
    recipe = store.get_meta(MEMORY_RECIPE_META_KEY)
    if recipe == MEMORY_RECIPE or not store.memories.vectors.count():
        return False
    if recipe is not None:
        return True
    sources = Counter(m.source for m in store.memories.list(MemoryFilter(), 1 << 62) if m.source)
    return any(count > 1 for count in sources.values())


EMBEDDING_RECIPE = "context/2"
"""What a chunk's vector is made from (`embedding_text`); stored in the store's meta beside the
model's fingerprint, so vectors made from other texts are never mixed with these."""
PREVIOUS_RECIPE = "context/1"
"""The recipe before a collection document's turns were embedded with it (`context_text`)."""
LEGACY_RECIPE = "text/0"
"""The recipe of stores written before recipes were recorded: a note's title, then the chunk's
text; a collection's chunk text alone."""
RECIPE_META_KEY = "embedding_recipe"
VECTOR_META_KEYS = (FINGERPRINT_META_KEY, ENCODING_META_KEY, RECIPE_META_KEY)
"""The meta a store's chunk vectors were made by (model, encoding, recipe): a copy of them
(`vrom.ingest.sync`) needs it to search them and to take new ones."""
MEMORY_VECTOR_META_KEYS = (MEMORY_FINGERPRINT_META_KEY, MEMORY_RECIPE_META_KEY)
"""The same for memory vectors."""
DATE_KEYS = ("date", "date_time", "datetime", "timestamp")
"""The metadata keys a document's date is read from, first found first (`metadata_date`)."""


def metadata_date(metadata: Mapping[str, Any]) -> object:
    """Return the value of the first of `DATE_KEYS` in ``metadata``, as written (None: none)."""
    return next((metadata[key] for key in DATE_KEYS if key in metadata), None)


def note_chunk_text(
    text: str, title: str, heading_path: str, frontmatter: Mapping[str, Any]
) -> str:
    """Return the text embedded for a chunk of a note: its title, heading path and date, then
    its text (`context_text`)."""
    return context_text(text, title, heading_path, frontmatter)


def collection_chunk_text(
    text: str, heading_path: str, metadata: Mapping[str, Any], turns: Sequence[str] = ()
) -> str:
    """Return the text embedded for a chunk of a collection's document: its ``title`` metadata,
    heading path and date, the ends of the ``turns`` before it from its source
    (`document_turns`), then its text (`context_text`)."""
    return context_text(text, "", heading_path, metadata, turns)


def embedding_text(chunk: StoredChunk, turns: Sequence[str] = ()) -> str:
    """Return the text embedded for a stored chunk: a collection document's (no title: its
    document has none) with its ``turns`` (`collection_chunk_text`), else a note's
    (`note_chunk_text`)."""
    if turns or not chunk.title:
        return collection_chunk_text(chunk.text, chunk.heading_path, chunk.metadata, turns)
    return note_chunk_text(chunk.text, chunk.title, chunk.heading_path, chunk.metadata)


def input_hash(text: str) -> str:
    """Return the hash of a text embedded for a vector, stored with the vector.

    A stored vector is given to another chunk (a note written again, renamed, or copied by a
    sync) only when that chunk's embedded text has the same hash: everything the recipe
    embeds (text, title, heading path, date, turns), not the chunk's text alone, which two
    notes of different titles share. A vector stored without one is never given to another.
    """
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def embedding_texts(store: Store, chunks: Sequence[StoredChunk], *, turns: bool) -> list[str]:
    """Return the text each stored chunk is embedded from now (`embedding_text`); ``turns``:
    a document of one chunk with the turns before it from its source (a collection's)."""
    before: dict[int, list[str]] = {}  # document id -> its turns
    if turns:
        for c in chunks:
            if c.prev_id is None and c.next_id is None:  # a document of one chunk
                before[c.document_id] = document_turns(store, c.metadata, c.document_id, [c.text])
    return [embedding_text(c, before.get(c.document_id, ())) for c in chunks]


def metadata_source(metadata: Mapping[str, Any]) -> str | None:
    """Return a document's ``source`` metadata (a conversation, a thread), if it is text."""
    source = metadata.get("source")
    return source if isinstance(source, str) and source.strip() else None


def document_turns(
    store: Store, metadata: Mapping[str, Any], document_id: int | None, chunks: Sequence[str]
) -> list[str]:
    """Return the whole texts of the `TURNS_BEFORE` documents stored before a document from
    its source (None: before a new one), oldest first; none without a source, or when the
    document (its ``chunks``' texts) is longer than a turn (`TURN_MAX_CHARS`)."""
    source = metadata_source(metadata)
    if source is None or not is_turn(chunks):
        return []
    turns = store.documents.field_texts("source", source, before=document_id, limit=TURNS_BEFORE)
    return [text for _, text in turns]


def is_turn(chunks: Sequence[str]) -> bool:
    """True if a document of these chunk texts is a turn: one chunk of at most
    `TURN_MAX_CHARS` characters."""
    return len(chunks) == 1 and len(chunks[0]) <= TURN_MAX_CHARS


def context_text(
    text: str,
    title: str,
    heading_path: str,
    metadata: Mapping[str, Any],
    turns: Sequence[str] = (),
) -> str:
    """Return the text embedded for a chunk: the context a reader of it alone would need, then
    the chunk's own text (recipe `EMBEDDING_RECIPE`).

    The context is, each on its own line and only when the chunk does not begin with it: the
    document's title (a note's title; a collection document's ``title`` metadata), its heading
    path below the title (``A > B``), and its date (the first of `DATE_KEYS` in the metadata,
    as written). On the development sets, the title before every chunk of a document raised
    vector nDCG@10 from 0.297 to 0.310 (NFCorpus) and 0.681 to 0.686 (SciFact): a document's
    later chunks no longer lose what it is about (docs/benchmarks.md). What is shown and cited
    is the chunk's text, unchanged.

    ``turns`` are the whole texts of the documents before this one from its source, oldest
    first (`document_turns`: a collection's documents whose ``source`` metadata names one
    conversation or thread). The end of each (`TURN_CHARS`, its title left out) goes between
    the context and the chunk, whose own leading title then moves into the context: a turn
    like "Yeah, I painted that last year!" says what it answers. On LoCoMo's dialogues the two
    turns before each raised hybrid nDCG@10 from 0.463 to 0.51 (docs/benchmarks.md).
    """
    start = text.lstrip("# \n")[:300]
    lines: list[str] = []
    if not title:
        named = metadata.get("title")
        title = " ".join(named.split()) if isinstance(named, str) else ""
    if title and turns and start.startswith(title):  # the turns go between title and text
        text = text.lstrip("# \n")[len(title) :].lstrip()
        start = text[:300]
    if title and not start.startswith(title):
        lines.append(title)
    headings = [h for h in heading_path.split(" > ") if h] if heading_path else []
    if headings and headings[0] == title:
        headings = headings[1:]
    if headings and not start.startswith(headings[-1]):
        lines.append(" > ".join(headings))
    date = metadata_date(metadata)
    if isinstance(date, str | int | float) and not isinstance(date, bool):
        written = " ".join(str(date).split())
        if written and all(written not in line for line in (*lines, start)):
            lines.append(written)
    if turns:
        text = "\n".join([*(_end(_untitled(turn, title)) for turn in turns), text])
    return "\n".join(lines) + "\n\n" + text if lines else text


def _untitled(text: str, title: str) -> str:
    """Return ``text`` without its leading ``title`` (a turn's words, not its heading)."""
    start = text.lstrip("# \n")
    return start[len(title) :] if title and start.startswith(title) else text


def memory_text(memory: MemoryRecord, before: Sequence[MemoryRecord] = ()) -> str:
    """Return the text embedded for a memory (recipe `MEMORY_RECIPE`): its title, then the end
    of each memory ``before`` it (`memory_turns`), then its content.

    A memory from a conversation is often a turn that means little alone ("Yeah, I painted
    that last year!"); the turns before it say what it answers. On LoCoMo's dialogues
    (`vrom eval locomo-dev --as memories`) the two turns before each raised hybrid nDCG@10
    from 0.468 to 0.51 (docs/benchmarks.md). What is shown and cited is the memory alone.
    """
    turns = [_end(turn.content) for turn in before]
    return f"{memory.title}\n\n" + "\n".join([*turns, memory.content])


def memory_texts(store: Store, memories: Sequence[MemoryRecord]) -> dict[str, str]:
    """Return the text embedded for each memory, by id: `memory_text` with the memories before
    it from its source (`memory_turns`)."""
    return {m.id: memory_text(m, memory_turns(store, m)) for m in memories}


def memory_turns(store: Store, memory: MemoryRecord) -> list[MemoryRecord]:
    """Return the memories a memory's vector includes: the last `TURNS_BEFORE` remembered
    before it from its source (a conversation, a session), oldest first; none without one, or
    for a memory longer than a turn (`TURN_MAX_CHARS`)."""
    if memory.source is None or not is_turn([memory.content]):
        return []
    return store.memories.preceding(memory.source, memory.id, TURNS_BEFORE)


def _end(text: str) -> str:
    """Return the last `TURN_CHARS` characters of ``text`` (from a word's start), whitespace
    collapsed."""
    flat = " ".join(text.split())
    if len(flat) <= TURN_CHARS:
        return flat
    end = flat[-TURN_CHARS:]
    space = end.find(" ")
    return end[space + 1 :] if 0 <= space < 40 else end


def embed_missing(
    embedder: Embedder,
    texts: Mapping[K, str],
    encoding: str,
    stored: Callable[[Sequence[str]], Mapping[str, bytes]] | None = None,
) -> dict[K, tuple[bytes, str]]:
    """Return each text's encoded vector and its input hash, by the caller's key: the one way
    every vector is made (a vault's chunks, a collection's documents and turns, memories).

    ``stored`` (the chunk vectors' `for_inputs`) gives the vectors already made from the same
    embedded inputs, which are reused; the texts left are embedded once each, however many keys
    share one. A failure of the model is a `ModelError` and nothing is returned.
    """
    hashes = {key: input_hash(text) for key, text in texts.items()}
    kept = stored(list(dict.fromkeys(hashes.values()))) if stored is not None and hashes else {}
    missing = {texts[key]: h for key, h in hashes.items() if h not in kept}  # each text once
    if missing:
        from vrom.index.codec import encode  # numpy: loaded already by any embedder

        blobs = encode(embedder.embed_documents(list(missing)), encoding)
        kept = {**kept, **dict(zip(missing.values(), blobs, strict=True))}
    return {key: (kept[h], h) for key, h in hashes.items()}


def embed_missing_chunks(
    store: Store,
    embedder: Embedder,
    progress: EmbedProgress | None = None,
    batch: int = EMBED_BATCH,
    stop: Callable[[], bool] | None = None,
    *,
    turns: bool = False,
) -> int:
    """Embed every chunk that has no vector yet, in batches; return how many were embedded.

    Each batch is committed on its own, so an interrupted run keeps what it finished, and the
    next run starts where it stopped. ``stop()`` is asked before each batch: True ends the run.
    ``turns``: each document is embedded with the turns before it (a collection's documents;
    `document_turns`). Chunks of one embedded input (`embed_missing`) share one vector.
    """
    total = 0
    if progress is not None:  # counting costs a pass over the store: only for a progress bar
        counts = store.counts()
        total = counts.chunks - counts.vectors
    encoding = store.vectors.encoding()
    done = after = 0
    if progress is not None and total:
        progress(0, total)  # shown at once: the model may take seconds to load before a batch
    while stop is None or not stop():
        # a cursor, so each batch starts where the last ended instead of rescanning the store
        chunks = store.vectors.missing(batch, after)
        if not chunks:
            return done
        if not after:  # something to embed: only vectors of this recipe may join the store's
            check_recipe(store, turns=turns)
        after = chunks[-1].chunk_id
        texts = embedding_texts(store, chunks, turns=turns)
        made = embed_missing(embedder, dict(enumerate(texts)), encoding, store.vectors.for_inputs)
        store.vectors.put(
            [(c.chunk_id, made[at][0]) for at, c in enumerate(chunks)],
            [made[at][1] for at in range(len(chunks))],
        )
        done += len(chunks)
        if progress is not None:
            progress(done, max(total, done))
    return done


def memories_since(
    store: Store, looked: tuple[int, int] | None
) -> tuple[int, tuple[int, ...]] | None:
    """Return where to look for memories without a vector after a look at ``looked`` (the
    newest memory key and the memory vector change number then): past that key, and at the
    keys whose vector changed since; None for a whole look (none before, or the change log no
    longer reaches back)."""
    if looked is None:
        return None
    changes = store.memories.vectors.changes(looked[1])
    return None if changes is None else (looked[0], changes.keys)


def embed_missing_memories(
    store: Store,
    embedder: Embedder,
    batch: int = EMBED_BATCH,
    since: tuple[int, Sequence[int]] | None = None,
) -> int:
    """Embed every memory that has no vector yet, in batches; return how many were embedded
    (``since``: only among those `MemoryVectors.missing` names with it)."""
    bind_memory_embedder(store, embedder)
    done, after = 0, ""
    while memories := store.memories.vectors.missing(batch, after, since):
        after = memories[-1].id
        made = embed_missing(embedder, memory_texts(store, memories), MEMORY_ENCODING)
        with store.transaction():
            bind_memory_embedder(store, embedder)  # another process may have switched models
            store.memories.vectors.put([(memory_id, blob) for memory_id, (blob, _) in made.items()])
        done += len(memories)
    return done
