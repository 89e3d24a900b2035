"""``vrom install`` and ``vrom selftest``: set up MCP clients, and check that everything works.

`add_setup_commands` adds both to the CLI's subcommands; the work is in `vrom.install` and
`vrom.selftest`, and this module only parses arguments and prints what comes back (or its JSON).
"""

from __future__ import annotations

import argparse
from typing import TextIO

from vrom.cli.global_options import add_global_options, settings_of
from vrom.cli.output import print_json
from vrom.install import CLIENT_TITLES, CLIENTS, DEFAULT_NAME, LAUNCHERS, InstallResult, install
from vrom.selftest import FAIL, OK, SKIP, WARN, Check, run_selftest
from vrom.settings import VAULT_ENV, VAULT_ROOT_ENV

MARKS = {OK: "✓", FAIL: "✗", WARN: "!", SKIP: "–"}
SETUP_OPTIONS = ("json", "vault", "embedder", "state_dir")
"""The global options ``install`` and ``selftest`` take (a vault folder: not ``--db``)."""


# -- install ---------------------------------------------------------------------------------


def _format_install(result: InstallResult, out: TextIO) -> None:
    config = result.files[0]
    title = CLIENT_TITLES[result.client]
    if result.dry_run:
        for change in result.files:
            out.write(change.diff if change.changed else f"{change.path}: unchanged\n")
        out.write(f"dry run: nothing written ({title}, server {result.name!r})\n")
    else:
        if not config.changed:
            out.write(f"{title}: {result.name!r} in {config.path} is already up to date\n")
        else:
            verb = "created" if config.created else "updated"
            backup = f" (backup: {config.backup})" if config.backup else ""
            out.write(f"{title}: {verb} {result.name!r} in {config.path}{backup}\n")
        for change in result.files[1:]:
            state = (
                "unchanged" if not change.changed else "created" if change.created else "updated"
            )
            out.write(f"  {state} {change.path}\n")
    launch = result.entry.get("command")
    if isinstance(launch, list):  # opencode: the whole command line in one list
        command = " ".join(str(part) for part in launch)
    else:
        command = " ".join([str(launch), *(str(a) for a in result.entry.get("args", []))])
    out.write(f"  server: {command}\n")
    for note in result.notes:
        out.write(f"  note: {note}\n")


def _cmd_install(args: argparse.Namespace, out: TextIO) -> int:
    result = install(
        args.client,
        args.vault,
        name=args.name,
        config=args.config,
        dry_run=args.dry_run,
        launcher=args.launcher,
        state_dir=args.state_dir,
        embedder=args.embedder,
        settings=settings_of(args),
    )
    if args.json:
        print_json(result, out)
    else:
        _format_install(result, out)
    return 0


# -- selftest --------------------------------------------------------------------------------


def _format_check(check: Check) -> str:
    line = f"{MARKS.get(check.status, '!')} {check.name}: {check.detail}"
    if check.fix and check.status != OK and check.fix not in check.detail:  # said once
        line += f" — {'tip' if check.status == SKIP else 'fix'}: {check.fix}"
    return line + "\n"


def _cmd_selftest(args: argparse.Namespace, out: TextIO) -> int:
    def show(check: Check) -> None:
        out.write(_format_check(check))
        out.flush()

    report = run_selftest(
        args.vault,
        state_dir=args.state_dir,
        embedder=args.embedder,
        name=args.name,
        progress=None if args.json else show,
        settings=settings_of(args),
    )
    if args.json:
        print_json(report, out)
    else:
        failed = sum(1 for c in report.checks if c.status == FAIL and c.required)
        plural = "check" if failed == 1 else "checks"
        out.write("all required checks passed\n" if report.ok else f"{failed} {plural} failed\n")
    return 0 if report.ok else 1


# -- parser ----------------------------------------------------------------------------------


def add_setup_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``install`` and ``selftest`` to the CLI's subcommands."""
    vault_help = (
        f"the vault folder (default: ${VAULT_ENV} or ${VAULT_ROOT_ENV}, the indexed vault at or "
        "above the current directory, else the one indexed last)"
    )

    help_text = (
        "Add vrom's MCP server for a vault to an MCP client's config "
        "(backed up first; running it again changes nothing)."
    )
    sub = commands.add_parser("install", help=help_text, description=help_text)
    sub.set_defaults(handler=_cmd_install)
    sub.add_argument("client", choices=CLIENTS, help="the MCP client to set up")
    add_global_options(sub, SETUP_OPTIONS, vault_help=vault_help)
    sub.add_argument(
        "--name",
        default=DEFAULT_NAME,
        help="the server's name in the client (default: %(default)s)",
    )
    sub.add_argument(
        "--config",
        metavar="FILE",
        help="write this config file instead of the client's usual one "
        "(e.g. a project's .mcp.json for Claude Code)",
    )
    sub.add_argument(
        "--dry-run", action="store_true", help="print what would change; write nothing"
    )
    sub.add_argument(
        "--launcher",
        choices=LAUNCHERS,
        default="python",
        help="start the server with this Python's absolute path (default; works with the "
        "minimal PATH desktop apps give) or with the vrom console script",
    )

    help_text = "Check Python, vrom, the vault, the model, search, mcp and client configs."
    sub = commands.add_parser("selftest", help=help_text, description=help_text)
    sub.set_defaults(handler=_cmd_selftest)
    add_global_options(sub, SETUP_OPTIONS, vault_help=vault_help)
    sub.add_argument(
        "--name",
        default=DEFAULT_NAME,
        help="the server name to look for in client configs (default: %(default)s)",
    )
