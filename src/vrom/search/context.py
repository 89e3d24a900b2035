"""LLM-ready context: numbered passages from search hits, within a token budget, with sources."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from vrom.errors import ValidationError, shown
from vrom.results import Context, Hit
from vrom.store import Store, StoredChunk

T = TypeVar("T")

CHARS_PER_TOKEN = 4  # a conservative average for English text with BPE tokenizers
CHANGED_ON_DISK = "changed on disk since indexing"
"""What a source line, a CLI hit or an MCP reply says of a hit whose note is not ``fresh``."""


def estimate_tokens(text: str) -> int:
    """Return a token estimate for ``text`` (about four characters a token)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _header(number: int, hit: Hit) -> str:
    """Return a passage's first line: its title, then where it is; a hit without a title (a
    collection's document) is named by where it is alone."""
    where = f"{hit.path} › {hit.heading_path}" if hit.heading_path else hit.path
    return f"[{number}] {hit.title} ({where})" if hit.title else f"[{number}] {where}"


def _source(number: int, hits: Sequence[Hit]) -> str:
    """Return a passage's source line: its best hit's place, and every chunk it holds (and,
    when its note changed on disk since it was indexed, that it did)."""
    hit = hits[0]
    modified = dt.datetime.fromtimestamp(hit.modified_unix, dt.timezone.utc).strftime("%Y-%m-%d")
    anchor = f"#{hit.heading_path}" if hit.heading_path else ""
    chunks = "chunk" if len(hits) == 1 else "chunks"
    stale = f" · {CHANGED_ON_DISK}" if any(h.fresh is False for h in hits) else ""
    return (
        f"[{number}] {hit.path}{anchor} · {chunks} {', '.join(str(h.chunk_id) for h in hits)} · "
        f"sha256 {', '.join(h.content_hash[:12] for h in hits)} · modified {modified}{stale}"
    )


def join_chunks(chunks: Sequence[StoredChunk]) -> str:
    """Return consecutive chunks of one note as one text, without their overlaps repeated."""
    text, end = chunks[0].text, chunks[0].char_end
    for chunk in chunks[1:]:
        if chunk.char_start < end:
            text += chunk.text[end - chunk.char_start :]
        else:
            text += "\n\n" + chunk.text
        end = max(end, chunk.char_end)
    return text


def check_context_window(window: object) -> None:
    """Raise `ValidationError` unless ``window`` is an integer from 0 to 10."""
    if isinstance(window, bool) or not isinstance(window, int) or not 0 <= window <= 10:
        raise ValidationError(
            f"context_window must be an integer from 0 to 10, not {shown(window)}"
        )


def chunks_around(
    chunks: Sequence[StoredChunk], chunk_id: int, position: int, window: int
) -> list[StoredChunk]:
    """Return a note's chunks within ``window`` positions of one chunk, in order.

    ``chunks`` are the note's chunks in order; when the note changed and no longer has that
    position, the chunk alone if it is still there, else nothing.
    """
    return [c for c in chunks if abs(c.position - position) <= window] or [
        c for c in chunks if c.chunk_id == chunk_id
    ]


def expand_hits(store: Store, hits: Sequence[Hit], window: int = 1) -> list[Hit]:
    """Return the hits with ``context_text``: each chunk joined with ``window`` neighbours a side.

    Neighbours follow the prev/next order of the note's chunks.
    """
    check_context_window(window)
    notes: dict[int, list[StoredChunk]] = {}
    expanded = []
    for hit in hits:
        if hit.note_id not in notes:
            notes[hit.note_id] = store.documents.chunks_of(hit.note_id)
        around = chunks_around(notes[hit.note_id], hit.chunk_id, hit.position, window)
        if not around:  # the note changed since the search: keep the hit as it was
            expanded.append(hit)
            continue
        expanded.append(
            dataclasses.replace(
                hit,
                context_text=join_chunks(around),
                context_chunk_ids=tuple(c.chunk_id for c in around),
            )
        )
    return expanded


RELATIVE_CUTOFF = 0.4
"""A context leaves out hits scoring under this share of the best hit's score.

Measured with keyword search on the BEIR SciFact and NFCorpus train splits (top 20 hits per
query): a 0.4 cut-off drops 25% and 12% of the non-relevant hits and 1% and 2% of the relevant
ones (0.5 drops 3% and 7% of the relevant ones). In hybrid search a hit found by one retriever
alone stays while its rank there is about 15 or better.
"""

MIN_OVERLAP_CHARS = 20
"""Two passages of one note are joined only when one ends with at least this many of the
characters the other starts with (chunks overlap by ``chunk_overlap``, 150 by default)."""


MIN_REPEATED_LINE_CHARS = 20
"""A line this long that an earlier passage of a context already gave is left out of later
ones (templates' boilerplate, footers, the same paragraph copied into several notes)."""


