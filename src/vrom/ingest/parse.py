"""Parse one Markdown note: frontmatter, title, headings, links and tags.

Parsing never raises on text: broken frontmatter becomes a warning and the note is kept as plain
text (`vrom.ingest.frontmatter`). Offsets are character offsets into the decoded note text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote

from vrom.ingest.frontmatter import split_frontmatter

NOTE_SUFFIXES = (".md", ".markdown")
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
"""The bidirectional embedding, override and isolate characters: they make a name show as
another (``bidi \u202egnp.md`` as ``bidi dm.png``)."""


@dataclass(frozen=True)
class Heading:
    """An ATX heading: its level (1-6), text, and the offset where its line starts."""

    level: int
    text: str
    start: int


@dataclass(frozen=True)
class ParsedLink:
    """A link found in a note; ``target_key`` is the normalised key used to resolve it."""

    kind: str  # "wikilink" | "embed" | "markdown"
    target: str
    target_key: str
    heading: str | None
    alias: str | None
    position: int


@dataclass
class ParsedNote:
    """Everything parsing learns about a note."""

    text: str
    title: str
    frontmatter: dict[str, Any]
    body_start: int
    headings: list[Heading]
    links: list[ParsedLink]
    tags: list[str]
    warnings: list[str] = field(default_factory=list)


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})", re.MULTILINE)
_BACKTICKS = re.compile(r"`+")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+([^\n]*))?$", re.MULTILINE)
# a literal first: re skips to each "[[" at C speed (a leading lookahead, optional or alternation
# makes it try the pattern at every position: 6x slower over the hub vault); an embed's "!" is
# the character before (`_wikilink`)
_WIKILINK_BODY = r"\[\[([^\[\]\n]+?)\]\]"
_WIKILINK = re.compile(_WIKILINK_BODY)
# a text or target stops at "[": each "[" of a long run is not rescanned
_LINK_TEXT_AND_TARGET = r"\[([^\[\]\n]*)\]\(\s*<?([^)\[\s>]+)>?(?:\s+[\"'][^\"'\n]*[\"'])?\s*\)"
# "[" first, then "not after !" looked behind: a pattern that starts with its literal is searched
# for that character at C speed, where a leading look-behind is tried at every position
_MD_LINK = re.compile(r"\[(?<!!\[)" + _LINK_TEXT_AND_TARGET.removeprefix(r"\["))
_ANY_LINK = re.compile(r"(?=[!\[])(?:!?" + _LINK_TEXT_AND_TARGET + "|(!?)" + _WIKILINK_BODY + ")")
"""A Markdown link or image (its text is group 1) or a wiki link or embed (group 4 inside)."""
# a "#" at the start or after whitespace, "(" or ",": the same test looked behind from after it
_TAG = re.compile(r"#(?<![^\s(,]#)([\w/-]+)")
_NOT_A_LINE_END = re.compile(r"[^\n]")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # Unicode's category Cc: exactly these 65
_URL_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPE = re.compile(r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[ntr])")


def note_key(path: str) -> str:
    """Return the key a link resolves against: the lower-cased path without its suffix."""
    lowered = path.strip().strip("/").lower()
    for suffix in NOTE_SUFFIXES:
        if lowered.endswith(suffix):
            return lowered[: -len(suffix)]
    return lowered


def is_utf8(text: str) -> bool:
    """Return True unless ``text`` holds surrogates: bytes of a file name that are not UTF-8."""
    return _SURROGATE.search(text) is None


def name_problem(path: str) -> str | None:
    """Return why a note cannot be indexed under this vault path, or None when it can.

    A name that is not valid UTF-8 (the OS hands it over with surrogate escapes) can be neither
    stored nor printed; one with control characters (a newline, a tab) cannot be named on a
    command line or by an agent (`vrom.ingest.confine` refuses it), so it is never indexed.
    """
    if not is_utf8(path):
        return "its name is not valid UTF-8: rename the file to index it"
    if has_control(path):
        return "its name contains a control character (a newline, a tab): rename it to index it"
    return None


def has_control(text: str) -> bool:
    """Return whether ``text`` holds a control character (Unicode category Cc: a newline, a
    tab, NUL...)."""
    return _CONTROL.search(text) is not None


def shown_path(path: str) -> str:
    r"""Return ``path`` fit to print on one line and seen as it is: a byte that is not UTF-8 as
    ``\xe9``, and control and bidirectional-override characters escaped as Python writes them
    (``\n``, ``\u202e``: ``bidi \u202egnp.md`` would show as ``bidi dm.png``).

    Every face prints a file name through it; `unshown_path` reads such a name back.
    """
    try:
        raw = path.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that stands for no byte (from JSON, or Windows)
        raw = path.encode("utf-8", "backslashreplace")
    printable = raw.decode("utf-8", "backslashreplace")
    return "".join(
        char.encode("unicode_escape").decode("ascii") if _escaped(char) else char
        for char in printable
    )


def unshown_path(shown: str) -> str:
    r"""Return the name `shown_path` printed as ``shown``: its ``\u202e``-style escapes of
    control and bidirectional-override characters turned back into them (other backslashes
    are kept)."""
    return _ESCAPE.sub(_unescaped, shown)


def _escaped(char: str) -> bool:
    return has_control(char) or char in BIDI_CONTROLS


def _unescaped(match: re.Match[str]) -> str:
    char = match.group(0).encode("ascii").decode("unicode_escape")
    return char if _escaped(char) else match.group(0)


def name_key(path: str) -> str:
    """Return the key a bare ``[[Name]]`` resolves against: the lower-cased file stem."""
    return note_key(path).rsplit("/", 1)[-1]


def mask_code(text: str) -> str:
    """Return ``text`` with fenced and inline code replaced by spaces (same length, same lines).

    Links, tags and headings inside code are not links, tags or headings.
    """
    if "`" not in text and "~~~" not in text and "<!--" not in text:
        return text  # no fence, code span or comment: nothing to mask
    fences = []
    pos = 0
    while True:
        opening = _FENCE.search(text, pos)
        if opening is None:
            break
        fence = opening.group(1)
        line_end = text.find("\n", opening.end())
        if line_end == -1:
            fences.append((opening.start(), len(text)))
            break
        closing = re.compile(
            r"^ {0,3}" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}[ \t]*$", re.MULTILINE
        ).search(text, line_end + 1)
        end = len(text) if closing is None else closing.end()
        fences.append((opening.start(), end))
        pos = end
    masked = _blanked_ranges(text, fences)
    spans = [(a, b) for a, b in _code_spans(masked) if "\n\n" not in masked[a:b]]
    return _blanked_ranges(masked, spans + list(_html_comments(masked)))


def _blanked_ranges(text: str, ranges: list[tuple[int, int]]) -> str:
    """Return ``text`` with each (start, end) range's characters but line ends as spaces."""
    if not ranges:
        return text
    pieces = []
    done = 0  # text before it is copied or blanked
    for start, end in sorted(ranges):
        if end <= done:
            continue
        start = max(start, done)
        pieces.append(text[done:start])
        blanked = text[start:end]
        if "\n" in blanked:
            pieces.append(_NOT_A_LINE_END.sub(" ", blanked))
        else:  # most code spans: one line
            pieces.append(" " * len(blanked))
        done = end
    pieces.append(text[done:])
    return "".join(pieces)


