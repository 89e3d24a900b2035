"""``vrom sync``: copy a vault's local store to a database (``--to URL``) or back (``--from URL``).

The local side is always the vault's own SQLite file in the state dir, whatever
``$VROM_DATABASE_URL`` says: sync is how a store gets from one to the other. ``--to`` needs the
vault indexed here (``--vault``, else the default vault); ``--from`` fills the store of
``--vault``, ``$VROM_VAULT`` or the current directory, created if need be. It calls
`vrom.vault.Vault.sync_to` or `sync_from` and prints the `vrom.results.SyncSummary`.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from vrom.cli.global_options import add_global_options, settings_of
from vrom.cli.output import print_json
from vrom.cli.vault_format import format_sync
from vrom.cli.vault_options import announce, open_vault, where
from vrom.settings import VAULT_ENV
from vrom.vault import Vault


def _sync(args: argparse.Namespace, out: TextIO) -> int:
    if args.to is not None:
        vault = open_vault(args, local=True, embedder=None)
    else:  # a new machine: the vault's folder is here, its store not yet
        folder = args.vault if args.vault is not None else settings_of(args).named_vault() or "."
        vault = Vault.open(
            folder,
            args.state_dir,
            embedder=None,
            namespace=args.namespace,
            local=True,
            settings=settings_of(args),
        )
        announce(vault)
    with vault:
        if args.to is not None:
            summary = vault.sync_to(args.to, namespace=args.namespace)
        else:
            summary = vault.sync_from(args.source, namespace=args.namespace)
    if args.json:
        print_json(summary, out, where(vault))
    else:
        out.write(format_sync(summary) + "\n")
    return 0


def add_sync_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``vrom sync`` to the CLI's subcommands."""
    help_text = (
        "Copy the vault's local store (notes, chunks, vectors, memories) to a database, or a "
        "database's copy back to this machine: only what changed, nothing re-embedded."
    )
    sub = commands.add_parser("sync", help=help_text, description=help_text)
    sub.set_defaults(handler=_sync, vector_encoding=None)
    add_global_options(
        sub,
        ("json", "vault", "namespace", "state_dir"),
        vault_help="the vault (--to: default as for 'vrom search'; --from: default "
        f"${VAULT_ENV}, else the current directory)",
    )
    way = sub.add_mutually_exclusive_group(required=True)
    way.add_argument(
        "--to",
        metavar="URL",
        help="copy the local store into this database (postgresql://USER:PASSWORD@HOST/DB, "
        "sqlite:///FILE or a store file), in --namespace",
    )
    way.add_argument(
        "--from",
        dest="source",
        metavar="URL",
        help="copy the vault's store from this database into the local store",
    )
