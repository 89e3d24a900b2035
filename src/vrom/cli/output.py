"""What every command's output shares: ``--json`` (the Python API's shapes), score labels, and
the one decision about colour.

Colour is for a person at a terminal: a stream gets ANSI styles only when it is a TTY, ``NO_COLOR``
is unset or empty (https://no-color.org) and ``TERM`` is not ``dumb``. Pipes, files and logs get
plain text, so scripts never see escape codes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from vrom.results import to_jsonable
from vrom.settings import Settings

STYLES = {"bold": "1", "dim": "2", "red": "31", "yellow": "33", "cyan": "36"}
"""The ANSI styles the CLI uses, by name."""
SCORE_DIGITS = {"bm25": 2}
"""Decimals shown per score kind: BM25 runs to tens; the rest (fused, cosine, dot, euclidean,
rerank, distance) show three."""

Style = Callable[[str, str], str]
"""Return a text wrapped in a named style (one of `STYLES`), or unchanged without colour."""


def print_json(value: Any, out: TextIO, where: Mapping[str, Any] | None = None) -> None:
    """Print a result (or list of results) as the JSON the Python API's shapes give.

    ``where`` (which vault and store the command used, and any result it led to) is added to
    an object result's keys; a list result prints as the list it is, so scripts that index
    into it keep working.
    """
    data = to_jsonable(value)
    if where and isinstance(data, dict):
        data = {**data, **to_jsonable(where)}
    json.dump(data, out, ensure_ascii=False, indent=2)
    out.write("\n")


def colour_enabled(stream: TextIO) -> bool:
    """True when ``stream`` should get colour: a terminal, ``NO_COLOR`` unset or empty, and
    ``TERM`` not ``dumb``."""
    if not Settings.from_environment().colour:  # asked as a stream is styled, as ever
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or the stream is closed
        return False


def _plain(text: str, style: str) -> str:
    return text


def _ansi(text: str, style: str) -> str:
    return f"\x1b[{STYLES[style]}m{text}\x1b[0m"


def styler(stream: TextIO) -> Style:
    """Return how to style text written to ``stream`` (`colour_enabled` decides)."""
    return _ansi if colour_enabled(stream) else _plain


def score_label(kind: str, value: float) -> str:
    """Return a score with what it is: ``bm25 12.31``, ``fused 0.813``, ``cosine 0.812``."""
    return f"{kind or 'score'} {value:.{SCORE_DIGITS.get(kind, 3)}f}"
