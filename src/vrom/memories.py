"""`Memories`: what an agent chose to remember, kept in the store and recalled by meaning and words.

A memory is a short titled text (a decision, a fact, a preference...) with a project, tags, the
notes it relates to and where it came from. Memories live in the vault's store file beside the
notes, so they survive reopening and share its crash safety; they are searched by the same core
as chunks: BM25 over title, content and tags, cosine over one vector each (the same exact or HNSW
indexes), fused as chunks are (`vrom.search.fusion.fuse`).

    memories = Memories(store, Embedder.default())
    memories.remember("Deploys go through CI", "Never push to prod by hand.", type="decision")
    memories.recall("how do we deploy?", k=3)

A memory is never edited or deleted: `archive` retires it (``archived``), or points to the one
that replaces it (``superseded``); `recall` and `list` see active memories unless asked.
"""

from __future__ import annotations

import builtins
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from vrom._memory_results import (
    Memory,
    MemoryHit,
    MemoryStats,
    memory_as_hit,
    memory_hit,
    memory_of,
    reranked_memories,
)
from vrom.corpus import Corpus
from vrom.dates import parse_span
from vrom.embed import Embedder, EmbedderBinding
from vrom.embed.rerank import RerankerChoice, Reranking
from vrom.errors import NotFoundError, ValidationError, check_unicode, shown
from vrom.filters import Condition, Instant, all_of, parse_filter
from vrom.ingest.embedding import (
    MEMORY_ENCODING,
    MEMORY_FINGERPRINT_META_KEY,
    bind_memory_embedder,
    embed_missing,
    embed_missing_memories,
    memory_texts,
)
from vrom.queryable import Queryable
from vrom.results import SearchReport
from vrom.search.fusion import MAX_K
from vrom.search.query import parse_query, query_words
from vrom.search.reranking import rerank_depth, reranked
from vrom.store import MEMORY_FIELDS, MEMORY_STATUSES, MemoryFilter, MemoryRecord, Store

__all__ = [  # Memory, MemoryHit and MemoryStats live in vrom._memory_results; named here too
    "ANY_STATUS",
    "FILTER_STATUSES",
    "FINGERPRINT_META_KEY",
    "MAX_CONTENT_CHARS",
    "MAX_PROJECT_CHARS",
    "MAX_RELATED",
    "MAX_RELATED_CHARS",
    "MAX_SOURCE_CHARS",
    "MAX_TAGS",
    "MAX_TAG_CHARS",
    "MAX_TITLE_CHARS",
    "MEMORY_TYPES",
    "RETIRED_STATUSES",
    "Memories",
    "Memory",
    "MemoryHit",
    "MemoryStats",
]

MEMORY_TYPES = ("note", "decision", "fact", "preference", "todo", "observation")
"""The documented memory types; any other lower-case word of up to 40 characters is allowed."""
ANY_STATUS = "any"
FILTER_STATUSES = (*MEMORY_STATUSES, ANY_STATUS)
"""The statuses `Memories.recall` and `Memories.list` filter by (``any``: all of them)."""
RETIRED_STATUSES = ("archived", "superseded")
"""The statuses `Memories.archive` sets."""
MAX_TITLE_CHARS = 200
MAX_CONTENT_CHARS = 20_000
MAX_PROJECT_CHARS = 100
MAX_TAGS = 50
MAX_TAG_CHARS = 100
MAX_RELATED = 100
MAX_RELATED_CHARS = 1_000
MAX_SOURCE_CHARS = 1_000
FINGERPRINT_META_KEY = MEMORY_FINGERPRINT_META_KEY
"""The meta key of the fingerprint of the embedder every stored memory vector comes from."""

_Where = Mapping[str, Any] | None  # a filter of the one grammar over `MEMORY_FIELDS`
_TYPE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


_last_id = [0, 0]  # (milliseconds, counter) of the last id this process made
_id_lock = threading.Lock()


