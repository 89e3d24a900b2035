"""The SDK's MCP server as vrom needs it: one-line argument errors, JSON-RPC error codes that
say what went wrong (never the SDK's code 0), and a seam to serve the protocol methods the SDK's
high-level server leaves out or answers too simply."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any, TypeVar, cast

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import RequestHandler
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared._context_streams import (
    ContextReceiveStream,
    ContextSendStream,
    create_context_streams,
)
from mcp.shared._stream_protocols import WriteStream
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    GetPromptResult,
    InputRequiredResult,
    JSONRPCError,
)
from pydantic import BaseModel
from pydantic import ValidationError as ArgumentsError

from vrom.bounded_json import top_level
from vrom.errors import ValidationError
from vrom.server.stdio_input import PendingRequests, claimed_stdin, read_messages
from vrom.server.stdio_output import LineOutput, claimed_stdout

ParamsT = TypeVar("ParamsT", bound=BaseModel)

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""The largest JSON-RPC message read from a client (a 16 MiB note in a vault_write is far
past any real one): a longer line over stdio, or body over HTTP, is refused."""

_logger = logging.getLogger("vrom.server")
_SURROGATE = re.compile("[\ud800-\udfff]")


class VromMCPServer(MCPServer):
    """The SDK's server, with arguments a schema rejects reported in one line a model can use,
    and protocol methods the SDK's high-level server leaves out (`add_request_handler`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.middleware.append(internal_errors)
        self.after_first_reply: Callable[[], object] | None = None
        """What to start once the first reply over stdio is written: work that would slow
        the answer to ``initialize`` down (the vault's file check) waits for it."""

    def add_request_handler(
        self, method: str, params_type: type[ParamsT], handler: RequestHandler[Any, ParamsT]
    ) -> None:
        """Serve (or replace the SDK's handler of) a JSON-RPC method; capabilities follow."""
        self._lowlevel_server.add_request_handler(method, params_type, handler)

    async def run_stdio_async(self) -> None:
        """Serve over stdin and stdout, answering a request the SDK cannot read with an error
        (`unreadable_request_error`) where the SDK would drop it and leave the client waiting,
        and a line longer than `MAX_MESSAGE_BYTES` unread (`vrom.server.stdio_input`). When
        the input ends, every request read is answered before the server stops. The lines
        are read and written by the event loop itself (`vrom.server.stdio_output`), and
        `after_first_reply` runs once the first reply (to ``initialize``) is written."""
        with claimed_stdin() as stdin, claimed_stdout() as stdout:
            # the SDK's transport serialises the replies; vrom reads and writes the lines
            async with stdio_server(stdin=cast(Any, _NoInput()), stdout=cast(Any, stdout)) as (
                _,
                out,
            ):
                pending = PendingRequests()
                replies = pending.watching(out)
                lines, received = create_context_streams[SessionMessage | Exception](0)
                readable, inbox = create_context_streams[SessionMessage | Exception](0)
                async with anyio.create_task_group() as group:
                    group.start_soon(read_messages, stdin, MAX_MESSAGE_BYTES, lines, out)
                    group.start_soon(_answer_unreadable, received, readable, replies, pending)
                    group.start_soon(self._after_first_line, stdout)
                    low = self._lowlevel_server
                    await low.run(inbox, replies, low.create_initialization_options())
                    group.cancel_scope.cancel()  # the wait for a first line, if none came

    async def _after_first_line(self, stdout: LineOutput) -> None:
        await stdout.first_line.wait()
        if self.after_first_reply is not None:
            self.after_first_reply()

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


async def _answer_unreadable(
    received: ContextReceiveStream[SessionMessage | Exception],
    readable: ContextSendStream[SessionMessage | Exception],
    replies: WriteStream[SessionMessage],
    pending: PendingRequests,
) -> None:
    """Pass on what the transport read; answer each request it could not read, or log it.
    The input's end is passed on once ``pending`` has every request read answered."""
    async with readable:
        async for item in received:
            if not isinstance(item, Exception):
                pending.read(item.message)
                await readable.send(item)
                continue
            error = unreadable_request_error(item)
            if error is None:
                _logger.warning("ignored a message that is not JSON-RPC: %s", _first_line(item))
            else:
                await replies.send(SessionMessage(error))
        await pending.answered()  # the server cancels what still runs when its input ends


def unreadable_request_error(problem: Exception) -> JSONRPCError | None:
    """Return the error answering a message the SDK could not read, when its id can be found.

    JSON allows a lone surrogate escape (``"\\udcff"``), which the SDK's parser refuses (a
    parse error, -32700); a request of the wrong shape is an invalid request (-32600). Python's
    JSON reader still finds such a request's id, so the client gets an answer instead of
    waiting for one. None when there is no id to answer (a notification, or no JSON at all).
    """
    if not isinstance(problem, ArgumentsError):
        return None
    errors = problem.errors()
    request_id = next((found for found in map(_request_id, errors) if found is not None), None)
    if request_id is None:
        return None
    first = errors[0]
    code = PARSE_ERROR if first["type"] == "json_invalid" else INVALID_REQUEST
    field = ".".join(str(part) for part in first["loc"][1:])  # the first part names a model
    reason = (
        first["msg"]
        if code == PARSE_ERROR
        else f"not a JSON-RPC request: {field or 'message'}: {first['msg']}"
    )
    if "recursion limit" in reason:  # the SDK's reader stops about 200 levels deep
        reason = f"the message nests arrays and objects too deep to read: {reason}"
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=reason))


def _request_id(error: Any) -> int | str | None:
    """Return the id of the request an error of a failed parse names as its input (the whole
    line for JSON the SDK could not read, the message for one of the wrong shape), if a reply
    can carry it: an integer, or text that can be written as UTF-8.

    Only the message's outermost object is read (`top_level`): a line nested too deep for the
    SDK is answered by its id too, where Python's reader would raise `RecursionError`."""
    raw = error.get("input")
    try:
        message = (
            top_level(raw, max_bytes=MAX_MESSAGE_BYTES, what="the message")
            if isinstance(raw, (str, bytes))
            else raw
        )
    except ValidationError:
        return None
    if not isinstance(message, dict) or "method" not in message:  # never answer an answer
        return None
    request_id = message.get("id")
    if isinstance(request_id, str) and not _SURROGATE.search(request_id):
        return request_id
    if isinstance(request_id, int) and not isinstance(request_id, bool):
        return request_id
    return None


class _NoInput:
    """An input with no lines, for the SDK's stdio transport (vrom reads stdin itself)."""

    def __aiter__(self) -> _NoInput:
        return self

    async def __anext__(self) -> str:
        raise StopAsyncIteration


def _first_line(problem: Exception) -> str:
    return str(problem).strip().split("\n", 1)[0][:200]
