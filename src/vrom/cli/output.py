"""JSON output, shared by every command's ``--json``: the shapes the Python API returns."""

from __future__ import annotations

import json
from typing import Any, TextIO

from vrom.results import to_jsonable


def print_json(value: Any, out: TextIO) -> None:
    """Print a result (or list of results) as the JSON the Python API's shapes give."""
    json.dump(to_jsonable(value), out, ensure_ascii=False, indent=2)
    out.write("\n")
