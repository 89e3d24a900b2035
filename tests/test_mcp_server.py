"""The MCP server's tools, through the official SDK's client (in memory, over stdio, over HTTP)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters

from vrom.server.app import build_server
from vrom.server.state import ServerState

NOTES: dict[str, str | bytes] = {
    "Projects/Atlas.md": "---\nstatus: active\ntags: [project]\n---\n# Atlas\n\n"
    "Atlas maps every office network switch. See [[Beacon]].\n",
    "Projects/Beacon.md": "# Beacon\n\nBeacon sends alerts when a switch fails. #project/alerts\n",
    "Journal/2024-05-01.md": "# Monday\n\nTalked about [[Atlas]] and gardening.\n",
    "README.md": "# Readme\n\nThe vault's front page links [[Missing Note]].\n",
}

Session = Callable[[Client], Awaitable[None]]


def _run(state: ServerState, session: Session) -> None:
    server = build_server(state)

    async def main() -> None:
        async with Client(server, mode="legacy") as client:
            await session(client)

    try:
        asyncio.run(main())
    finally:
        state.close()


def _data(result: Any) -> Any:
    """Return a tool reply's data (its structured content; the text is a summary or the same
    data as JSON)."""
    assert not result.is_error, result.content[0].text
    assert result.structured_content is not None
    return result.structured_content


def _error(result: Any) -> str:
    assert result.is_error, result.content[0].text
    text: str = result.content[0].text
    assert "\n" not in text
    return text


@pytest.fixture
def vault_root(write_vault: Callable[[dict[str, str | bytes]], Path]) -> Path:
    return write_vault(NOTES)


@pytest.fixture
def state(vault_root: Path) -> Iterator[ServerState]:
    state = ServerState(vault_root, embedder="fake", watch=False)
    state.open_explicit()
    assert state.embedding is not None
    state.embedding.join(60)  # vectors are embedded in the background: these tests want them all
    yield state
    state.close()


def test_every_tool_is_listed_with_a_schema(state: ServerState) -> None:
    async def session(client: Client) -> None:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) >= {
            "vault_search",
            "vault_context",
            "vault_read",
            "vault_frontmatter",
            "vault_list",
            "vault_wikilinks",
            "vault_backlinks",
            "vault_related",
            "vault_tags",
            "vault_stats",
            "vault_write",
            "vault_delete",
            "vault_reindex",
        }
        search = tools["vault_search"].input_schema
        assert search["required"] == ["query"]
        assert search["properties"]["k"]["maximum"] == 50
        assert tools["vault_search"].annotations.read_only_hint
        assert tools["vault_delete"].annotations.destructive_hint

    _run(state, session)


def test_search_context_and_stats(state: ServerState) -> None:
    async def session(client: Client) -> None:
        hits = _data(await client.call_tool("vault_search", {"query": "network switch", "k": 3}))
        first = hits["results"][0]
        assert first["path"] == "Projects/Atlas.md"
        assert first["content_hash"] and first["heading_path"] == "Atlas"
        keyword = _data(
            await client.call_tool(
                "vault_search", {"query": "switch", "mode": "keyword", "tags": ["project"]}
            )
        )
        assert {h["path"] for h in keyword["results"]} == {
            "Projects/Atlas.md",
            "Projects/Beacon.md",
        }
        context = _data(await client.call_tool("vault_context", {"query": "switch alerts"}))
        assert "Beacon" in context["text"] and context["sources"]
        # the one filter grammar reaches the context tool too: frontmatter, path and tags
        for narrowed in (
            {"where": {"status": "active"}},
            {"path": "Projects/Atlas.md"},
            {"tags": ["project"], "mode": "keyword", "where": {"status": {"$ne": "active"}}},
        ):
            sources = _data(
                await client.call_tool("vault_context", {"query": "switch", **narrowed})
            )["sources"]
            expected = "Projects/Beacon.md" if "tags" in narrowed else "Projects/Atlas.md"
            assert {source["path"] for source in sources} == {expected}, narrowed
        stats = _data(await client.call_tool("vault_stats", {}))
        assert stats["notes"] == 4 and stats["vectors"] > 0

    _run(state, session)


def test_bad_arguments_are_one_line_errors(state: ServerState) -> None:
    async def session(client: Client) -> None:
        assert "k" in _error(await client.call_tool("vault_search", {"query": "x", "k": 0}))
        assert "mode" in _error(
            await client.call_tool("vault_search", {"query": "x", "mode": "psychic"})
        )
        assert "query" in _error(await client.call_tool("vault_search", {}))
        assert "where" in _error(
            await client.call_tool("vault_search", {"query": "x", "where": {"n": {"$bad": 1}}})
        )
        assert "no note" in _error(await client.call_tool("vault_read", {"path": "Nope.md"}))
        # the session still works after errors
        assert _data(await client.call_tool("vault_stats", {}))["notes"] == 4

    _run(state, session)


def test_reading_links_tags_and_folders(state: ServerState) -> None:
    async def session(client: Client) -> None:
        note = _data(await client.call_tool("vault_read", {"path": "Projects/Atlas.md"}))
        assert note["frontmatter"]["status"] == "active" and "Atlas maps" in note["body"]
        assert _data(await client.call_tool("vault_read", {"path": "Atlas"}))["path"] == (
            "Projects/Atlas.md"
        )
        links = _data(await client.call_tool("vault_wikilinks", {"path": "README.md"}))
        assert links["links"][0]["target"] == "Missing Note"
        assert links["links"][0]["resolved_path"] is None
        back = _data(await client.call_tool("vault_backlinks", {"path": "Projects/Atlas.md"}))
        assert {n["path"] for n in back["backlinks"]} == {"Journal/2024-05-01.md"}
        related = _data(await client.call_tool("vault_related", {"path": "Projects/Atlas.md"}))
        assert related["note"]["path"] == "Projects/Atlas.md"
        tags = _data(await client.call_tool("vault_tags", {}))
        assert {t["tag"] for t in tags["tags"]} >= {"project", "project/alerts"}
        tagged = _data(await client.call_tool("vault_tags", {"tag": "project"}))
        assert {n["path"] for n in tagged["notes"]} == {"Projects/Atlas.md", "Projects/Beacon.md"}
        listing = _data(await client.call_tool("vault_list", {"folder": "Projects"}))
        assert {n["path"] for n in listing["notes"]} == {"Projects/Atlas.md", "Projects/Beacon.md"}
        top = _data(await client.call_tool("vault_list", {}))
        assert set(top["folders"]) >= {"Projects", "Journal"}
        fm = _data(await client.call_tool("vault_frontmatter", {"path": "Projects/Atlas.md"}))
        assert fm["frontmatter"]["status"] == "active"

    _run(state, session)


def test_writing_deleting_and_reindexing(state: ServerState, vault_root: Path) -> None:
    async def session(client: Client) -> None:
        written = _data(
            await client.call_tool(
                "vault_write",
                {
                    "path": "Inbox/Zeppelin.md",
                    "content": "# Zeppelin\n\nAirships float over the harbour.",
                    "frontmatter": {"status": "draft"},
                },
            )
        )
        assert written["created"] and written["indexed"]
        hits = _data(await client.call_tool("vault_search", {"query": "airships harbour"}))
        assert hits["results"][0]["path"] == "Inbox/Zeppelin.md", "indexed at once"
        assert "exist" in _error(
            await client.call_tool("vault_write", {"path": "Inbox/Zeppelin.md", "content": "x"})
        )
        _data(
            await client.call_tool(
                "vault_write",
                {"path": "Inbox/Zeppelin.md", "content": "More blimps.", "mode": "append"},
            )
        )
        fm = _data(
            await client.call_tool(
                "vault_frontmatter", {"path": "Inbox/Zeppelin.md", "set": {"status": "done"}}
            )
        )
        assert fm["frontmatter"] == {"status": "done"}
        text = (vault_root / "Inbox" / "Zeppelin.md").read_text()
        assert "Airships float" in text and "More blimps." in text and "status: done" in text
        deleted = _data(await client.call_tool("vault_delete", {"path": "Inbox/Zeppelin.md"}))
        assert deleted["trashed_to"].startswith(".trash/")
        assert not (vault_root / "Inbox" / "Zeppelin.md").exists()
        assert (vault_root / deleted["trashed_to"]).exists()
        hits = _data(await client.call_tool("vault_search", {"query": "airships harbour"}))
        assert all(h["path"] != "Inbox/Zeppelin.md" for h in hits["results"])
        (vault_root / "Outside-the-server.md").write_text("# Quokka\n\nA quokka note.\n")
        summary = _data(await client.call_tool("vault_reindex", {}))
        assert summary["added"] == 1
        assert "outside the vault" in _error(
            await client.call_tool("vault_write", {"path": "../escape.md", "content": "x"})
        )
        assert not (vault_root.parent / "escape.md").exists()

    _run(state, session)


def test_notes_are_resources(state: ServerState) -> None:
    async def session(client: Client) -> None:
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["vault://note/{+path}"]
        read = await client.read_resource("vault://note/Projects/Atlas.md")
        assert "Atlas maps every office" in read.contents[0].text

    _run(state, session)


def test_the_vault_comes_from_the_clients_roots(vault_root: Path) -> None:
    from mcp.types import ListRootsResult, Root

    state = ServerState(None, embedder=None, watch=False)
    server = build_server(state)

    async def roots(_context: Any) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=vault_root.as_uri(), name="notes")])

    async def main() -> None:
        async with Client(server, mode="legacy", list_roots_callback=roots) as client:
            stats = _data(await client.call_tool("vault_stats", {}))
            assert stats["vault_root"] == str(vault_root.resolve())

    try:
        asyncio.run(main())
    finally:
        state.close()


# -- real processes ---------------------------------------------------------------------------


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "VROM_STATE_DIR": str(tmp_path / "state"), "VROM_EMBEDDER": "fake"}


def test_stdio_end_to_end_with_the_sdk_client(vault_root: Path, tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "vrom", "mcp", "--vault", str(vault_root)],
        env=_env(tmp_path),
    )

    async def main() -> None:
        async with Client(params, mode="legacy") as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert "vault_search" in names
            hits = _data(await client.call_tool("vault_search", {"query": "network switch"}))
            assert hits["results"][0]["path"] == "Projects/Atlas.md"

    asyncio.run(main())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _start_http(vault: Path, tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], int]:
    """Start ``vrom mcp --transport http --port 0``; return it and the port its line names."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vrom",
            "mcp",
            "--vault",
            str(vault),
            "--transport",
            "http",
            "--port",
            "0",
            *extra,
        ],
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    for line in process.stderr:  # ends when the server exits
        found = re.fullmatch(r"vrom: listening on http://127\.0\.0\.1:(\d+)/mcp\n", line)
        if found:
            return process, int(found.group(1))
    raise AssertionError(f"server exited without listening: {process.wait(timeout=30)}")


