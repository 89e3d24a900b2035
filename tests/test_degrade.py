"""Searches degrade to keyword, and say so, when a mode by meaning cannot run yet."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from vrom import Embedder, NotFoundError, ValidationError, Vault
from vrom.server.app import build_server
from vrom.server.state import ServerState

NOTES = {
    "Coffee.md": "# Coffee\n\nEspresso without sugar, every morning.\n",
    "Tea.md": "# Tea\n\nGreen tea in the afternoon.\n",
}


def _vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    root.mkdir()
    for name, text in NOTES.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def _index(root: Path, state: Path, embedder: Any) -> None:
    with Vault.open(root, state, embedder=embedder) as vault:
        vault.index()


def test_no_embedder_on_a_store_with_vectors_answers_by_keyword(tmp_path: Path) -> None:
    root, state = _vault(tmp_path), tmp_path / "state"
    _index(root, state, Embedder.fake())
    with Vault.open(root, state, embedder=None) as vault:
        assert vault.search("espresso")[0].path == "Coffee.md", "the default degrades"
        report = vault.search("espresso", fallback=True)
        assert report.mode == "keyword" and report.results[0].path == "Coffee.md"
        assert report.fallback and "needs an embedder" in report.fallback
        assert (report.vectors, report.chunks) == (2, 2)
        asked = vault.search("espresso", mode="vector", fallback=True)
        assert asked.mode == "keyword" and "vector search needs an embedder" in str(asked.fallback)
        with pytest.raises(ValidationError, match=r"needs an embedder.*none is configured"):
            vault.search("espresso", mode="vector")  # the Python API stays strict when asked


def test_before_any_vector_exists_searches_say_why_they_are_keyword(tmp_path: Path) -> None:
    root, state = _vault(tmp_path), tmp_path / "state"
    _index(root, state, None)
    with Vault.open(root, state, embedder=Embedder.fake()) as vault:
        report = vault.search("tea", mode="hybrid", fallback=True)
        assert report.mode == "keyword" and report.results[0].path == "Tea.md"
        assert "needs vectors" in str(report.fallback) and "vrom embed" in str(report.fallback)
        assert "needs vectors" in str(vault.search("tea", fallback=True).fallback), (
            "the default too"
        )
        assert (report.vectors, report.chunks) == (0, 2)
        with pytest.raises(NotFoundError, match="needs vectors"):
            vault.search("tea", mode="vector")
        vault.embed()
        ready = vault.search("tea", fallback=True)
        assert ready.mode == "hybrid" and ready.fallback is None and ready.vectors == 2


def test_a_keyword_only_vault_is_not_told_off(tmp_path: Path) -> None:
    root, state = _vault(tmp_path), tmp_path / "state"
    _index(root, state, None)
    with Vault.open(root, state, embedder=None) as vault:
        report = vault.search("tea", fallback=True)
        assert report.mode == "keyword" and report.fallback is None


def test_the_mcp_search_of_a_vault_served_without_a_model_degrades(tmp_path: Path) -> None:
    root, state_dir = _vault(tmp_path), tmp_path / "state"
    _index(root, state_dir, Embedder.fake())
    state = ServerState(root, state_dir=state_dir, embedder=None, watch=False, log=lambda _: None)

    async def run() -> dict[str, Any]:
        async with Client(build_server(state), mode="legacy") as client:
            result = await client.call_tool("vault_search", {"query": "espresso"})
            assert not result.is_error, result.content[0].text
            assert "needs an embedder" in result.content[0].text, "the summary says so too"
            return result.structured_content  # type: ignore[return-value]

    try:
        reply = asyncio.run(run())
    finally:
        state.close()
    assert reply["mode"] == "keyword" and "needs an embedder" in reply["fallback"]
    assert reply["results"][0]["path"] == "Coffee.md"
    assert (reply["vectors"], reply["chunks"]) == (2, 2)


def test_the_cli_search_degrades_with_a_note_on_stderr(tmp_path: Path) -> None:
    root, state = _vault(tmp_path), tmp_path / "state"
    _index(root, state, Embedder.fake())
    command = [sys.executable, "-m", "vrom", "--state-dir", str(state), "--embedder", "none"]
    for mode_args in ([], ["--mode", "hybrid"]):
        done = subprocess.run(
            [*command, "search", "espresso", "--vault", str(root), "--json", *mode_args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["results"][0]["path"] == "Coffee.md"
        assert report["mode"] == "keyword" and "--embedder" in report["fallback"]
        assert done.stderr.startswith("note: searched by keyword: ") and "--embedder" in done.stderr


def test_a_partly_embedded_store_says_how_far_it_got(tmp_path: Path) -> None:
    root, state = _vault(tmp_path), tmp_path / "state"
    _index(root, state, Embedder.fake())
    with Vault.open(root, state, embedder=Embedder.fake()) as vault:
        store_file = vault.stats().store_path
    with sqlite3.connect(store_file) as raw:  # as if embedding were still running
        raw.execute("DELETE FROM vectors WHERE chunk_id = (SELECT min(chunk_id) FROM vectors)")
    with Vault.open(root, state, embedder=Embedder.fake()) as vault:
        report = vault.search("tea", fallback=True)
        assert report.mode == "hybrid" and (report.vectors, report.chunks) == (1, 2)
    command = [sys.executable, "-m", "vrom", "--state-dir", str(state), "--embedder", "fake"]
    done = subprocess.run(
        [*command, "search", "tea", "--vault", str(root)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "note: only 1 / 2 (50%) chunks have vectors so far" in done.stderr
    assert done.stdout.startswith("1. Tea.md")
