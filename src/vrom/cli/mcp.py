"""``vrom mcp``: serve a vault to MCP clients (Claude Desktop, Claude Code, Cursor, opencode)."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from vrom.cli.global_options import add_global_options, settings_of
from vrom.errors import ValidationError, VromError
from vrom.settings import DATABASE_URL_ENV, MCP_TOKEN_ENV, VAULT_ENV, VAULT_ROOT_ENV
from vrom.store import is_url


def add_mcp_command(commands: Any) -> None:
    """Add the ``mcp`` command to the CLI's subcommands."""
    help_text = "Serve a vault's notes and the agent's memories over MCP (stdio or HTTP)."
    sub = commands.add_parser("mcp", help=help_text, description=help_text)
    sub.set_defaults(handler=_run_mcp)
    add_global_options(
        sub,
        ("vault", "db", "namespace", "embedder", "state_dir"),
        vault_help=f"the vault (default: the client's MCP roots, ${VAULT_ROOT_ENV} or "
        f"${VAULT_ENV}, the current directory; over HTTP only ${VAULT_ROOT_ENV} or "
        f"${VAULT_ENV}, unless --allow-roots)",
        db_help="the database the vault's store is in: postgresql://USER:PASSWORD@HOST/DB or "
        f"sqlite:///FILE (default: ${DATABASE_URL_ENV}, else the vault's own file in the state "
        "dir)",
    )
    sub.add_argument(
        "--transport", choices=("stdio", "http"), default="stdio", help="default: stdio"
    )
    sub.add_argument(
        "--host",
        default="127.0.0.1",
        help="HTTP: address to bind (default: 127.0.0.1; anything else needs --token)",
    )
    sub.add_argument("--port", type=int, default=8765, help="HTTP: port (default: 8765)")
    sub.add_argument(
        "--token",
        default=None,
        help=f"HTTP: require 'Authorization: Bearer TOKEN' (default: ${MCP_TOKEN_ENV})",
    )
    sub.add_argument(
        "--allow-roots",
        action="store_true",
        help="HTTP: without --vault, let the first client's MCP roots choose the folder served "
        f"(default: only --vault or ${VAULT_ROOT_ENV}; stdio always asks the client)",
    )
    sub.add_argument(
        "--allow-install",
        action="store_true",
        help="HTTP: serve vault_install_opencode, which writes the user's opencode config "
        "(stdio always serves it)",
    )
    sub.add_argument("--no-watch", action="store_true", help="do not re-index notes edited on disk")
    sub.add_argument(
        "--reranker",
        default=None,
        metavar="SPEC",
        help="the cross-encoder vault_search reorders its first hits with when asked to rerank:"
        " onnx:DIR, a folder with model.onnx and tokenizer.json (docs/models.md)",
    )


def _run_mcp(args: argparse.Namespace, out: TextIO) -> int:
    if args.db and not is_url(args.db):
        raise ValidationError(
            f"vrom mcp --db takes a database URL (postgresql://..., sqlite:///FILE), not"
            f" {args.db!r}: the vault is served from its folder (--vault)"
        )
    try:
        from vrom.server.app import serve
    except ImportError as exc:
        raise VromError(
            f"the MCP server needs the mcp extra: pip install 'vrom[mcp]' ({exc})"
        ) from exc
    serve(
        args.vault,
        transport=args.transport,
        host=args.host,
        port=args.port,
        token=args.token,
        state_dir=args.state_dir,
        embedder=args.embedder,
        watch=not args.no_watch,
        database_url=args.db,
        namespace=args.namespace,
        allow_roots=args.allow_roots,
        allow_install=args.allow_install,
        settings=settings_of(args),
        reranker=args.reranker,
    )
    return 0
