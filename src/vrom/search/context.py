"""LLM-ready context: numbered passages from search hits, within a token budget, with sources."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence

from vrom.results import Context, Hit

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


def build_context(query: str, hits: Sequence[Hit], max_tokens: int) -> Context:
    """Return context built from ``hits`` in order, as many as fit in ``max_tokens``.

    A passage that does not fit whole is cut (with ``…``) only when it is the first one, so the
    result is never empty while there are hits and the budget allows a few words.
    """
    passages: list[str] = []
    sources: list[str] = []
    used: list[Hit] = []
    for hit in hits:
        number = len(used) + 1
        passage = f"{_header(number, hit)}\n{hit.text.strip()}"
        source = _source(number, hit)
        candidate = _render([*passages, passage], [*sources, source])
        if estimate_tokens(candidate) > max_tokens:
            if used:
                break
            room = (
                max_tokens * CHARS_PER_TOKEN
                - len(_render([_header(number, hit) + "\n"], [source]))
                - 2
            )
            if room < 40:
                break
            passage = f"{_header(number, hit)}\n{hit.text.strip()[:room].rstrip()}…"
        passages.append(passage)
        sources.append(source)
        used.append(hit)
    text = _render(passages, sources) if used else ""
    return Context(query=query, text=text, tokens=estimate_tokens(text), sources=tuple(used))


def _render(passages: list[str], sources: list[str]) -> str:
    return "\n\n".join(passages) + "\n\nSources:\n" + "\n".join(sources)
