"""Opening the vault a command's ``--vault``/``--db`` (or, with neither, the default) names, and
saying which one it was.

A person at a terminal sees ``vrom: vault PATH (store FILE)`` on stderr; a pipe or a log sees
nothing, so scripts stay clean; ``--json`` adds ``vault`` and ``store`` to an object result.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from vrom.cli.output import styler
from vrom.vault import Vault


def open_vault(args: argparse.Namespace) -> Vault:
    """Return the vault a command's ``--db``, ``--vault`` or (neither) the default names, and
    `announce` it."""
    options: dict[str, Any] = {"embedder": args.embedder, "vector_encoding": args.vector_encoding}
    if args.db:
        vault = Vault.open_store(args.db, **options)
    elif args.vault is not None:  # "" is a mistake to report, not a request for the default
        vault = Vault.open(args.vault, args.state_dir, create=False, **options)
    else:
        vault = Vault.open_default(args.state_dir, **options)
    announce(vault)
    return vault


def where(vault: Vault) -> dict[str, str]:
    """Return which vault and store a command used: the keys ``--json`` adds to an object."""
    return {"vault": str(vault.root), "store": vault.store.location}


def announce(vault: Vault, stream: TextIO | None = None) -> None:
    """Write ``vrom: vault PATH (store FILE)`` to ``stream`` (stderr) if it is a terminal."""
    announce_text(f"vault {vault.root} (store {vault.store.location})", stream)


def announce_text(text: str, stream: TextIO | None = None) -> None:
    """Write ``vrom: TEXT`` to ``stream`` (stderr) if it is a terminal: a person sees what a
    command used, a pipe or a log stays clean."""
    stream = stream or sys.stderr
    if stream.isatty():
        stream.write(styler(stream)(f"vrom: {text}", "dim") + "\n")
        stream.flush()
