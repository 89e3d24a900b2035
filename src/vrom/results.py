"""Plain result types that the SDK's searches return and the CLI (``--json``) and MCP serialise.

Every type is a frozen dataclass with documented fields; `to_jsonable` is the one function that
turns any of them (or a list of them) into JSON-ready dicts, so all faces return the same shape.
The result types of a vault's reads and writes and of the admin commands live in
`vrom.vault_results`, re-exported here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast, overload

from vrom.vault_results import (
    BackendInfo,
    DeleteResult,
    EmbeddingStatus,
    Enrichment,
    ExportSummary,
    FolderListing,
    FormatIssue,
    FormatReport,
    IndexSummary,
    IndexWarning,
    Link,
    Note,
    NoteFormat,
    NoteRef,
    Related,
    SharedTags,
    SimilarNote,
    SyncSummary,
    TagCount,
    VaultStats,
    VectorInfo,
    WriteResult,
)

__all__ = [
    "BackendInfo",
    "Context",
    "DeleteResult",
    "EmbeddingStatus",
    "Enrichment",
    "ExportSummary",
    "FolderListing",
    "FormatIssue",
    "FormatReport",
    "Hit",
    "IndexSummary",
    "IndexWarning",
    "Link",
    "MountStatus",
    "Note",
    "NoteFormat",
    "NoteRef",
    "Related",
    "SearchReport",
    "SearchResult",
    "SharedTags",
    "SimilarNote",
    "SyncSummary",
    "TagCount",
    "VaultStats",
    "VectorInfo",
    "WriteResult",
    "built",
    "changed_hit",
    "deferred",
    "new_hit",
    "rough_duration",
    "to_jsonable",
    "vector_coverage",
]


@dataclass(frozen=True)
class Hit:
    """One search result: a chunk of a note, with the provenance needed to cite it exactly.

    A memory found by `vrom.Memories.search` is a hit too, by this convention: ``id`` and
    ``path`` are the memory's id (``mem_…``: what a context cites), ``chunk_id`` and
    ``note_id`` are 0 (a memory is no chunk of a note, and has no neighbours), ``title`` its
    title, ``text`` its whole content (``char_end`` its length), ``modified_unix`` its
    timestamp, ``content_hash`` the SHA-256 of its content, ``metadata`` its other fields
    (``project``, ``type``, ``status``, ``tags``, ``related``, ``source``, ``timestamp``,
    ``superseded_by``) and ``score``, ``scores``, ``score_kind`` as `vrom.MemoryHit`'s.

    Fields:
        chunk_id: the chunk's id in the store; ids are never reused, and a note's chunks get
            new ids each time the note is rewritten (``content_hash`` identifies the text).
        path: the note's path relative to the vault root, with ``/`` separators.
        title: the note's title (frontmatter ``title`` › first H1 › file name).
        heading_path: the headings above the chunk, joined with `` > `` ("Setup > Install").
        excerpt: a bounded excerpt of the chunk around the best match (made when first read:
            a search's hits cost nothing for excerpts nobody reads; see `deferred`).
        score: the final ranking score (higher is better); its parts are in ``scores``, and
            what it measures in ``score_kind``.
        content_hash: SHA-256 of the chunk's text, hex.
        modified_unix: the note file's modification time (seconds since the epoch).
        human_relevance_score: the note's human-relevance prior in [0, 1].
        note_id: the note's id in the store.
        position: the chunk's position in the note (0-based).
        char_start, char_end: the chunk's character offsets in the note's (or the collection
            document's) text.
        text: the chunk's whole text; in a `vrom.Collection` hit, the document's whole text as
            it was added (the chunk is ``chunk_text``).
        scores: the parts of ``score`` (``bm25``, ``vector``, ``fused``, ``rrf``, ``prior``).
        context_text: with ``expand_context``, the chunk joined with its neighbours in the note.
        context_chunk_ids: the ids of the chunks ``context_text`` spans, in order.
        prev_chunk_id, next_chunk_id: the chunks before and after this one in its note (None
            at either end): the links context expansion follows.
        id: the document's id: its path in a vault, the id it was added with in a collection.
        metadata: the document's metadata: a note's frontmatter, a collection document's
            ``metadata``.
        chunk_text: in a `vrom.Collection` hit, the best-matching chunk's text,
            ``text[char_start:char_end]``; None elsewhere, where ``text`` is the chunk.
        fts_score, vector_score, text_quality_score, ranking_runtime: set by the ``rerank``
            mode (the VaultLayer hybrid-search contract): BM25 normalised to [0, 1] among the
            candidates, cosine similarity, a [0, 1] estimate of how much the chunk is prose
            (not link lists, code or fragments), and the reranking's wall time in milliseconds.
        score_kind: what ``score`` is, so it can be labelled and never compared across kinds:
            ``bm25`` (keyword: BM25 times the human-relevance prior), ``fused`` (hybrid: the
            keyword and vector scores, each normalised to [0, 1], combined by
            `vrom.search.fusion.fuse`, times the prior), ``cosine`` (vector: cosine similarity;
            ``dot`` or ``euclidean``, minus the distance, on stores opened with those metrics),
            ``rerank`` (the rerank mode's weighted sum, in [0, 1]).
        fresh: for a vault's hit, whether the note on disk still holds what was indexed
            (checked at search time: its size and modification time, or its SHA-256 when they
            differ); False when it changed or is gone since, so the hit's text may no longer
            be the note's (``vrom index`` brings it up to date). None where there is no file
            (collections, packs, memories).
        stale: True when the note's ``stale_after`` instant (OKF v0.2 §5.5) has passed at the
            time of the search: the content may no longer hold.
        stale_after: the note's ``stale_after`` as an ISO 8601 UTC datetime (a date alone is
            its midnight UTC), or None when it has none (or one that is not a date).
    """

    chunk_id: int
    path: str
    title: str
    heading_path: str
    excerpt: str
    score: float
    content_hash: str
    modified_unix: float
    human_relevance_score: float
    note_id: int
    position: int
    char_start: int
    char_end: int
    text: str
    scores: Mapping[str, float] = field(default_factory=dict)
    id: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    chunk_text: str | None = None
    context_text: str | None = None
    context_chunk_ids: Sequence[int] = ()
    fts_score: float | None = None
    vector_score: float | None = None
    text_quality_score: float | None = None
    ranking_runtime: float | None = None
    prev_chunk_id: int | None = None
    next_chunk_id: int | None = None
    score_kind: str = ""
    stale: bool = False
    stale_after: str | None = None
    fresh: bool | None = None


class Deferred:
    """A field's value to be computed when it is first read (see `deferred`)."""

    __slots__ = ("args", "compute")

    def __init__(self, compute: Callable[..., Any], *args: Any) -> None:
        self.compute, self.args = compute, args


def deferred(compute: Callable[..., str], *args: Any) -> str:
    """Return what a `Hit`'s ``excerpt`` takes for ``compute(*args)``, computed when the field
    is first read (by code, its repr, equality, `to_jsonable`) and kept: a search's hits cost
    nothing for excerpts nobody reads. ``compute`` must not depend on anything that changes."""
    return cast(str, Deferred(compute, *args))


class _ComputedOnRead:
    """A dataclass field that may hold a `Deferred`: the first read computes and keeps it.

    A data descriptor, so the dataclass's own ``__init__`` stores through it; the value lives
    in the instance's ``__dict__`` under the field's name, so `changed_hit` (``vars``) carries
    a value not yet computed over as it is.
    """

    def __init__(self, name: str) -> None:
        self._name = name

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        if instance is None:
            return self
        value = instance.__dict__[self._name]
        if type(value) is Deferred:
            value = value.compute(*value.args)
            instance.__dict__[self._name] = value
        return value

    def __set__(self, instance: object, value: Any) -> None:
        instance.__dict__[self._name] = value


setattr(Hit, "excerpt", _ComputedOnRead("excerpt"))  # noqa: B010 (the field is declared a str)


@dataclass(frozen=True)
class SearchReport(Sequence[Hit]):
    """What a search found, and how: a sequence of its `Hit`s, best first, that also says how
    they were found (what the MCP server's ``vault_search`` returns).

    ``report[0]``, ``len(report)`` and ``for hit in report`` are its hits (``results``). A
    report equals a list or tuple holding the same hits in the same order (``report == []``
    when nothing was found), so code written for a list of hits keeps working; two reports
    are equal when every field is.

    Fields:
        results: the hits, best first.
        mode: the mode that ran: ``keyword``, ``vector``, ``hybrid`` or ``rerank``.
        fallback: why ``mode`` is keyword when another mode was asked for (or is the default
            once vectors exist): no embedder is configured, or no chunk has a vector yet. None
            when the search ran as asked.
        vectors, chunks: how many of the store's chunks have a vector: searches by meaning
            see only those (keyword search sees every chunk). A search of memories
            (`vrom.Memories.search`) counts memories: those with a vector, and all of them.
        reranker: with ``rerank``, the reranker that reordered the first hits
            (`vrom.search.reranking`); None when the search was not reranked.
        rerank_ms: the reranking's wall time in milliseconds (None without it). Not compared
            when reports are: the same search reranked twice gives equal reports.
    """

    results: Sequence[Hit]
    mode: str
    fallback: str | None
    vectors: int
    chunks: int
    reranker: str | None = None
    rerank_ms: float | None = None

    @overload
    def __getitem__(self, index: int) -> Hit: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Hit]: ...

    def __getitem__(self, index: int | slice) -> Hit | Sequence[Hit]:
        return self.results[index]

    def __len__(self) -> int:
        return len(self.results)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple)):
            return list(self.results) == list(other)
        if isinstance(other, SearchReport):
            return (self.mode, self.fallback, self.vectors, self.chunks, self.reranker) == (
                other.mode,
                other.fallback,
                other.vectors,
                other.chunks,
                other.reranker,
            ) and list(self.results) == list(other.results)
        return NotImplemented

    def with_hits(self, hits: Sequence[Hit]) -> SearchReport:
        """Return the report with ``hits`` for its results (finished or viewed otherwise)."""
        return dataclasses.replace(self, results=hits)


