"""The SDK's MCP server as vrom needs it: one-line argument errors, and a seam to serve the
protocol methods the SDK's high-level server leaves out or answers too simply."""

from __future__ import annotations

from typing import Any, TypeVar

from mcp.server.lowlevel.server import RequestHandler
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel
from pydantic import ValidationError as ArgumentsError

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
