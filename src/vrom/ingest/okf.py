"""Open Knowledge Format (OKF) v0.2: what kind of note a file is, whether it conforms, and the
lifecycle fields search reads (``status``, ``stale_after``).

OKF is a folder of Markdown files with YAML frontmatter. Every Markdown file but the reserved
``index.md`` (a folder's listing, §8) and ``log.md`` (its dated history, §9) is a concept, whose
frontmatter carries a non-empty ``type``. The checks follow the spec's conformance section (§11):
what it says MUST hold is an error, what it says SHOULD hold a warning, and a field it does not
know is never a problem (every write keeps it).

Errors:
- a concept without a frontmatter block, or with one that is not closed, not YAML or not a
  mapping, or without a non-empty string ``type``; a note that is not UTF-8 text;
- an ``index.md`` with frontmatter holding anything but ``okf_version``, without a section
  heading, or with a list item that is not a link or comes before any heading;
- a ``log.md`` whose date headings (level 2) are not ISO 8601 ``YYYY-MM-DD`` dates.

Warnings (§5–§10, which producers SHOULD follow when a family is present): a ``status`` other
than ``draft``, ``stable``, ``deprecated``; a timestamp (``stale_after``, ``generated.at``,
``verified[].at``, ``sources[].last_modified``, ``usage_window``) that is not an ISO 8601
datetime with a UTC offset; ``generated`` or ``verified`` entries without an actor ``by``
(``agent/version``, ``human:id``, ``process:id``); ``sources`` entries without ``resource``; a
footnote label that names no ``sources`` id; an Attested Computation without ``runtime``;
``title``/``description`` that are not text, ``tags`` that are not a list of text; an index
entry without a description; a log that is not newest first or has no dated entry;
``okf_version`` other than 0.2.

An ``index.md`` whose only frontmatter is ``okf_version`` declares a bundle root; it is accepted
anywhere, since a vault may hold several bundles in its folders.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

import yaml

from vrom.dates import ISO_INSTANT, parse_instant
from vrom.ingest.frontmatter import (
    YamlRefusedError,
    json_ready,
    kept_as_text_warning,
    load_yaml,
)
from vrom.ingest.okf_listings import DATE, check_index, check_log, shown_value
from vrom.ingest.okf_listings import index_entries as _index_entries
from vrom.ingest.parse import mask_code
from vrom.results import FormatIssue

OKF_VERSION = "0.2"
CONCEPT, INDEX, LOG = "okf_concept", "okf_index", "okf_log"
OBSIDIAN, MARKDOWN = "obsidian", "markdown"
FORMATS = (CONCEPT, INDEX, LOG, OBSIDIAN, MARKDOWN)
"""Every format a note can have, in the order summaries list them."""
RESERVED_NAMES = {"index.md": INDEX, "log.md": LOG}
STATUSES = ("draft", "stable", "deprecated")
"""OKF's lifecycle statuses (§5.4); absent means ``stable``."""
DEMOTED_STATUSES = frozenset({"deprecated", "superseded"})
"""Statuses that say a note is no longer current: OKF's ``deprecated``, and ``superseded`` (the
word vrom's memories and many vaults use)."""
DEMOTION = 0.5
"""What a demoted status multiplies a note's human-relevance score by (see
`vrom.ingest.relevance`)."""
ATTESTED = "Attested Computation"

_FRONTMATTER_END = re.compile(r"^(?:---|\.\.\.)[ \t]*\r?$", re.MULTILINE)
_ACTOR = re.compile(r"^(?:(?:human|process):\S+|[^\s/:]+/\S+)$")
_FOOTNOTE = re.compile(r"\[\^([^\]\s]+)\]")

_Warn = Callable[[str, str], None]
"""Records a warning: ``warn(code, message)``."""


@dataclass(frozen=True)
class NoteCheck:
    """What checking one note found, and what enrichment needs to know about it.

    ``frontmatter`` is the note's frontmatter when it has a readable block (None when the block
    is broken, and ``{}`` when there is none); ``has_block`` says whether the text starts with
    one. ``body_start`` is where the body begins in ``text``.
    """

    format: str
    errors: tuple[FormatIssue, ...]
    warnings: tuple[FormatIssue, ...]
    frontmatter: dict[str, Any] | None
    has_block: bool
    text: str
    body_start: int


