"""The stdio transport's input, read a bounded line at a time.

The SDK's stdio transport reads each line whole, however long: a client that never sends a
newline has the server hold all it sends. Here a line past `MAX_MESSAGE_BYTES` is skipped
unread and answered with an error (by the id at its start, when there is one), and fd 0
points at the null device while the server runs, as the SDK's transport does, so a handler or
a child process reading stdin cannot take the protocol's bytes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO

import anyio
import anyio.to_thread
from mcp.shared._context_streams import ContextSendStream
from mcp.shared.message import SessionMessage
from mcp.types import INVALID_REQUEST, ErrorData, JSONRPCError, jsonrpc_message_adapter

_LEADING_ID = re.compile(
    rb'\A\s*\{(?:[^{}\[\]"]|"(?:[^"\\]|\\.)*")*?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")'
)
"""The outermost object's ``id`` when it comes before anything nested (clients send it first)."""

_SKIP_BYTES = 1024 * 1024
"""How much of an over-long line is read (and dropped) at a time."""


@contextmanager
def claimed_stdin() -> Iterator[BinaryIO]:
    """Yield the protocol's input (a duplicate of fd 0), with fd 0 itself pointed at the null
    device meanwhile; where descriptors cannot be moved, the process's stdin as it is."""
    try:
        private = os.dup(0)
        null = os.open(os.devnull, os.O_RDONLY)
    except OSError:
        import sys

        yield sys.stdin.buffer
        return
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        # closefd=False: a worker thread may still be blocked reading it when the server ends
        yield os.fdopen(private, "rb", closefd=False)
    finally:
        os.dup2(private, 0)


async def read_messages(
    stdin: BinaryIO,
    max_bytes: int,
    readable: ContextSendStream[SessionMessage | Exception],
    replies: ContextSendStream[SessionMessage],
) -> None:
    """Send each line of ``stdin`` on to ``readable`` as a message, or as the exception its
    parse raised; answer a line longer than ``max_bytes`` on ``replies`` without reading it."""
    async with readable:
        while True:
            line = await _readline(stdin, max_bytes + 1)
            if not line:
                return
            if len(line) > max_bytes:
                await replies.send(SessionMessage(too_large_error(line, max_bytes)))
                while line and not line.endswith(b"\n"):  # drop the rest of it
                    line = await _readline(stdin, _SKIP_BYTES)
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


async def _readline(stdin: BinaryIO, limit: int) -> bytes:
    line: bytes = await anyio.to_thread.run_sync(stdin.readline, limit, abandon_on_cancel=True)
    return line