def _code_spans(text: str) -> Iterator[tuple[int, int]]:
    """Yield the (start, end) of each inline code span: a run of backticks up to the next run of
    the same length. Each run is looked at a bounded number of times, so a note of unmatched
    runs (a regular expression rescans the rest of the text from each) costs linear time."""
    runs = [match.span() for match in _BACKTICKS.finditer(text)]
    of_length: dict[int, list[int]] = {}
    for index, (start, end) in enumerate(runs):
        of_length.setdefault(end - start, []).append(index)
    next_candidate: dict[int, int] = {}  # per length: where its search resumes (only moves on)
    index = 0
    while index < len(runs):
        start, end = runs[index]
        candidates = of_length[end - start]
        at = next_candidate.get(end - start, 0)
        while at < len(candidates) and candidates[at] <= index:
            at += 1
        next_candidate[end - start] = at
        if at == len(candidates):  # never closed: literal backticks
            index += 1
            continue
        closing = candidates[at]
        yield start, runs[closing][1]
        index = closing + 1


def _html_comments(text: str) -> Iterator[tuple[int, int]]:
    """Yield the (start, end) of each ``<!-- -->`` comment; an unclosed one ends the search."""
    position = 0
    while (start := text.find("<!--", position)) != -1:
        end = text.find("-->", start + 4)
        if end == -1:
            return
        yield start, end + 3
        position = end + 3


def find_headings(masked: str, start: int) -> list[Heading]:
    """Return the ATX headings in ``masked`` text at or after offset ``start``; a link in a
    heading reads as its text (`link_text`)."""
    headings: list[Heading] = []
    if masked.find("#", start) == -1:  # no heading without one
        return headings
    for match in _ATX.finditer(masked, start):
        text = link_text(_without_closing_hashes(match.group(2) or ""))
        headings.append(Heading(level=len(match.group(1)), text=text, start=match.start()))
    return headings


def link_text(text: str) -> str:
    """Return ``text`` with each link as a reader sees it: ``[NixOS](https://nixos.org)`` and
    ``![NixOS](logo.png)`` as ``NixOS``, ``[[Note|alias]]`` as ``alias`` and ``[[Note]]`` as
    ``Note``."""
    if "[" not in text:
        return text
    return _ANY_LINK.sub(_shown_link, text).strip()


def _shown_link(match: re.Match[str]) -> str:
    if match.group(4) is None:
        return match.group(1)
    target, _, alias = match.group(4).partition("|")
    return alias.strip() or target.strip()


