"""How big an MCP tool's reply may get, and how a reply is cut to fit, saying what was cut.

Every tool's data (its structured content, as JSON) is held to `REPLY_CHARS`. A tool that
lists (``vault_list``, ``vault_format``, ``vault_search``) takes ``offset`` and ``limit`` and
returns one page; ``vault_read`` pages a note's body by characters. Whatever still does not fit
is cut from the reply's longest list. A reply that was cut has a ``cut`` list saying, for each
field cut, how many of how many entries (or characters) it holds and the ``offset`` that
continues it (`Cut`). One item is never split:
a hit's chunk or a memory (at most 20,000 characters) comes whole.

(No ``from __future__ import annotations``: the SDK reads the tool functions' annotations.)
"""

import json
from typing import Annotated, Any

from pydantic import Field
from typing_extensions import TypedDict  # pydantic reads it on Python < 3.12

REPLY_CHARS = 24_000
"""The most characters of JSON a tool's structured content holds (about 6,000 tokens); the
text content is a summary, or the same JSON for clients that read only text, so a whole reply
stays under twice that."""

BODY_CHARS = 16_000
"""How many characters of a note's body ``vault_read`` returns at once (the most ``limit``
asks for): what fits beside the note's links, headings and frontmatter."""

PAGE_ITEMS = 200
"""How many entries a listing tool returns at once by default (``limit``)."""

MAX_HITS = 50
"""The most hits (``k``) one search reply returns; ``offset`` pages on."""

MAX_OFFSET = 950
"""How far ``vault_search`` pages (offset + k stays within the engine's 1,000 hits)."""

MAX_PAGE_ITEMS = 1000
"""The most entries a listing tool's ``limit`` asks for (what fits is returned)."""

CONTEXT_TOKENS = REPLY_CHARS // 5
"""The largest ``vault_context`` budget: its passages and their sources fit one reply."""

Offset = Annotated[
    int,
    Field(
        ge=0,
        description="Where the page starts (0: the first); a reply that was cut says "
        "the offset of the next page in cut.next_offset",
    ),
]

Limit = Annotated[
    int,
    Field(
        ge=1,
        le=MAX_PAGE_ITEMS,
        description="How many entries a page holds at most (fewer when they do not fit a reply)",
    ),
]


class Cut(TypedDict):
    """What a reply left out: ``field`` lists ``returned`` of its ``total`` entries (or, for a
    note's body, characters) from ``offset``; ``next_offset`` continues it (None: nothing
    follows); ``message`` says so in a line."""

    field: str
    offset: int
    returned: int
    total: int
    next_offset: int | None
    message: str


def page(data: dict[str, Any], field: str, offset: int, limit: int) -> dict[str, Any]:
    """Return ``data`` with its list ``field`` cut to ``limit`` entries from ``offset`` and to
    what fits `REPLY_CHARS`, with a `Cut` (whose ``next_offset`` continues it) when anything
    was left out."""
    items = data[field]
    shown = items[offset : offset + limit]
    kept = _fitting({**data, field: shown}, field)
    if offset == 0 and kept == len(items):
        return data
    return _with_cut({**data, field: shown[:kept]}, cut(field, offset, kept, len(items)))


def body_page(note: dict[str, Any], offset: int, limit: int) -> dict[str, Any]:
    """Return a note (as JSON data) with ``limit`` characters of its body from ``offset``, with
    a `Cut` when that is not the whole body, then `fitted` (its links are paged by
    ``vault_wikilinks``)."""
    body = note["body"]
    if offset or len(body) > limit:
        shown = body[offset : offset + limit]
        note = _with_cut({**note, "body": shown}, cut("body", offset, len(shown), len(body)))
    return fitted(note, "vault_wikilinks lists a note's links a page at a time")


def fitted(data: dict[str, Any], hint: str = "narrow the request") -> dict[str, Any]:
    """Return ``data`` cut to `REPLY_CHARS`: its longest list loses its last entries (never the
    first), and a `Cut` says how many are left and, as this tool cannot page on (``next_offset``
    is None), what to do (``hint``)."""
    lists = [
        (_size(value), key)
        for key, value in data.items()
        if isinstance(value, list) and key != "cut"
    ]
    if not lists or _size(data) <= REPLY_CHARS:
        return data
    field = max(lists)[1]
    kept = _fitting(data, field)
    total = len(data[field])
    left = cut(field, 0, kept, total, hint=hint)
    return _with_cut({**data, field: data[field][:kept]}, left)


def cut(field: str, offset: int, returned: int, total: int, *, hint: str | None = None) -> Cut:
    """Return the `Cut` saying that ``returned`` of ``total`` entries of ``field`` from
    ``offset`` are in the reply; with a ``hint`` the tool cannot page on, and it says why."""
    following = offset + returned
    next_offset = following if hint is None and following < total else None
    shown = f"{offset + 1}–{following}" if returned else "none"
    message = f"{field}: {shown} of {total}"
    if next_offset is not None:
        message += f"; the next page is offset={next_offset}"
    elif following < total:
        message += f" (a reply holds {REPLY_CHARS:,} characters of data): {hint}"
    return Cut(
        field=field,
        offset=offset,
        returned=returned,
        total=total,
        next_offset=next_offset,
        message=message,
    )


def cut_lines(data: dict[str, Any]) -> list[str]:
    """Return a line per `Cut` in a reply's data, for its text summary."""
    return [f"cut: {left['message']}" for left in data.get("cut", ())]


def _with_cut(data: dict[str, Any], left: Cut) -> dict[str, Any]:
    return {**data, "cut": [*data.get("cut", ()), left]}


def _fitting(data: dict[str, Any], field: str) -> int:
    """Return how many of ``data[field]``'s first entries fit `REPLY_CHARS` (at least one)."""
    room = REPLY_CHARS - _size({**data, field: []}) - CUT_CHARS
    kept = 0
    for item in data[field]:
        room -= _size(item) + 2  # ", " between entries
        if room < 0:
            break
        kept += 1
    return max(kept, min(1, len(data[field])))


CUT_CHARS = 300
"""Room kept for the `Cut` a reply may gain."""


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False))
