"""The ``--vault``/``--db`` choice every vault command offers, and opening the vault it names."""

from __future__ import annotations

import argparse
from typing import Any

from vrom.settings import VAULT_ENV
from vrom.vault import Vault


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


def open_vault(args: argparse.Namespace) -> Vault:
    """Return the vault a command's ``--db``, ``--vault`` or (neither) the default names."""
    options: dict[str, Any] = {"embedder": args.embedder, "vector_encoding": args.vector_encoding}
    if args.db:
        return Vault.open_store(args.db, **options)
    if args.vault:
        return Vault.open(args.vault, args.state_dir, create=False, **options)
    return Vault.open_default(args.state_dir, **options)
