"""Suggest the OKF frontmatter a note lacks, from its own content, its folder and its file.

Only fields that are missing (or blank) are suggested, never a change to one that is there:

- ``type`` (required by OKF): the heading its folder's ``index.md`` lists it under (OKF index
  generators group entries by type), else the type most of its folder's concepts have, else
  ``Note``, OKF's generic concept;
- ``title``: the first level-1 heading, else the file name (``-`` and ``_`` as spaces);
- ``description``: the first sentence of the first paragraph of prose, without its Markdown;
- ``tags``: the note's inline ``#tags``, when it has any;
- ``timestamp``: the file's modification time, as an ISO 8601 UTC datetime, when the note has
  neither ``timestamp`` nor ``generated``. It records when the content last changed without
  claiming who wrote it, which ``generated.by`` would (OKF v0.2 reads ``timestamp`` when
  ``generated`` is absent).

Reserved files (``index.md``, ``log.md``) and notes whose frontmatter cannot be read get no
suggestion: an index holds no frontmatter, and broken frontmatter is for a person to mend.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from vrom.ingest.okf import INDEX, LOG, NoteCheck
from vrom.ingest.parse import NOTE_SUFFIXES, find_headings, mask_code, parse_note
from vrom.results import Enrichment

DEFAULT_TYPE = "Note"
DESCRIPTION_CHARS = 240
"""The longest description suggested; a longer first sentence is cut at a word, with …"""

_NOT_PROSE = re.compile(r"^ {0,3}(?:#|[*+-][ \t]|\d+[.)][ \t]|>|\||<|\[\^|!\[|-{3,}|\*{3,}|_{3,})")
_IMAGE = re.compile(r"!\[[^\]\n]*\]\([^)\n]*\)")
_LINK = re.compile(r"\[([^\]\n]*)\]\([^)\n]*\)")
_WIKILINK = re.compile(r"!?\[\[([^\]|\n]*)(?:\|([^\]\n]*))?\]\]")
_FOOTNOTE_REF = re.compile(r"\[\^[^\]\s]+\]")
_EMPHASIS = re.compile(r"\*{1,3}|_{2,3}|`+|~~")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")


def suggest_enrichment(
    check: NoteCheck,
    path: str,
    mtime: float,
    *,
    listed_under: str | None = None,
    sibling_types: Mapping[str, int] | None = None,
) -> list[Enrichment]:
    """Return the fields to add to the note at vault path ``path``, each with its source.

    ``check`` is what `vrom.ingest.okf.check_note` found; ``mtime`` is the file's modification
    time; ``listed_under`` is the heading its folder's ``index.md`` lists it under, and
    ``sibling_types`` counts the types of the concepts in its folder.
    """
    frontmatter = check.frontmatter
    if check.format in (INDEX, LOG) or frontmatter is None:
        return []
    found: list[Enrichment] = []
    if _missing(frontmatter, "type"):
        found.append(_type(listed_under, sibling_types or {}))
    if _missing(frontmatter, "title"):
        found.append(_title(check, path))
    if _missing(frontmatter, "description"):
        description = first_sentence(check.text, check.body_start)
        if description:
            found.append(Enrichment("description", description, "first paragraph"))
    if _missing(frontmatter, "tags") and _missing(frontmatter, "tag"):
        tags = parse_note(check.text, path).tags
        if tags:
            found.append(Enrichment("tags", tags, "inline tags"))
    if _missing(frontmatter, "timestamp") and _missing(frontmatter, "generated"):
        stamp = dt.datetime.fromtimestamp(mtime, tz=dt.timezone.utc).replace(microsecond=0)
        found.append(Enrichment("timestamp", stamp.isoformat(), "file mtime"))
    return found


def _missing(frontmatter: Mapping[str, Any], key: str) -> bool:
    """True when ``key`` is absent, null or blank text: a value there is never replaced."""
    value = frontmatter.get(key)
    return value is None or (isinstance(value, str) and not value.strip())


def _type(listed_under: str | None, sibling_types: Mapping[str, int]) -> Enrichment:
    if listed_under:
        return Enrichment("type", listed_under, "index.md section")
    counts = {kind: n for kind, n in sibling_types.items() if kind.strip() and n > 0}
    if counts:
        # the most common; a tie goes to the first in alphabetical order, so runs agree
        best = min(counts, key=lambda kind: (-counts[kind], kind))
        return Enrichment("type", best, "sibling concepts")
    return Enrichment("type", DEFAULT_TYPE, "default")


def _title(check: NoteCheck, path: str) -> Enrichment:
    for heading in find_headings(mask_code(check.text), check.body_start):
        if heading.level == 1 and heading.text:
            return Enrichment("title", heading.text, "first heading")
    name = PurePosixPath(path).name
    for suffix in NOTE_SUFFIXES:
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
            break
    return Enrichment("title", " ".join(re.split(r"[-_\s]+", name)).strip() or name, "file name")


def first_sentence(text: str, body_start: int = 0) -> str | None:
    """Return the first sentence of the first paragraph of prose after ``body_start``, as plain
    text (links as their text, no emphasis or code marks), or None when there is no prose.

    Headings, lists, tables, quotes, HTML, footnotes, images, rules and code are not prose.
    """
    masked = mask_code(text)
    lines = text[body_start:].split("\n")  # not splitlines: masking may turn a \r into a space
    masked_lines = masked[body_start:].split("\n")
    paragraph: list[str] = []
    for line, masked_line in zip(lines, masked_lines, strict=True):
        if not masked_line.strip():  # a blank line, or a line that was all code
            if paragraph:
                break
            continue
        if _NOT_PROSE.match(masked_line):
            if paragraph:
                break
            continue
        paragraph.append(line.strip())
    if not paragraph:
        return None
    plain = _plain(" ".join(paragraph))
    if not plain:
        return None
    sentence = _SENTENCE_END.split(plain, maxsplit=1)[0]
    if len(sentence) > DESCRIPTION_CHARS:
        sentence = sentence[:DESCRIPTION_CHARS].rsplit(" ", 1)[0].rstrip(" ,;:") + "…"
    return sentence


def _plain(markdown: str) -> str:
    """Return one line of Markdown as plain text."""
    text = _IMAGE.sub("", markdown)
    text = _LINK.sub(r"\1", text)
    text = _WIKILINK.sub(lambda m: m.group(2) or m.group(1), text)
    text = _FOOTNOTE_REF.sub("", text)
    text = _EMPHASIS.sub("", text)
    return " ".join(text.split()).strip()
