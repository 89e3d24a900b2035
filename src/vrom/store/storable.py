"""The one rule for text a store holds, whatever its backend: no NUL character, no lone surrogate.

PostgreSQL's ``text`` cannot hold a NUL (U+0000) and no UTF-8 store can hold a lone surrogate
(what Python makes of bytes that are not UTF-8, or what a JSON ``"\\ud800"`` escape gives), so a
note, a collection's document or a memory holding either is refused by every backend the same
way: a `ValidationError` naming it and the part that holds it, before anything is written. A
store that held one on SQLite could then never be synced to PostgreSQL. The vault's reader takes
a file with a NUL byte anywhere for binary (`vrom.ingest.walk.read_note_text`), the collection
checks each batch with `check_text` before embedding; the backends' ``put`` methods check every
record they write (`check_document`, `check_memory`) for whatever reaches them otherwise
(frontmatter escapes, stores written by an older vrom that a sync copies).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import astuple
from typing import Any

from vrom.errors import ValidationError
from vrom.store.records import ChunkRecord, DocumentRecord, LinkRecord, MemoryRecord


def unstorable(text: str) -> str | None:
    """Return what in ``text`` no store holds (``a NUL character``, ``a lone surrogate``), or
    None when it may be stored."""
    if "\x00" in text:
        return "a NUL character"
    if text.isascii():  # no surrogate, and no encoding made to find out
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "a lone surrogate (text that is not valid Unicode)"
    return None


def check_text(text: str | None, what: str) -> None:
    """Raise `ValidationError` naming ``what`` when ``text`` holds what no store holds."""
    reason = None if text is None else unstorable(text)
    if reason is not None:
        raise ValidationError(f"{what} holds {reason}, which no vrom store can hold: remove it")


def check_value(value: Any, what: str) -> None:
    """Raise `ValidationError` naming ``what`` when a string in a JSON-ready value (a key or a
    value, at any depth) holds what no store holds."""
    for text in _strings(value):
        check_text(text, what)


def check_document(
    document: DocumentRecord,
    chunks: Sequence[ChunkRecord],
    links: Sequence[LinkRecord],
    tags: Sequence[str],
) -> None:
    """Raise `ValidationError` naming the note (and its part) when any text of it is not
    storable."""
    name = repr(document.path)
    check_text(document.path, "a note's path")
    check_text(document.text, f"the text of {name}")
    check_text(document.title, f"the title of {name}")
    check_value(document.frontmatter, f"the frontmatter of {name}")
    for chunk in chunks:
        check_text(chunk.text, f"the text of {name}")
        check_text(chunk.heading_path, f"a heading of {name}")
    for link in links:
        for text in (link.target, link.heading, link.alias):
            check_text(text, f"a link of {name}")
    for tag in tags:
        check_text(tag, f"a tag of {name}")


def check_memory(memory: MemoryRecord) -> None:
    """Raise `ValidationError` naming the memory when any text of it is not storable."""
    check_value(astuple(memory), f"memory {memory.id!r}")


def _strings(value: Any) -> Iterator[str]:
    """Yield every string in a JSON-ready value: keys and values, at any depth."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, Mapping):
            for key, inner in item.items():
                if isinstance(key, str):
                    yield key
                stack.append(inner)
        elif isinstance(item, list | tuple):
            stack.extend(item)


_KEPT_BY_JSON = frozenset({str, bool, int, float, type(None)})
"""The types JSON reads back as the very same values (a subclass may not be: an enum, a tuple)."""


def as_json_reads_it(
    mapping: Mapping[str, Any], encoded: str | bytes | None = None
) -> dict[str, Any]:
    """Return a copy of a JSON-ready mapping as its JSON text reads back (tuples become lists,
    keys text, subclasses their base). A mapping of text keys and scalar values, or lists of
    them, is copied without the round trip (most metadata and frontmatter); any other is read
    from ``encoded``, its JSON text when the caller has made it already, else made here."""
    plain = {}
    for key, value in mapping.items():
        kind = type(value)
        if type(key) is not str:
            break
        if kind in _KEPT_BY_JSON:
            plain[key] = value
        elif kind is list and all(type(item) in _KEPT_BY_JSON for item in value):
            plain[key] = list(value)
        else:
            break
    else:
        return plain
    if encoded is None:
        encoded = json.dumps(dict(mapping), ensure_ascii=False)
    copied: dict[str, Any] = json.loads(encoded)
    return copied
