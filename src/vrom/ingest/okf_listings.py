"""The two files OKF v0.2 reserves: a folder's ``index.md`` (§8: link entries in sections under
headings) and its ``log.md`` (§9: dated entries, newest first); `vrom.ingest.okf` checks every
note and calls these for the reserved ones.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from vrom.dates import parse_instant
from vrom.ingest.parse import find_headings, mask_code, shown_path
from vrom.results import FormatIssue

DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_LIST_ITEM = re.compile(r"^[ \t]*[*+-][ \t]+(.*)$")
_LINK_ENTRY = re.compile(r"^\[[^\]\n]*\]\(\s*<?([^)\s>]*)>?[^)]*\)(.*)$")
_HEADING_LINE = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)")


def check_index(
    text: str,
    body_start: int,
    frontmatter: Mapping[str, Any] | None,
    errors: list[FormatIssue],
    warnings: list[FormatIssue],
    okf_version: str,
) -> None:
    """Check an ``index.md`` against §8 (of OKF ``okf_version``): sections of link entries
    under headings."""
    if frontmatter:
        extra = sorted(shown_path(key) for key in frontmatter if key != "okf_version")
        if extra:
            errors.append(
                FormatIssue(
                    "index_frontmatter",
                    f"index.md carries frontmatter ({', '.join(extra[:5])}): an index has none,"
                    " but for 'okf_version' in a bundle's root index",
                )
            )
        version = frontmatter.get("okf_version")
        if "okf_version" in frontmatter and str(version) != okf_version:
            warnings.append(
                FormatIssue(
                    "okf_version",
                    f"okf_version is {shown_value(version)}; these checks are for {okf_version}",
                )
            )
    masked = mask_code(text)
    in_section = False
    for number, line in _body_lines(masked, body_start):
        if _HEADING_LINE.match(line):
            in_section = True
            continue
        item = _LIST_ITEM.match(line)
        if item is None:
            continue
        entry = _LINK_ENTRY.match(item.group(1).strip())
        if not in_section:
            errors.append(
                FormatIssue(
                    "index_entry_outside_section",
                    f"line {number}: an entry before any section heading; put it under one",
                )
            )
        if entry is None:
            errors.append(
                FormatIssue(
                    "bad_index_entry",
                    f"line {number}: a list item that is not a link entry"
                    " ('* [Title](path) - description')",
                )
            )
        elif not entry.group(2).strip().lstrip("-–—:").strip():
            warnings.append(
                FormatIssue(
                    "missing_entry_description",
                    f"line {number}: the entry has no description after its link",
                )
            )
    if not find_headings(masked, body_start):
        errors.append(
            FormatIssue(
                "no_index_section",
                "index.md has no section heading: list the folder's entries under one",
            )
        )


def index_entries(text: str, body_start: int, index_path: str) -> dict[str, str]:
    """Return {vault path of each note an ``index.md`` lists: the heading it is listed under};
    its body begins at ``body_start``.

    Links are resolved from the index's folder; one starting with ``/`` from the vault root.
    """
    folder = PurePosixPath(index_path).parent
    heading = ""
    entries: dict[str, str] = {}
    for _, line in _body_lines(mask_code(text), body_start):
        if _HEADING_LINE.match(line):
            heading = line.strip().lstrip("#").strip().rstrip("#").strip()
            continue
        item = _LIST_ITEM.match(line)
        entry = None if item is None else _LINK_ENTRY.match(item.group(1).strip())
        if entry is None or not heading or not entry.group(1):
            continue
        target = entry.group(1).split("#", 1)[0]
        resolved = _resolved(folder, target)
        if resolved is not None:
            entries.setdefault(resolved, heading)
    return entries


def _resolved(folder: PurePosixPath, target: str) -> str | None:
    parts = [] if target.startswith("/") else list(folder.parts)
    for part in PurePosixPath(target.lstrip("/")).parts:
        if part == "..":
            if not parts:
                return None
            parts.pop()
        elif part != ".":
            parts.append(part)
    return "/".join(parts) or None


def check_log(
    text: str, body_start: int, errors: list[FormatIssue], warnings: list[FormatIssue]
) -> None:
    """Check a ``log.md`` against §9: date headings in ``YYYY-MM-DD`` form, newest first."""
    dates: list[str] = []
    for heading in find_headings(mask_code(text), body_start):
        if heading.level != 2:
            continue
        number = text.count("\n", 0, heading.start) + 1
        if DATE.match(heading.text) and parse_instant(heading.text) is not None:
            dates.append(heading.text)
        else:
            errors.append(
                FormatIssue(
                    "bad_log_date",
                    f"line {number}: log heading {heading.text!r} is not an ISO 8601 date"
                    " (YYYY-MM-DD)",
                )
            )
    if not dates:
        warnings.append(FormatIssue("no_log_entries", "log.md has no dated entry (## YYYY-MM-DD)"))
    elif dates != sorted(dates, reverse=True):
        warnings.append(FormatIssue("log_order", "log.md entries should be newest first"))


def _body_lines(masked: str, body_start: int) -> list[tuple[int, str]]:
    """Return (line number in the file, line) for each line of the body."""
    first = masked.count("\n", 0, body_start) + 1
    lines = (line.rstrip("\r") for line in masked[body_start:].split("\n"))
    return list(enumerate(lines, start=first))


def shown_value(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
