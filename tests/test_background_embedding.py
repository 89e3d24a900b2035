"""Embedding in the background: the vault answers by keyword at once, vectors arrive in
committed batches, and a restart resumes without redoing what was committed."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from vrom import Embedder, Vault
from vrom._background_embedding import BackgroundEmbedding
from vrom.server.state import ServerState

NOTES = 300


def _vault(root: Path, notes: int = NOTES) -> Path:
    root.mkdir()
    for i in range(notes):
        (root / f"note {i:04d}.md").write_text(
            f"# Note {i}\n\nSubject {i % 7} and harbour {i % 13} notes.\n", encoding="utf-8"
        )
    return root


def _vector_writes(store_file: str) -> int:
    with sqlite3.connect(store_file) as raw:  # every vector ever written (the change log)
        return int(raw.execute("SELECT count(*) FROM vector_changes").fetchone()[0])


def test_the_server_answers_by_keyword_while_vectors_arrive(tmp_path: Path) -> None:
    root = _vault(tmp_path / "vault")
    slow = Embedder.fake(32, delay_per_text=0.004)  # ~1.2 s for the vault's 300 chunks
    state = ServerState(root, state_dir=tmp_path / "state", embedder=slow, watch=False)
    try:
        vault = state.open_explicit()
        assert vault is not None and state.embedding is not None
        early = vault.search_report("harbour", k=5)
        assert early.results and early.chunks == NOTES
        assert early.vectors < NOTES, "the keyword index came first; vectors are still coming"
        seen = [state.embedding.progress().vectors]
        while state.embedding.progress().running:
            time.sleep(0.05)
            seen.append(state.embedding.progress().vectors)
        done = state.embedding.progress()
        assert done.error is None and done.vectors == done.chunks == NOTES
        assert seen == sorted(seen) and len(set(seen)) > 2, "the count grew batch by batch"
        assert done.chunks_per_second is not None and done.chunks_per_second > 0
        late = vault.search_report("harbour", k=5)
        assert late.mode == "hybrid" and late.fallback is None and late.vectors == NOTES
        assert "rrf" in late.results[0].scores
    finally:
        state.close()


def test_a_stopped_run_resumes_without_writing_any_vector_twice(tmp_path: Path) -> None:
    root, state_dir = _vault(tmp_path / "vault"), tmp_path / "state"
    with Vault.open(root, state_dir, embedder=Embedder.fake(32)) as vault:
        vault.index(embed=False)
        store_file = vault.stats().store_path
    slow = Embedder.fake(32, delay_per_text=0.004)
    first = BackgroundEmbedding(root.resolve(), state_dir, slow, log=lambda _: None)
    first.start()
    while first.progress().vectors < 64:  # at least one batch committed
        time.sleep(0.02)
    first.stop()
    part = first.progress()
    assert not part.running and 0 < part.vectors < NOTES
    second = BackgroundEmbedding(root.resolve(), state_dir, slow, log=lambda _: None)
    second.start()
    second.join(60)
    rest = second.progress()
    assert rest.error is None and rest.vectors == NOTES
    assert rest.embedded == NOTES - part.vectors, "only the missing chunks were embedded"
    assert _vector_writes(store_file) == NOTES, "no chunk's vector was written twice"


class _RawServer:
    """`vrom mcp` over stdio, spoken to line by line (so the test can SIGKILL it)."""

    def __init__(self, root: Path, state_dir: Path) -> None:
        env = {**os.environ, "VROM_STATE_DIR": str(state_dir), "VROM_EMBEDDER": "fake:32:10"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "vrom", "mcp", "--vault", str(root), "--no-watch"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._id = 0

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self._id += 1
        message = {"jsonrpc": "2.0", "id": self._id, "method": method, "params": params}
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()
        while True:
            reply = json.loads(self.process.stdout.readline())
            if reply.get("id") == self._id:
                return reply  # type: ignore[no-any-return]

    def initialize(self) -> None:
        self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "first-hour", "version": "1"},
            },
        )
        assert self.process.stdin is not None
        self.process.stdin.write(
            json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n"
        )
        self.process.stdin.flush()

    def tool(self, name: str, **arguments: Any) -> dict[str, Any]:
        reply = self.request("tools/call", {"name": name, "arguments": arguments})
        result = reply["result"]
        assert not result.get("isError"), result
        return json.loads(result["content"][0]["text"])  # type: ignore[no-any-return]


@pytest.mark.slow
def test_a_large_vault_over_stdio_answers_at_once_and_resumes_after_a_kill(
    tmp_path: Path,
) -> None:
    notes = 3000  # one chunk each; the model takes 10 ms a chunk: ~30 s of embedding
    root, state_dir = _vault(tmp_path / "vault", notes), tmp_path / "state"

    first = _RawServer(root, state_dir)
    try:
        started = time.perf_counter()
        first.initialize()
        answered = time.perf_counter() - started
        report = first.tool("vault_search", query="harbour 7", k=3)
        searched = time.perf_counter() - started
        print(f"initialize {answered:.2f} s, first keyword search {searched:.2f} s")
        assert report["results"] and report["chunks"] == notes
        assert report["vectors"] < notes, "answered while embedding runs"
        grown = [first.tool("vault_stats")["embedding"]["vectors"]]
        while grown[-1] < notes // 3:
            time.sleep(0.2)
            grown.append(first.tool("vault_stats")["embedding"]["vectors"])
        assert grown == sorted(grown) and grown[-1] > grown[0], "the vector count grows"
    finally:
        first.process.kill()  # SIGKILL half way: no goodbye, no last batch
        first.process.wait(timeout=30)

    store_file = next(state_dir.rglob("store.db"))
    committed = _vector_writes(str(store_file))
    assert 0 < committed < notes

    second = _RawServer(root, state_dir)
    try:
        second.initialize()
        while True:
            progress = second.tool("vault_stats")["embedding"]
            if not progress["running"] and progress["vectors"] == notes:
                break
            assert progress["error"] is None
            time.sleep(0.5)
        assert progress["embedded"] == notes - committed, "only what the kill left was embedded"
        hybrid = second.tool("vault_search", query="harbour 7", k=3)
        assert hybrid["mode"] == "hybrid" and hybrid["vectors"] == notes
        assert "rrf" in hybrid["results"][0]["scores"]
    finally:
        second.process.kill()
        second.process.wait(timeout=30)
    assert _vector_writes(str(store_file)) == notes, "no chunk's vector was written twice"
