"""The streamable HTTP transport, locked down: localhost by default, a bearer token otherwise.

- Binding anything but a loopback address requires a token (``--token`` / ``$VROM_MCP_TOKEN``);
  every request must then carry ``Authorization: Bearer <token>`` (compared in constant time).
- Against DNS rebinding (as the MCP spec asks) the SDK checks each request's ``Host`` against the
  bound name and its ``Origin`` (when a browser sends one) against the same host.
  A wildcard bind (0.0.0.0, ::) cannot know which names reach it, so there the token alone
  guards: a rebinding page cannot know it.

`run_http` prints one line, ``vrom: listening on http://HOST:PORT/mcp``, once the port is bound,
and each refused request (bad JSON, wrong content type, a foreign ``Host``, a wrong token, ...)
as one line: `RequestLog`.
"""

from __future__ import annotations

import hmac
import json
import logging
import socket
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vrom.errors import ValidationError
from vrom.server.http_limits import (
    CUT,
    AcceptErrors,
    CutRequests,
    HttpLimits,
    bounded_protocol,
    within_descriptors,
)
from vrom.settings import MCP_TOKEN_ENV

LOOPBACK = ("127.0.0.1", "localhost", "::1")
_WILDCARD = ("0.0.0.0", "::", "")


PATH = "/mcp"


def http_app(
    server: MCPServer, host: str, token: str | None, log: Callable[[str], None] | None = None
) -> ASGIApp:
    """Return the ASGI app serving ``server`` at ``/mcp``, with the checks described above;
    with ``log``, each refused request is logged there in one line."""
    if host not in LOOPBACK and not token:
        raise ValidationError(
            f"serving MCP over HTTP on {host!r} (not this machine only) needs a bearer token: "
            f"pass --token or set ${MCP_TOKEN_ENV}",
            code="token_required",
        )
    if token is not None and len(token) < 16:
        raise ValidationError("the bearer token must be at least 16 characters", code="weak_token")
    if host in _WILDCARD:
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    else:
        names = {host, *LOOPBACK} if host in LOOPBACK else {host}
        hosts = [f"[{name}]" if ":" in name else name for name in names]
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[pattern for h in hosts for pattern in (h, f"{h}:*")],
            allowed_origins=[
                pattern
                for h in hosts
                for scheme in ("http", "https")
                for pattern in (f"{scheme}://{h}", f"{scheme}://{h}:*")
            ],
        )
    app: ASGIApp = server.streamable_http_app(
        streamable_http_path=PATH, transport_security=security, host=host
    )
    if token is not None:
        app = BearerToken(app, token)
    return app if log is None else RequestLog(app, log)


def run_http(
    app: ASGIApp,
    host: str,
    port: int,
    log: Callable[[str], None],
    limits: HttpLimits | None = None,
) -> None:
    """Serve ``app`` on ``host:port`` (0: any free port) until the process is stopped, within
    ``limits`` (`vrom.server.http_limits`; None: the defaults); log one line with the URL once
    the port is bound, and nothing else of uvicorn's but its problems."""
    import uvicorn  # only HTTP mode needs it

    limits = within_descriptors(limits or HttpLimits())
    logging.getLogger("asyncio").addFilter(AcceptErrors())
    logging.getLogger("mcp.server.streamable_http").addFilter(CutRequests())

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:  # bound: say where (with the port the system chose for 0)
                bound = self.servers[0].sockets[0].getsockname()[1] if self.servers else port
                name = f"[{host}]" if ":" in host else host
                log(f"vrom: listening on http://{name}:{bound}{PATH}")

    # log_config=None: uvicorn's loggers go through the process's logging setup (one line each)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        log_config=None,
        access_log=False,
        http=bounded_protocol(limits, log),
        backlog=limits.backlog,
    )
    Server(config).run()


class RequestLog:
    """ASGI middleware: log each HTTP request the server refuses (status 400 and up) in one
    line, with the reason the response gives (its JSON-RPC or JSON error message)."""

    MAX_BODY = 2048
    """How much of a refusal's body is read for its reason."""

    def __init__(self, app: ASGIApp, log: Callable[[str], None]) -> None:
        self._app = app
        self._log = log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        status = 0
        body = b""

        async def watch(message: Message) -> None:
            nonlocal status, body
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif message["type"] == "http.response.body" and status >= 400:
                body = (body + message.get("body", b""))[: self.MAX_BODY]
                if not message.get("more_body", False):
                    self._refused(scope, status, body)
            await send(message)

        await self._app(scope, receive, watch)

    def _refused(self, scope: Scope, status: int, body: bytes) -> None:
        if scope.get(CUT):  # its connection was cut, and that was logged
            return
        client = scope.get("client")
        who = f" from {client[0]}" if client else ""
        self._log(
            f"vrom: warning: refused {scope.get('method', '?')} {scope.get('path', '?')}{who}: "
            f"{status} {_reason(body)}".rstrip()
        )


def _reason(body: bytes) -> str:
    """Return a refusal's reason from its body: the JSON-RPC or JSON error message, else the
    text itself, on one line."""
    text = body.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and "message" in error:
            text = str(error["message"])
        elif isinstance(error, str):
            text = error
    return " ".join(text.split())[:300]


class BearerToken:
    """ASGI middleware: HTTP requests without ``Authorization: Bearer <token>`` get a 401."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan events pass through
            await self._app(scope, receive, send)
            return
        given = dict(scope.get("headers") or ()).get(b"authorization", b"")
        if hmac.compare_digest(given, self._expected):
            await self._app(scope, receive, send)
            return
        body = json.dumps({"error": "missing or wrong bearer token"}).encode()
        headers: list[Any] = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", b'Bearer realm="vrom"'),
        ]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": body})
