"""Symlinks planted in a vault: where a link leads is what counts, for indexing, every tool, the
file watcher and the trash (issue 15, items 5, 6 and 7).

Each vault is built in tmp_path beside an ``outside/`` folder; the checks go through the SDK,
the server's own state (the watcher thread, as ``vrom mcp`` runs it) and the real MCP server
over stdio with the SDK's client. Waits poll for a state with a generous deadline; nothing
asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from vrom import ValidationError, Vault
from vrom.server.state import ServerState

pytestmark = pytest.mark.skipif(os.name == "nt", reason="symlinks need privileges on Windows")

DEADLINE = 60.0
SECRET_WORD = "zebracorn"
NOTES = {
    "Home.md": "# Home\n\nWelcome to the vault.\n",
    "Notes/Inside.md": "# Inside\n\nA note about gardening.\n",
    ".obsidian/workspace.md": f"# Workspace\n\nplugin token {SECRET_WORD}\n",
    ".git/notes.md": f"# Git\n\n{SECRET_WORD} in the history\n",
}


def wait_for(condition: Callable[[], Any], what: str) -> Any:
    """Poll ``condition`` until it is truthy; fail naming ``what`` after `DEADLINE` seconds."""
    deadline = time.monotonic() + DEADLINE
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)


@pytest.fixture
def planted(write_vault: Callable[[dict[str, str | bytes]], Path], tmp_path: Path) -> Path:
    """A vault whose visible names lead into .obsidian and .git: ``ws.md``, ``Notes/obs``."""
    root = write_vault(NOTES)
    (root / "ws.md").symlink_to(".obsidian/workspace.md")
    (root / "Notes" / "obs").symlink_to("../.obsidian", target_is_directory=True)
    (root / "history").symlink_to(".git", target_is_directory=True)
    (root / "Also").symlink_to("Notes", target_is_directory=True)  # inside: Notes/ is indexed
    return root


# -- item 5: a symlink into .obsidian or .git ---------------------------------------------------


def test_a_symlink_into_a_hidden_folder_is_not_indexed(planted: Path, tmp_path: Path) -> None:
    with Vault.open(planted, tmp_path / "state", embedder=None) as vault:
        summary = vault.index()
        reasons = {w.path: w.reason for w in summary.warnings}
        assert reasons["ws.md"] == "skipped: symlink into a hidden folder (.obsidian/workspace.md)"
        assert reasons["Notes/obs"] == "skipped: symlink into a hidden folder (.obsidian)"
        assert reasons["history"] == "skipped: symlink into a hidden folder (.git)"
        assert reasons["Also"] == "skipped: symlink to a folder indexed as Notes"
        assert sorted(note.path for note in vault.notes("", 10)) == ["Home.md", "Notes/Inside.md"]
        assert vault.search(SECRET_WORD, mode="keyword") == []
        assert vault.list_folder("Notes").folders == [], "Notes/obs is .obsidian: not listed"
        assert vault.list_folder("").folders == ["Also", "Notes"], "history is .git: not listed"
        for path in ("ws.md", "Notes/obs/workspace.md", "history/notes.md"):
            with pytest.raises(ValidationError, match="keeps out of") as refused:
                vault.get_note(path, purpose="read")
            assert refused.value.code == "path_outside_vault"
        # re-indexing the link by name (as the watcher would) takes nothing either
        assert vault.reindex_paths(["ws.md"]).added == 0
        assert vault.search(SECRET_WORD, mode="keyword") == []


def test_no_tool_reaches_hidden_text_through_a_symlink(planted: Path, tmp_path: Path) -> None:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.shared.exceptions import MCPError
    from mcp.types import INVALID_PARAMS

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "vrom", "--embedder", "fake:16", "mcp", "--vault", str(planted)],
        env={**os.environ, "VROM_STATE_DIR": str(tmp_path / "state")},
    )
    log = tmp_path / "server.log"

    async def session() -> None:
        with log.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
                found = await client.call_tool("vault_search", {"query": SECRET_WORD})
                hits = found.structured_content["results"]  # by meaning: the nearest others
                assert {hit["path"] for hit in hits} <= {"Home.md", "Notes/Inside.md"}
                assert all(SECRET_WORD not in hit["text"] for hit in hits)
                context = await client.call_tool("vault_context", {"query": SECRET_WORD})
                assert SECRET_WORD not in context.structured_content["text"]
                for path in ("ws.md", "Notes/obs/workspace.md", "history/notes.md"):
                    read = await client.call_tool("vault_read", {"path": path})
                    assert read.is_error and "keeps out of" in read.content[0].text
                    with pytest.raises(MCPError) as refused:
                        await client.read_resource(f"vault://note/{path}")
                    assert refused.value.error.code == INVALID_PARAMS
                listed = await client.call_tool("vault_list", {"folder": "Notes"})
                assert listed.structured_content["folders"] == []
                stats = await client.call_tool("vault_stats", {})
                assert stats.structured_content["notes"] == 2

    asyncio.run(asyncio.wait_for(session(), timeout=DEADLINE))
    assert "Traceback" not in log.read_text(encoding="utf-8")


# -- item 6: the watcher -------------------------------------------------------------------------


@pytest.fixture
def served(planted: Path, tmp_path: Path) -> Iterator[ServerState]:
    """The server's state for ``planted``, watching it, plus links out of the vault."""
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (planted / "rootlink").symlink_to("/", target_is_directory=True)
    (planted / "outlink").symlink_to(outside, target_is_directory=True)
    state = ServerState(planted, embedder=None, watch=True, log=lambda line: None)
    state.open_explicit()
    yield state
    state.close()


