"""The SDK's MCP server as vrom needs it: one-line argument errors, JSON-RPC error codes that
say what went wrong (never the SDK's code 0), and a seam to serve the protocol methods the SDK's
high-level server leaves out or answers too simply."""

from __future__ import annotations

import logging
from typing import Any, TypeVar

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import RequestHandler
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS, GetPromptResult, InputRequiredResult
from pydantic import BaseModel
from pydantic import ValidationError as ArgumentsError

ParamsT = TypeVar("ParamsT", bound=BaseModel)

_logger = logging.getLogger("vrom.server")


class VromMCPServer(MCPServer):
    """The SDK's server, with arguments a schema rejects reported in one line a model can use,
    and protocol methods the SDK's high-level server leaves out (`add_request_handler`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.middleware.append(internal_errors)

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

    async def get_prompt(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        context: Context[Any, Any] | None = None,
    ) -> GetPromptResult | InputRequiredResult:
        """Render a prompt; an unknown name, a missing or bad argument is -32602 (invalid
        params) with a message naming what is wrong, any other failure -32603."""
        prompts = {prompt.name: prompt for prompt in await self.list_prompts()}
        prompt = prompts.get(name)
        if prompt is None:
            known = ", ".join(sorted(prompts)) or "none"
            raise MCPError(INVALID_PARAMS, f"unknown prompt {name!r} (the prompts: {known})")
        given = arguments or {}
        missing = [a.name for a in prompt.arguments or () if a.required and a.name not in given]
        if missing:
            raise MCPError(INVALID_PARAMS, f"prompt {name!r} needs {', '.join(missing)}")
        try:
            return await super().get_prompt(name, arguments, context)
        except MCPError:
            raise
        except ValueError as exc:  # the SDK's wrapping of whatever the prompt raised
            bad_arguments = _caused_by(exc, ArgumentsError)
            if bad_arguments is not None:
                raise MCPError(
                    INVALID_PARAMS, f"invalid arguments for prompt {name!r}: {bad_arguments}"
                ) from exc
            raise MCPError(INTERNAL_ERROR, f"prompt {name!r} failed: {exc}") from exc


def _caused_by(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    """Return the first exception of ``kind`` in ``exc``'s chain of causes, or None."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kind):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


async def internal_errors(
    ctx: ServerRequestContext[Any, Any], call_next: CallNext
) -> HandlerResult:
    """Answer a request whose handler failed unexpectedly with -32603 (internal error).

    The SDK answers such a failure with code 0, which JSON-RPC does not define; its own errors
    (`MCPError`, and -32602 for params a schema rejects) pass through unchanged. The failure is
    a bug, so it is logged with its traceback.
    """
    try:
        return await call_next(ctx)
    except (MCPError, ArgumentsError):
        raise
    except Exception as exc:
        if ctx.request_id is None:  # a notification: nothing to answer
            raise
        _logger.exception("%s failed", ctx.method)
        raise MCPError(INTERNAL_ERROR, f"{ctx.method} failed: {type(exc).__name__}: {exc}") from exc