def _stop(process: subprocess.Popen[str]) -> str:
    process.terminate()
    try:
        _, stderr = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        _, stderr = process.communicate()
    return stderr


def test_http_transport_on_localhost(vault_root: Path, tmp_path: Path) -> None:
    import httpx

    process, port = _start_http(vault_root, tmp_path)
    try:

        async def main() -> None:
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                hits = _data(await client.call_tool("vault_search", {"query": "network switch"}))
                assert hits["results"][0]["path"] == "Projects/Atlas.md"

        asyncio.run(main())
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        headers = {"accept": "application/json, text/event-stream"}
        rebinding = httpx.post(
            f"http://127.0.0.1:{port}/mcp",
            json=init,
            headers={**headers, "host": "evil.example:80"},
        )
        assert rebinding.status_code in (400, 421), "a foreign Host header is refused"
        cross_site = httpx.post(
            f"http://127.0.0.1:{port}/mcp",
            json=init,
            headers={**headers, "origin": "https://evil.example"},
        )
        assert cross_site.status_code in (400, 403), "a foreign Origin is refused"
    finally:
        stderr = _stop(process)
    assert "Traceback" not in stderr


def test_http_transport_with_a_token(vault_root: Path, tmp_path: Path) -> None:
    import httpx

    token = "s3cret-token-for-tests-0123456789"
    process, port = _start_http(vault_root, tmp_path, "--token", token)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        for given in (None, "Bearer wrong-token-wrong-token-00", token):
            headers = {"accept": "application/json, text/event-stream"}
            if given is not None:
                headers["authorization"] = given
            refused = httpx.post(url, json={}, headers=headers)
            assert refused.status_code == 401, given
            assert refused.headers["www-authenticate"].startswith("Bearer")

        async def main() -> None:
            auth = httpx.AsyncClient(headers={"authorization": f"Bearer {token}"})
            from mcp.client.streamable_http import streamable_http_client

            async with Client(streamable_http_client(url, http_client=auth)) as client:
                stats = _data(await client.call_tool("vault_stats", {}))
                assert stats["notes"] == 4

        asyncio.run(main())
    finally:
        _stop(process)


