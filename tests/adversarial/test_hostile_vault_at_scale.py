"""Issue 15's must-show: 2,000 notes, 20 of them hostile (one of each kind), through the real CLI
and the real MCP server in subprocesses. Every good note is indexed and found, each hostile one
is named in one warning, and the server answers every tool call, hostile ones included."""

from __future__ import annotations

import asyncio
import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hostile import HOSTILE_NOTES, make_file
from vrom_cli import run_vrom

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="file names that are not UTF-8, and named pipes"
)

TIMEOUT = 180
FOLDERS = 20
GOOD = 1_980

# the hostile notes of `hostile.HOSTILE_NOTES` and more, each warned about by name; the
# parseable ones are indexed as text (frontmatter refused, or values stored as strings)
INDEXED_WITH_A_WARNING = [
    "inf.md",
    "nan.md",
    "huge-int.md",
    "too-many-digits.md",
    "bomb.md",
    "deep.md",
    "tag.md",
    "odd-types.md",
    "broken.md",
    "unclosed.md",
    "bad-utf8.md",
]
SKIPPED = [
    "binary.md",
    "huge.md",
    "caf\\xe9.md",  # as warnings show a name that is not UTF-8
    "new\\nline.md",
    "ws.md",  # -> .obsidian/workspace.md
    "rootlink",  # -> /
    "dangling.md",
    "loop",  # -> .
    "fifo.md",
]


def good_note(i: int) -> str:
    return (
        f"---\ntitle: Good {i}\ntags: [fine, batch{i % 7}]\n---\n# Good {i}\n\n"
        f"The word kiwi{i} is in this note only. See [[note-{(i + 1) % GOOD:04d}]].\n"
    )


def good_path(i: int) -> str:
    return f"folder-{i % FOLDERS:02d}/note-{i:04d}.md"


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("scale") / "vault"
    for i in range(GOOD):
        path = root / good_path(i)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(good_note(i), encoding="utf-8")
    hostile = root / "hostile"
    hostile.mkdir()
    for name in INDEXED_WITH_A_WARNING[:8]:
        (hostile / name).write_text(HOSTILE_NOTES[name], encoding="utf-8")
    (hostile / "broken.md").write_text("---\nx: [1, 2\n---\n# Broken\n", encoding="utf-8")
    (hostile / "unclosed.md").write_text("---\ntitle: no end\n# Body\n", encoding="utf-8")
    (hostile / "bad-utf8.md").write_bytes(b"# Bad\n\ncaf\xff\xfe text\n")
    (hostile / "binary.md").write_bytes(b"\x00\x01\x02 binary")
    (hostile / "huge.md").write_text("# Huge\n\n" + "word " * (1_100_000), encoding="utf-8")
    assert make_file(hostile, b"caf\xe9.md")
    (hostile / "new\nline.md").write_text("# Newline\n", encoding="utf-8")
    (root / ".obsidian").mkdir()
    (root / ".obsidian" / "workspace.md").write_text("# Hidden workspace\n", encoding="utf-8")
    (hostile / "ws.md").symlink_to("../.obsidian/workspace.md")
    (hostile / "rootlink").symlink_to("/", target_is_directory=True)
    (hostile / "dangling.md").symlink_to("nowhere.md")
    (hostile / "loop").symlink_to("..", target_is_directory=True)
    os.mkfifo(hostile / "fifo.md")
    return root


def warned_names(lines: list[str]) -> list[str]:
    """The paths in ``warning: PATH: reason`` lines, without the ``hostile/`` folder."""
    return sorted(line.split(": ", 2)[1].removeprefix("hostile/") for line in lines)


