"""`vrom mcp --transport http` against clients it did not start: any local user can connect to
127.0.0.1 (no token needed there), so none may choose the folder served, write the user's
opencode config, or tie the server up with slow connections.

Issue 26: item 6 (a client's MCP roots chose the folder served over HTTP), item 8
(``vault_install_opencode`` was served over HTTP), item 11 (half-open and slow connections).
Each test runs a real server in a subprocess and waits on conditions, never on a clock.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import Client
from mcp.types import ListRootsResult, Root

LISTENING = re.compile(r"vrom: listening on http://127\.0\.0\.1:(\d+)/mcp")


class HttpServer:
    """``vrom mcp --transport http --port 0 ARGS`` in a subprocess; its stderr is read in a
    thread (so it never blocks on a full pipe) and kept in ``lines``."""

    def __init__(self, args: list[str], *, cwd: Path, env: dict[str, str]) -> None:
        command = [sys.executable, "-m", "vrom", "mcp", "--transport", "http", "--port", "0"]
        self.process = subprocess.Popen(
            [*command, "--no-watch", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.until(lambda: self.port is not None or self.process.poll() is not None)

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def until(self, condition: Callable[[], bool], timeout: float = 120.0) -> None:
        """Wait for ``condition()`` (the timeout guards against hanging; it measures nothing)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not condition():
                assert time.monotonic() < deadline, f"gave up waiting; stderr: {self.lines}"
                self._changed.wait(0.1)

    @property
    def port(self) -> int | None:
        found = (LISTENING.search(line) for line in list(self.lines))
        return next((int(match.group(1)) for match in found if match), None)

    @property
    def url(self) -> str:
        assert self.port is not None, f"not listening: {self.lines}"
        return f"http://127.0.0.1:{self.port}/mcp"

    def stop(self) -> str:
        """Stop the server; return its stderr."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(timeout=30)  # to the end of its stderr
        return "\n".join(self.lines)


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        key: value for key, value in os.environ.items() if key not in ("VAULT_ROOT", "VROM_VAULT")
    }
    return {**env, "VROM_STATE_DIR": str(tmp_path / "state"), "VROM_EMBEDDER": "none", **extra}


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    """A vault, and another folder of the same user's holding a private note."""
    vault, other = tmp_path / "vault", tmp_path / "private"
    vault.mkdir()
    other.mkdir()
    (vault / "a.md").write_text("# A\n\nThe served note.\n", encoding="utf-8")
    (other / "secret.md").write_text("# Secret\n\ntoken-0123456789\n", encoding="utf-8")
    return vault, other


def _with_roots(folder: Path) -> Callable[[Any], Any]:
    async def roots(_context: Any) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=folder.as_uri(), name="mine")])

    return roots


def test_issue26_item6_http_without_vault_serves_no_folder_a_client_names(
    folders: tuple[Path, Path], tmp_path: Path
) -> None:
    vault, other = folders
    nothing = HttpServer([], cwd=vault, env=_env(tmp_path))
    assert nothing.process.wait(timeout=60) == 1, "no folder named: it refuses to start"
    refusal = nothing.stop()
    assert "no vault to serve" in refusal and "--vault FOLDER" in refusal
    assert "--allow-roots" in refusal and "Traceback" not in refusal

    server = HttpServer([], cwd=tmp_path, env=_env(tmp_path, VAULT_ROOT=str(vault)))
    replies: dict[str, Any] = {}

    async def session() -> None:
        async with Client(server.url, mode="legacy", list_roots_callback=_with_roots(other)) as c:
            replies["read"] = await c.call_tool("vault_read", {"path": "secret.md"})
            replies["write"] = await c.call_tool("vault_write", {"path": "x.md", "content": "x"})
            replies["stats"] = await c.call_tool("vault_stats", {})

    try:
        asyncio.run(session())
    finally:
        stderr = server.stop()
    assert replies["read"].is_error, "the private folder's note is not served"
    assert "token-0123456789" not in replies["read"].content[0].text
    assert replies["stats"].structured_content["vault_root"] == str(vault.resolve())
    assert not (other / "x.md").exists() and (vault / "x.md").exists()
    assert f"vrom: serving {vault} ($VAULT_ROOT)" in stderr


def test_issue26_item6_allow_roots_lets_the_first_client_choose_over_http(
    folders: tuple[Path, Path], tmp_path: Path
) -> None:
    vault, _ = folders
    server = HttpServer(["--allow-roots"], cwd=tmp_path, env=_env(tmp_path))
    stats: dict[str, Any] = {}

    async def session() -> None:
        async with Client(server.url, mode="legacy", list_roots_callback=_with_roots(vault)) as c:
            stats.update((await c.call_tool("vault_stats", {})).structured_content or {})

    try:
        asyncio.run(session())
    finally:
        server.stop()
    assert stats["vault_root"] == str(vault.resolve()), "asked for: the client's roots choose"


def test_issue26_item8_install_opencode_is_not_served_over_http_unless_enabled(
    folders: tuple[Path, Path], tmp_path: Path
) -> None:
    vault, _ = folders
    config_home = tmp_path / "config"
    env = _env(tmp_path, XDG_CONFIG_HOME=str(config_home))
    seen: dict[str, Any] = {}

    async def session(url: str, name: str, arguments: dict[str, Any]) -> None:
        async with Client(url, mode="legacy") as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            seen[name] = tools.get("vault_install_opencode")
            seen[f"{name} call"] = await client.call_tool("vault_install_opencode", arguments)

    for name, args, arguments in (
        ("default", [], {"apply": True}),
        ("enabled", ["--allow-install"], {}),  # a dry run: it writes nothing
    ):
        server = HttpServer(["--vault", str(vault), *args], cwd=tmp_path, env=env)
        try:
            asyncio.run(session(server.url, name, arguments))
        finally:
            server.stop()
    assert seen["default"] is None, "not listed over HTTP by default"
    assert seen["default call"].is_error, "nor callable"
    assert not config_home.exists(), "nothing written in the user's config folder"
    assert seen["enabled"] is not None and not seen["enabled call"].is_error
    opencode = config_home / "opencode"
    for written in (opencode / "opencode.json", opencode / "AGENTS.md", opencode / "skills"):
        assert str(written) in seen["enabled"].description, "it says where it writes"
