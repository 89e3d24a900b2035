"""Embedding in the background: the vault answers by keyword at once, vectors arrive in
committed batches, and a restart resumes without redoing what was committed."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from vector_log import vector_writes

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


def test_the_server_answers_by_keyword_while_vectors_arrive(tmp_path: Path) -> None:
    root = _vault(tmp_path / "vault")
    slow = Embedder.fake(32, delay_per_text=0.004)  # ~1.2 s for the vault's 300 chunks
    state = ServerState(root, state_dir=tmp_path / "state", embedder=slow, watch=False)
    try:
        vault = state.open_explicit()
        assert vault is not None and state.embedding is not None
        early = vault.search("harbour", k=5, fallback=True)
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
        late = vault.search("harbour", k=5, fallback=True)
        assert late.mode == "hybrid" and late.fallback is None and late.vectors == NOTES
        assert "fused" in late.results[0].scores
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
    assert vector_writes(store_file) == NOTES, "no chunk's vector was written twice"


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
        return result["structuredContent"]  # type: ignore[no-any-return]


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
    committed = vector_writes(str(store_file))
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
        assert "fused" in hybrid["results"][0]["scores"]
    finally:
        second.process.kill()
        second.process.wait(timeout=30)
    assert vector_writes(str(store_file)) == notes, "no chunk's vector was written twice"


def test_wake_embeds_what_was_indexed_after_the_worker_ended(tmp_path: Path) -> None:
    root, state_dir = _vault(tmp_path / "vault", 20), tmp_path / "state"
    lines: list[str] = []
    with Vault.open(root, state_dir, embedder=Embedder.fake(32)) as vault:
        vault.index(embed=False)
        worker = BackgroundEmbedding(
            vault.root, state_dir, Embedder.fake(32), lines.append, progress_seconds=0
        )
        worker.start()
        worker.join(60)
        assert worker.progress().vectors == 20 and not worker.progress().running
        (root / "note 0000.md").write_text("# Narwhal\n\nA new chunk.\n", encoding="utf-8")
        (root / "extra.md").write_text("# Extra\n\nAnother one.\n", encoding="utf-8")
        vault.reindex_paths(["note 0000.md", "extra.md"], embed=False)
        assert vault.store.counts().vectors == 19, "indexed by keyword only"
        worker.wake()
        worker.join(60)
        done = worker.progress()
        assert done.error is None and done.vectors == done.chunks == 21
        assert done.embedded == 22, "counted over both passes"
        assert vault.store.counts().vectors == 21
    assert any("chunks have vectors" in line for line in lines), "progress is logged"
    worker.wake()  # nothing missing: the pass ends at once
    worker.join(60)
    worker.stop()
    worker.wake()  # after stop, wake does nothing
    assert not worker.progress().running


def test_wakes_during_a_pass_are_never_lost_and_nothing_is_embedded_twice(
    tmp_path: Path,
) -> None:
    rounds = 30
    root, state_dir = _vault(tmp_path / "vault", 5), tmp_path / "state"
    with Vault.open(root, state_dir, embedder=Embedder.fake(32)) as vault:
        vault.index(embed=False)
        worker = BackgroundEmbedding(
            vault.root, state_dir, Embedder.fake(32, delay_per_text=0.001), lambda _: None
        )
        worker.start()
        for i in range(rounds):
            (root / f"new {i}.md").write_text(f"# New {i}\n\nFresh text {i}.\n", encoding="utf-8")
            vault.reindex_paths([f"new {i}.md"], embed=False)
            worker.wake()
        worker.join(60)
        assert not worker.progress().running
        counts = vault.store.counts()
        assert counts.vectors == counts.chunks == 5 + rounds, "every wake-up was honoured"
        store_file = vault.stats().store_path
    assert vector_writes(store_file) == 5 + rounds, "no chunk was embedded twice"


def test_an_edit_is_searchable_by_keyword_at_once_and_embedded_in_the_background(
    tmp_path: Path,
) -> None:
    pytest.importorskip("mcp")
    from mcp import Client, StdioServerParameters

    root, state_dir = _vault(tmp_path / "vault", 5), tmp_path / "state"
    with Vault.open(root, state_dir, embedder=Embedder.fake(32)) as vault:
        vault.index()  # every chunk has its vector before the server starts
    params = StdioServerParameters(
        command=sys.executable,
        # the same model (fake, 32 d), slow: 3 s a text, so embedding an edit takes a while
        args=["-m", "vrom", "--embedder", "fake:32:3000", "mcp", "--vault", str(root)],
        env={**os.environ, "VROM_STATE_DIR": str(state_dir)},
    )

    async def call(client: Any, name: str, **arguments: Any) -> dict[str, Any]:
        result = await client.call_tool(name, arguments)
        assert not result.is_error, result.content[0].text
        return result.structured_content  # type: ignore[no-any-return]

    async def main() -> None:
        async with Client(params, mode="legacy") as client:
            stats = await call(client, "vault_stats")
            assert stats["vectors"] == stats["chunks"] == 5
            await asyncio.sleep(0.5)  # let the watcher start
            (root / "note 0001.md").write_text(
                "# Note 1\n\nNow about narwhal migrations.\n", encoding="utf-8"
            )
            while True:  # the watcher re-indexes within about a second
                found = await call(client, "vault_search", query="narwhal", mode="keyword")
                if found["results"]:
                    break
                await asyncio.sleep(0.05)
            assert found["results"][0]["path"] == "note 0001.md"
            assert found["vectors"] < found["chunks"], "found by keyword before its vector"
            while True:
                embedding = (await call(client, "vault_stats"))["embedding"]
                assert embedding["error"] is None
                if not embedding["running"] and embedding["vectors"] == embedding["chunks"]:
                    break
                await asyncio.sleep(0.2)
            assert embedding["embedded"] == 1, "only the edited note's chunk was embedded"
            by_meaning = await call(client, "vault_search", query="narwhal", mode="vector", k=1)
            assert by_meaning["results"][0]["path"] == "note 0001.md"

    asyncio.run(asyncio.wait_for(main(), timeout=120))


def test_a_note_written_while_another_run_holds_the_claim_gets_its_vector(
    tmp_path: Path,
) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from vrom.ingest.embed_job import EmbeddingClaim
    from vrom.server.app import build_server

    root, state_dir = _vault(tmp_path / "vault", 5), tmp_path / "state"
    state = ServerState(root, state_dir=state_dir, embedder=Embedder.fake(32), watch=False)
    server = build_server(state)

    async def main() -> None:
        async with Client(server, mode="legacy") as client:
            vault = await state.vault()
            assert state.embedding is not None
            await asyncio.to_thread(state.embedding.join, 60)
            assert vault.store.counts().vectors == 5, "the worker embedded the vault and ended"
            with Vault.open(root, state_dir, embedder=None) as other:
                claim = EmbeddingClaim.take(other.store)  # as `vrom embed` elsewhere would
                try:
                    written = await client.call_tool(
                        "vault_write", {"path": "new.md", "content": "# New\n\nA narwhal.\n"}
                    )
                    assert not written.is_error, written.content[0].text
                    counts = await asyncio.to_thread(state.run, lambda v: v.store.counts(), vault)
                    assert counts.vectors == 5 < counts.chunks, "the write could not embed it"
                finally:
                    claim.release()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                counts = await asyncio.to_thread(state.run, lambda v: v.store.counts(), vault)
                if counts.vectors == counts.chunks:
                    break
                await asyncio.sleep(0.1)
            assert counts.vectors == counts.chunks == 6, "the woken worker embedded it"

    try:
        asyncio.run(asyncio.wait_for(main(), timeout=120))
    finally:
        state.close()
