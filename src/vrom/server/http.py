"""The streamable HTTP transport, locked down: localhost by default, a bearer token otherwise.

- Binding anything but a loopback address requires a token (``--token`` / ``$VROM_MCP_TOKEN``);
  every request must then carry ``Authorization: Bearer <token>`` (compared in constant time).
- Against DNS rebinding (as the MCP spec asks) the SDK checks each request's ``Host`` against the
  bound name and its ``Origin`` (when a browser sends one) against the same host.
  A wildcard bind (0.0.0.0, ::) cannot know which names reach it, so there the token alone
  guards: a rebinding page cannot know it.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from vrom.errors import ValidationError
from vrom.settings import MCP_TOKEN_ENV

LOOPBACK = ("127.0.0.1", "localhost", "::1")
_WILDCARD = ("0.0.0.0", "::", "")


def http_app(server: MCPServer, host: str, token: str | None) -> ASGIApp:
    """Return the ASGI app serving ``server`` at ``/mcp``, with the checks described above."""
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
    app = server.streamable_http_app(transport_security=security, host=host)
    return app if token is None else BearerToken(app, token)


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