@dataclass
class Passage:
    """Distinct text for a context: one or more hits' texts, overlaps joined once.

    ``members`` are the indexes (into the texts given to `distinct_passages`) of the texts it
    holds, the first (best ranked) first.
    """

    source: str
    text: str
    members: list[int]


def above_cutoff(
    scores: Sequence[float], cutoff: float | None = RELATIVE_CUTOFF, kinds: Sequence[str] = ()
) -> list[int]:
    """Return the indexes of the scores at or above ``cutoff`` times the best one.

    All of them when ``cutoff`` is None, when the best score is not positive, or when one of
    ``kinds`` (what each score is: `vrom.Hit.score_kind`) is ``reranker``: a relative cut-off
    means nothing then (a cross-encoder's logits have no scale a share of the best means
    anything on).
    """
    best = max(scores, default=0.0)
    if cutoff is None or best <= 0 or "reranker" in kinds:
        return list(range(len(scores)))
    return [i for i, score in enumerate(scores) if score >= cutoff * best]


def distinct_passages(texts: Sequence[tuple[str, str]]) -> list[Passage]:
    """Return ``(source, text)`` pairs, best first, as passages that never repeat text.

    A text held whole by an earlier passage of any source adds nothing; texts of one source that
    overlap (one ends with what the other starts with: neighbouring chunks, or windows of
    expanded hits) are joined once; passages keep the order of their best member.
    """
    passages: list[Passage] = []
    for index, (source, raw) in enumerate(texts):
        text = raw.strip()
        if not text:
            continue
        home = next((p for p in passages if _absorb(p, source, text)), None)
        if home is None:
            passages.append(Passage(source, text, [index]))
            continue
        if home.source == source:  # another note's copy of the text is not cited
            home.members.append(index)
        # a passage that grew may now overlap (or hold) a later passage of its note
        for other in [p for p in passages if p is not home and p.source == home.source]:
            if _absorb(home, other.source, other.text):
                home.members.extend(other.members)
                passages.remove(other)
    return passages


def _absorb(passage: Passage, source: str, text: str) -> bool:
    """Add ``text`` to ``passage`` when it is held by it or (same source) overlaps it."""
    if text in passage.text:
        return True
    if source != passage.source:
        return False
    if passage.text in text:
        passage.text = text
        return True
    joined = _join_overlapping(passage.text, text) or _join_overlapping(text, passage.text)
    if joined is None:
        return False
    passage.text = joined
    return True


def _join_overlapping(first: str, second: str) -> str | None:
    """Return ``first`` followed by ``second`` when ``first`` ends with what ``second`` starts
    with (at least `MIN_OVERLAP_CHARS` of it), the shared part once; else None."""
    if len(second) < MIN_OVERLAP_CHARS:
        return None
    start = first.find(second[:MIN_OVERLAP_CHARS])
    while start != -1:  # the earliest match is the longest overlap
        if second.startswith(first[start:]):
            return first[:start] + second
        start = first.find(second[:MIN_OVERLAP_CHARS], start + 1)
    return None


def without_repeated_lines(texts: Sequence[str]) -> list[str]:
    """Return the texts with each line that an earlier text already has left out.

    Only lines of at least `MIN_REPEATED_LINE_CHARS` characters (stripped) count; a text made
    only of repeated lines comes back empty.
    """
    seen: set[str] = set()
    kept_texts = []
    for text in texts:
        lines = [
            line
            for line in text.splitlines()
            if len(line.strip()) < MIN_REPEATED_LINE_CHARS or line.strip() not in seen
        ]
        seen.update(line.strip() for line in text.splitlines())
        kept = re.sub(r"\n{3,}", "\n\n", "\n".join(lines).strip())
        removed = len(lines) < len(text.splitlines())
        left = sum(len(line.strip()) for line in lines)
        kept_texts.append("" if removed and left < MIN_REPEATED_LINE_CHARS else kept)
    return kept_texts


def fill_budget(options: Sequence[Sequence[T]], fits: Callable[[list[T]], bool]) -> list[T]:
    """Return the first alternative of each option that still fits, the best option first.

    ``options`` come most relevant first, each as alternatives to try in turn (a passage, then
    a shorter form of it); ``fits(chosen)`` says whether a selection fits the budget. An option
    that fits in no form is skipped, so a shorter, less relevant one can still use the room.
    """
    chosen: list[T] = []
    for alternatives in options:
        for candidate in alternatives:
            if fits([*chosen, candidate]):
                chosen.append(candidate)
                break
    return chosen


