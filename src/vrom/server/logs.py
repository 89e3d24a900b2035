"""The server's log lines: to stderr, and as MCP log notifications to the clients that ask.

Indexing, background embedding and the file watcher log one line at a time (``vrom: ...``,
``vrom: warning: ...``, ``vrom: error: ...``) from their own threads, mostly before any client
has connected. Every line goes to stderr. A client that sends ``logging/setLevel`` also gets the
lines at or above its level as ``notifications/message`` on its connection, from then on: over
stdio the one client, over HTTP each session that asked (on its standalone stream).

A line is handed to each client's event loop and queued there; the thread that logged it never
waits for a client, and a client that stops reading loses its oldest lines, never stalls
indexing. A connection that fails to take a line is dropped.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, get_args

from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.types import (
    EmptyResult,
    LoggingLevel,
    LoggingMessageNotification,
    LoggingMessageNotificationParams,
    SetLevelRequestParams,
)

from vrom.errors import hide_passwords
from vrom.server.base import VromMCPServer

LEVELS: Final[tuple[LoggingLevel, ...]] = get_args(LoggingLevel)
"""The MCP (syslog) levels, least severe first."""

LOGGER = "vrom"
"""The ``logger`` name the notifications carry."""

QUEUED_PER_CLIENT = 1000
"""How many lines wait for a slow client before the oldest are dropped."""

_PREFIXES: Final[tuple[tuple[str, LoggingLevel], ...]] = (
    ("vrom: error: ", "error"),
    ("vrom: warning: ", "warning"),
    ("vrom: ", "info"),
)


@dataclass(eq=False)
class _Client:
    """One connection that asked for log lines, and the lines waiting for it."""

    session: ServerSession
    loop: asyncio.AbstractEventLoop
    level: LoggingLevel
    queued: deque[LoggingMessageNotification] = field(
        default_factory=lambda: deque(maxlen=QUEUED_PER_CLIENT)
    )
    sending: bool = False


class ClientLog:
    """A ``log(line)`` callable for the server's parts: stderr plus the clients that asked."""

    def __init__(self, stderr: Callable[[str], None] | None = None) -> None:
        self.stderr = stderr or _to_stderr
        """Where every line goes (for lines the clients need not hear)."""
        self._lock = threading.Lock()
        # keyed by the connection's initialize params: one entry per connection, however many
        # times it sets its level (each request gets a new ServerSession proxy)
        self._clients: dict[int, _Client] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def __call__(self, line: str) -> None:
        """Write ``line`` to stderr and send it to each client whose level lets it through
        (a database password in it masked, whatever exception it quotes)."""
        line = hide_passwords(line)
        self.stderr(line)
        level, text = level_of(line)
        with self._lock:
            clients = list(self._clients.values())
        for client in clients:
            if LEVELS.index(level) >= LEVELS.index(client.level):
                notification = LoggingMessageNotification(
                    params=LoggingMessageNotificationParams(level=level, logger=LOGGER, data=text)
                )
                try:
                    client.loop.call_soon_threadsafe(self._queue, client, notification)
                except RuntimeError:  # its event loop has closed: the server is ending
                    self._forget(client)

    def set_level(self, session: ServerSession, level: LoggingLevel) -> None:
        """Send the lines at ``level`` and above to ``session``'s connection from now on.

        Call it from the request handler (it notes the running event loop).
        """
        # an entry keeps its connection's params alive, so their id names one connection
        key = id(session.client_params) if session.client_params is not None else id(session)
        with self._lock:
            known = self._clients.get(key)
            if known is not None:
                known.level = level
            else:
                self._clients[key] = _Client(session, asyncio.get_running_loop(), level)

    @property
    def clients(self) -> int:
        """How many connections receive log lines."""
        with self._lock:
            return len(self._clients)

    def _queue(self, client: _Client, notification: LoggingMessageNotification) -> None:
        """Queue a line for ``client`` (on its event loop) and start sending if idle."""
        client.queued.append(notification)
        if not client.sending:
            client.sending = True
            task = client.loop.create_task(self._send(client))
            self._tasks.add(task)  # the loop keeps only a weak reference to a task
            task.add_done_callback(self._tasks.discard)

    async def _send(self, client: _Client) -> None:
        try:
            while client.queued:
                await client.session.send_notification(client.queued.popleft())
        except Exception:  # the connection has gone: stop sending to it
            self._forget(client)
        finally:
            client.sending = False

    def _forget(self, client: _Client) -> None:
        with self._lock:
            for key, known in list(self._clients.items()):
                if known is client:
                    del self._clients[key]


def serve_logging(server: VromMCPServer, log: ClientLog) -> None:
    """Answer ``logging/setLevel``: the client gets the server's log lines from that level up."""

    async def set_level(
        ctx: ServerRequestContext[Any], params: SetLevelRequestParams
    ) -> EmptyResult:
        log.set_level(ctx.session, params.level)
        return EmptyResult()

    server.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)


def level_of(line: str) -> tuple[LoggingLevel, str]:
    """Return a log line's MCP level (from its ``vrom: warning:`` style prefix) and its text."""
    for prefix, level in _PREFIXES:
        if line.startswith(prefix):
            return level, line[len(prefix) :]
    return "info", line


def _to_stderr(line: str) -> None:
    # one write: print() writes the line and its end apart, so two threads logging at once
    # (the HTTP server's "listening on" and the indexing thread's progress) could interleave
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