@dataclass(frozen=True)
class Context:
    """LLM-ready text built from search hits within a token budget.

    ``text`` holds numbered passages followed by a ``Sources:`` list; ``sources`` are the hits
    it used, in order; ``tokens`` is the estimated size of ``text``.
    """

    query: str
    text: str
    tokens: int
    sources: Sequence[Hit]


T = TypeVar("T")


def built(cls: type[T], values: dict[str, Any]) -> T:
    """Return the frozen dataclass ``cls`` holding ``values``, one for each of its fields.

    What ``cls(**values)`` gives, without its ``__init__`` (which sets a frozen dataclass's
    fields one by one: ~10 µs for a `Hit`) — for a class with no ``__post_init__`` and no
    check in its ``__init__``, built for every hit and chunk a search returns. ``values`` is
    taken over. A field's data descriptor (`Hit.excerpt`'s) keeps its value in the instance's
    ``__dict__`` too.
    """
    made: T = object.__new__(cls)
    made.__dict__.update(values)
    return made


_HIT_FIELDS = frozenset(f.name for f in dataclasses.fields(Hit))
_HIT_DEFAULTS = {
    f.name: f.default_factory
    for f in dataclasses.fields(Hit)
    if f.default_factory is not dataclasses.MISSING
}
_HIT_CONSTANTS = {
    f.name: f.default for f in dataclasses.fields(Hit) if f.default is not dataclasses.MISSING
}