def check_note(path: str, text: str | None, decoding_problem: str | None = None) -> NoteCheck:
    """Return the format of the note at vault path ``path`` and how it departs from OKF v0.2.

    ``text`` is the decoded note (None for binary content); ``decoding_problem`` says why the
    bytes were not clean UTF-8, which OKF requires.
    """
    if text is None:
        why = decoding_problem or "binary content"
        return NoteCheck(
            MARKDOWN,
            (FormatIssue("not_text", f"not a text file ({why}): OKF notes are UTF-8"),),
            (),
            None,
            False,
            "",
            0,
        )
    errors: list[FormatIssue] = []
    warnings: list[FormatIssue] = []
    if decoding_problem:
        errors.append(FormatIssue("not_utf8", f"not valid UTF-8 ({decoding_problem})"))
    has_block, frontmatter, body_start, problem, kept = read_frontmatter(text)
    if problem is not None:
        errors.append(FormatIssue("bad_frontmatter", problem))
    if kept:
        warnings.append(FormatIssue("kept_as_text", kept_as_text_warning(kept)))
    kind = note_format(path, has_block, frontmatter)
    if kind == INDEX:
        check_index(text, body_start, frontmatter, errors, warnings, OKF_VERSION)
    elif kind == LOG:
        check_log(text, body_start, errors, warnings)
    elif kind == CONCEPT:
        assert frontmatter is not None  # a concept has a readable block with a type
        _check_concept(frontmatter, text, body_start, errors, warnings)
    elif problem is None:  # a note that is no concept yet: what OKF asks first
        if has_block:
            errors.append(
                FormatIssue(
                    "missing_type", "frontmatter has no 'type': every OKF concept needs one"
                )
            )
        else:
            errors.append(
                FormatIssue(
                    "no_frontmatter",
                    "no frontmatter block: an OKF concept starts with YAML frontmatter holding"
                    " its 'type'",
                )
            )
    return NoteCheck(kind, tuple(errors), tuple(warnings), frontmatter, has_block, text, body_start)


def note_format(path: str, has_block: bool, frontmatter: Mapping[str, Any] | None) -> str:
    """Return a note's format: a reserved OKF file by name, a concept by its ``type`` key, else
    a note with frontmatter (``obsidian``) or plain Markdown."""
    reserved = RESERVED_NAMES.get(PurePosixPath(path).name)
    if reserved is not None:
        return reserved
    if frontmatter is not None and "type" in frontmatter:
        return CONCEPT
    return OBSIDIAN if has_block else MARKDOWN


def read_frontmatter(
    text: str,
) -> tuple[bool, dict[str, Any] | None, int, str | None, list[str]]:
    """Return (has a block, its mapping, body offset, problem, values kept as text) for a
    note's text.

    The mapping is ``{}`` without a block and None when the block cannot be read; the problem
    then says why, in one line. Values are as the store keeps them (`json_ready`); one YAML
    cannot build is kept as its text and named in the last item (`LoadedYaml.kept_as_text`).
    """
    if not (text.startswith("---\n") or text.startswith("---\r\n")):
        return False, {}, 0, None, []
    first_line_end = text.index("\n") + 1
    closing = _FRONTMATTER_END.search(text, first_line_end)
    if closing is None:
        return True, None, 0, "the frontmatter block is never closed with '---'", []
    body_start = closing.end()
    if body_start < len(text) and text[body_start] == "\n":
        body_start += 1
    raw = text[first_line_end : closing.start()]
    try:
        data, kept = load_yaml(raw)
    except YamlRefusedError as exc:
        return True, None, body_start, f"the frontmatter is refused: {exc}", []
    except yaml.MarkedYAMLError as exc:
        line = "" if exc.problem_mark is None else f" at line {exc.problem_mark.line + 2}"
        reason = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
        return True, None, body_start, f"the frontmatter is not valid YAML{line} ({reason})", []
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as exc:
        reason = " ".join(str(exc).split("\n", 1)[0].split()) or type(exc).__name__
        return True, None, body_start, f"the frontmatter is not valid YAML ({reason})", []
    if data is None:
        return True, {}, body_start, None, []
    if not isinstance(data, dict):
        problem = (
            f"the frontmatter is a YAML {type(data).__name__}, not a mapping of keys to values"
        )
        return True, None, body_start, problem, []
    return True, json_ready(data), body_start, None, kept


