"""Opening the vault a command's ``--vault``/``--db`` (or, with neither, the default) names."""

from __future__ import annotations

import argparse
from typing import Any

from vrom.vault import Vault


def open_vault(args: argparse.Namespace) -> Vault:
    """Return the vault a command's ``--db``, ``--vault`` or (neither) the default names."""
    options: dict[str, Any] = {"embedder": args.embedder, "vector_encoding": args.vector_encoding}
    if args.db:
        return Vault.open_store(args.db, **options)
    if args.vault:
        return Vault.open(args.vault, args.state_dir, create=False, **options)
    return Vault.open_default(args.state_dir, **options)