def test_http_says_where_it_listens_and_logs_each_refused_request_in_one_line(
    vault_root: Path, tmp_path: Path
) -> None:
    import httpx

    token = "s3cret-token-for-tests-0123456789"
    process, port = _start_http(vault_root, tmp_path, "--token", token)
    url = f"http://127.0.0.1:{port}/mcp"
    good = {
        "authorization": f"Bearer {token}",
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
    }
    refusals = [
        ({**good, "authorization": "Bearer wrong-token-wrong-token-00"}, b"{}", 401),
        (good, b'{"jsonrpc": "2.0", "id": 1, "method": ', 400),  # malformed JSON
        ({**good, "content-type": "text/plain"}, b"{}", 400),
        ({**good, "accept": "text/html"}, b"{}", 406),
        ({**good, "host": "evil.example"}, b"{}", 421),
    ]
    try:
        for headers, body, status in refusals:
            assert httpx.post(url, content=body, headers=headers).status_code == status
    finally:
        stderr = _stop(process)
    lines = stderr.splitlines()
    refused = [line for line in lines if line.startswith("vrom: warning: refused POST /mcp")]
    assert [int(line.split(": ")[3].split()[0]) for line in refused] == [401, 400, 400, 406, 421]
    assert "missing or wrong bearer token" in refused[0] and "Parse error" in refused[1]
    assert all(line.startswith("vrom: ") for line in lines), stderr
    assert "Traceback" not in stderr and "Uvicorn" not in stderr
    assert not any("listening on" in line for line in lines), "said once, at the start"


