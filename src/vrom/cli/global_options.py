"""The global options, given before the command or after it: ``--json``, ``--vault``, ``--db``
(alias ``--database-url``), ``--namespace``, ``--embedder`` and ``--state-dir``.

`add_global_options` adds them to the top-level parser with their defaults, and to each command
that uses them without defaults (`argparse.SUPPRESS`): a command sets a value only when it is
given after the command, so that one wins over a value given before it, and one given only before
it is left alone. `global_option_problem` then finds what parsing alone cannot: an option given
before a command that has no use for it (``vrom --json mcp``), or ``--vault`` with ``--db FILE``
(a store file names its vault; a database URL does not, so ``--vault`` goes with it).
`settings_of` gives a command the environment's `Settings`, resolved once a command.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from vrom.settings import (
    DATABASE_URL_ENV,
    EMBEDDER_ENV,
    STATE_DIR_ENV,
    VAULT_ENV,
    VAULT_ROOT_ENV,
    Settings,
)
from vrom.store import is_url
from vrom.vault import AUTO

GLOBAL_OPTIONS = ("json", "vault", "db", "namespace", "embedder", "state_dir")
"""Every global option, by its ``argparse`` dest."""
CHECKED_OPTIONS = ("json", "vault", "db", "namespace")
"""The options a command must use to be given them before it. ``--embedder`` and
``--state-dir`` are accepted before every command, as they always were."""
VAULT_HELP = (
    f"the vault (default: ${VAULT_ENV} or ${VAULT_ROOT_ENV}, the indexed vault at or above the "
    "current directory, else the one indexed last)"
)
TOP_NOTE = (
    "before the command or after it, where it applies; given in both places, the one after the "
    "command wins"
)
COMMAND_NOTE = "also accepted before the command; given in both places, the one here wins"
DB_HELP = (
    "a store file to open (the vault it indexed), or the database the vault's store is in: "
    f"postgresql://USER:PASSWORD@HOST/DB or sqlite:///FILE (default: ${DATABASE_URL_ENV}, else "
    "the vault's own file in the state dir)"
)
NAMESPACE_HELP = "the vault's namespace in a database (default: the vault folder's name)"


def add_global_options(
    parser: argparse.ArgumentParser,
    names: Sequence[str] = GLOBAL_OPTIONS,
    *,
    top: bool = False,
    vault_help: str = VAULT_HELP,
    db_help: str = DB_HELP,
) -> None:
    """Add the global options ``names`` to ``parser``: the top-level parser (``top``), with
    defaults, or a command, without them; ``vault_help`` and ``db_help`` are what ``--vault``
    and ``--db`` mean there."""
    group = parser.add_argument_group("global options", TOP_NOTE if top else COMMAND_NOTE)

    def default(value: object) -> object:
        return value if top else argparse.SUPPRESS

    if "json" in names:
        group.add_argument(
            "--json", action="store_true", default=default(False), help="print JSON, not text"
        )
    if "vault" in names:
        group.add_argument("--vault", metavar="PATH", default=default(None), help=vault_help)
    if "db" in names:
        group.add_argument(
            "--db",
            "--database-url",
            dest="db",
            metavar="FILE|URL",
            default=default(None),
            help=db_help,
        )
    if "namespace" in names:
        group.add_argument("--namespace", metavar="NS", default=default(None), help=NAMESPACE_HELP)
    if "embedder" in names:
        group.add_argument(
            "--embedder",
            default=default(AUTO),
            metavar="SPEC",
            help="embedding model: default, none (keyword only), fake[:DIMS], onnx:DIR or "
            f"openai:MODEL[@URL] (default: ${EMBEDDER_ENV} or the built-in model)",
        )
    if "state_dir" in names:
        group.add_argument(
            "--state-dir",
            metavar="DIR",
            default=default(None),
            help=f"where vault stores live (default: ${STATE_DIR_ENV} or the user data dir)",
        )
    if not top:
        parser.set_defaults(global_options=frozenset(names))


def global_option_problem(args: argparse.Namespace) -> str | None:
    """Return what is wrong with the global options parsed into ``args``, or None.

    A value the command did not define came from before the command: refused when the command
    has no use for it. ``--vault`` and ``--db FILE`` name a vault two ways: refused together
    (``--db URL`` names only where the store is, and goes with ``--vault``).
    """
    accepted: frozenset[str] = getattr(args, "global_options", frozenset())
    for name in CHECKED_OPTIONS:
        if name not in accepted and getattr(args, name, None):
            option = "--" + name.replace("_", "-")
            return f"{option} does not apply to 'vrom {args.command}'"
    database = getattr(args, "db", None)
    if getattr(args, "vault", None) and database and not is_url(database):
        return "give --vault PATH or --db FILE, not both"
    return None


def settings_of(args: argparse.Namespace) -> Settings:
    """Return the `Settings` a command runs with: resolved from the environment when first
    asked, then kept in ``args``, so the command's every part sees one value."""
    resolved = getattr(args, "settings", None)
    if not isinstance(resolved, Settings):
        resolved = Settings.from_environment()
        args.settings = resolved
    return resolved
