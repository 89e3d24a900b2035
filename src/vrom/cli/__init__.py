"""The ``vrom`` command line: parse arguments, call the SDK, format what comes back.

Every result-producing command takes ``--json`` and prints the same shapes the Python API returns
(`vrom.to_jsonable`). The global options go before or after the command (`global_options`). A
`VromError` becomes one line on stderr and exit code 1; neither it nor a usage error ever shows
a database password (`vrom.errors.hide_passwords`).

This module assembles the parser and runs a command; each group of commands lives in its own
module (`vault_commands`, `formats`, `export`, `mcp`, `evaluate`, `memory`, `packs`, `setup`,
`completion`, `sync`), which adds its subcommands and handlers. Those modules never import this one.
"""

from __future__ import annotations

import argparse
import errno
import io
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn, TextIO, cast

from vrom import __version__
from vrom.cli.completion import add_completion_command
from vrom.cli.evaluate import add_eval_command
from vrom.cli.export import add_export_command
from vrom.cli.formats import add_format_command
from vrom.cli.global_options import add_global_options, global_option_problem
from vrom.cli.mcp import add_mcp_command
from vrom.cli.memory import add_memory_command
from vrom.cli.models import add_models_command
from vrom.cli.output import styler
from vrom.cli.packs import add_pack_commands
from vrom.cli.setup import add_setup_commands
from vrom.cli.sync import add_sync_command
from vrom.cli.vault_commands import add_vault_commands
from vrom.cli.vault_options import open_vault
from vrom.errors import VromError, hide_passwords
from vrom.search.query import check_query

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """Return the ``vrom`` argument parser."""
    parser = _Parser(
        prog="vrom",
        description="Local-first memory for AI agents: index a Markdown vault, search it with "
        "exact provenance.",
        epilog="'vrom COMMAND --help' shows a command's options; 'vrom completion bash|zsh|fish' "
        "prints a shell completion script.",
    )
    parser.add_argument("--version", action="version", version=f"vrom {__version__}")
    add_global_options(parser, top=True)
    # each command's parser is a _Parser too; typed as argparse's, which the modules take
    commands = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        parser.add_subparsers(dest="command", metavar="COMMAND", required=True),
    )
    # the order here is the order `vrom --help` lists the commands in
    add_vault_commands(commands)
    add_format_command(commands)
    add_export_command(commands)
    add_sync_command(commands)
    add_mcp_command(commands)
    add_eval_command(commands)
    add_models_command(commands)
    add_memory_command(commands, open_vault)
    add_pack_commands(commands)
    add_setup_commands(commands)
    add_completion_command(commands, build_parser)
    return parser


class _Parser(argparse.ArgumentParser):
    """The CLI's parser (its commands' too): a usage error that quotes an argument never shows
    a password in it (``--databse-url postgresql://user:secret@...`` mistyped)."""

    def error(self, message: str) -> NoReturn:
        super().error(hide_passwords(message))


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the CLI; return the exit code (0 ok, 1 error, 2 usage, 130 interrupted).

    Output that cannot be written ends the command in one line too: a reader that went away
    (``vrom search ... | head``) quietly with 0, a full disk or a closed stdout as an error.
    """
    if sys.stderr is None:  # started with stderr closed: messages are lost, not a crash
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - the process's
    own_stdout = out is None
    if own_stdout and isinstance(sys.stdout, io.TextIOWrapper):
        # a console that cannot show '›' or CJK text gets '?' instead of a traceback
        sys.stdout.reconfigure(errors="replace")
    output = _Output(sys.stdout if out is None else out)
    try:
        try:
            return _run(argv, cast(TextIO, output))
        finally:
            output.flush()  # now, not at exit: a full disk is reported as any failed write is
    except _OutputFailed as exc:
        if own_stdout:  # what is still buffered goes nowhere at exit, instead of failing again
            _discard_stdout()
        if isinstance(exc.error, BrokenPipeError):
            return 0  # the reader went away (e.g. `vrom search ... | head`): nothing more to say
        _say(f"vrom: {styler(sys.stderr)('error:', 'red')} cannot write the output: {exc}")
        return 1


def _run(argv: Sequence[str] | None, out: TextIO) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    problem = global_option_problem(args)
    if problem:
        parser.error(problem)  # a usage error: exit code 2, as argparse's own
    try:
        if hasattr(args, "query"):  # search, context, memory recall: before a vault or pack opens
            check_query(args.query)
        handler: Callable[[argparse.Namespace, TextIO], int] = args.handler
        return handler(args, out)
    except VromError as exc:
        _say(f"vrom: {styler(sys.stderr)('error:', 'red')} {exc}")
        return 1
    except KeyboardInterrupt:
        _say("vrom: interrupted")
        return 130


class _OutputFailed(Exception):
    """Writing a command's output failed: a closed pipe, a full disk, a closed stdout."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error.strerror or str(error))
        self.error = error


class _Output:
    """The stream a command writes its output to, a failed write raised as `_OutputFailed`
    (so it is told apart from any other OSError a command might meet)."""

    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream  # None: the process started with stdout closed

    def write(self, text: str) -> int:
        try:
            return self._open().write(text)
        except OSError as exc:
            raise _OutputFailed(exc) from exc

    def flush(self) -> None:
        if self._stream is None:
            return
        try:
            self._stream.flush()
        except OSError as exc:
            raise _OutputFailed(exc) from exc
        except ValueError:  # flushed after something closed it: nothing left to write
            pass

    def isatty(self) -> bool:
        return self._stream is not None and self._stream.isatty()

    def _open(self) -> TextIO:
        if self._stream is None:
            raise OSError(errno.EBADF, "standard output is closed")
        return self._stream


def _discard_stdout() -> None:
    """Point stdout at the null device, so the interpreter's last flush cannot fail."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):  # stdout closed or not a file: nothing to do
        pass


def _say(line: str) -> None:
    """Write one line to stderr; a stderr that cannot take it (a full disk) is ignored."""
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