def _without_links(masked: str) -> str:
    """Return ``masked`` with every link and image blanked (same length, same lines): what a
    link's text or target holds (``[x](#css-code)``, ``[white #FFFFFF](...)``) is not a tag.

    The blank is NUL, which no tag follows: a space would make ``#x`` right after a link a tag.
    """
    return _ANY_LINK.sub(_blanked, masked)


def _blanked(match: re.Match[str]) -> str:
    found = match.group(0)
    return _NOT_A_LINE_END.sub("\0", found) if "\n" in found else "\0" * len(found)


def _without_closing_hashes(text: str) -> str:
    """Return a heading's text without its optional closing ``#`` run (``## Title ##``)."""
    text = text.rstrip(" \t")
    opened = text.rstrip("#")
    if opened != text and opened[-1:] in (" ", "\t"):
        text = opened
    return text.strip()


def _wikilink(match: re.Match[str], text: str, start: int) -> ParsedLink | None:
    """Return the link a `_WIKILINK` match in ``text`` (searched from ``start``) is: an embed
    when a "!" before it was searched too."""
    at = match.start()
    embed = at > start and text[at - 1] == "!"
    inner = match.group(1)
    target, _, alias = inner.partition("|")
    target, _, heading = target.partition("#")
    target = target.strip()
    heading = heading.strip() or None
    if not target and heading is None:
        return None
    return ParsedLink(
        kind="embed" if embed else "wikilink",
        target=target,
        target_key=note_key(target) if target else "",
        heading=heading,
        alias=alias.strip() or None,
        position=at - 1 if embed else at,
    )


def _markdown_link(match: re.Match[str], note_path: str) -> ParsedLink | None:
    raw = match.group(2)
    if raw.startswith("#") or _URL_SCHEME.match(raw):
        return None
    target, _, heading = unquote(raw).partition("#")
    suffix = PurePosixPath(target).suffix.lower()
    if suffix and suffix not in NOTE_SUFFIXES:
        return None  # an image or attachment, not a note
    if target.startswith("/"):
        resolved = target.lstrip("/")
    else:
        parts: list[str] = list(PurePosixPath(note_path).parent.parts)
        for part in PurePosixPath(target).parts:
            if part == "..":
                if not parts:
                    return None  # points outside the vault
                parts.pop()
            elif part != ".":
                parts.append(part)
        resolved = "/".join(parts)
    return ParsedLink(
        kind="markdown",
        target=raw,
        target_key=note_key(resolved),
        heading=heading or None,
        alias=None,
        position=match.start(),
    )


def _frontmatter_tags(frontmatter: dict[str, Any]) -> list[str]:
    tags: list[str] = []
    for key in ("tags", "tag"):
        value = frontmatter.get(key)
        items = (
            value
            if isinstance(value, list)
            else re.split(r"[,\s]+", value)
            if isinstance(value, str)
            else []
        )
        tags.extend(str(item) for item in items if item is not None)
    return tags


def _clean_tag(tag: str) -> str | None:
    tag = tag.strip().lstrip("#").strip("/").lower()
    if not tag or tag.isdigit():
        return None
    return tag


def note_title(frontmatter: dict[str, Any], headings: list[Heading], path: str) -> str:
    """Return the note's title: frontmatter ``title`` › first H1 › file name."""
    title = frontmatter.get("title")
    if isinstance(title, (str, int, float)) and str(title).strip():
        return str(title).strip()
    for heading in headings:
        if heading.level == 1 and heading.text:
            return heading.text
    stem = PurePosixPath(path).name
    for suffix in NOTE_SUFFIXES:
        if stem.lower().endswith(suffix):
            return stem[: -len(suffix)]
    return stem


def parse_note(text: str, path: str) -> ParsedNote:
    """Parse a note's decoded text; ``path`` is its vault-relative POSIX path."""
    frontmatter, body_start, warnings = split_frontmatter(text, note_changes=True)
    masked = mask_code(text)
    headings = find_headings(masked, body_start)
    links: list[ParsedLink] = []
    for match in _WIKILINK.finditer(masked, body_start):
        link = _wikilink(match, masked, body_start)
        if link is not None:
            links.append(link)
    for match in _MD_LINK.finditer(masked, body_start):
        link = _markdown_link(match, path)
        if link is not None:
            links.append(link)
    links.sort(key=lambda link: link.position)
    raw_tags = _frontmatter_tags(frontmatter)
    if _TAG.search(masked, body_start):  # blanking links only takes tags away
        raw_tags.extend(m.group(1) for m in _TAG.finditer(_without_links(masked), body_start))
    # a dict keeps the first-seen order and answers "seen?" at once (a list made 40k tags cost
    # 800 million comparisons)
    tags = list(dict.fromkeys(tag for tag in map(_clean_tag, raw_tags) if tag is not None))
    return ParsedNote(
        text=text,
        title=note_title(frontmatter, headings, path),
        frontmatter=frontmatter,
        body_start=body_start,
        headings=headings,
        links=links,
        tags=tags,
        warnings=warnings,
    )
