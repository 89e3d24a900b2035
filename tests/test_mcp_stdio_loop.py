"""The agent loop over stdio (issue 29, item 6): every request read is answered even when the
client closes its input at once, and `initialize` is answered before the vault is checked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("mcp")

WriteVault = Callable[[dict[str, str | bytes]], Path]

HELLO = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "pipe"}}
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": HELLO}


def _notes(write_vault: WriteVault, count: int) -> Path:
    return write_vault(
        {f"note {n}.md": f"# Note {n}\n\nThe orchard keeps apple tree {n}.\n" for n in range(count)}
    )


def _piped(root: Path, state: Path, requests: list[dict[str, object]]) -> list[dict[str, object]]:
    """Write ``requests`` to a fresh `vrom mcp` and close its input at once; return its replies."""
    lines = [INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"}, *requests]
    done = subprocess.run(
        [sys.executable, "-m", "vrom", "mcp", "--vault", str(root), "--no-watch"],
        input="".join(json.dumps(line) + "\n" for line in lines),
        env={**os.environ, "VROM_STATE_DIR": str(state)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_requests_written_just_before_the_input_ends_are_all_answered(
    tmp_path: Path, write_vault: WriteVault
) -> None:
    """The server used to stop when its input ended, cancelling what it had read but not yet
    answered: a client piping its requests in and closing stdin lost the last replies."""
    root = _notes(write_vault, 40)
    calls = [
        {
            "jsonrpc": "2.0",
            "id": number,
            "method": "tools/call",
            "params": {"name": "vault_search", "arguments": {"query": f"apple tree {number}"}},
        }
        for number in range(1, 6)
    ]
    pings = [{"jsonrpc": "2.0", "id": f"ping {n}", "method": "ping"} for n in range(3)]
    replies = _piped(root, tmp_path / "state", [*calls, *pings])
    by_id = {reply["id"]: reply for reply in replies if "id" in reply}
    assert set(by_id) == {0, 1, 2, 3, 4, 5, "ping 0", "ping 1", "ping 2"}, replies
    for number in range(1, 6):
        result = by_id[number]["result"]
        assert isinstance(result, dict) and not result.get("isError"), result
        hits = result["structuredContent"]["results"]
        assert hits[0]["path"] == f"note {number}.md", hits
    assert all(by_id[f"ping {n}"]["result"] == {} for n in range(3))


def test_initialize_is_answered_before_the_vault_is_checked_and_tools_see_it_fresh(
    tmp_path: Path, write_vault: WriteVault
) -> None:
    """`initialize` used to wait behind the check of every file of the vault (started with the
    server, it took the CPU the answer needed); now the check starts once the answer is
    written, and a tool called before the check ends waits for it: it finds a note edited
    since the vault was last indexed as it is now."""
    root = _notes(write_vault, 300)
    state = tmp_path / "state"
    env = {**os.environ, "VROM_STATE_DIR": str(state)}
    indexed = subprocess.run(
        [sys.executable, "-m", "vrom", "index", str(root), "--embedder", "none"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert indexed.returncode == 0, indexed.stderr
    (root / "note 7.md").write_text("# Note 7\n\nNow about quinces.\n", encoding="utf-8")
    server = subprocess.Popen(
        [sys.executable, "-m", "vrom", "mcp", "--vault", str(root), "--no-watch"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # one stream: the order of replies and log lines shows
        text=True,
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        # Gives a check started with the server (as it was) the time to log itself first;
        # a server that waits for the answer passes however long this is.
        time.sleep(1)
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "vault_search", "arguments": {"query": "quinces"}},
        }
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        for message in (INITIALIZE, initialized, call):
            server.stdin.write(json.dumps(message) + "\n")
        server.stdin.flush()
        before_answer = []
        while not (line := server.stdout.readline()).startswith("{"):
            before_answer.append(line)
        assert json.loads(line)["id"] == 0, line
        assert not [seen for seen in before_answer if "indexing" in seen], before_answer
        after = []
        while not (line := server.stdout.readline()).startswith("{"):
            after.append(line)
        assert any("vrom: indexing" in seen for seen in after), after
        reply = json.loads(line)
        assert reply["id"] == 1, reply
        hits = reply["result"]["structuredContent"]["results"]
        assert [hit["path"] for hit in hits] == ["note 7.md"], hits
        assert hits[0]["fresh"] is not False, hits
    finally:
        server.stdin.close()
        server.wait(timeout=60)
        server.stdout.close()


def test_import_vrom_leaves_the_facades_for_first_use_and_every_name_resolves() -> None:
    """`import vrom` no longer loads the facades and the engines behind them (issue 29: most
    of a CLI search's CPU); each public name still resolves, to the object its module has."""
    code = (
        "import importlib, sys, vrom\n"
        "print(sorted(m for m in ('vrom.vault', 'vrom.collection', 'vrom.memories', 'yaml',"
        " 'vrom.corpus') if m in sys.modules))\n"
        "for name in vrom.__all__:\n"
        "    value = getattr(vrom, name)\n"
        "    module = sys.modules[getattr(value, '__module__', 'vrom')]\n"
        "    assert getattr(module, name, value) is value, name\n"
        "print(set(vrom.__all__) <= set(dir(vrom)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["[]", "True"], done.stdout
