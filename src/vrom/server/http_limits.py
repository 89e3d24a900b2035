"""Bounds on the HTTP transport's connections, so slow or idle clients cannot tie it up.

uvicorn (and the MCP SDK above it) bound none of these: a connection that sends nothing is kept
for ever, a request's headers and body may take as long as the client likes, and the only
connection limit (``limit_concurrency``) is checked once a request's headers have arrived. So
1,500 half-open connections took every file descriptor before any token check, and a body sent
at a byte a second kept its connection. vrom's own HTTP/1.1 protocol (uvicorn's h11 one, with
deadlines) bounds, per `HttpLimits`:

- how many connections are open at once: past the bound, the connection that has waited longest
  for its request's headers is closed (a real client's request is never the one cut; when every
  connection is serving one, the new connection is closed);
- how long a request's headers take (from the connection, or the previous response) and how long
  its body takes: past either, the client gets a ``408`` and the connection is closed;
- how large a body may be (a ``413``), and how large the headers (h11's bound, 16 KiB).

Each kind of cut is logged as one line, at the 1st, 2nd, 4th, 8th... time, so a flood of slow
clients cannot fill stderr.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import h11

from vrom.server.base import MAX_MESSAGE_BYTES

if TYPE_CHECKING:
    from uvicorn.protocols.http.h11_impl import H11Protocol


@dataclass(frozen=True)
class HttpLimits:
    """The bounds `bounded_protocol` keeps (the defaults serve any real MCP client)."""

    connections: int = 100
    """Connections open at once (an MCP client keeps one or two)."""
    header_seconds: float = 10.0
    """From a connection (or its previous response) to its request's complete headers."""
    body_seconds: float = 30.0
    """From a request's headers to the end of its body (16 MiB takes well under a second)."""
    body_bytes: int = MAX_MESSAGE_BYTES
    """A request body's size."""
    backlog: int = 128
    """Connections the system queues before they are accepted: asyncio accepts up to this many
    at once, so the descriptors they take are bounded too (`within_descriptors`)."""


