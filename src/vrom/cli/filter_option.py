"""The ``--where`` option of every command that filters: the one filter grammar, as JSON.

``--where '{"year": {"$gte": 2024}}'`` passes a filter object (docs/filters.md); ``--where
KEY=VALUE`` is sugar for equality (VALUE read as a JSON scalar when it is one, else as text).
Given more than once, every filter must hold.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from vrom.bounded_json import loads_bounded
from vrom.errors import ValidationError
from vrom.filters import MAX_DEPTH

MAX_WHERE_BYTES = 64 * 1024
"""The longest ``--where`` JSON object read."""


def add_where_option(sub: argparse.ArgumentParser, what: str) -> None:
    """Add the repeatable ``--where`` option; ``what`` says what it filters on."""
    sub.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="FILTER",
        help=f"keep only what passes a filter on {what}: a JSON object such as "
        """'{"year": {"$gte": 2024}}' (operators $eq $ne $gt $gte $lt $lte $in $nin $contains"""
        " $and $or; docs/filters.md) or KEY=VALUE for equality (repeatable: all must hold)",
    )


def parse_where_option(items: Sequence[str]) -> dict[str, Any] | None:
    """Return the filter object the ``--where`` options ask for (None for none)."""
    parts = [_one(item) for item in items]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"$and": parts}


def _one(item: str) -> dict[str, Any]:
    if item.lstrip().startswith("{"):
        value = loads_bounded(
            item, max_depth=2 * MAX_DEPTH + 4, max_bytes=MAX_WHERE_BYTES, what="--where"
        )
        if not isinstance(value, dict):
            raise ValidationError("--where takes a JSON object or KEY=VALUE")
        return value
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise ValidationError(f"--where takes a JSON object or KEY=VALUE, not {item!r}")
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return {key.strip(): value if isinstance(value, (str, int, float, bool)) else raw}
