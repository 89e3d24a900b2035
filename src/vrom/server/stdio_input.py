"""The stdio transport's input, read a bounded line at a time, and the requests read from it
that still await an answer.

The SDK's stdio transport reads each line whole, however long: a client that never sends a
newline has the server hold all it sends. Here a line past `MAX_MESSAGE_BYTES` is skipped
unread and answered with an error (by the id at its start, when there is one), and fd 0
points at the null device while the server runs, as the SDK's transport does, so a handler or
a child process reading stdin cannot take the protocol's bytes.

A client may write its requests and close stdin at once (a script piping lines in): the SDK's
server cancels whatever is running when its input ends, so `PendingRequests` holds the end of
input back until every request read has been answered.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any, BinaryIO

import anyio
import anyio.to_thread
from mcp.shared._context_streams import ContextSendStream
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_REQUEST,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)

from vrom.server.stdio_output import non_blocking

_LEADING_ID = re.compile(
    rb'\A\s*\{(?:[^{}\[\]"]|"(?:[^"\\]|\\.)*")*?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")'
)
"""The outermost object's ``id`` when it comes before anything nested (clients send it first)."""

_SKIP_BYTES = 1024 * 1024
"""How much of an over-long line is read (and dropped) at a time."""

_READ_BYTES = 64 * 1024
"""How much of a pipe is read at a time (a pipe's whole buffer on Linux)."""


@contextmanager
def claimed_stdin() -> Iterator[LineInput]:
    """Yield the protocol's input (a duplicate of fd 0), with fd 0 itself pointed at the null
    device meanwhile; where descriptors cannot be moved, the process's stdin as it is."""
    try:
        private = os.dup(0)
        null = os.open(os.devnull, os.O_RDONLY)
    except OSError:
        import sys

        yield LineInput(sys.stdin.buffer, pollable=False)
        return
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        with non_blocking(private) as pollable:
            # closefd=False: a worker thread may still be blocked reading it when the server ends
            yield LineInput(os.fdopen(private, "rb", closefd=False), pollable=pollable)
    finally:
        os.dup2(private, 0)


class LineInput:
    """The protocol's input, a bounded line at a time: a pipe or socket read from the event
    loop as bytes arrive, anything else (a file, a terminal) in a worker thread."""

    def __init__(self, stream: BinaryIO, *, pollable: bool) -> None:
        self._stream = stream
        self._pollable = pollable
        self._buffer = bytearray()
        self._scanned = 0  # how much of the buffer holds no newline
        self._ended = False

    async def readline(self, limit: int) -> bytes:
        """Return the next line (with its newline), or its first ``limit`` bytes when it is
        longer; b"" at the end of the input."""
        if not self._pollable:
            line: bytes = await anyio.to_thread.run_sync(
                self._stream.readline, limit, abandon_on_cancel=True
            )
            return line
        while True:
            end = self._buffer.find(b"\n", self._scanned, limit)
            if end >= 0 or len(self._buffer) >= limit or self._ended:
                size = end + 1 if end >= 0 else min(limit, len(self._buffer))
                line = bytes(self._buffer[:size])
                del self._buffer[:size]
                self._scanned = 0
                return line
            self._scanned = len(self._buffer)
            await anyio.wait_readable(self._stream.fileno())
            try:
                read = os.read(self._stream.fileno(), _READ_BYTES)
            except BlockingIOError:  # woken for nothing
                continue
            self._buffer += read
            self._ended = not read


async def read_messages(
    stdin: LineInput,
    max_bytes: int,
    readable: ContextSendStream[SessionMessage | Exception],
    replies: ContextSendStream[SessionMessage],
) -> None:
    """Send each line of ``stdin`` on to ``readable`` as a message, or as the exception its
    parse raised; answer a line longer than ``max_bytes`` on ``replies`` without reading it."""
    async with readable:
        while True:
            line = await stdin.readline(max_bytes + 1)
            if not line:
                return
            if len(line) > max_bytes:
                await replies.send(SessionMessage(too_large_error(line, max_bytes)))
                while line and not line.endswith(b"\n"):  # drop the rest of it
                    line = await stdin.readline(_SKIP_BYTES)
                continue
            text = line.decode("utf-8", "replace")  # as the SDK's transport reads it
            try:
                message = jsonrpc_message_adapter.validate_json(text, by_name=False)
            except Exception as exc:  # what the SDK's transport passes on, for the server
                await readable.send(exc)
                continue
            await readable.send(SessionMessage(message))


def too_large_error(start: bytes, max_bytes: int) -> JSONRPCError:
    """Return the error answering a message longer than ``max_bytes``, which begins ``start``."""
    found = _LEADING_ID.match(start[:4096])
    request_id: Any = None
    if found:
        try:
            request_id = json.loads(found.group(1))
        except ValueError:  # not an id a reply can carry (a lone surrogate...)
            request_id = None
    return JSONRPCError(
        jsonrpc="2.0",
        id=request_id,
        error=ErrorData(
            code=INVALID_REQUEST,
            message=f"the message is longer than the {max_bytes:,} bytes the server reads: "
            "it was skipped unread (send less at a time)",
        ),
    )


class PendingRequests:
    """The client's requests read and not yet answered (or cancelled), and the server's own
    requests to the client not yet answered, as the messages in and out say."""

    def __init__(self) -> None:
        self._read: set[tuple[str, int | str]] = set()
        self._asked: set[tuple[str, int | str]] = set()
        self._changed = anyio.Event()

    def read(self, message: JSONRPCMessage) -> None:
        """Note a message from the client: a request to answer, a cancellation, an answer."""
        if isinstance(message, JSONRPCRequest):
            self._read.add(_key(message.id))
        elif isinstance(message, JSONRPCNotification):
            if message.method == "notifications/cancelled":  # the SDK answers it with nothing
                cancelled = (message.params or {}).get("requestId")
                if isinstance(cancelled, (int, str)):
                    self._settle(self._read, cancelled)
        elif isinstance(message, (JSONRPCResponse, JSONRPCError)) and message.id is not None:
            self._settle(self._asked, message.id)

    def sent(self, message: JSONRPCMessage) -> None:
        """Note a message to the client: an answer settles a request, a request awaits one."""
        if isinstance(message, (JSONRPCResponse, JSONRPCError)) and message.id is not None:
            self._settle(self._read, message.id)
        elif isinstance(message, JSONRPCRequest):
            self._asked.add(_key(message.id))
            self._wake()

    async def answered(self) -> None:
        """Return once every request read is answered, or as soon as the server waits on an
        answer from the client (which cannot come once its input has ended)."""
        while self._read and not self._asked:
            await self._changed.wait()

    def watching(self, replies: ContextSendStream[SessionMessage]) -> _NotedReplies:
        """Return ``replies``, noting each message sent through it."""
        return _NotedReplies(replies, self)

    def _settle(self, pending: set[tuple[str, int | str]], request_id: int | str) -> None:
        pending.discard(_key(request_id))
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()


def _key(request_id: int | str) -> tuple[str, int | str]:
    """A request's id as a set holds it: 1 and "1" are two requests."""
    return type(request_id).__name__, request_id


class _NotedReplies:
    """The stream of messages to the client, telling `PendingRequests` of each one sent."""

    def __init__(self, replies: ContextSendStream[SessionMessage], noted: PendingRequests) -> None:
        self._replies = replies
        self._noted = noted

    async def send(self, item: SessionMessage, /) -> None:
        await self._replies.send(item)
        self._noted.sent(item.message)

    async def aclose(self) -> None:
        await self._replies.aclose()

    async def __aenter__(self) -> _NotedReplies:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None