def within_descriptors(limits: HttpLimits) -> HttpLimits:
    """Return ``limits`` fitted to the process's file descriptors, raising its soft limit to
    the hard one first: the connections and a burst of accepted ones take at most half of
    them (the store, the watcher and the log need the rest). Past the limit asyncio logs a
    traceback for each connection it fails to accept, up to 2,048 a time."""
    try:
        import resource
    except ImportError:  # Windows: no descriptor limit to share
        return limits
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (OSError, ValueError):  # refused: fit the limits to the soft one
            pass
    if soft == resource.RLIM_INFINITY:
        return limits
    backlog = max(1, min(limits.backlog, soft // 4))
    connections = max(1, min(limits.connections, soft // 2 - backlog))
    return dataclasses.replace(limits, backlog=backlog, connections=connections)


LINGER_SECONDS = 2.0
"""How long a connection cut while its client sends a body waits for the client to close."""

CUT = "vrom.cut"
"""Set in the ASGI scope of a request whose connection was cut (the cut is logged already)."""


class CutRequests(logging.Filter):
    """A logging filter for the SDK's traceback of a request whose connection was cut while
    it read the body (`starlette.requests.ClientDisconnect`): the cut is logged already."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return type(error).__name__ != "ClientDisconnect"


class AcceptErrors(logging.Filter):
    """A logging filter for asyncio's "socket.accept() out of system resource": one line, no
    traceback, at the 1st, 2nd, 4th... time (asyncio logs one per connection it fails to
    accept, with a traceback), so stderr stays readable whatever a flood of clients does."""

    def __init__(self) -> None:
        super().__init__()
        self._count = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if "socket.accept() out of system resource" not in record.getMessage():
            return True
        self._count += 1
        if self._count & (self._count - 1):
            return False
        record.msg = (
            f"could not accept a connection ({self._count:,} times so far): too many open "
            "files; the server goes on with those it holds"
        )
        record.args = ()
        record.exc_info = None
        return True


def bounded_protocol(limits: HttpLimits, log: Callable[[str], None]) -> type[H11Protocol]:
    """Return uvicorn's h11 protocol class keeping ``limits``, logging its cuts to ``log``."""
    from uvicorn.protocols.http.h11_impl import H11Protocol  # only HTTP mode needs it

    cuts: dict[str, int] = {}

    def cut(reason: str) -> None:
        cuts[reason] = cuts.get(reason, 0) + 1
        count = cuts[reason]
        if count & (count - 1) == 0:  # 1, 2, 4, 8...: a flood logs a few lines
            times = "once" if count == 1 else f"{count:,} times so far"
            log(f"vrom: warning: closed an HTTP connection ({times}): {reason}")

    class BoundedH11(H11Protocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._deadline: asyncio.TimerHandle | None = None
            self._waiting_since = 0.0  # when it began to wait for a request's headers
            self._body_received = 0
            self._lingering = False  # answered and cut, waiting for the client to close

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._wait_for_headers()
            if len(self.connections) > limits.connections:
                waiting = [
                    c
                    for c in self.connections
                    if isinstance(c, BoundedH11) and c is not self and c._idle
                ]
                if waiting:
                    oldest = min(waiting, key=lambda c: c._waiting_since)
                    oldest._close(
                        408,
                        f"{limits.connections} connections were open and a new one came: the "
                        "one waiting longest for its request's headers was closed",
                    )
                else:
                    self._close(
                        503,
                        f"{limits.connections} connections were open, each serving a request: "
                        "a new one was refused",
                    )

        @property
        def _idle(self) -> bool:
            """True while it waits for a request's headers (no request of its is served)."""
            return (
                self.conn.their_state is h11.IDLE
                and (self.cycle is None or self.cycle.response_complete)
                and not self.transport.is_closing()
                and not self._lingering
            )

        def data_received(self, data: bytes) -> None:
            if self._lingering:  # answered and cut: the rest of its body is not read
                return
            before = self.conn.their_state
            super().data_received(data)
            if self.transport.is_closing():
                return
            state = self.conn.their_state
            if state is h11.SEND_BODY:
                if before is not h11.SEND_BODY:  # headers complete: the body's deadline now
                    self._body_received = 0
                    self._arm(limits.body_seconds, "its request's body was not complete in time")
                    if self._declared_length() > limits.body_bytes:
                        self._close(413, "its request's body was larger than allowed")
                        return
                self._body_received += len(data)
                if self._body_received > limits.body_bytes + 64 * 1024:  # chunked framing
                    self._close(413, "its request's body was larger than allowed")
            elif state is not h11.IDLE:  # the request is read: its response is the app's
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self._wait_for_headers()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _wait_for_headers(self) -> None:
            self._waiting_since = self.loop.time()
            self._arm(limits.header_seconds, "its request's headers were not complete in time")

        def _declared_length(self) -> int:
            for name, value in self.headers or ():
                if name == b"content-length" and value.isdigit():
                    return int(value)
            return 0

        def _arm(self, seconds: float, reason: str) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(seconds, self._close, 408, reason)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _close(self, status: int, reason: str) -> None:
            """Answer ``status`` (unless a response has begun) and close the connection."""
            self._disarm()
            if self.transport.is_closing() or self._lingering:
                return
            cut(reason)
            if self.cycle is None or not self.cycle.response_started:
                body = f"{reason}\n".encode()
                phrase = {408: "Request Timeout", 413: "Content Too Large"}.get(
                    status, "Service Unavailable"
                )
                self.transport.write(
                    f"HTTP/1.1 {status} {phrase}\r\ncontent-type: text/plain; charset=utf-8\r\n"
                    f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
                    + body
                )
            if self.scope is not None:
                self.scope[CUT] = True  # type: ignore[literal-required]  # RequestLog: said
            if self.cycle is not None:
                self.cycle.disconnected = True
                self.cycle.message_event.set()  # the app reading the body hears a disconnect
            if self.conn.their_state is not h11.SEND_BODY or not self.transport.can_write_eof():
                self.transport.close()
                return
            # The client may still be sending its body: closing now would answer that with a
            # reset, which can drop the response before the client reads it. So end the
            # writing side, discard what still comes, and close when the client does (or soon).
            self._lingering = True
            self.transport.write_eof()
            self.loop.call_later(LINGER_SECONDS, self.transport.close)

    return BoundedH11