def test_http_on_another_address_needs_a_token(vault_root: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "vrom",
            "mcp",
            "--vault",
            str(vault_root),
            "--transport",
            "http",
            "--host",
            "0.0.0.0",
            "--port",
            str(_free_port()),
        ],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "needs a bearer token" in result.stderr and "Traceback" not in result.stderr


def test_an_edit_on_disk_is_searchable_within_two_seconds(vault_root: Path) -> None:
    state = ServerState(vault_root, embedder="fake", watch=True)
    vault = state.open_explicit()
    assert vault is not None and state.watcher is not None
    try:
        time.sleep(0.3)  # let the watcher start
        (vault_root / "Projects" / "Atlas.md").write_text(
            "# Atlas\n\nAtlas now tracks narwhal migrations.\n"
        )
        started = time.monotonic()
        found = False
        while time.monotonic() - started < 2.0:
            with state.lock:
                hits = vault.search("narwhal migrations", k=1, mode="keyword")
            if hits and hits[0].path == "Projects/Atlas.md":
                found = True
                break
            time.sleep(0.05)
        elapsed = time.monotonic() - started
        assert found, f"not searchable after {elapsed:.2f} s"
    finally:
        state.close()


def test_memory_tools(state: ServerState) -> None:
    async def session(client: Client) -> None:
        first = _data(
            await client.call_tool(
                "vault_remember",
                {
                    "title": "Deploy day",
                    "content": "We deploy the web app on Tuesdays after stand-up.",
                    "type": "decision",
                    "project": "web",
                    "tags": ["ops"],
                    "related": ["Projects/Atlas.md"],
                    "source": "standup 2024-05-01",
                },
            )
        )
        assert first["id"].startswith("mem_") and first["status"] == "active"
        second = _data(
            await client.call_tool(
                "vault_remember",
                {
                    "title": "Deploy day moved",
                    "content": "Deploys move to Thursdays.",
                    "project": "web",
                    "timestamp": "2024-06-03",
                },
            )
        )
        assert second["timestamp"].startswith("2024-06-03T00:00:00")
        recalled = _data(
            await client.call_tool("vault_recall", {"query": "when do we deploy", "project": "web"})
        )
        assert {hit["memory"]["id"] for hit in recalled["results"]} == {first["id"], second["id"]}
        spans = [
            ({"until": "2024-06-30"}, {second["id"]}),
            ({"since": "2024-07-01"}, {first["id"]}),
            ({"since": "2024-06-01", "until": "2024-06-03"}, {second["id"]}),
        ]
        for span, expected in spans:
            within = _data(await client.call_tool("vault_recall", {"query": "deploy", **span}))
            assert {hit["memory"]["id"] for hit in within["results"]} == expected, span
        recent = _data(
            await client.call_tool("vault_recall", {"query": "deploy", "half_life_days": 30})
        )
        assert recent["results"][0]["memory"]["id"] == first["id"], "stored now: the recent one"
        by_words = _data(
            await client.call_tool("vault_recall", {"query": "Thursdays", "mode": "keyword"})
        )
        assert [hit["score_kind"] for hit in by_words["results"]] == ["bm25"]
        assert [hit["memory"]["id"] for hit in by_words["results"]] == [second["id"]]
        this_year = _data(
            await client.call_tool("vault_recall", {"query": "deploy", "since": "2024"})
        )
        assert {hit["memory"]["id"] for hit in this_year["results"]} == {first["id"], second["id"]}
        assert "since must be a date" in _error(
            await client.call_tool("vault_recall", {"query": "deploy", "since": "someday"})
        )
        archived = _data(
            await client.call_tool(
                "vault_memory_archive",
                {"id": first["id"], "status": "superseded", "superseded_by": second["id"]},
            )
        )
        assert archived["status"] == "superseded" and archived["superseded_by"] == second["id"]
        active = _data(await client.call_tool("vault_recall", {"query": "deploy Tuesdays"}))
        assert [hit["memory"]["id"] for hit in active["results"]] == [second["id"]]
        stats = _data(await client.call_tool("vault_memory_stats", {}))
        assert stats["total"] == 2 and stats["by_status"]["superseded"] == 1
        assert "mem_nope" in _error(
            await client.call_tool("vault_memory_archive", {"id": "mem_nope"})
        )
        assert "title" in _error(
            await client.call_tool("vault_remember", {"title": " ", "content": "x"})
        )

    _run(state, session)


