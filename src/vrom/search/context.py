"""LLM-ready context: numbered passages from search hits, within a token budget, with sources."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Sequence

from vrom.errors import ValidationError
from vrom.results import Context, Hit
from vrom.store import Store, StoredChunk

CHARS_PER_TOKEN = 4  # a conservative average for English text with BPE tokenizers


def estimate_tokens(text: str) -> int:
    """Return a token estimate for ``text`` (about four characters a token)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _header(number: int, hit: Hit) -> str:
    where = f" › {hit.heading_path}" if hit.heading_path else ""
    return f"[{number}] {hit.title} ({hit.path}{where})"


def _source(number: int, hit: Hit) -> str:
    modified = dt.datetime.fromtimestamp(hit.modified_unix, dt.timezone.utc).strftime("%Y-%m-%d")
    anchor = f"#{hit.heading_path}" if hit.heading_path else ""
    return (
        f"[{number}] {hit.path}{anchor} · chunk {hit.chunk_id} · "
        f"sha256 {hit.content_hash[:12]} · modified {modified}"
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
        raise ValidationError(f"context_window must be an integer from 0 to 10, not {window!r}")


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


def format_context(
    hits: Sequence[Hit], max_tokens: int = 2000, include_sources: bool = True, query: str = ""
) -> Context:
    """Return LLM-ready text from hits (their ``context_text`` when expanded) within a budget.

    Passages are numbered ``[1]``, ``[2]`` … in the order given, as many as fit in
    ``max_tokens``; ``include_sources`` appends a ``Sources:`` list citing path, heading, chunk
    id, content hash and modification date. A passage that does not fit whole is cut (with
    ``…``) only when it is the first one, so the result is never empty while there are hits and
    the budget allows a few words.
    """
    passages: list[str] = []
    sources: list[str] = []
    used: list[Hit] = []
    for hit in hits:
        number = len(used) + 1
        header, body = _header(number, hit), (hit.context_text or hit.text).strip()
        source = _source(number, hit)
        passage = f"{header}\n{body}"
        candidate = _render([*passages, passage], [*sources, source], include_sources)
        if estimate_tokens(candidate) > max_tokens:
            if used:
                break
            overhead = len(_render([header + "\n"], [source], include_sources)) + 2
            room = max_tokens * CHARS_PER_TOKEN - overhead
            if room < 40:
                break
            passage = f"{header}\n{body[:room].rstrip()}…"
        passages.append(passage)
        sources.append(source)
        used.append(hit)
    text = _render(passages, sources, include_sources) if used else ""
    return Context(query=query, text=text, tokens=estimate_tokens(text), sources=tuple(used))


def _render(passages: list[str], sources: list[str], include_sources: bool) -> str:
    text = "\n\n".join(passages)
    return text + "\n\nSources:\n" + "\n".join(sources) if include_sources else text
