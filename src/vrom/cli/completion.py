"""``vrom completion bash|zsh|fish``: print a shell completion script for ``vrom``.

The script is generated from the CLI's own parser by shtab (imported only when a script is asked
for), so it completes every command, option and choice the parser has and cannot drift from it.
Folder and file arguments complete as paths.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from typing import TextIO

SHELLS = ("bash", "zsh", "fish")
HOW_TO_INSTALL = """\
install it (then open a new shell):
  bash:  vrom completion bash > ~/.local/share/bash-completion/completions/vrom
         (or add  eval "$(vrom completion bash)"  to ~/.bashrc)
  zsh:   vrom completion zsh > "${fpath[1]}/_vrom"    (any folder on $fpath)
  fish:  vrom completion fish > ~/.config/fish/completions/vrom.fish
"""
FOLDERS = {"path", "dataset", "pack_dir", "registry_dir", "vault", "state_dir"}
"""Arguments (by dest) that name a folder on disk; ``--path`` (a prefix inside the vault) is not
one of them, so only the positional ``path`` of ``vrom index`` completes as a folder."""
FILES = {"db", "config", "source"}
"""Arguments (by dest) that name a file (or a folder, as ``pack build``'s source may)."""

BuildParser = Callable[[], argparse.ArgumentParser]


def add_completion_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], build_parser: BuildParser
) -> None:
    """Add ``completion`` to the CLI's subcommands; its script completes ``build_parser()``."""
    help_text = "Print a shell completion script for vrom: bash, zsh or fish."
    sub = commands.add_parser(
        "completion",
        help=help_text,
        description=help_text,
        epilog=HOW_TO_INSTALL,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub.add_argument("shell", choices=SHELLS, help="the shell to complete in")

    def handler(args: argparse.Namespace, out: TextIO) -> int:
        out.write(completion_script(build_parser(), args.shell))
        return 0

    sub.set_defaults(handler=handler)


def completion_script(parser: argparse.ArgumentParser, shell: str) -> str:
    """Return the ``shell`` script that completes ``parser``'s commands, options and paths."""
    import shtab  # only a user installing completion needs it

    for action in _actions(parser):
        positional = not action.option_strings
        if action.dest in FOLDERS and (positional or action.dest != "path"):
            action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]
        elif action.dest in FILES:
            action.complete = shtab.FILE  # type: ignore[attr-defined]
    return shtab.complete(parser, shell=shell)


def _actions(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    """Yield every argument of ``parser`` and of its subcommands, however deep."""
    for action in parser._actions:
        yield action
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _actions(sub)
