"""JSON a peer sends, parsed within bounds: at most so many bytes, nested at most so deep.

`json.loads` recurses once per nesting level, so a small document nested a few thousand levels
deep raises `RecursionError` (and one within the limit still makes every later walk over it
recurse as deep). `loads_bounded` measures the size and the nesting before parsing: the depth is
counted over the brackets outside strings in one pass of a regular expression, so a document is
refused before `json` sees it. Every refusal is a `ValidationError` naming the document.
"""

from __future__ import annotations

import json
import re
from typing import Any

from vrom.errors import ValidationError

__all__ = ["loads_bounded"]

# a JSON string (escapes included) or one bracket; whatever else lies between is skipped
_STRING_OR_BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
_OPENING = frozenset("[{")


def loads_bounded(text: str | bytes, *, max_depth: int, max_bytes: int, what: str) -> Any:
    """Return the JSON value in ``text``, or raise `ValidationError` naming ``what``.

    Refused: more than ``max_bytes`` bytes (UTF-8 for a ``str``), arrays and objects nested
    deeper than ``max_depth`` (``[]`` is depth 1), bytes that are not UTF-8, and anything that
    is not JSON.
    """
    size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise ValidationError(f"{what} is {size:,} bytes, more than the {max_bytes:,} allowed")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ValidationError(f"{what} is not UTF-8 text: {exc.reason}") from exc
    depth = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        token = match.group()
        if token in _OPENING:
            depth += 1
            if depth > max_depth:
                raise ValidationError(
                    f"{what} is nested more than {max_depth} levels deep: refused"
                )
        elif token in "]}":
            depth -= 1
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ValidationError(f"{what} is not valid JSON: {exc}") from exc
