"""The vault commands: ``index``, the searches, ``get-note``, ``related``, ``context``, ``embed``,
``stats``, ``backend-info``, ``vector-info`` (and its alias ``sqlite-vec-info``).

Each parses its arguments, calls `vrom.Vault`, and prints the result as text
(`vrom.cli.vault_format`) or, with ``--json``, as the Python API's shapes.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, TextIO

from vrom.cli.background import embed_in_background
from vrom.cli.filter_option import add_where_option, parse_where_option
from vrom.cli.global_options import GLOBAL_OPTIONS, add_global_options, settings_of
from vrom.cli.output import print_json, styler
from vrom.cli.packs import search_pack
from vrom.cli.progress import command_progress
from vrom.cli.vault_format import (
    format_backend_info,
    format_context,
    format_embedded,
    format_hits,
    format_note,
    format_related,
    format_stats,
    format_summary,
    format_sync,
    format_vector_info,
)
from vrom.cli.vault_options import announce, open_vault, where
from vrom.errors import ValidationError
from vrom.index import ENCODINGS
from vrom.ingest.walk import DEFAULT_MAX_FILE_BYTES
from vrom.results import vector_coverage
from vrom.search.reranking import RERANK_CANDIDATES
from vrom.search.vector import MODES
from vrom.settings import REGISTRY_URL_ENV
from vrom.vault import Vault

WARNINGS_SHOWN = 10


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
        database_url=args.db,
        namespace=args.namespace,
        # index, then sync: into the local store unless --db names another
        local=args.remote_sync is not None and args.db is None,
        settings=settings_of(args),
    )
    embed = not args.background  # with --background, a detached `vrom embed` does it
    with vault:
        if not args.quiet:
            announce(vault)
        with command_progress(args.json or args.quiet) as progress:
            summary = vault.index(
                None if progress is None else progress.notes,
                force=args.force,
                embed_progress=None if progress is None else progress.chunks,
                embed=embed,
            )
        background = (
            embed_in_background(vault, args.embedder, args.vector_encoding, args.state_dir)
            if args.background
            else None
        )
        synced = (
            None
            if args.remote_sync is None
            else vault.sync_to(args.remote_sync, namespace=args.namespace)
        )
    if args.json:
        print_json(summary, out, {**where(vault), **({} if synced is None else {"sync": synced})})
    elif not args.quiet:
        warning_label = styler(sys.stderr)("warning:", "yellow")
        for warning in summary.warnings[:WARNINGS_SHOWN]:
            sys.stderr.write(f"{warning_label} {warning.path}: {warning.reason}\n")
        hidden = len(summary.warnings) - WARNINGS_SHOWN
        if hidden > 0:
            sys.stderr.write(f"{warning_label} … and {hidden} more (see --json)\n")
        out.write(format_summary(summary) + "\n")
        if synced is not None:
            out.write(format_sync(synced) + "\n")
    for note in (summary.not_embedded, background):
        if note and not args.quiet:
            sys.stderr.write(f"vrom: {note}\n")
    return 0


def _embed(vault: Vault, args: argparse.Namespace) -> dict[str, int]:
    """Embed what has no vector, saying how far it has got as ``vrom index`` does (a bar on a
    terminal, else a line every few seconds: what a background run's log holds)."""
    with command_progress(args.json) as progress:
        if progress is not None and not sys.stderr.isatty():
            stats = vault.stats()
            missing = stats.chunks if args.rebuild else stats.chunks - stats.vectors
            sys.stderr.write(f"vrom: embedding {missing:,} chunks of {vault.root}\n")
            sys.stderr.flush()
        embedded = vault.embed(
            rebuild=args.rebuild, progress=None if progress is None else progress.chunks
        )
    return {"embedded": embedded}


def _reader(
    read: Callable[[Vault, argparse.Namespace], Any], show: Callable[[Any, TextIO], None]
) -> Callable[[argparse.Namespace, TextIO], int]:
    """Return a command that opens the vault, reads one result, and prints it (or its JSON)."""

    def handler(args: argparse.Namespace, out: TextIO) -> int:
        with open_vault(args) as vault:
            result = read(vault, args)
        if args.json:
            print_json(result, out, where(vault))
        else:
            show(result, out)
        return 0

    return handler


SQLITE_VEC_NOTE = (
    "vrom does not use sqlite-vec: it keeps vectors in its own store and searches them with its"
    " own index (exact float32, or a usearch HNSW graph on large stores), described here"
)


def _sqlite_vec_info(args: argparse.Namespace, out: TextIO) -> int:
    """Print `vrom vector-info`'s answer with a line (a ``note`` key in JSON) saying vrom does
    not use sqlite-vec, so scripts that asked the old CLI for it keep working."""
    with open_vault(args) as vault:
        info = vault.vector_info()
    if args.json:
        print_json(info, out, {**where(vault), "note": SQLITE_VEC_NOTE})
    else:
        out.write(f"note: {SQLITE_VEC_NOTE}\n")
        format_vector_info(info, out)
    return 0


RERANK = "keyword candidates reranked by meaning, human relevance and text quality"
"""What mode rerank runs, as the CLI says it (help and a note on stderr)."""


def _search_vault(args: argparse.Namespace, out: TextIO) -> int:
    """Search the vault; say on stderr when the search fell back to keyword, and why.

    ``--json`` prints the `SearchReport` (``results``, ``mode``, ``fallback``, ``vectors``,
    ``chunks``) with ``vault`` and ``store``: the shape MCP's ``vault_search`` returns.
    """
    if args.reranker is not None and args.rerank is None:
        raise ValidationError("--reranker names the model --rerank uses: add --rerank")
    reranking: dict[str, Any] = {}  # the model loads only for a search that reranks
    if args.rerank is not None:
        reranking["reranker"] = args.reranker or "default"
    with open_vault(args, **reranking) as vault:
        report = vault.search(
            args.query,
            k=args.k,
            mode=args.mode,
            **_filters(args),
            expand_context=args.expand_context,
            context_window=args.context_window,
            ef_search=args.ef_search,
            per_note=not args.chunks,
            fallback=True,
            rerank=args.rerank or False,
        )
        used = where(vault)
    note = styler(sys.stderr)("note:", "yellow")
    if report.fallback:
        sys.stderr.write(f"{note} searched by keyword: {report.fallback}\n")
    elif report.mode == "rerank":  # hybrid-search's name promises fusion: say what ran
        sys.stderr.write(f"{note} mode rerank: {RERANK} (not fused: --mode hybrid)\n")
    elif report.mode != "keyword" and report.vectors < report.chunks:
        sys.stderr.write(
            f"{note} only {vector_coverage(report.vectors, report.chunks)} chunks have vectors"
            " so far: the rest are found by keyword only\n"
        )
    if report.reranker is not None:
        sys.stderr.write(f"{note} reranked by {report.reranker} in {report.rerank_ms:.1f} ms\n")
    if args.json:  # the report MCP's vault_search sends: hits, mode, fallback, coverage
        print_json(report, out, used)
    else:
        format_hits(report.results, out)
    return 0


def _search(args: argparse.Namespace, out: TextIO) -> int:
    if args.pack is None:
        handler: Callable[[argparse.Namespace, TextIO], int] = args.vault_handler
        return handler(args, out)
    if args.vault or args.db:
        raise ValidationError("--pack searches a pack, not a vault: drop --vault/--db")
    if args.rerank is not None or args.reranker is not None:
        raise ValidationError("--rerank reorders a vault's hits; a pack search does not take it")
    return search_pack(args, out)


def _filters(args: argparse.Namespace) -> dict[str, Any]:
    """Return the ``where``, ``path`` and ``tags`` a search's flags ask for."""
    return {"where": parse_where_option(args.where), "path": args.path, "tags": args.tag or None}


# -- parser ----------------------------------------------------------------------------------


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not positive")
    return value


def add_vault_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the vault commands to the CLI's subcommands."""

    def command(
        name: str,
        handler: Callable[[argparse.Namespace, TextIO], int],
        help_text: str,
        *,
        vault: bool = True,
    ) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(handler=handler, vector_encoding=None)
        add_global_options(
            sub, GLOBAL_OPTIONS if vault else ("json", "db", "namespace", "embedder", "state_dir")
        )
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

    def reranking(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--rerank",
            nargs="?",
            type=_positive_int,
            const=RERANK_CANDIDATES,
            default=None,
            metavar="N",
            help="reorder the first N hits (default: %(const)s) with the --reranker cross-encoder",
        )
        sub.add_argument(
            "--reranker",
            default=None,
            metavar="SPEC",
            help="the cross-encoder --rerank uses: onnx:DIR, a folder with model.onnx and"
            " tokenizer.json (docs/models.md)",
        )

    def filters(sub: argparse.ArgumentParser) -> None:
        add_where_option(sub, "the notes' frontmatter")
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
    sub.add_argument(
        "--background",
        action="store_true",
        help="return once the keyword index is current and embed in a detached process "
        "('vrom stats' shows its progress; searches use vectors as they arrive)",
    )
    encoding_option(sub)
    sub.add_argument(
        "--remote-sync",
        metavar="URL",
        help="index into the vault's local store (or --db), then copy it to this database "
        "(as 'vrom sync --to URL', in --namespace)",
    )
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
            f"Search in mode rerank: {RERANK}, the same as 'vrom search --mode rerank' (each"
            " hit carries fts_score, vector_score, text_quality_score, ranking_runtime); for"
            " keyword and vector scores fused, 'vrom search --mode hybrid'.",
        ),
    ):
        sub = command(name, _search_vault, help_text)
        if mode is None:  # `vrom search --pack ID QUERY` searches a knowledge pack instead
            sub.set_defaults(vault_handler=sub.get_default("handler"), handler=_search)
            sub.add_argument(
                "--pack", metavar="ID", help="search this knowledge pack (pulled if not cached)"
            )
            sub.add_argument(
                "--registry",
                default=None,
                help=f"with --pack: the registry URL or path (default: ${REGISTRY_URL_ENV})",
            )
        sub.add_argument(
            "query", metavar="QUERY", help='words, "exact phrases", -excluded, prefix*'
        )
        sub.add_argument(
            "-k", type=_positive_int, default=10, help="notes (or chunks) to return (default: 10)"
        )
        sub.add_argument(
            "--chunks",
            action="store_true",
            help="list the best chunks, several of one note among them (default: each note "
            "once, with its best chunk)",
        )
        if mode is None:
            sub.add_argument(
                "--mode",
                choices=MODES,
                default=None,
                help="keyword, vector, hybrid (normalised keyword and vector scores fused) or"
                f" rerank ({RERANK}: what hybrid-search runs); default: hybrid when the vault has"
                " vectors (vector with --pack)",
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
        reranking(sub)
        filters(sub)
        expansion(sub)

    sub = command(
        "get-note",
        _reader(lambda v, a: v.get_note(a.note), format_note),
        "Show one note: metadata, links, tags and body.",
    )
    sub.add_argument("note", metavar="PATH_OR_ID", help="note path, name or id")

    sub = command(
        "related",
        _reader(lambda v, a: v.related(a.note, k=a.k), format_related),
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
                mode=a.mode,
                **_filters(a),
                expand_context=a.expand_context,
                context_window=a.context_window,
            ),
            format_context,
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
        _reader(_embed, format_embedded),
        "Embed the chunks that have no vector yet (--rebuild: re-embed all with this model).",
    )
    sub.add_argument(
        "--rebuild", action="store_true", help="drop every vector and re-embed with this model"
    )
    encoding_option(sub)

    command(
        "stats",
        _reader(lambda v, a: v.stats(), format_stats),
        "Show counts and sizes of the vault's store.",
    )
    command(
        "backend-info",
        _reader(lambda v, a: v.backend_info(), format_backend_info),
        "Show the store backend, its schema version, index write mode, vector mode, embedding "
        "model and fingerprint, vector index settings, tokenizers and capabilities.",
    )
    command(
        "vector-info",
        _reader(lambda v, a: v.vector_info(), format_vector_info),
        "Show the vault's vectors: mode, count, dims, dtype, model fingerprint, index "
        "settings and the HNSW graph file's state.",
    )
    command(
        "sqlite-vec-info",
        _sqlite_vec_info,
        "As vector-info, for scripts written for sqlite-vec: vrom searches its own vector "
        "index, not sqlite-vec.",
    )
