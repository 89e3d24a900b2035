"""Build the vrom MCP server and run it over stdio or streamable HTTP."""

from __future__ import annotations

import os
from typing import Any, TypeVar

from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import RequestHandler
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import EmptyResult, SetLevelRequestParams
from pydantic import BaseModel
from pydantic import ValidationError as ArgumentsError

from vrom import __version__, settings
from vrom.server.http import http_app
from vrom.server.logs import ClientLog
from vrom.server.memory_tools import register_memory_tools
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
- Keep what you learn across sessions with memory_remember; look it up with memory_recall."""

ParamsT = TypeVar("ParamsT", bound=BaseModel)


class VromMCPServer(MCPServer):
    """The SDK's server, with arguments a schema rejects reported in one line a model can use,
    and protocol methods the SDK's high-level server leaves out (`add_request_handler`)."""

    def add_request_handler(
        self, method: str, params_type: type[ParamsT], handler: RequestHandler[Any, ParamsT]
    ) -> None:
        """Serve (or replace the SDK's handler of) a JSON-RPC method; capabilities follow."""
        self._lowlevel_server.add_request_handler(method, params_type, handler)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        """Call a tool; rejected arguments become a `ToolError` naming each field and why."""
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if not isinstance(cause, ArgumentsError):
                raise
            problems = "; ".join(
                f"{'.'.join(str(part) for part in error['loc']) or 'arguments'}: {error['msg']}"
                for error in cause.errors()
            )
            raise ToolError(f"invalid arguments for {name}: {problems}") from cause


def build_server(state: ServerState) -> VromMCPServer:
    """Return an MCP server whose tools and resources serve ``state``'s vault."""
    server = VromMCPServer(
        "vrom", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )
    register_vault_tools(server, state)
    register_memory_tools(server, state)
    serve_logging(server, state.log)
    return server


def serve_logging(server: VromMCPServer, log: ClientLog) -> None:
    """Answer ``logging/setLevel``: the client gets the server's log lines from that level up."""

    async def set_level(
        ctx: ServerRequestContext[Any], params: SetLevelRequestParams
    ) -> EmptyResult:
        log.set_level(ctx.session, params.level)
        return EmptyResult()

    server.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)


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