# -- lifecycle: what search reads -----------------------------------------------------------


def is_demoted(frontmatter: Mapping[str, Any]) -> bool:
    """Return True when a note's ``status`` says it is no longer current (`DEMOTED_STATUSES`)."""
    status = frontmatter.get("status")
    return isinstance(status, str) and status.strip().lower() in DEMOTED_STATUSES


def stale_after(frontmatter: Mapping[str, Any]) -> dt.datetime | None:
    """Return the instant a note's ``stale_after`` names (UTC), or None without a readable one."""
    return parse_instant(frontmatter.get("stale_after"))


def instant_problem(value: object) -> str | None:
    """Return why ``value`` is not an ISO 8601 datetime with a UTC offset (§5), or None."""
    if not isinstance(value, str):
        return f"is {_kind(value)}, not an ISO 8601 datetime"
    text = value.strip()
    if DATE.match(text):
        return f"is a date ({text}), not a datetime with a UTC offset ({text}T00:00:00Z)"
    match = ISO_INSTANT.match(text)
    if match is None or parse_instant(text) is None:
        return f"{value!r} is not an ISO 8601 datetime"
    if match.group(8) is None:
        return f"{value!r} has no UTC offset (end it with Z or +00:00)"
    return None


# -- the checks ---------------------------------------------------------------------------


def _check_concept(
    frontmatter: Mapping[str, Any],
    text: str,
    body_start: int,
    errors: list[FormatIssue],
    warnings: list[FormatIssue],
) -> None:
    kind = frontmatter.get("type")
    if not isinstance(kind, str):
        code = "empty_type" if kind is None else "bad_type"
        what = "empty" if kind is None else _kind(kind)
        errors.append(FormatIssue(code, f"'type' is {what}: it must name the kind of concept"))
    elif not kind.strip():
        errors.append(
            FormatIssue("empty_type", "'type' is empty: it must name the kind of concept")
        )

    def warn(code: str, message: str) -> None:
        warnings.append(FormatIssue(code, message))

    for key in ("title", "description", "resource"):
        if key in frontmatter and not isinstance(frontmatter[key], str):
            warn("bad_field", f"'{key}' is {_kind(frontmatter[key])}; it should be text")
    if "tags" in frontmatter:
        tags = frontmatter["tags"]
        if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
            warn("bad_tags", f"'tags' is {_kind(tags)}; it should be a YAML list of short strings")
    if "status" in frontmatter:
        status = frontmatter["status"]
        if not isinstance(status, str) or status.strip().lower() not in STATUSES:
            warn(
                "unknown_status",
                f"'status' is {shown_value(status)}; OKF's are {', '.join(STATUSES)}",
            )
    _check_instant(frontmatter, "stale_after", "stale_after", warn)
    _check_events(frontmatter, warn)
    _check_sources(frontmatter, text, body_start, warn)
    if kind == ATTESTED:
        _check_computation(frontmatter, warn)


def _check_instant(holder: Mapping[str, Any], key: str, label: str, warn: _Warn) -> None:
    if key in holder:
        problem = instant_problem(holder[key])
        if problem is not None:
            warn("bad_datetime", f"'{label}' {problem}")


def _check_events(frontmatter: Mapping[str, Any], warn: _Warn) -> None:
    """Check ``generated`` (one mapping) and ``verified`` (a list, or one bare mapping)."""
    if "generated" in frontmatter:
        generated = frontmatter["generated"]
        if isinstance(generated, Mapping):
            _check_actor(generated, "generated", warn)
            _check_instant(generated, "at", "generated.at", warn)
        else:
            warn("bad_generated", f"'generated' is {_kind(generated)}; it should be {{by, at}}")
    if "verified" in frontmatter:
        verified = frontmatter["verified"]
        events = [verified] if isinstance(verified, Mapping) else verified  # §5.2: bare = list
        if not isinstance(events, list) or not all(isinstance(e, Mapping) for e in events):
            warn(
                "bad_verified",
                f"'verified' is {_kind(verified)}; it should be a list of {{by, at}} entries",
            )
            return
        for number, event in enumerate(events):
            label = f"verified[{number}]"
            _check_actor(event, label, warn)
            if "at" not in event:
                warn("missing_at", f"'{label}' has no 'at': when it was verified")
            _check_instant(event, "at", f"{label}.at", warn)