def _new_id(now: float) -> str:
    """Return a new memory id: milliseconds since 1970 (12 hex digits), then a counter (8).

    The counter starts at a random point each millisecond and counts up within it, so ids this
    process makes sort in the order they were made even when several share a millisecond.
    """
    milliseconds = int(now * 1000)
    with _id_lock:
        last_ms, last_counter = _last_id
        if milliseconds <= last_ms:
            milliseconds, counter = last_ms, last_counter + 1
        else:
            counter = int.from_bytes(os.urandom(3), "big")  # leaves room to count up
        _last_id[:] = [milliseconds, counter]
    return f"mem_{milliseconds:012x}{counter:08x}"


def _text(name: str, value: object, limit: int, *, one_line: bool = False) -> str:
    """Return ``value`` stripped, or raise `ValidationError` if it is not fitting text."""
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a string, not {type(value).__name__}")
    text = value.strip()
    if not text:
        raise ValidationError(f"{name} must not be blank")
    if len(text) > limit:
        raise ValidationError(f"{name} is {len(text):,} characters; the limit is {limit:,}")
    if "\x00" in text or (one_line and _CONTROL.search(text)):
        what = "line breaks or control characters" if one_line else "NUL characters"
        raise ValidationError(f"{name} must not hold {what}")
    return check_unicode(text, name)


def _optional_text(name: str, value: object, limit: int) -> str | None:
    return None if value is None else _text(name, value, limit, one_line=True)


def _tag(text: str) -> str:
    """Return a tag as notes' tags are kept: no ``#`` or outer ``/``, lower case."""
    return text.strip().lstrip("#").strip("/").lower()