ESCAPES = [
    "../outside/secret.md",
    "../../etc/passwd",
    "/etc/passwd",
    "~/secret.md",
    "Projects/../../outside/secret.md",
    "..\\outside\\secret.md",
    "%2e%2e/outside/secret.md",
    "C:\\Windows\\win.ini",
    "\\\\server\\share\\x.md",
    ".git/config",
    ".obsidian/app.json",
    "link-out/secret.md",
    "Projects/evil\x00.md",
]


def test_no_tool_reaches_outside_the_vault(state: ServerState, vault_root: Path) -> None:
    outside = vault_root.parent / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\ntop secret\n")
    (vault_root / "link-out").symlink_to(outside, target_is_directory=True)
    (vault_root / ".git").mkdir()
    (vault_root / ".git" / "config").write_text("[core]\n")

    def snapshot() -> dict[str, bytes]:
        return {
            str(p): p.read_bytes()
            for base in (outside, vault_root / ".git")
            for p in sorted(base.rglob("*"))
            if p.is_file()
        }

    before = snapshot()

    async def session(client: Client) -> None:
        for path in ESCAPES:
            calls: list[tuple[str, dict[str, Any]]] = [
                ("vault_read", {"path": path}),
                ("vault_frontmatter", {"path": path}),
                ("vault_frontmatter", {"path": path, "set": {"pwned": True}}),
                ("vault_write", {"path": path, "content": "pwned", "mode": "overwrite"}),
                ("vault_write", {"path": path, "content": "pwned", "mode": "append"}),
                ("vault_delete", {"path": path, "permanent": True}),
                ("vault_wikilinks", {"path": path}),
                ("vault_list", {"folder": path}),
            ]
            for name, arguments in calls:
                result = await client.call_tool(name, arguments)
                assert result.is_error, (name, path, result.content[0].text)
                assert "top secret" not in result.content[0].text

    _run(state, session)
    assert snapshot() == before
    assert not list(vault_root.parent.glob("*pwned*"))