def vrom(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_vrom(state, *args, embedder="fake:32", timeout=TIMEOUT)


def test_the_cli_indexes_every_good_note_and_names_each_hostile_one(
    vault: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    indexed = vrom(state, "index", str(vault))
    assert indexed.returncode == 0, indexed.stderr
    shown = [line for line in indexed.stderr.splitlines() if line.startswith("warning: ")]
    assert shown[-1] == "warning: … and 10 more (see --json)"  # ten lines, then a count
    assert set(warned_names(shown[:-1])) < set(INDEXED_WITH_A_WARNING + SKIPPED)
    assert f"indexed {GOOD + len(INDEXED_WITH_A_WARNING):,} notes" in indexed.stdout
    assert f"{len(SKIPPED)} skipped" in indexed.stdout

    # a second run warns about what it reads: the files it skips, and the notes changed since
    with (vault / "hostile" / "inf.md").open("a", encoding="utf-8") as note:
        note.write("one more line\n")
    again = json.loads(vrom(state, "index", str(vault), "--json").stdout)
    warnings = [f"warning: {w['path']}: {w['reason']}" for w in again["warnings"]]
    assert warned_names(warnings) == sorted([*SKIPPED, "inf.md"]), warnings
    assert (again["unchanged"], again["changed"]) == (GOOD + len(INDEXED_WITH_A_WARNING) - 1, 1)

    stats = json.loads(vrom(state, "--vault", str(vault), "stats", "--json").stdout)
    assert stats["notes"] == GOOD + len(INDEXED_WITH_A_WARNING)
    assert stats["vectors"] == stats["chunks"]
    for i in (0, 977, GOOD - 1):  # by keyword: the fake model's vectors rank by chance
        found = vrom(
            state, "--vault", str(vault), "search", f"kiwi{i}", "--mode", "keyword", "--json"
        )
        assert json.loads(found.stdout)["results"][0]["path"] == good_path(i), found.stderr
    hybrid = json.loads(vrom(state, "--vault", str(vault), "search", "kiwi5", "--json").stdout)
    assert hybrid["mode"] == "hybrid" and good_path(5) in [h["path"] for h in hybrid["results"]]
    hidden = vrom(state, "--vault", str(vault), "search", "hidden workspace", "--json")
    assert not any("workspace" in hit["path"] for hit in json.loads(hidden.stdout)["results"])


def test_the_mcp_server_on_it_answers_every_call(vault: Path, tmp_path: Path) -> None:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "vrom", "--embedder", "fake:32", "mcp", "--vault", str(vault)],
        env={**os.environ, "VROM_STATE_DIR": str(tmp_path / "state")},
    )
    log = tmp_path / "server.log"

    async def call(client: Client, tool: str, arguments: dict[str, Any]) -> tuple[bool, Any]:
        result = await client.call_tool(tool, arguments)
        text = result.content[0].text
        assert "\n" not in text.strip() or not result.is_error, text
        return result.is_error, result.structured_content if not result.is_error else text

    async def session() -> None:
        with log.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
                failed, summary = await call(client, "vault_reindex", {})
                assert not failed, summary
                assert warned_names(
                    [f"warning: {w['path']}: {w['reason']}" for w in summary["warnings"]]
                ) == sorted(SKIPPED)  # the server indexed (and warned about) the rest at start
                listed: set[str] = set()
                for folder in range(FOLDERS):
                    failed, page = await call(
                        client, "vault_list", {"folder": f"folder-{folder:02d}"}
                    )
                    assert not failed, page
                    listed.update(note["path"] for note in page["notes"])
                assert listed == {good_path(i) for i in range(GOOD)}
                for i in (5, 1234):
                    query = {"query": f"kiwi{i}", "mode": "keyword", "k": 3}
                    failed, hits = await call(client, "vault_search", query)
                    assert not failed and hits["results"][0]["path"] == good_path(i), hits
                failed, hits = await call(client, "vault_search", {"query": "kiwi7"})
                assert not failed and hits["mode"] == "hybrid", hits
                assert good_path(7) in [hit["path"] for hit in hits["results"]]
                for name in ["inf.md", "bomb.md", "bad-utf8.md"]:  # indexed as text: readable
                    failed, note = await call(client, "vault_read", {"path": f"hostile/{name}"})
                    assert not failed, note
                refused = [
                    ("vault_read", {"path": "hostile/ws.md"}),
                    ("vault_read", {"path": "hostile/rootlink/etc/passwd"}),
                    ("vault_read", {"path": "hostile/binary.md"}),
                    ("vault_read", {"path": "hostile/new\nline.md"}),
                    ("vault_write", {"path": "hostile/fifo.md", "content": "x", "mode": "append"}),
                    ("vault_write", {"path": "hostile/loop/x.md", "content": "x"}),
                ]
                for tool, arguments in refused:
                    failed, text = await call(client, tool, arguments)
                    assert failed, (tool, arguments, text)
                failed, stats = await call(client, "vault_stats", {})
                assert not failed and stats["notes"] == GOOD + len(INDEXED_WITH_A_WARNING)

    asyncio.run(asyncio.wait_for(session(), timeout=TIMEOUT))
    assert "Traceback" not in log.read_text(encoding="utf-8")


def test_a_request_the_sdk_cannot_read_is_answered_and_the_server_goes_on(
    vault: Path, tmp_path: Path
) -> None:
    """JSON allows a lone surrogate escape; the SDK's parser refuses it, and the SDK would drop
    the request and leave the client waiting. The client is answered instead."""
    server = subprocess.Popen(
        [sys.executable, "-m", "vrom", "--embedder", "none", "mcp", "--vault", str(vault)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "VROM_STATE_DIR": str(tmp_path / "state")},
    )
    assert server.stdin is not None and server.stdout is not None

    def ask(line: str) -> dict[str, Any]:
        server.stdin.write(line.encode("ascii") + b"\n")
        server.stdin.flush()
        ready, _, _ = select.select([server.stdout], [], [], TIMEOUT)
        assert ready, f"no answer to {line}"
        return json.loads(server.stdout.readline())

    def call(request_id: object, query: str) -> str:
        arguments = f'{{"name":"vault_search","arguments":{{"query":"{query}","mode":"keyword"}}}}'
        return f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"method":"tools/call","params":{arguments}}}'

    try:
        hello = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        }
        assert "result" in ask(
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello})
        )
        server.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        refused = ask(call(2, "kiwi3\\udcff"))
        assert refused["id"] == 2 and refused["error"]["code"] == -32700, refused
        assert "surrogate" in refused["error"]["message"]
        shape = ask('{"jsonrpc":"2.0","id":"three","method":7}')
        assert shape["id"] == "three" and shape["error"]["code"] == -32600, shape
        assert shape["error"]["message"].startswith("not a JSON-RPC request: method: ")
        server.stdin.write(b"not json at all\n")  # nothing to answer: logged in one line
        answer = ask(call(4, "kiwi3"))
        assert answer["id"] == 4 and answer["result"]["structuredContent"]["results"][0][
            "path"
        ] == good_path(3)
    finally:
        server.stdin.close()
        try:
            server.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            server.kill()
            raise
    assert server.returncode == 0
    logged = server.stderr.read().decode() if server.stderr else ""
    assert "Traceback" not in logged and "ignored a message that is not JSON-RPC" in logged