def _watcher_state(state: ServerState) -> str:
    assert state.watcher is not None
    return state.watcher.status().state


def _found(state: ServerState, word: str) -> list[Any]:
    vault = state.open_explicit()
    assert vault is not None
    with state.lock:
        return vault.search(word, mode="keyword")


def test_the_watcher_never_follows_a_symlink_out_of_the_vault(
    served: ServerState, tmp_path: Path
) -> None:
    """``rootlink -> /`` once made the watcher walk the whole disk and die on /proc."""
    root = served.open_explicit().root  # type: ignore[union-attr]
    wait_for(lambda: _watcher_state(served) == "running", "the watcher runs")
    assert served.watcher is not None
    assert served.watcher.status().folders == 2, "the root and Notes: no link followed"
    (tmp_path / "outside" / "deep" / "far.md").write_text("# Far\n\nwalrus outside\n")
    (root / "leak.md").symlink_to(tmp_path / "outside" / "deep" / "far.md")
    (root / "ws2.md").symlink_to(".obsidian/workspace.md")
    (root / "Notes" / "New.md").write_text("# New\n\nnarwhal inside\n")
    hits = wait_for(lambda: _found(served, "narwhal"), "the new note is indexed")
    assert [hit.path for hit in hits] == ["Notes/New.md"]
    assert _found(served, "walrus") == [], "a note outside, through a link, is not indexed"
    assert _found(served, SECRET_WORD) == [], "a link into .obsidian is not indexed"
    status = served.watcher.status()
    assert (status.state, status.restarts, status.reason) == ("running", 0, None)


def test_a_new_folder_is_watched_too(served: ServerState) -> None:
    root = served.open_explicit().root  # type: ignore[union-attr]
    wait_for(lambda: _watcher_state(served) == "running", "the watcher runs")
    (root / "Later" / "Deeper").mkdir(parents=True)
    watcher = served.watcher
    assert watcher is not None
    wait_for(lambda: watcher.status().folders == 4, "the new folders are watched")
    (root / "Later" / "Deeper" / "Note.md").write_text("# Note\n\nokapi\n")
    hits = wait_for(lambda: _found(served, "okapi"), "a note in a new folder is indexed")
    assert [hit.path for hit in hits] == ["Later/Deeper/Note.md"]


