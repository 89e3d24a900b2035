"""What one run leaves for the next: a killed save's graph temporaries, a second ``vrom index``
racing the first, a resource read the server refuses (issue 15, item 9).

The concurrent runs are real ``vrom index`` processes with a slow fake model (``fake:16:20``,
20 ms a chunk); the resource reads go through the real MCP server over stdio.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from vrom import Embedder, Vault
from vrom.index.cache_files import STALE_TEMPORARY_SECONDS

TIMEOUT = 120
SLOW_MODEL = "fake:16:20"


def test_graph_temporaries_a_killed_save_left_are_removed_when_the_graph_opens(
    write_vault: Callable[[dict[str, str | bytes]], Path], tmp_path: Path
) -> None:
    root = write_vault(
        {f"note {i}.md": f"# Note {i}\n\nThe walrus {i} swims.\n" for i in range(20)}
    )

    def search_by_meaning() -> Path:
        with Vault.open(
            root, tmp_path / "state", embedder=Embedder.fake(16), hnsw_threshold=1
        ) as v:
            v.index()
            assert v.search("walrus", mode="vector")  # opens the graph, or has it built beside
            v.corpus.index.wait_for_graph()  # a build beside the searches saves it when done
            return Path(v.store.location)

    store = search_by_meaning()
    graph = store.with_name(store.name + ".hnsw.usearch")
    assert graph.is_file()
    # what a save killed between writing its temporaries and renaming them leaves behind
    stale = [
        graph.with_name(graph.name + ".k1ll3d.tmp"),
        store.with_name(store.name + ".hnsw.json.k1ll3d.tmp"),
    ]
    in_progress = graph.with_name(graph.name + ".s4v1ng.tmp")  # another process's, right now
    long_ago = time.time() - 2 * STALE_TEMPORARY_SECONDS
    for leftover in [*stale, in_progress]:
        leftover.write_bytes(b"\0" * 1024)
    for leftover in stale:
        os.utime(leftover, (long_ago, long_ago))

    assert search_by_meaning() == store
    assert not any(leftover.exists() for leftover in stale), "removed when the graph opened"
    assert in_progress.exists(), "a save still being written is left alone"


# -- two `vrom index` runs at once ---------------------------------------------------------------


def _vrom(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "vrom", "--state-dir", str(tmp_path / "state"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "VROM_STATE_DIR": str(tmp_path / "state")},
    )


def _vector_writes(store_file: str) -> int:
    """How many vectors were ever written to the store (its change log's rows)."""
    with sqlite3.connect(store_file) as raw:
        return int(raw.execute("SELECT count(*) FROM vector_changes").fetchone()[0])


@pytest.mark.slow
def test_two_index_runs_at_once_embed_each_chunk_once(tmp_path: Path) -> None:
    """The second run's embedding step is skipped (``not_embedded`` says why), not repeated."""
    notes = 300  # 6 s of embedding at 20 ms a chunk: the second run starts well inside it
    root = tmp_path / "vault"
    root.mkdir()
    for i in range(notes):
        (root / f"note {i:03d}.md").write_text(f"# Note {i}\n\nThe walrus {i % 7} swims.\n")
    first = _vrom(tmp_path, "--embedder", SLOW_MODEL, "index", str(root), "--json")
    with Vault.open(root, tmp_path / "state", embedder=None) as watching:
        deadline = time.monotonic() + TIMEOUT
        while True:  # until the first run is embedding (its keyword index is then complete)
            embedding = watching.stats().embedding
            if embedding is not None and embedding.running:
                break
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first run never started embedding"
            time.sleep(0.05)
    second = _vrom(tmp_path, "--embedder", SLOW_MODEL, "index", str(root), "--json")
    out_second, err_second = second.communicate(timeout=TIMEOUT)
    out_first, err_first = first.communicate(timeout=TIMEOUT)
    assert first.returncode == second.returncode == 0, (err_first, err_second)
    ran, raced = json.loads(out_first), json.loads(out_second)
    assert ran["embedded"] == notes and ran["not_embedded"] is None
    assert raced["embedded"] == 0 and "is embedding this store" in raced["not_embedded"]
    assert "Traceback" not in err_first + err_second
    assert _vector_writes(ran["store"]) == notes, "no chunk was embedded twice"


# -- a resource read the server refuses --------------------------------------------------------


def test_refused_and_undecodable_resource_reads_log_no_traceback(
    write_vault: Callable[[dict[str, str | bytes]], Path], tmp_path: Path
) -> None:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.shared.exceptions import MCPError
    from mcp.types import INVALID_PARAMS

    root = write_vault(
        {
            "Latin.md": b"# Latin\n\ncaf\xe9 au lait\n",  # not UTF-8: indexed with a warning
            "Home.md": "# Home\n",
            ".obsidian/app.md": "# App\n\nplugin token\n",
        }
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "vrom", "mcp", "--no-watch", "--vault", str(root)],
        env={**os.environ, "VROM_STATE_DIR": str(tmp_path / "state")},
    )
    log = tmp_path / "server.log"

    async def session() -> None:
        with log.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
                read = (await client.read_resource("vault://note/Latin.md")).contents[0]
                assert read.text == "# Latin\n\ncaf\ufffd au lait\n"  # type: ignore[union-attr]
                for uri in (
                    "vault://note/.obsidian/app.md",
                    "vault://note/Missing.md",
                    "vault://note/..%2F..%2Fetc%2Fpasswd",
                    "vault://note/%00",
                ):
                    with pytest.raises(MCPError) as refused:
                        await client.read_resource(uri)
                    assert refused.value.error.code == INVALID_PARAMS, uri
                    assert "\n" not in refused.value.error.message

    asyncio.run(asyncio.wait_for(session(), timeout=TIMEOUT))
    text = log.read_text(encoding="utf-8")
    assert "Traceback" not in text and "unexpected exception" not in text, text