def _check_actor(event: Mapping[str, Any], label: str, warn: _Warn) -> None:
    by = event.get("by")
    if by is None:
        warn("missing_actor", f"'{label}' has no 'by': who or what did it")
    elif not isinstance(by, str) or not _ACTOR.match(by):
        warn(
            "bad_actor",
            f"'{label}.by' is {shown_value(by)}; an actor is agent/version, human:id or process:id",
        )


def _check_sources(frontmatter: Mapping[str, Any], text: str, body_start: int, warn: _Warn) -> None:
    if "usage_window" in frontmatter:
        _check_window(frontmatter["usage_window"], "usage_window", warn)
    if "sources" not in frontmatter:
        return
    sources = frontmatter["sources"]
    if not isinstance(sources, list) or not all(isinstance(s, Mapping) for s in sources):
        warn("bad_sources", f"'sources' is {_kind(sources)}; it should be a list of entries")
        return
    ids = set()
    for number, source in enumerate(sources):
        label = f"sources[{number}]"
        if not source.get("resource"):
            warn("missing_source_resource", f"'{label}' has no 'resource': what it derives from")
        if source.get("id") is not None:
            ids.add(str(source["id"]))
        count = source.get("usage_count")
        if "usage_count" in source and (
            isinstance(count, bool) or not isinstance(count, int) or count < 0
        ):
            warn(
                "bad_usage_count",
                f"'{label}.usage_count' is {shown_value(count)}; a count is 0 or more",
            )
        _check_instant(source, "last_modified", f"{label}.last_modified", warn)
        if "usage_window" in source:
            _check_window(source["usage_window"], f"{label}.usage_window", warn)
    cited = sorted(set(_FOOTNOTE.findall(mask_code(text)[body_start:])) - ids)
    if cited:
        shown = ", ".join(f"[^{label}]" for label in cited[:5])
        more = f" and {len(cited) - 5} more" if len(cited) > 5 else ""
        warn(
            "unknown_source_id",
            f"footnotes {shown}{more} name no 'sources' id: give the cited source that id",
        )


def _check_window(window: object, label: str, warn: _Warn) -> None:
    if not isinstance(window, Mapping):
        warn("bad_usage_window", f"'{label}' is {_kind(window)}; it should be {{from, to}}")
        return
    for end in ("from", "to"):
        if end not in window:
            warn("bad_usage_window", f"'{label}' has no '{end}'")
        _check_instant(window, end, f"{label}.{end}", warn)


def _check_computation(frontmatter: Mapping[str, Any], warn: _Warn) -> None:
    """Check the contract fields of an Attested Computation (§10.2)."""
    if not frontmatter.get("runtime"):
        warn("missing_runtime", "an Attested Computation needs 'runtime': how to run it")
    if "parameters" in frontmatter:
        parameters = frontmatter["parameters"]
        if not isinstance(parameters, list) or not all(
            isinstance(p, Mapping) and p.get("name") for p in parameters
        ):
            warn(
                "bad_parameters",
                "'parameters' should be a list of {name, type, required} entries",
            )
    for key in ("executor", "attester"):
        if key in frontmatter:
            value = frontmatter[key]
            if not isinstance(value, Mapping) or not value.get("resource"):
                warn("bad_contract", f"'{key}' should be a mapping with a 'resource'")


def _kind(value: object) -> str:
    if value is None:
        return "empty"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def index_entries(text: str, index_path: str) -> dict[str, str]:
    """Return {vault path of each note an ``index.md`` lists: the heading it is listed under}.

    Links are resolved from the index's folder; one starting with ``/`` from the vault root.
    """
    return _index_entries(text, read_frontmatter(text)[2], index_path)
