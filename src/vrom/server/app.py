"""Build the vrom MCP server and run it over stdio or streamable HTTP."""

from __future__ import annotations

import os

from vrom import __version__, settings
from vrom.server.base import VromMCPServer
from vrom.server.http import http_app
from vrom.server.logs import serve_logging
from vrom.server.memory_tools import register_memory_tools
from vrom.server.prompts import register_prompts
from vrom.server.resources import register_note_resources
from vrom.server.state import ServerState
from vrom.server.tools import register_vault_tools
from vrom.vault import EmbedderChoice

INSTRUCTIONS = """\
vrom serves a Markdown notes vault (Obsidian-style) and the agent's own memories.
- Find notes with vault_search (meaning + keywords; cite the path and heading it returns);
  vault_context gives ready-to-quote passages with sources for a question.
- Read with vault_read; browse with vault_list, vault_tags, vault_wikilinks, vault_backlinks,
  vault_related.
- Write with vault_write (create / overwrite / append, frontmatter merge) and
  vault_frontmatter; vault_delete moves a note to .trash/. Writes are indexed at once.
- Keep what you learn across sessions with memory_remember; look it up with memory_recall.
- Every note is a resource (vault://note/<path>); the prompt summarise(topic) asks for a
  summary of what the notes say about a topic, with the passages to cite."""


def build_server(state: ServerState) -> VromMCPServer:
    """Return an MCP server whose tools and resources serve ``state``'s vault."""
    server = VromMCPServer(
        "vrom", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )
    register_vault_tools(server, state)
    register_memory_tools(server, state)
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
) -> None:
    """Serve a vault over MCP until the client disconnects (stdio) or the process is stopped."""
    token = token or settings.mcp_token()
    state = ServerState(vault, state_dir=state_dir, embedder=embedder, watch=watch)
    server = build_server(state)
    app = http_app(server, host, token) if transport == "http" else None  # checks before indexing
    try:
        state.open_in_background()  # initialize and the tool list are answered meanwhile
        if app is None:
            server.run("stdio")
        else:
            import uvicorn

            uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).run()
    finally:
        state.close()