def test_the_vault_falls_back_to_the_environment(
    vault_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VROM_VAULT", str(vault_root))
    state = ServerState(None, embedder=None, watch=False)

    async def session(client: Client) -> None:
        stats = _data(await client.call_tool("vault_stats", {}))
        assert stats["vault_root"] == str(vault_root.resolve())

    _run(state, session)


def test_a_client_config_setting_only_vault_root_serves_that_vault(
    vault_root: Path, tmp_path: Path
) -> None:
    """A client that sets only ``VAULT_ROOT`` and starts ``vrom mcp`` in another folder gets
    the VAULT_ROOT vault, not the current folder; an empty VAULT_ROOT, or one naming another
    folder than VROM_VAULT, stops the server at once with a one-line reason."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "Cwd.md").write_text("# Cwd\n\nThe network switch of the wrong folder.\n")
    env = {k: v for k, v in _env(tmp_path).items() if k not in ("VROM_VAULT", "VAULT_ROOT")}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "vrom", "mcp", "--no-watch"],
        env={**env, "VAULT_ROOT": str(vault_root)},
        cwd=elsewhere,
    )

    async def main() -> None:
        async with Client(params, mode="legacy") as client:
            stats = _data(await client.call_tool("vault_stats", {}))
            assert stats["vault_root"] == str(vault_root.resolve())
            assert stats["notes"] == len(NOTES)
            hits = _data(await client.call_tool("vault_search", {"query": "network switch"}))
            assert hits["results"][0]["path"] == "Projects/Atlas.md"

    asyncio.run(main())
    for refused, reason in (
        ({"VAULT_ROOT": ""}, "vrom: error: $VAULT_ROOT is set but empty"),
        ({"VAULT_ROOT": str(vault_root), "VROM_VAULT": str(elsewhere)}, "name different vaults"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "vrom", "mcp", "--no-watch"],
            env={**env, **refused},
            cwd=elsewhere,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr.count("\n") == 1 and reason in done.stderr, done.stderr


def test_stdout_carries_only_protocol(vault_root: Path, tmp_path: Path) -> None:
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "vault_search", "arguments": {"query": "network switch", "k": 1}},
        },
    ]
    process = subprocess.Popen(
        [sys.executable, "-m", "vrom", "mcp", "--vault", str(vault_root), "--no-watch"],
        env=_env(tmp_path),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    lines = []
    try:
        for message in messages:
            process.stdin.write(json.dumps(message) + "\n")
            process.stdin.flush()
            if "id" in message:  # a request: wait for its reply
                lines.append(process.stdout.readline())
        process.stdin.close()  # the client leaves: the server must exit
        rest = process.stdout.read()
        stderr = process.stderr.read() if process.stderr else ""
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
    lines += [line for line in rest.splitlines() if line.strip()]
    replies = [json.loads(line) for line in lines]  # every line is JSON-RPC, nothing else
    assert all(reply.get("jsonrpc") == "2.0" for reply in replies)
    answer = next(r for r in replies if r.get("id") == 2)
    assert "Projects/Atlas.md" in answer["result"]["content"][0]["text"]
    assert "indexing" in stderr, "progress goes to stderr"
