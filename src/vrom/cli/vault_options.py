"""Opening the vault a command's ``--vault``/``--db`` (or, with neither, the default) names, in
the database ``--db URL`` or ``$VROM_DATABASE_URL`` names, and saying which one it was.

A person at a terminal sees ``vrom: vault PATH (store FILE)`` on stderr; a pipe or a log sees
nothing, so scripts stay clean; ``--json`` adds ``vault`` and ``store`` to an object result.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from vrom.cli.global_options import settings_of
from vrom.cli.output import styler
from vrom.store import is_url
from vrom.vault import Vault


def open_vault(args: argparse.Namespace, *, local: bool = False, **overrides: Any) -> Vault:
    """Return the vault a command's ``--db FILE``, ``--vault`` or (neither) the default names,
    its store in the database ``--db URL`` or ``$VROM_DATABASE_URL`` names (in ``--namespace``)
    if any, and `announce` it.

    ``local`` opens the vault's own file in the state dir, whatever database is named (what
    ``vrom sync`` copies); ``overrides`` replace `Vault.open` options the arguments give.
    """
    options: dict[str, Any] = {
        "embedder": args.embedder,
        "vector_encoding": args.vector_encoding,
        "settings": settings_of(args),
    }
    options.update(overrides)
    database = None if local else args.db
    if database and not is_url(database):  # a store file: the vault it indexed
        vault = Vault.open_store(database, **options)
    else:
        options.update(database_url=database, namespace=args.namespace, local=local)
        if args.vault is not None:  # "" is a mistake to report, not a request for the default
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
