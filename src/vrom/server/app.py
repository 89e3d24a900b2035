"""Build the vrom MCP server and run it over stdio or streamable HTTP."""

from __future__ import annotations

import logging
import os

from vrom import __version__
from vrom.embed.rerank import RerankerChoice
from vrom.server.base import VromMCPServer
from vrom.server.http import http_app, run_http
from vrom.server.http_limits import HttpLimits
from vrom.server.install_tools import register_install_tools
from vrom.server.logs import serve_logging
from vrom.server.memory_tools import register_memory_tools
from vrom.server.prompts import register_prompts
from vrom.server.resources import register_note_resources
from vrom.server.state import ServerState
from vrom.server.tools import register_vault_tools
from vrom.settings import Settings
from vrom.vault import EmbedderChoice

INSTRUCTIONS = """\
vrom serves a Markdown notes vault (Obsidian-style) and the agent's own memories.
- Find notes with vault_search (meaning + keywords; k notes, each with its best chunk, or
  chunks=true for chunks; cite the path and heading it returns); vault_context gives
  ready-to-quote passages with sources for a question. A hit with fresh=false is from a note
  changed on disk since indexing: read the note again (or vault_reindex) before quoting it.
- Read with vault_read; browse with vault_list, vault_tags, vault_wikilinks, vault_backlinks,
  vault_related.
- Write with vault_write (create / overwrite / append, frontmatter merge) and
  vault_frontmatter; vault_delete moves a note to .trash/. Writes are indexed at once.
- Keep what you learn across sessions with vault_remember; look it up with vault_recall
  (vault_memory_stats counts them; vault_memory_archive retires one).
- vault_install_opencode (when served) sets opencode up for this vault: a dry run unless
  apply=true, and only when the user asks for it.
- Every note is a resource (vault://note/<path>); the prompt summarise(topic) asks for a
  summary of what the notes say about a topic, with the passages to cite."""


def build_server(state: ServerState, *, install_tool: bool = True) -> VromMCPServer:
    """Return an MCP server whose tools and resources serve ``state``'s vault;
    ``install_tool``: with ``vault_install_opencode``, which writes outside the vault."""
    server = VromMCPServer(
        "vrom", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )
    register_vault_tools(server, state)
    register_memory_tools(server, state)
    if install_tool:
        register_install_tools(server, state)
    register_note_resources(server, state)
    register_prompts(server, state)
    serve_logging(server, state.log)
    return server


def serve(
    vault: str | os.PathLike[str] | None,
    *,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    state_dir: str | os.PathLike[str] | None = None,
    embedder: EmbedderChoice = "auto",
    watch: bool = True,
    database_url: str | None = None,
    namespace: str | None = None,
    allow_roots: bool = False,
    allow_install: bool = False,
    http_limits: HttpLimits | None = None,
    settings: Settings | None = None,
    reranker: RerankerChoice = None,
) -> None:
    """Serve a vault over MCP until the client disconnects (stdio) or the process is stopped.

    ``database_url`` and ``namespace`` say where the vault's store is, as for
    `vrom.vault.Vault.open` (None: ``$VROM_DATABASE_URL``, else the state dir).

    Over HTTP any local user can connect (127.0.0.1 needs no token), not only the client that
    started the server, so two things stdio allows need asking for: ``allow_roots`` lets the
    first client's MCP roots choose the vault when ``vault`` is None (else ``$VAULT_ROOT``
    must name it), and ``allow_install`` serves ``vault_install_opencode``, which writes the
    user's opencode config. ``http_limits`` bounds HTTP connections (None: `HttpLimits`'s
    defaults). ``settings``: what the environment configures (`vrom.settings.Settings`),
    resolved now when not given; the arguments beat it. ``reranker``: the cross-encoder
    ``vault_search`` reorders with when asked to ``rerank`` (`vrom.search.reranking`).
    """
    config = Settings.from_environment() if settings is None else settings
    token = token or config.mcp_token
    _log_in_lines()
    stdio = transport != "http"
    state = ServerState(
        vault,
        state_dir=state_dir,
        embedder=embedder,
        watch=watch,
        database_url=database_url,
        namespace=namespace,
        roots=stdio or allow_roots,
        settings=config,
        reranker=reranker,
    )
    server = build_server(state, install_tool=stdio or allow_install)
    stderr = state.log.stderr
    app = http_app(server, host, token, stderr) if transport == "http" else None  # checks first
    try:
        if app is None:
            # checking the vault's files takes the CPU the answer to initialize needs: it
            # starts once that is written; the tool list is answered meanwhile
            server.after_first_reply = state.open_in_background
            server.run("stdio")
        else:
            state.open_in_background()  # initialize and the tool list are answered meanwhile
            run_http(app, host, port, stderr, http_limits)
    finally:
        state.close()


class _OneLine(logging.Formatter):
    """``vrom: warning: message (logger)``: the libraries' log records in vrom's form."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"vrom: {record.levelname.lower()}: {record.getMessage()} ({record.name})"
        if record.exc_info:  # a bug: its traceback is worth the lines
            line += "\n" + self.formatException(record.exc_info)
        return line


def _log_in_lines() -> None:
    """Send the MCP SDK's and uvicorn's log records to stderr one line each, warnings and up
    (the SDK would set up multi-line, boxed output), minus the refusals `RequestLog` reports."""
    handler = logging.StreamHandler()
    handler.setFormatter(_OneLine())
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)
    for name in ("mcp.server.transport_security", "mcp.server.streamable_http_manager"):
        logging.getLogger(name).setLevel(logging.ERROR)
