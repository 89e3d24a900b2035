"""What every command module of the CLI shares: the ``--vault``/``--db`` choice and JSON output.

The command modules (``cli``, ``cli_memory``, ``cli_pack``, ``cli_setup``, ``cli_eval``) import
these instead of ``cli`` itself, which imports them.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from vrom.results import to_jsonable
from vrom.vault import VAULT_ENV


def add_vault_options(sub: argparse.ArgumentParser) -> None:
    """Add the mutually exclusive ``--vault PATH`` and ``--db FILE`` options to a command."""
    which = sub.add_mutually_exclusive_group()
    which.add_argument(
        "--vault",
        metavar="PATH",
        help=f"the vault (default: ${VAULT_ENV}, the indexed vault at or above the current "
        "directory, else the one indexed last)",
    )
    which.add_argument("--db", metavar="FILE", help="open this store file directly")


def print_json(value: Any, out: TextIO) -> None:
    """Print a result (or list of results) as the JSON the Python API's shapes give."""
    json.dump(to_jsonable(value), out, ensure_ascii=False, indent=2)
    out.write("\n")
