"""The ``vrom`` command line: parse arguments, call the SDK, format what comes back.

Every result-producing command takes ``--json`` and prints the same shapes the Python API returns
(`vrom.to_jsonable`). A `VromError` becomes one line on stderr and exit code 1.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from vrom import __version__
from vrom.cli_eval import add_eval_command
from vrom.cli_mcp import add_mcp_command
from vrom.cli_memory import add_memory_command
from vrom.cli_pack import add_pack_commands, search_pack
from vrom.cli_setup import add_setup_commands
from vrom.cli_shared import add_vault_options, print_json
from vrom.errors import ValidationError, VromError
from vrom.index import ENCODINGS
from vrom.ingest.walk import DEFAULT_MAX_FILE_BYTES
from vrom.results import (
    BackendInfo,
    Context,
    Hit,
    IndexSummary,
    Note,
    Related,
    VaultStats,
)
from vrom.search.vector import MODES
from vrom.settings import EMBEDDER_ENV
from vrom.state import STATE_DIR_ENV
from vrom.vault import AUTO, Vault

WARNINGS_SHOWN = 10


def _parse_where(items: Sequence[str], path: str | None, tags: Sequence[str]) -> dict[str, Any]:
    where: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ValidationError(f"--where takes KEY=VALUE, not {item!r}")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        where[key.strip()] = value if isinstance(value, (str, int, float, bool)) else raw
    if path:
        if "path" in where and where["path"] != path:
            raise ValidationError("give the path prefix once: --path or --where path=..., not both")
        where["path"] = path
    if tags:
        given = [where.pop(key) for key in ("tag", "tags") if key in where]
        where["tags"] = [*given, *tags]
    return where


def _open_vault(args: argparse.Namespace) -> Vault:
    options: dict[str, Any] = {"embedder": args.embedder, "vector_encoding": args.vector_encoding}
    if args.db:
        return Vault.open_store(args.db, **options)
    if args.vault:
        return Vault.open(args.vault, args.state_dir, create=False, **options)
    return Vault.open_default(args.state_dir, **options)


# -- formatting ------------------------------------------------------------------------------


def _format_hits(hits: Sequence[Hit], out: TextIO) -> None:
    if not hits:
        out.write("no matches\n")
        return
    for rank, hit in enumerate(hits, start=1):
        where = f" › {hit.heading_path}" if hit.heading_path else ""
        out.write(f"{rank}. {hit.path}{where}  (score {hit.score:.3f})\n")
        out.write(f"   {hit.excerpt}\n")
        out.write(
            f"   chunk {hit.chunk_id} · sha256 {hit.content_hash[:12]} · "
            f"relevance {hit.human_relevance_score:.2f}\n"
        )


def _format_summary(summary: IndexSummary) -> str:
    embedded = f", {summary.embedded:,} chunks embedded" if summary.embedded else ""
    return (
        f"indexed {summary.notes:,} notes, {summary.chunks:,} chunks in "
        f"{summary.seconds:.2f} s: {summary.added:,} added, {summary.changed:,} changed, "
        f"{summary.removed:,} removed, {summary.renamed:,} renamed, "
        f"{summary.unchanged:,} unchanged, {summary.skipped:,} skipped{embedded}"
    )


def _format_note(note: Note, out: TextIO) -> None:
    modified = dt.datetime.fromtimestamp(note.modified_unix, dt.timezone.utc).isoformat(
        timespec="seconds"
    )
    out.write(
        f"{note.title}\n{note.path} · id {note.note_id} · {note.chunk_count} chunks · "
        f"modified {modified} · sha256 {note.content_hash[:12]}\n"
    )
    if note.tags:
        out.write("tags: " + ", ".join(f"#{t}" for t in note.tags) + "\n")
    if note.frontmatter:
        out.write("frontmatter: " + json.dumps(note.frontmatter, ensure_ascii=False) + "\n")
    out.write("\n" + note.body.rstrip() + "\n")


def _format_related(related: Related, out: TextIO) -> None:
    out.write(f"{related.note.title} ({related.note.path})\n")
    out.write(f"\nlinks ({len(related.links)}):\n")
    for link in related.links:
        target = link.resolved_path or "(unresolved)"
        written = link.target + (f"#{link.heading}" if link.heading else "")
        alias = f" ({link.alias})" if link.alias else ""
        out.write(f"  {link.kind}: {written}{alias} → {target}\n")
    out.write(f"\nbacklinks ({len(related.backlinks)}):\n")
    for ref in related.backlinks:
        out.write(f"  {ref.path}\n")
    out.write(f"\nshared tags ({len(related.shared_tags)}):\n")
    for shared in related.shared_tags:
        out.write(f"  {shared.note.path}: " + ", ".join(f"#{t}" for t in shared.tags) + "\n")
    if related.similar:
        out.write(f"\nsimilar in meaning ({len(related.similar)}):\n")
        for similar in related.similar:
            out.write(f"  {similar.note.path} ({similar.score:.3f})\n")


# -- commands --------------------------------------------------------------------------------


def _cmd_index(args: argparse.Namespace, out: TextIO) -> int:
    vault = Vault.open(
        args.path,
        args.state_dir,
        max_file_bytes=args.max_file_size,
        chunk_chars=args.chunk_chars,
        chunk_overlap=args.chunk_overlap,
        embedder=args.embedder,
        vector_encoding=args.vector_encoding,
    )
    with vault:
        if not (args.json or args.quiet) and sys.stderr.isatty():
            from rich.progress import Progress  # the progress bar is only for people at a TTY

            with Progress(transient=True) as bar:
                notes = bar.add_task("indexing", total=None)
                chunks = bar.add_task("embedding", total=None, visible=False)

                def progress(done: int, total: int, path: str) -> None:
                    bar.update(notes, completed=done, total=total)

                def embed_progress(done: int, total: int) -> None:
                    bar.update(chunks, completed=done, total=total, visible=True)

                summary = vault.index(progress, force=args.force, embed_progress=embed_progress)
        else:
            summary = vault.index(force=args.force)
    if args.json:
        print_json(summary, out)
    elif not args.quiet:
        for warning in summary.warnings[:WARNINGS_SHOWN]:
            sys.stderr.write(f"warning: {warning.path}: {warning.reason}\n")
        hidden = len(summary.warnings) - WARNINGS_SHOWN
        if hidden > 0:
            sys.stderr.write(f"warning: … and {hidden} more (see --json)\n")
        out.write(_format_summary(summary) + "\n")
    return 0


def _format_context(context: Context, out: TextIO) -> None:
    out.write((context.text or "no matches") + "\n")


def _format_stats(stats: VaultStats, out: TextIO) -> None:
    last = (
        "never"
        if stats.last_indexed_unix is None
        else dt.datetime.fromtimestamp(stats.last_indexed_unix, dt.timezone.utc).isoformat(
            timespec="seconds"
        )
    )
    out.write(
        f"vault:       {stats.vault_root}\nstore:       {stats.store_path} "
        f"({stats.store_bytes / 1e6:.1f} MB)\nnotes:       {stats.notes:,}\n"
        f"chunks:      {stats.chunks:,}\nlinks:       {stats.links:,} "
        f"({stats.unresolved_links:,} unresolved)\ntags:        {stats.tags:,}\n"
        f"vectors:     {stats.vectors:,} ({stats.embedding_model or 'no model'})\n"
        f"last index:  {last}\n"
    )


def _format_backend_info(info: BackendInfo, out: TextIO) -> None:
    rows = {
        "backend": info.backend,
        "store": info.store_path,
        "schema version": info.schema_version,
        "fts tokenizers": ", ".join(info.fts_tokenizers),
        "capabilities": ", ".join(info.capabilities),
        **info.details,
    }
    for key, value in rows.items():
        out.write(f"{key + ':':<23}{value}\n")


def _format_embedded(result: dict[str, int], out: TextIO) -> None:
    out.write(f"embedded {result['embedded']:,} chunks\n")


def _reader(
    read: Callable[[Vault, argparse.Namespace], Any], show: Callable[[Any, TextIO], None]
) -> Callable[[argparse.Namespace, TextIO], int]:
    """Return a command that opens the vault, reads one result, and prints it (or its JSON)."""

    def handler(args: argparse.Namespace, out: TextIO) -> int:
        with _open_vault(args) as vault:
            result = read(vault, args)
        if args.json:
            print_json(result, out)
        else:
            show(result, out)
        return 0

    return handler


def _search(args: argparse.Namespace, out: TextIO) -> int:
    if args.pack is None:
        handler: Callable[[argparse.Namespace, TextIO], int] = args.vault_handler
        return handler(args, out)
    if args.vault or args.db:
        raise ValidationError("--pack searches a pack, not a vault: drop --vault/--db")
    return search_pack(args, out)


def _where(args: argparse.Namespace) -> dict[str, Any] | None:
    return _parse_where(args.where, args.path, args.tag) or None


# -- parser ----------------------------------------------------------------------------------


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not positive")
    return value


def build_parser() -> argparse.ArgumentParser:
    """Return the ``vrom`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="vrom",
        description="Local-first memory for AI agents: index a Markdown vault, search it with "
        "exact provenance.",
    )
    parser.add_argument("--version", action="version", version=f"vrom {__version__}")
    parser.add_argument(
        "--state-dir",
        default=None,
        help=f"where vault stores live (default: ${STATE_DIR_ENV} or the user data dir)",
    )
    parser.add_argument(
        "--embedder",
        default=AUTO,
        metavar="SPEC",
        help=f"embedding model: default, none (keyword only), fake[:DIMS], onnx:DIR or "
        f"openai:MODEL[@URL] (default: ${EMBEDDER_ENV} or the built-in model)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(
        name: str,
        handler: Callable[[argparse.Namespace, TextIO], int],
        help_text: str,
        *,
        vault: bool = True,
    ) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(handler=handler, vector_encoding=None)
        sub.add_argument("--json", action="store_true", help="print JSON instead of text")
        if vault:
            add_vault_options(sub)
        return sub

    def encoding_option(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--vector-encoding",
            choices=ENCODINGS,
            default=None,
            help="store vectors as float32 (default) or int8 with a scale (a quarter the size)",
        )

    def expansion(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--expand-context",
            action="store_true",
            help="join each hit with its neighbouring chunks (see --context-window)",
        )
        sub.add_argument(
            "--context-window",
            type=int,
            default=1,
            metavar="N",
            help="neighbouring chunks a side with --expand-context (default: 1)",
        )

    def filters(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--where",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="keep notes whose frontmatter KEY equals VALUE (repeatable)",
        )
        sub.add_argument("--path", help="keep notes under this folder or path prefix")
        sub.add_argument(
            "--tag",
            action="append",
            default=[],
            help="keep notes with this tag (repeatable; nested tags match)",
        )

    sub = command("index", _cmd_index, "Index (or re-index) a vault folder.", vault=False)
    sub.add_argument("path", metavar="PATH", help="the vault folder")
    sub.add_argument("--force", action="store_true", help="rewrite every note, changed or not")
    encoding_option(sub)
    sub.add_argument("--quiet", action="store_true", help="print nothing but errors")
    sub.add_argument(
        "--max-file-size",
        type=_positive_int,
        default=DEFAULT_MAX_FILE_BYTES,
        metavar="BYTES",
        help="skip larger files (default: %(default)s)",
    )
    sub.add_argument(
        "--chunk-chars",
        type=_positive_int,
        default=1000,
        metavar="N",
        help="target chunk size in characters (default: %(default)s)",
    )
    sub.add_argument(
        "--chunk-overlap",
        type=int,
        default=150,
        metavar="N",
        help="overlap between split chunks in characters (default: %(default)s)",
    )

    for name, mode, help_text in (
        ("search", None, "Search the vault: hybrid when it has vectors, else keyword."),
        ("vector-search", "vector", "Search the vault by meaning (vectors only)."),
        (
            "hybrid-search",
            "rerank",
            "Keyword candidates reranked by meaning, human relevance and text quality "
            "(each hit carries fts_score, vector_score, text_quality_score, ranking_runtime).",
        ),
    ):
        sub = command(
            name,
            _reader(
                lambda v, a: v.search(
                    a.query,
                    k=a.k,
                    where=_where(a),
                    mode=a.mode,
                    expand_context=a.expand_context,
                    context_window=a.context_window,
                    ef_search=a.ef_search,
                ),
                _format_hits,
            ),
            help_text,
        )
        if mode is None:  # `vrom search --pack ID QUERY` searches a knowledge pack instead
            sub.set_defaults(vault_handler=sub.get_default("handler"), handler=_search)
            sub.add_argument(
                "--pack", metavar="ID", help="search this knowledge pack (pulled if not cached)"
            )
            sub.add_argument(
                "--registry",
                default=None,
                help="with --pack: the registry URL or path (default: $VROM_REGISTRY_URL)",
            )
        sub.add_argument(
            "query", metavar="QUERY", help='words, "exact phrases", -excluded, prefix*'
        )
        sub.add_argument("-k", type=_positive_int, default=10, help="hits to return (default: 10)")
        if mode is None:
            sub.add_argument(
                "--mode",
                choices=MODES,
                default=None,
                help="keyword, vector, hybrid (rank fusion) or rerank (as hybrid-search); "
                "default: hybrid when the vault has vectors",
            )
        else:
            sub.set_defaults(mode=mode)
        sub.add_argument(
            "--ef-search",
            type=_positive_int,
            default=None,
            metavar="N",
            help="HNSW search width for this query on large vaults (at least -k)",
        )
        filters(sub)
        expansion(sub)

    sub = command(
        "get-note",
        _reader(lambda v, a: v.get_note(a.note), _format_note),
        "Show one note: metadata, links, tags and body.",
    )
    sub.add_argument("note", metavar="PATH_OR_ID", help="note path, name or id")

    sub = command(
        "related",
        _reader(lambda v, a: v.related(a.note, k=a.k), _format_related),
        "Show a note's links, backlinks and notes sharing its tags.",
    )
    sub.add_argument("note", metavar="PATH_OR_ID", help="note path, name or id")
    sub.add_argument(
        "-k", type=_positive_int, default=20, help="notes sharing tags to show (default: 20)"
    )

    sub = command(
        "context",
        _reader(
            lambda v, a: v.context(
                a.query,
                max_tokens=a.max_tokens,
                k=a.k,
                where=_where(a),
                mode=a.mode,
                expand_context=a.expand_context,
                context_window=a.context_window,
            ),
            _format_context,
        ),
        "Print LLM-ready context for a query, with sources, within a token budget.",
    )
    sub.add_argument("query", metavar="QUERY")
    sub.add_argument(
        "--max-tokens", type=_positive_int, default=2000, help="token budget (default: 2000)"
    )
    sub.add_argument("-k", type=_positive_int, default=20, help="hits to draw from (default: 20)")
    sub.add_argument(
        "--mode", choices=MODES, default=None, help="how to search (default: as vrom search)"
    )
    filters(sub)
    expansion(sub)

    sub = command(
        "embed",
        _reader(lambda v, a: {"embedded": v.embed(rebuild=a.rebuild)}, _format_embedded),
        "Embed the chunks that have no vector yet (--rebuild: re-embed all with this model).",
    )
    sub.add_argument(
        "--rebuild", action="store_true", help="drop every vector and re-embed with this model"
    )
    encoding_option(sub)

    command(
        "stats",
        _reader(lambda v, a: v.stats(), _format_stats),
        "Show counts and sizes of the vault's store.",
    )
    command(
        "backend-info",
        _reader(lambda v, a: v.backend_info(), _format_backend_info),
        "Show the store backend, its schema version, tokenizers and capabilities.",
    )
    add_mcp_command(commands)
    add_eval_command(commands)
    add_memory_command(commands, _open_vault)
    add_pack_commands(commands)
    add_setup_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the CLI; return the exit code (0 ok, 1 error, 2 usage, 130 interrupted)."""
    args = build_parser().parse_args(argv)
    if out is None:
        out = sys.stdout
        if isinstance(out, io.TextIOWrapper):
            # a console that cannot show '›' or CJK text gets '?' instead of a traceback
            out.reconfigure(errors="replace")
    try:
        handler: Callable[[argparse.Namespace, TextIO], int] = args.handler
        return handler(args, out)
    except VromError as exc:
        sys.stderr.write(f"vrom: error: {exc}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("vrom: interrupted\n")
        return 130
    except BrokenPipeError:
        # the reader went away (e.g. `vrom search ... | head`): not an error worth a traceback
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
