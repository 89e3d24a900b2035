"""A real HTTP server on 127.0.0.1 that serves a folder, for pack registry and download tests.

It answers GET and HEAD with ``Content-Length``, honours ``Range: bytes=a-`` / ``bytes=a-b``
(206 with ``Content-Range``, 416 past the end), and has switches a test flips while it runs:

- ``ignore_range``: answer every GET with 200 and the whole file, as some servers do;
- ``fail_status``: answer everything with this status (500: the registry is "offline");
- ``drop_after(path, n)``: the next GET of ``path`` sends ``n`` body bytes, then closes the
  connection (once), so a client sees an interrupted download;
- ``drip(path, interval, limit)``: GETs of ``path`` send one body byte per ``interval`` seconds,
  at most ``limit`` of them, then close the connection: a server too slow to wait for;
- ``stream_forever(path)``: GETs of ``path`` answer 200 with no ``Content-Length`` and send the
  file over and over (up to 64 MiB) until the client hangs up: a body longer than any claim;
- ``requests``: every request received, with its path, ``Range`` header and the status sent.

Use the ``pack_server`` fixture (import ``pack_server_fixture`` into a test module), or
``with PackServer(folder) as server:``.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


@dataclass(frozen=True)
class LoggedRequest:
    """One request the server received and the status it answered with."""

    method: str
    path: str
    range: str | None
    status: int


class PackServer:
    """Serve ``root`` over HTTP on 127.0.0.1 (a free port) from a background thread."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.ignore_range = False
        self.fail_status: int | None = None
        self.requests: list[LoggedRequest] = []
        self._drops: dict[str, int] = {}
        self._drips: dict[str, tuple[float, int]] = {}
        self._forever: set[str] = set()
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.pack_server = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        """The server's base URL, ending in ``/``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/"

    def url_for(self, path: str) -> str:
        """Return the URL of ``path`` (relative to the served folder)."""
        return self.url + path.lstrip("/")

    def drop_after(self, path: str, n_bytes: int) -> None:
        """Make the next GET of ``path`` close the connection after ``n_bytes`` of its body."""
        with self._lock:
            self._drops["/" + path.lstrip("/")] = n_bytes

    def drip(self, path: str, interval: float, limit: int) -> None:
        """Make GETs of ``path`` send a body byte per ``interval`` s, at most ``limit`` bytes."""
        with self._lock:
            self._drips["/" + path.lstrip("/")] = (interval, limit)

    def stream_forever(self, path: str) -> None:
        """Make GETs of ``path`` send its bytes again and again, with no ``Content-Length``."""
        with self._lock:
            self._forever.add("/" + path.lstrip("/"))

    def requests_for(self, path: str) -> list[LoggedRequest]:
        """Return the requests received for ``path``, in order."""
        wanted = "/" + path.lstrip("/")
        with self._lock:
            return [r for r in self.requests if r.path == wanted]

    def clear_log(self) -> None:
        """Forget the requests received so far."""
        with self._lock:
            self.requests.clear()

    def start(self) -> PackServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> PackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _log(self, request: LoggedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _take_drop(self, path: str) -> int | None:
        with self._lock:
            return self._drops.pop(path, None)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    pack_server: PackServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # keep pytest output clean
        pass

    def do_HEAD(self) -> None:
        self._answer(send_body=False)

    def do_GET(self) -> None:
        self._answer(send_body=True)

    def _answer(self, send_body: bool) -> None:
        owner = self.server.pack_server
        path = unquote(urlsplit(self.path).path)
        range_header = self.headers.get("Range")

        def finish(status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
            owner._log(LoggedRequest(self.command, path, range_header, status))
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if send_body:
                self.wfile.write(body)

        if owner.fail_status is not None:
            finish(owner.fail_status, b"server error\n")
            return
        file = (owner.root / path.lstrip("/")).resolve()
        if not file.is_relative_to(owner.root) or not file.is_file():
            finish(404, b"not found\n")
            return
        data = file.read_bytes()
        match = _RANGE.match(range_header or "")
        if match and not owner.ignore_range:
            start = int(match.group(1))
            end = int(match.group(2)) if match.group(2) else len(data) - 1
            if start >= len(data):
                finish(416, headers={"Content-Range": f"bytes */{len(data)}"})
                return
            end = min(end, len(data) - 1)
            status, body = 206, data[start : end + 1]
            headers = {"Content-Range": f"bytes {start}-{end}/{len(data)}"}
        else:
            status, body, headers = 200, data, {"Accept-Ranges": "bytes"}
        with owner._lock:
            drip = owner._drips.get(path)
            forever = path in owner._forever
        if send_body and (drip or forever):
            owner._log(LoggedRequest(self.command, path, range_header, 200))
            self.send_response(200)
            if drip:
                self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            with contextlib.suppress(OSError):  # the client hung up
                if drip:
                    interval, limit = drip
                    for byte in data[:limit]:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(interval)
                else:
                    for _ in range(64 * 1024 * 1024 // max(len(data), 1)):
                        self.wfile.write(data)
            return
        drop = owner._take_drop(path) if send_body else None
        if drop is None:
            finish(status, body, headers)
            return
        # Promise the whole body, send part of it, then hang up: an interrupted download.
        owner._log(LoggedRequest(self.command, path, range_header, status))
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[:drop])
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True


@pytest.fixture(name="pack_server")
def pack_server_fixture(tmp_path: Path) -> Iterator[PackServer]:
    """Yield a running `PackServer` serving ``tmp_path / "served"`` (created empty)."""
    root = tmp_path / "served"
    root.mkdir()
    with PackServer(root) as server:
        yield server