def choose_passages(
    texts: Sequence[tuple[str, str, str]],
    render: Callable[[list[Passage], list[str]], str],
    max_tokens: int | None,
) -> tuple[list[Passage], list[str], list[Passage]]:
    """Return the passages a context gives, their bodies, and every distinct passage: the one
    formatting engine under every rendering (`format_context`'s numbered passages and sources,
    a pack's blocks: `vrom.seed_views.pack_context`).

    ``texts`` are ``(source, text, chunk)`` of each hit kept, best first: ``text`` what it
    gives (its expanded context, or its chunk), ``chunk`` its own chunk, tried alone when the
    whole does not fit. Text is never repeated (`distinct_passages`, `without_repeated_lines`);
    each passage that fits in ``max_tokens`` (None: no limit) as ``render(passages, bodies)``
    is used, so a long one that does not fit leaves room for shorter ones (`fill_budget`).
    The bodies are the chosen passages' texts less the lines an earlier one gave; the passages'
    ``members`` index into ``texts``.
    """
    passages = distinct_passages([(source, text) for source, text, _ in texts])
    options: list[tuple[Passage, ...]] = []
    for passage in passages:
        chunk = texts[passage.members[0]][2].strip()
        alone = Passage(passage.source, chunk, passage.members[:1])
        options.append((passage, alone) if chunk and chunk != passage.text else (passage,))

    def fits(selection: list[Passage]) -> bool:
        bodies = without_repeated_lines([p.text for p in selection])
        # the last one must add text of its own, and all of them fit the budget
        if not bodies[-1]:
            return False
        return max_tokens is None or estimate_tokens(render(selection, bodies)) <= max_tokens

    chosen = fill_budget(options, fits)
    return chosen, without_repeated_lines([p.text for p in chosen]), passages


def format_context(
    hits: Sequence[Hit],
    max_tokens: int = 2000,
    include_sources: bool = True,
    query: str = "",
    *,
    relative_cutoff: float | None = RELATIVE_CUTOFF,
) -> Context:
    """Return LLM-ready text from hits (their ``context_text`` when expanded) within a budget.

    Hits scoring under ``relative_cutoff`` times the best are left out (`RELATIVE_CUTOFF`;
    None, or reranked hits, keep all: `above_cutoff`). Text is never repeated: hits of one
    note whose texts overlap (neighbouring chunks, overlapping expanded windows) become one
    passage, and a text another passage holds
    adds nothing, nor does a line an earlier passage gave (templates' boilerplate: see
    `without_repeated_lines`). Passages are numbered ``[1]``, ``[2]`` … best first; each that fits in
    ``max_tokens`` is used, so a long passage that does not fit leaves room for shorter ones.
    An expanded passage too long for the room left is tried as its best hit's chunk alone.
    ``include_sources`` appends a ``Sources:`` list citing path, heading, chunk ids, content
    hashes and modification date. When nothing fits, the best passage is cut (with ``…``), so
    the result is never empty while there are hits and the budget allows a few words.
    ``sources`` holds each passage's best hit. The engine is `choose_passages`.
    """
    scores, kinds = [hit.score for hit in hits], [hit.score_kind for hit in hits]
    kept = [hits[i] for i in above_cutoff(scores, relative_cutoff, kinds)]

    def rendered(chosen: Sequence[Passage], bodies: Sequence[str]) -> str:
        """Render the chosen passages with ``bodies``, their texts less repeated lines."""
        return _render(
            [
                f"{_header(n, kept[p.members[0]])}\n{body}"
                for n, (p, body) in enumerate(zip(chosen, bodies, strict=True), 1)
            ],
            [_source(n, [kept[i] for i in p.members]) for n, p in enumerate(chosen, 1)],
            include_sources,
        )

    texts = [(hit.path, hit.context_text or hit.text, hit.text) for hit in kept]
    chosen, bodies, passages = choose_passages(texts, rendered, max_tokens)
    if not chosen and passages:  # the best passage's own chunk, cut to fit
        best = passages[0].members[0]
        alone = Passage(passages[0].source, kept[best].text.strip(), [best])
        chosen = _cut_to_fit(alone, kept[best], max_tokens, include_sources)
        bodies = without_repeated_lines([p.text for p in chosen])
    text = rendered(chosen, bodies) if chosen else ""
    return Context(
        query=query,
        text=text,
        tokens=estimate_tokens(text),
        sources=tuple(kept[p.members[0]] for p in chosen),
    )


def _cut_to_fit(
    passage: Passage, hit: Hit, max_tokens: int, include_sources: bool
) -> list[Passage]:
    """Return the passage cut (with ``…``) to fit the budget alone, or nothing if it can't."""
    overhead = len(_render([_header(1, hit) + "\n"], [_source(1, [hit])], include_sources)) + 2
    room = max_tokens * CHARS_PER_TOKEN - overhead
    if room < 40:
        return []
    return [Passage(passage.source, passage.text[:room].rstrip() + "…", passage.members)]


def _render(passages: list[str], sources: list[str], include_sources: bool) -> str:
    text = "\n\n".join(passages)
    return text + "\n\nSources:\n" + "\n".join(sources) if include_sources else text
