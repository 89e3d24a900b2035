"""``vrom memory``: remember, recall, list, show and retire an agent's memories.

The memories live in the vault's store; each action opens the vault the way every other command
does (``--vault``, ``--db`` or the default vault) and prints text, or with ``--json`` the shapes
`vrom.memories.Memories` returns.
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from vrom.cli.filter_option import add_where_option, parse_where_option
from vrom.cli.global_options import add_global_options
from vrom.cli.output import print_json, score_label, styler
from vrom.cli.vault_options import where
from vrom.errors import ValidationError
from vrom.memories import (
    FILTER_STATUSES,
    MEMORY_TYPES,
    Memories,
    Memory,
    MemoryHit,
    MemoryStats,
)
from vrom.vault import Vault

OpenVault = Callable[[argparse.Namespace], Vault]
"""How the CLI opens the vault a command names (``--vault``, ``--db``, or the default)."""
EXCERPT_CHARS = 160


def memories_for(vault: Vault) -> Memories:
    """Return the memories in the vault's store, embedded with the vault's model when needed."""
    return vault.memories


def add_memory_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], open_vault: OpenVault
) -> None:
    """Add ``memory`` and its actions to the CLI's subcommands; they open vaults with open_vault."""
    help_text = "Keep an agent's memories in the vault's store and recall them."
    memory = commands.add_parser(
        "memory",
        help=help_text,
        description=help_text,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = memory.add_subparsers(dest="memory_action", metavar="ACTION", required=True)

    def handler(args: argparse.Namespace, out: TextIO) -> int:
        with open_vault(args) as vault:
            return run_memory(args, memories_for(vault), out, where(vault))

    leaves: list[argparse.ArgumentParser] = []

    def action(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = actions.add_parser(name, help=help_text, description=help_text)
        # vector_encoding: opening a vault reads it; memory vectors are always float32
        sub.set_defaults(handler=handler, vector_encoding=None)
        add_global_options(sub)
        leaves.append(sub)
        return sub

    def filters(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--project", help="only memories of this project")
        sub.add_argument("--type", help="only memories of this type")
        sub.add_argument(
            "--status",
            choices=FILTER_STATUSES,
            default="active",
            help="only memories with this status (default: active)",
        )
        add_where_option(sub, "project, type, status, source, tags, created, updated")

    sub = action("remember", "Store a new memory.")
    sub.add_argument("title", metavar="TITLE", help="one line, up to 200 characters")
    sub.add_argument(
        "content", metavar="CONTENT", help="the memory's text, up to 20,000 characters ('-': stdin)"
    )
    sub.add_argument(
        "--type",
        default="note",
        help=f"{', '.join(MEMORY_TYPES)} or another lower-case word (default: note)",
    )
    sub.add_argument("--project", help="the project it belongs to")
    sub.add_argument("--tag", action="append", default=[], help="a tag (repeatable)")
    sub.add_argument(
        "--related", action="append", default=[], metavar="NOTE", help="a related note (repeatable)"
    )
    sub.add_argument(
        "--source",
        help="where it came from (a URL, a session, a tool); memories from one source are its "
        "turns, each embedded with the two before it",
    )
    sub.add_argument(
        "--timestamp",
        metavar="WHEN",
        help="when it happened, if not now: ISO 8601 (2023-05-08, 2023-05-08T13:56:00Z), "
        "Unix seconds or '8 May, 2023'",
    )

    sub = action("recall", "Find the memories that best match a query.")
    sub.add_argument("query", metavar="QUERY", help='words, "exact phrases", -excluded, prefix*')
    sub.add_argument("-k", type=int, default=5, help="memories to return (default: 5)")
    filters(sub)
    sub.add_argument("--since", metavar="WHEN", help="only memories from this date or time on")
    sub.add_argument("--until", metavar="WHEN", help="only memories up to this date or time")
    sub.add_argument(
        "--mode",
        choices=("hybrid", "keyword", "vector"),
        help="how to match (default: hybrid with an embedder, else keyword)",
    )
    sub.add_argument(
        "--half-life-days",
        type=float,
        metavar="DAYS",
        help="favour recent memories: a score halves every DAYS of a memory's age",
    )

    sub = action("list", "List memories, newest first.")
    sub.add_argument("--limit", type=int, default=50, help="at most this many (default: 50)")
    filters(sub)

    sub = action("get", "Show one memory.")
    sub.add_argument("id", metavar="ID", help="the memory's id (mem_...)")

    sub = action("archive", "Retire a memory: archived, or superseded by another.")
    sub.add_argument("id", metavar="ID", help="the memory's id (mem_...)")
    sub.add_argument(
        "--superseded-by",
        metavar="ID",
        default=None,
        help="the memory that replaces it (marks it superseded instead of archived)",
    )

    action("stats", "Count memories by status, type and project.")
    # every action's options in 'vrom memory --help', so one page shows them all
    memory.epilog = "usage of each action:\n" + "".join(
        # "usage: " becomes two spaces: its wrapped lines move 5 columns left with it
        "  " + leaf.format_usage().removeprefix("usage: ").replace("\n     ", "\n")
        for leaf in leaves
    )


def run_memory(
    args: argparse.Namespace,
    memories: Memories,
    out: TextIO,
    vault_place: Mapping[str, str] | None = None,
) -> int:
    """Run the memory action ``args`` names and print its result; return the exit code.

    ``vault_place`` (`vrom.cli.vault_options.where`) joins an object result's ``--json``.
    """
    result: Any
    show: Callable[[Any, TextIO], None]
    match args.memory_action:
        case "remember":
            content = sys.stdin.read() if args.content == "-" else args.content
            result = memories.remember(
                args.title,
                content,
                type=args.type,
                project=args.project,
                tags=args.tag,
                related=args.related,
                source=args.source,
                timestamp=_when(args.timestamp),
            )
            show = _format_remembered
        case "recall":
            result = memories.recall(
                args.query,
                args.k,
                project=args.project,
                type=args.type,
                status=args.status,
                since=_when(args.since),
                until=_when(args.until),
                mode=args.mode,
                half_life_days=args.half_life_days,
                where=parse_where_option(args.where),
            )
            show = _format_hits
        case "list":
            result = memories.list(
                args.project,
                args.type,
                args.status,
                args.limit,
                where=parse_where_option(args.where),
            )
            show = _format_list
        case "get":
            result = memories.get(args.id)
            show = _format_memory
        case "archive":
            status = "archived" if args.superseded_by is None else "superseded"
            result = memories.archive(args.id, status, args.superseded_by)
            show = _format_archived
        case "stats":
            result = memories.stats()
            show = _format_stats
        case other:
            raise ValidationError(f"unknown memory action {other!r}")
    if args.json:
        print_json(result, out, vault_place)
    else:
        show(result, out)
    return 0


# -- formatting ------------------------------------------------------------------------------


def _label(memory: Memory) -> str:
    project = f" · {memory.project}" if memory.project else ""
    status = "" if memory.status == "active" else f" ({memory.status})"
    return f"[{memory.type}{project}] {memory.title}{status}"


def _format_remembered(memory: Memory, out: TextIO) -> None:
    out.write(f"remembered {memory.id}: {_label(memory)}\n")


def _format_hits(hits: Sequence[MemoryHit], out: TextIO) -> None:
    if not hits:
        out.write("no matching memories\n")
        return
    style = styler(out)
    for rank, hit in enumerate(hits, start=1):
        memory = hit.memory
        score = style(f"({score_label(hit.score_kind, hit.score)})", "cyan")
        out.write(f"{style(f'{rank}. {_label(memory)}', 'bold')}  {score}\n")
        out.write(f"   {textwrap.shorten(memory.content, EXCERPT_CHARS, placeholder=' …')}\n")
        tags = "".join(f" #{tag}" for tag in memory.tags)
        out.write(style(f"   {memory.id} · {memory.timestamp}{tags}", "dim") + "\n")


def _format_list(memories: Sequence[Memory], out: TextIO) -> None:
    if not memories:
        out.write("no memories\n")
    for memory in memories:
        out.write(f"{memory.id}  {memory.timestamp[:10]}  {_label(memory)}\n")


def _format_memory(memory: Memory, out: TextIO) -> None:
    out.write(f"{memory.title}\n{memory.id} · {memory.type} · {memory.status}")
    out.write(f" · {memory.timestamp}\n")
    rows = {
        "project": memory.project,
        "tags": ", ".join(f"#{tag}" for tag in memory.tags),
        "related": ", ".join(memory.related),
        "source": memory.source,
        "superseded by": memory.superseded_by,
    }
    for key, value in rows.items():
        if value:
            out.write(f"{key}: {value}\n")
    out.write("\n" + memory.content.rstrip() + "\n")


def _format_archived(memory: Memory, out: TextIO) -> None:
    if memory.superseded_by:
        out.write(f"{memory.id} is superseded by {memory.superseded_by}\n")
    else:
        out.write(f"{memory.id} is archived\n")


def _format_stats(stats: MemoryStats, out: TextIO) -> None:
    out.write(f"memories:    {stats.total:,} ({stats.embedded:,} embedded)\n")
    for label, counts in (
        ("by status", stats.by_status),
        ("by type", stats.by_type),
        ("by project", stats.by_project),
    ):
        parts = ", ".join(f"{name} {count:,}" for name, count in counts.items())
        out.write(f"{label + ':':<13}{parts or '-'}\n")


def _when(text: str | None) -> str | float | None:
    """Return a command line's date or time: Unix seconds as a number, anything else as is
    (four digits are a year, not seconds after 1970)."""
    if text is None or re.fullmatch(r"\s*\d{4}\s*", text):
        return text
    try:
        return float(text)
    except ValueError:
        return text
