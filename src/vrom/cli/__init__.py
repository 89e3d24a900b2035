"""The ``vrom`` command line: parse arguments, call the SDK, format what comes back.

Every result-producing command takes ``--json`` and prints the same shapes the Python API returns
(`vrom.to_jsonable`). The global options go before or after the command (`global_options`). A
`VromError` becomes one line on stderr and exit code 1.

This module assembles the parser and runs a command; each group of commands lives in its own
module (`vault_commands`, `mcp`, `evaluate`, `memory`, `packs`, `setup`, `completion`), which
adds its subcommands and handlers. Those modules never import this one.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from vrom import __version__
from vrom.cli.completion import add_completion_command
from vrom.cli.evaluate import add_eval_command
from vrom.cli.global_options import add_global_options, global_option_problem
from vrom.cli.mcp import add_mcp_command
from vrom.cli.memory import add_memory_command
from vrom.cli.output import styler
from vrom.cli.packs import add_pack_commands
from vrom.cli.setup import add_setup_commands
from vrom.cli.vault_commands import add_vault_commands
from vrom.cli.vault_options import open_vault
from vrom.errors import VromError
from vrom.search.query import check_query

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """Return the ``vrom`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="vrom",
        description="Local-first memory for AI agents: index a Markdown vault, search it with "
        "exact provenance.",
        epilog="'vrom COMMAND --help' shows a command's options; 'vrom completion bash|zsh|fish' "
        "prints a shell completion script.",
    )
    parser.add_argument("--version", action="version", version=f"vrom {__version__}")
    add_global_options(parser, top=True)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    # the order here is the order `vrom --help` lists the commands in
    add_vault_commands(commands)
    add_mcp_command(commands)
    add_eval_command(commands)
    add_memory_command(commands, open_vault)
    add_pack_commands(commands)
    add_setup_commands(commands)
    add_completion_command(commands, build_parser)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the CLI; return the exit code (0 ok, 1 error, 2 usage, 130 interrupted)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    problem = global_option_problem(args)
    if problem:
        parser.error(problem)  # a usage error: exit code 2, as argparse's own
    if out is None:
        out = sys.stdout
        if isinstance(out, io.TextIOWrapper):
            # a console that cannot show '›' or CJK text gets '?' instead of a traceback
            out.reconfigure(errors="replace")
    try:
        if hasattr(args, "query"):  # search, context, memory recall: before a vault or pack opens
            check_query(args.query)
        handler: Callable[[argparse.Namespace, TextIO], int] = args.handler
        return handler(args, out)
    except VromError as exc:
        sys.stderr.write(f"vrom: {styler(sys.stderr)('error:', 'red')} {exc}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("vrom: interrupted\n")
        return 130
    except BrokenPipeError:
        # the reader went away (e.g. `vrom search ... | head`): not an error worth a traceback
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
