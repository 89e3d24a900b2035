"""Split a parsed note into heading-aware chunks with overlap.

Sections start at headings. Small neighbouring sections inside the same top-level section
(a level-1 or level-2 heading) are merged up to the target size; a section longer than the target
is split at the best boundary (paragraph › line › sentence › word) with overlap. Every chunk is an
exact slice ``text[char_start:char_end]``, and together the chunks cover every non-blank
character of the body.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import Any

from vrom.ingest.parse import Heading, ParsedNote

CHUNKER_VERSION = 2
"""Recorded in the store with the strategy: a new version parses and chunks every note again on
the next index. 2: a heading path reads a link as its text, no tag comes from inside a link,
and a frontmatter value YAML cannot build is kept as text (it dropped the note, or all of its
frontmatter). Vectors are kept where a chunk embeds the same input as before."""
_BOUNDARIES = ("\n\n", "\n", ". ", "? ", "! ", "; ", " ")


@dataclass(frozen=True)
class ChunkStrategy:
    """How notes are cut into chunks; recorded in the store so a change re-chunks everything."""

    target_chars: int = 1000
    overlap_chars: int = 150
    top_level: int = 2
    version: int = CHUNKER_VERSION

    def __post_init__(self) -> None:
        if self.target_chars < 100:
            raise ValueError("chunk target must be at least 100 characters")
        if not 0 <= self.overlap_chars < self.target_chars // 2:
            raise ValueError("chunk overlap must be between 0 and half the target size")

    def as_dict(self) -> dict[str, Any]:
        """Return the strategy as a JSON-ready dict (as stored in the ``meta`` table)."""
        return {"splitter": "heading-aware", **asdict(self)}


@dataclass(frozen=True)
class ChunkSpan:
    """A chunk before it is stored: its slice of the note and the headings above it."""

    position: int
    char_start: int
    char_end: int
    heading_path: str
    text: str
    content_hash: str


@dataclass(frozen=True)
class _Section:
    start: int
    end: int
    path: tuple[str, ...]
    top: tuple[str, ...]


def _sections(note: ParsedNote, top_level: int) -> list[_Section]:
    sections: list[_Section] = []
    stack: list[Heading] = []
    start = note.body_start
    headings = [h for h in note.headings if h.start >= note.body_start]
    for index in range(len(headings) + 1):
        end = headings[index].start if index < len(headings) else len(note.text)
        if end > start:
            path = tuple(h.text for h in stack)
            top = tuple(h.text for h in stack if h.level <= top_level)
            sections.append(_Section(start, end, path, top))
        if index < len(headings):
            heading = headings[index]
            while stack and stack[-1].level >= heading.level:
                stack.pop()
            stack.append(heading)
            start = heading.start
    return sections


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _cut(text: str, start: int, end: int, target: int) -> int:
    """Return where to end a piece that starts at ``start``: the best boundary within target."""
    limit = start + target
    floor = start + target // 2
    for boundary in _BOUNDARIES:
        found = text.rfind(boundary, floor, limit)
        if found != -1:
            return found + len(boundary)
    return limit


def _split(text: str, start: int, end: int, strategy: ChunkStrategy) -> list[tuple[int, int]]:
    pieces: list[tuple[int, int]] = []
    pos = start
    while True:
        if end - pos <= strategy.target_chars:
            pieces.append((pos, end))
            return pieces
        cut = _cut(text, pos, end, strategy.target_chars)
        pieces.append((pos, cut))
        following = cut - strategy.overlap_chars
        if strategy.overlap_chars:
            space = text.find(" ", following, cut)
            following = space + 1 if space != -1 else following
        pos = max(following, pos + 1)


def _common_prefix(paths: list[tuple[str, ...]]) -> tuple[str, ...]:
    prefix = paths[0]
    for path in paths[1:]:
        size = 0
        while size < min(len(prefix), len(path)) and prefix[size] == path[size]:
            size += 1
        prefix = prefix[:size]
    return prefix


def chunk_note(note: ParsedNote, strategy: ChunkStrategy) -> list[ChunkSpan]:
    """Return the note's chunks in order."""
    text = note.text
    groups: list[tuple[int, int, tuple[str, ...]]] = []
    pending: list[_Section] = []

    def flush() -> None:
        if pending:
            groups.append(
                (pending[0].start, pending[-1].end, _common_prefix([s.path for s in pending]))
            )
            pending.clear()

    for section in _sections(note, strategy.top_level):
        if pending and (
            section.top != pending[0].top or section.end - pending[0].start > strategy.target_chars
        ):
            flush()
        pending.append(section)
    flush()

    spans: list[ChunkSpan] = []
    for group_start, group_end, path in groups:
        for piece_start, piece_end in _split(text, group_start, group_end, strategy):
            start, end = _trim(text, piece_start, piece_end)
            if start == end:
                continue
            chunk_text = text[start:end]
            spans.append(
                ChunkSpan(
                    position=len(spans),
                    char_start=start,
                    char_end=end,
                    heading_path=" > ".join(path),
                    text=chunk_text,
                    content_hash=hashlib.sha256(
                        chunk_text.encode("utf-8", "surrogatepass")
                    ).hexdigest(),
                )
            )
    return spans