def _texts(
    name: str,
    values: Iterable[str],
    most: int,
    limit: int,
    clean: Callable[[str], str] = str.strip,
) -> tuple[str, ...]:
    """Return the ``clean``-ed, de-duplicated strings of ``values`` (order kept)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ValidationError(f"{name} must be a list of strings, not {type(values).__name__}")
    items = tuple(
        dict.fromkeys(
            _text(f"each of {name}", clean(v) if isinstance(v, str) else v, limit, one_line=True)
            for v in values
        )
    )
    if len(items) > most:
        raise ValidationError(f"{name} holds {len(items)} items; the limit is {most}")
    return items


def _type(value: object) -> str:
    if not isinstance(value, str) or not _TYPE.match(value.strip().lower()):
        raise ValidationError(
            f"type {shown(value)} must be one of {', '.join(MEMORY_TYPES)} or another word of"
            " up to 40 lower-case letters, digits, '-' or '_'"
        )
    return value.strip().lower()


def _status(value: object, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValidationError(f"status must be one of {', '.join(allowed)}, not {shown(value)}")
    return str(value)


def _memory_filter(
    where: Mapping[str, Any] | None,
    project: str | None,
    type_: str | None,
    status: str,
    since: object = None,
    until: object = None,
) -> MemoryFilter:
    """Return the filter `recall` and `list` read memories with: ``where`` (the one grammar over
    `MEMORY_FIELDS`) and every keyword argument given, which are sugar for its fields."""
    _status(status, FILTER_STATUSES)
    tests: dict[str, Any] = {}
    if project is not None:
        tests["project"] = _optional_text("project", project, MAX_PROJECT_CHARS)
    if type_ is not None:
        tests["type"] = _type(type_)
    if status != ANY_STATUS:
        tests["status"] = status
    sugar = [Condition(key, "eq", value) for key, value in tests.items()]
    if since is not None:
        sugar.append(Condition("created", "gte", Instant(_instant("since", since))))
    if until is not None:
        sugar.append(Condition("created", "lte", Instant(_instant("until", until, last=True))))
    return MemoryFilter(all_of(parse_filter(where, fields=MEMORY_FIELDS), *sugar))


def _instant(name: str, value: object, *, last: bool = False) -> float:
    """Return the Unix time ``value`` names (`vrom.dates.parse_span`: with ``last``, the last
    instant of a day, month or year written alone), or `ValidationError`."""
    span = parse_span(value)
    if span is None:
        raise ValidationError(
            f"{name} must be a date or time (ISO 8601 such as 2023-05-08 or "
            f"2023-05-08T13:56:00Z, Unix seconds, '8 May, 2023', or a year or month such as "
            f"2023 or 2023-05), not {shown(value)}"
        )
    return span[1 if last else 0].timestamp()


def _memory_id(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"a memory id must be a non-empty string, not {shown(value)}")
    return check_unicode(value.strip(), "a memory id")


class Memories(Queryable):
    """The memories kept in one store, recalled through the search core (`vrom.corpus.Corpus`).

    ``source`` is a `Corpus` (a vault's, sharing its store and model) or a store. With a store,
    ``embedder`` is an `Embedder`, a function returning one (or None), called once when a model
    is first needed so listing or archiving loads none, or None for keyword recall only.
    Memories remembered without a model are embedded when next recalled with one; memories
    embedded with another model are refused (`ModelError`) until `embed` rebuilds them.
    ``reranker`` (with a store; a core has its own) is what ``rerank`` reorders with.
    """

    def __init__(
        self,
        source: Corpus | Store,
        embedder: Embedder | Callable[[], Embedder | None] | None = None,
        *,
        reranker: RerankerChoice = None,
    ) -> None:
        self._owned = not isinstance(source, Corpus)  # a core made here is closed here
        if isinstance(source, Corpus):
            if reranker is not None:
                raise ValidationError("memories of a core rerank with its reranker: drop it")
            self._corpus = source
        else:
            binding = (
                EmbedderBinding.of(embedder)
                if embedder is None or isinstance(embedder, Embedder)
                else EmbedderBinding.lazy(embedder)
            )
            self._corpus = Corpus(source, binding)
            self._corpus.reranking = Reranking(reranker)
        self._store = self._corpus.store

    @property
    def embedder(self) -> Embedder | None:
        """The embedder memories and queries are embedded with (None: keyword recall only)."""
        return self._corpus.embedder

    # -- writing ---------------------------------------------------------------------------

    def remember(
        self,
        title: str,
        content: str,
        *,
        type: str = "note",
        project: str | None = None,
        tags: Iterable[str] = (),
        related: Iterable[str] = (),
        source: str | None = None,
        timestamp: object = None,
    ) -> Memory:
        """Store a new memory (and its vector, with an embedder) in one transaction; return it.

        ``title`` (one line, up to 200 characters) and ``content`` (up to 20,000) must not be
        blank; ``type`` is one of `MEMORY_TYPES` or another lower-case word of up to 40
        characters; ``project`` and ``source`` are optional one-line texts; ``tags`` (a leading
        ``#`` is dropped and case folded, as in notes) and ``related`` (note paths) are lists of
        strings. ``timestamp`` is when the memory happened, if not now: a `datetime`, Unix
        seconds, or a text `vrom.dates.parse_when` reads (ISO 8601, ``8 May, 2023``); it is the
        memory's ``timestamp`` and what ``since`` and ``until`` compare (its id still sorts by
        when it was stored). Anything else is a `ValidationError`. ``title`` and ``content``
        are embedded together when there is an embedder.
        """
        now = time.time()
        record = MemoryRecord(
            id=_new_id(now),
            created_unix=now if timestamp is None else _instant("timestamp", timestamp),
            updated_unix=now,
            project=_optional_text("project", project, MAX_PROJECT_CHARS),
            type=_type(type),
            title=_text("title", title, MAX_TITLE_CHARS, one_line=True),
            content=_text("content", content, MAX_CONTENT_CHARS),
            tags=_texts("tags", tags, MAX_TAGS, MAX_TAG_CHARS, _tag),
            related=_texts("related", related, MAX_RELATED, MAX_RELATED_CHARS),
            source=_optional_text("source", source, MAX_SOURCE_CHARS),
        )
        embedder = self.embedder
        made = (
            {}
            if embedder is None
            else embed_missing(embedder, memory_texts(self._store, [record]), MEMORY_ENCODING)
        )
        with self._store.transaction():
            if embedder is not None:
                bind_memory_embedder(self._store, embedder)  # refuses another model's vectors
            self._store.memories.put(record)
            if made:
                self._store.memories.vectors.put([(record.id, made[record.id][0])])
        return memory_of(record)

    def archive(
        self, memory_id: str, status: str = "archived", superseded_by: str | None = None
    ) -> Memory:
        """Retire a memory: ``archived``, or ``superseded`` by the memory ``superseded_by``.

        Returns the memory as it now is. An unknown id (either one) is a `NotFoundError`;
        ``superseded_by`` is required with ``superseded`` and refused with ``archived``.
        """
        memory_id = _memory_id(memory_id)
        _status(status, RETIRED_STATUSES)
        if status == "superseded":
            if superseded_by is None:
                raise ValidationError("a superseded memory needs superseded_by (its replacement)")
            superseded_by = _memory_id(superseded_by)
            if superseded_by == memory_id:
                raise ValidationError(f"memory {memory_id!r} cannot supersede itself")
        elif superseded_by is not None:
            raise ValidationError("superseded_by goes with status='superseded', not 'archived'")
        with self._store.transaction():
            if superseded_by is not None and self._store.memories.get(superseded_by) is None:
                raise NotFoundError(f"no memory {superseded_by!r} to supersede {memory_id!r} with")
            if not self._store.memories.set_status(memory_id, status, superseded_by, time.time()):
                raise NotFoundError(f"no memory {memory_id!r}: see 'vrom memory list'")
        return self.get(memory_id)

    # -- reading ---------------------------------------------------------------------------

    def get(self, memory_id: str) -> Memory:
        """Return the memory with this id; `NotFoundError` if there is none."""
        memory_id = _memory_id(memory_id)
        record = self._store.memories.get(memory_id)
        if record is None:
            raise NotFoundError(f"no memory {memory_id!r}: see 'vrom memory list'")
        return memory_of(record)

    def recall(
        self,
        query: str,
        k: int = 5,
        *,
        project: str | None = None,
        type: str | None = None,
        status: str = "active",
        since: object = None,
        until: object = None,
        mode: str | None = None,
        half_life_days: float | None = None,
        where: Mapping[str, Any] | None = None,
        rerank: bool | int = False,
    ) -> builtins.list[MemoryHit]:
        """Return the ``k`` memories that best match ``query``, best first.

        Ranked by the search core (`Corpus.recall`). With an embedder: BM25 and cosine
        similarity fused (`vrom.search.fusion.fuse`) among the memories that pass the filters
        (exact, or an HNSW graph past the vault's threshold, as for chunks); without one: BM25
        alone.
        ``where`` is a filter of the one grammar (docs/filters.md) over the fields
        ``project``, ``type``, ``status``, ``source``, ``tags`` and the dates ``created`` (the
        timestamp) and ``updated``: ``{"type": {"$in": ["decision", "fact"]}}``. The keyword
        arguments are sugar for it, all holding with it:
        ``project`` and ``type`` must match exactly; ``status`` is one of the statuses or
        ``"any"``. ``since`` and ``until`` keep memories whose ``timestamp`` is at or after,
        and at or before, an instant (as ``timestamp`` in `remember`); a day, month or year
        written alone is all of it: ``since`` from its first instant, ``until`` through its
        last (``until="2023"`` keeps 2023). ``mode``: ``hybrid`` (the default with an embedder), ``keyword`` or
        ``vector``. ``half_life_days`` favours recent memories: each score is multiplied by
        ``0.5 ** (age in days / half_life_days)`` (``recency`` in the parts). Query syntax is
        keyword search's: words, "phrases", -excluded, prefix*. ``rerank`` (True: the first
        30; or a number) reorders the first memories found with the core's cross-encoder
        (`vrom.search.reranking`): each one's ``score`` is then the reranker's.
        """
        # the query and k are validated once, by the core (`Corpus.recall`)
        if half_life_days is not None and (
            isinstance(half_life_days, bool)
            or not isinstance(half_life_days, int | float)
            or not 0 < half_life_days < float("inf")
        ):
            raise ValidationError(
                f"half_life_days must be a positive number, not {shown(half_life_days)}"
            )
        where_filter = _memory_filter(where, project, type, status, since, until)
        reranker = self._corpus.reranking.reranker
        depth, _ = rerank_depth(rerank, k, reranker)
        found = self._corpus.recall(query, depth or k, where_filter, mode, half_life_days)
        hits = [memory_hit(record, score, parts) for record, score, parts in found]
        return reranked_memories(hits, reranker, query, k, rerank) if depth else hits

    def search(
        self,
        query: str,
        k: int = 5,
        *,
        where: _Where = None,
        mode: str | None = None,
        rerank: bool | int = False,
        **words: Any,
    ) -> SearchReport:
        """Return `recall`'s memories as the read half's report: each a `Hit` (its id as ``id``
        and ``path``, its content as ``text``, its fields as ``metadata``: see `Hit`), with the
        mode that ran and how many of the memories (``chunks``) have a vector (``vectors``).

        ``words`` are `recall`'s own filters (``project``, ``type``, ``status``, ``since``,
        ``until``, ``half_life_days``), and the ranking is `recall`'s: these are its hits. The
        read half's words for chunks (``ef_search``, ``expand_context``, ``context_window``)
        are taken and change nothing: a memory has no neighbouring chunks, and its graph no
        search breadth to set. Any other word is a `TypeError`, as for `recall`. ``rerank``
        reorders the first memories found with the core's reranker, as a vault's search does
        (`vrom.search.reranking`).
        """
        for chunk_word in ("ef_search", "expand_context", "context_window"):
            words.pop(chunk_word, None)
        reranker = self._corpus.reranking.reranker
        depth, _ = rerank_depth(rerank, k, reranker)
        found = self.recall(query, depth or k, where=where, mode=mode, **words)
        excerpted = query_words(parse_query(query))  # the words a chunk's excerpt is around
        hits = [memory_as_hit(hit, excerpted) for hit in found]
        memories = self._store.memories
        report = SearchReport(
            hits, self._corpus.recall_mode(mode), None, memories.vectors.count(), memories.count()
        )
        return reranked(report, reranker, query, k, rerank) if depth else report

    def _report(
        self, query: str, k: int, where: Mapping[str, Any] | None, mode: str | None, **own: Any
    ) -> SearchReport:
        return self.search(query, k, where=where, mode=mode, **own)

    def _finished(
        self, report: SearchReport, expand_context: bool, context_window: int
    ) -> SearchReport:
        return report  # a memory has no neighbouring chunks to join

    def close(self) -> None:
        """Close the core these memories were opened with from a store (and so the store).
        Memories of a vault or another facade's core (``vault.memories``) are closed with it:
        here, nothing is closed, so ``with vault.memories:`` leaves the vault open."""
        if self._owned:
            self._corpus.close()

    def stats(self) -> MemoryStats:
        """Return how many memories there are: in all, by status, type and project."""
        counts = self._store.memories.counts()
        return MemoryStats(
            total=counts.total,
            by_status=dict(counts.by_status),
            by_type=dict(counts.by_type),
            by_project=dict(counts.by_project),
            embedded=counts.embedded,
        )

    def list(
        self,
        project: str | None = None,
        type: str | None = None,
        status: str = "active",
        limit: int = 50,
        *,
        where: Mapping[str, Any] | None = None,
    ) -> builtins.list[Memory]:
        """Return up to ``limit`` (1 to 1000) memories, newest first, filtered as in `recall`."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_K:
            raise ValidationError(f"limit must be an integer from 1 to {MAX_K}, not {shown(limit)}")
        where_filter = _memory_filter(where, project, type, status)
        return [memory_of(record) for record in self._store.memories.list(where_filter, limit)]

    # -- vectors ---------------------------------------------------------------------------

    def embed(self, *, rebuild: bool = False) -> int:
        """Embed every memory without a vector; return how many were embedded.

        ``rebuild`` first drops every memory vector: the way to switch memories to another
        model (without it, another model's vectors are refused with `ModelError`).
        """
        embedder = self._corpus.require_embedder("embedding memories")
        if rebuild:
            bind_memory_embedder(self._store, embedder, rebuild=True)
        return embed_missing_memories(self._store, embedder)
