"""JSON from a peer (an MCP client, a pack registry, a manifest), read within bounds.

Python's reader recurses once per nested array or object, so a message nested a few thousand
levels deep raises `RecursionError` (no `ValueError`: handlers that expect a bad input's
error miss it), and it reads any size it is given. `loads_bounded` measures the size and the
nesting first, without recursing, and reads only what fits, raising `ValidationError`.
`top_level` reads just a message's outermost object, whatever is nested inside it, so a
refused request can still be answered by its id.
"""

from __future__ import annotations

import json
import re
from typing import Any

from vrom.errors import ValidationError

_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.DOTALL)
"""A string (to skip its brackets; unterminated at the end of the text) or a bracket."""


def loads_bounded(text: str | bytes, *, max_depth: int, max_bytes: int, what: str) -> Any:
    """Return the JSON value in ``text``, refusing (`ValidationError`) one of more than
    ``max_bytes`` bytes, one nested deeper than ``max_depth`` arrays and objects, and text
    that is not JSON; ``what`` names the input in the message (``"the registry at URL"``)."""
    _check_size(text, max_bytes, what)
    source = _text(text, what)
    depth = nesting_depth(source)
    if depth > max_depth:
        raise ValidationError(
            f"{what} is nested more than {max_depth} levels deep: refused (its JSON is "
            f"nested {depth:,} levels deep)",
            code="json_too_deep",
        )
    try:
        return json.loads(source)
    except (ValueError, RecursionError) as exc:  # ValueError: also an int past 4,300 digits
        raise ValidationError(f"{what} is not valid JSON: {exc}", code="invalid_json") from exc


def top_level(text: str | bytes, *, max_bytes: int, what: str) -> Any:
    """Return the JSON value in ``text`` with every array and object nested in its outermost
    one read as None (``{"id": 7, "params": null}``), however deep they go."""
    _check_size(text, max_bytes, what)
    source = _text(text, what)
    kept: list[str] = []
    depth = 0
    start = 0  # where the text not yet kept begins
    for token in _TOKEN.finditer(source):
        bracket = token.group()
        if bracket in ("[", "{"):
            depth += 1
            if depth == 2:  # a nested value begins: keep what came before it
                kept.append(source[start : token.start()])
        elif bracket in ("]", "}"):
            depth -= 1
            if depth == 1:  # it ends: it reads as null
                kept.append("null")
                start = token.end()
    kept.append(source[start:] if depth < 2 else "")
    return loads_bounded("".join(kept), max_depth=1, max_bytes=max_bytes, what=what)


def nesting_depth(text: str) -> int:
    """Return how deeply ``text``'s arrays and objects nest (0 for a scalar), counting the
    brackets outside strings, without recursing (a bracket that is not JSON counts too)."""
    depth = deepest = 0
    for token in _TOKEN.finditer(text):
        bracket = token.group()
        if bracket in ("[", "{"):
            depth += 1
            deepest = max(deepest, depth)
        elif bracket in ("]", "}"):
            depth -= 1
    return deepest


def _check_size(text: str | bytes, max_bytes: int, what: str) -> None:
    size = len(text)  # a character is 1 to 4 bytes: encode only when that leaves it open
    if isinstance(text, str) and size <= max_bytes < 4 * size:
        size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise ValidationError(
            f"{what} is refused: {size:,} bytes of JSON, more than the {max_bytes:,} allowed",
            code="json_too_large",
        )


def _text(text: str | bytes, what: str) -> str:
    if isinstance(text, str):
        return text
    try:
        return text.decode("utf-8-sig")  # a registry file saved with a BOM reads too
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{what} is not UTF-8 JSON: {exc}", code="invalid_json") from exc