def test_the_watcher_restarts_after_a_failure_and_says_so_in_vault_stats(
    served: ServerState, tmp_path: Path
) -> None:
    from mcp import Client

    from vrom.server.app import build_server

    root = served.open_explicit().root  # type: ignore[union-attr]
    away = tmp_path / "away"
    server = build_server(served)

    async def watcher(client: Client) -> dict[str, Any]:
        result = await client.call_tool("vault_stats", {})
        assert not result.is_error, result.content[0].text
        return result.structured_content["watcher"]  # type: ignore[no-any-return]

    async def until(client: Client, state: str) -> dict[str, Any]:
        deadline = time.monotonic() + DEADLINE
        while (status := await watcher(client))["state"] != state:
            assert time.monotonic() < deadline, f"the watcher never got to {state}: {status}"
            await asyncio.sleep(0.05)
        return status

    async def session() -> None:
        async with Client(server, mode="legacy") as client:
            running = await until(client, "running")
            assert running["restarts"] == 0 and running["reason"] is None
            shutil.move(root, away)  # the watched folders are gone: watching fails
            failed = await until(client, "restarting")
            assert "FileNotFoundError" in failed["reason"] and failed["restarts"] >= 1
            shutil.move(away, root)
            (root / "Notes" / "Meanwhile.md").write_text("# Meanwhile\n\nquokka\n")
            back = await until(client, "running")
            assert back["restarts"] >= 1 and back["reason"] is None
            # what changed while it was down is caught up, and it watches again
            await asyncio.to_thread(wait_for, lambda: _found(served, "quokka"), "caught up")
            (root / "Home.md").write_text("# Home\n\nnow about capybaras\n")
            await asyncio.to_thread(wait_for, lambda: _found(served, "capybaras"), "watching")

    asyncio.run(asyncio.wait_for(session(), timeout=2 * DEADLINE))


def test_vault_stats_says_when_the_server_does_not_watch(planted: Path) -> None:
    from mcp import Client

    from vrom.server.app import build_server

    state = ServerState(planted, embedder=None, watch=False)
    state.open_explicit()

    async def session() -> None:
        async with Client(build_server(state), mode="legacy") as client:
            result = await client.call_tool("vault_stats", {})
            assert result.structured_content["watcher"] == {
                "state": "stopped",
                "reason": "the server was started with --no-watch",
                "folders": 0,
                "restarts": 0,
                "reindexed": 0,
            }

    try:
        asyncio.run(asyncio.wait_for(session(), timeout=DEADLINE))
    finally:
        state.close()


# -- item 7: the trash ---------------------------------------------------------------------------


def _tree(base: Path) -> list[str]:
    return sorted(str(path.relative_to(base)) for path in base.rglob("*"))


def test_a_refused_delete_creates_nothing_outside_the_vault(
    write_vault: Callable[[dict[str, str | bytes]], Path], tmp_path: Path
) -> None:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    root = write_vault({"sub/note.md": "# Note\n", "sub/deeper/n.md": "# N\n", ".trash/x.md": ""})
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / ".trash" / "sub").symlink_to("../../outside", target_is_directory=True)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "vrom", "mcp", "--no-watch", "--vault", str(root)],
        env={**os.environ, "VROM_STATE_DIR": str(tmp_path / "state")},
    )
    log = tmp_path / "server.log"

    async def session() -> None:
        with log.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
                for path in ("sub/deeper/n.md", "sub/note.md"):
                    result = await client.call_tool("vault_delete", {"path": path})
                    assert result.is_error, result.content[0].text
                    assert "a symlink inside '.trash' is on the way" in result.content[0].text

    asyncio.run(asyncio.wait_for(session(), timeout=DEADLINE))
    assert _tree(outside) == [], "not even an empty folder"
    assert (root / "sub" / "deeper" / "n.md").is_file() and (root / "sub" / "note.md").is_file()
    assert "Traceback" not in log.read_text(encoding="utf-8")