def new_hit(**values: Any) -> Hit:
    """Return ``Hit(**values)`` at a tenth of the cost (`built`): fields left out get their
    defaults (a mutable one made anew); a missing field or an unknown name is a TypeError."""
    fields = {**_HIT_CONSTANTS, **values}
    for name, factory in _HIT_DEFAULTS.items():
        if name not in fields:
            fields[name] = factory()
    if fields.keys() != _HIT_FIELDS:
        missing, unknown = _HIT_FIELDS - fields.keys(), fields.keys() - _HIT_FIELDS
        raise TypeError(f"Hit: missing {sorted(missing)}, unknown {sorted(unknown)}")
    return built(Hit, fields)


def changed_hit(hit: Hit, **changes: Any) -> Hit:
    """Return ``hit`` with ``changes``: what `dataclasses.replace` gives at a fifth of the
    cost (`built`), for the steps that finish every hit a search returns (a collection's whole
    text, a note's freshness); an excerpt not made yet is carried over as it is."""
    unknown = changes.keys() - _HIT_FIELDS
    if unknown:
        raise TypeError(f"Hit has no field {', '.join(sorted(unknown))}")
    return built(Hit, {**vars(hit), **changes})


def to_jsonable(value: Any, *, omit_empty: bool = False) -> Any:
    """Return ``value`` (a result dataclass, or lists/dicts of them) as JSON-ready data.

    ``omit_empty`` leaves out the dataclass fields that are None, and the optional ones (those
    with a default) that are an empty list: a smaller reply, whose required fields are always
    there (a search with no hits still has ``results: []``); a mapping's entries, such as a
    note's frontmatter, are kept as they are.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: to_jsonable(getattr(value, f.name), omit_empty=omit_empty)
            for f in dataclasses.fields(value)
            if not (omit_empty and _empty(f, getattr(value, f.name)))
        }
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v, omit_empty=omit_empty) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v, omit_empty=omit_empty) for v in value]
    return value


def _empty(field: dataclasses.Field[Any], item: object) -> bool:
    """True for None, and for an empty list in a field that has a default."""
    if item is None:
        return True
    optional = (
        field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
    )
    return optional and isinstance(item, (list, tuple)) and not item


@dataclass(frozen=True)
class SearchResult:
    """One result of searching a mounted pack (`vrom.AgentMemory.search`): the seed's view of a
    `Hit` (see `vrom.seed_views.search_result`).

    Fields:
        text: the chunk's text (with ``expand_context``, joined with its neighbours).
        metadata: ``chunk_id``, ``source_file``, ``section_heading``, ``prev_chunk_id``,
            ``next_chunk_id``, ``url``, ``doc_title``, ``content_hash``, and ``text`` (the chunk
            before any expansion); expanded results also carry ``_expanded`` (True) and
            ``_context_chunks`` (how many chunks were joined); outside vector mode, ``score``,
            its parts ``scores`` and what it is, ``score_kind`` (see `Hit`).
        distance: in vector mode the cosine distance in [0, 2], smaller is nearer; otherwise
            ``1 - score / best score`` (0 for the best). Results come best first.
        id: the chunk's id in the pack.
    """

    text: str
    metadata: Mapping[str, Any]
    distance: float
    id: int


@dataclass(frozen=True)
class MountStatus:
    """What `vrom.AgentMemory` has mounted: the pack id and version, whether it is ready to
    search, its vector count and dimensions, and the embedding model its queries use."""

    active_vrom: str | None
    version: str | None
    ready: bool
    vectors: int
    dim: int
    model: str | None


def vector_coverage(vectors: int, chunks: int) -> str:
    """Return how complete a store's vectors are: ``2,368 / 24,096 (10%)``."""
    share = 100 * vectors / chunks if chunks else 100.0
    percent = f"{share:.0f}%" if share >= 1 or not vectors else f"{share:.1f}%"
    if vectors < chunks and percent == "100%":
        percent = "99%"  # never round an unfinished store up to complete
    return f"{vectors:,} / {chunks:,} ({percent})"


def rough_duration(seconds: float) -> str:
    """Return a rough duration a person reads at a glance: ``45 s``, ``12 min``, ``1 h 20 min``."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"
