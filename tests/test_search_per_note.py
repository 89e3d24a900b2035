"""Search by note: ``k`` distinct notes, each with its best chunk (the default of ``vrom search``
and MCP's ``vault_search``), or chunk-level hits when asked; through the Python API in every
mode, the MCP server (the SDK's client) and the CLI (a subprocess)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from vrom_cli import run_vrom

from vrom import Vault
from vrom.results import Hit

MODES = ("keyword", "vector", "hybrid", "rerank")
LONG_CHUNKS = 60
"""The long note's sections, each a chunk saying "zebra" many times: more than a first
candidate pool of 50 holds, so one note fills it and the pool must widen to find k notes."""

NOTES: dict[str, str | bytes] = {
    "Zebras.md": "# Zebras\n\n"
    + "\n\n".join(
        f"## Herd {i}\n\n" + "zebra stripes zebra herd. " * 30 for i in range(LONG_CHUNKS)
    ),
    **{
        f"Savanna/Note {i:02d}.md": f"# Note {i}\n\nA walk through the grass where a zebra "
        f"grazed beside acacia trees, lions, giraffes and {i} birds.\n"
        for i in range(12)
    },
    "Garden.md": "# Garden\n\nTomatoes and basil, nothing striped.\n",
}
MATCHING_NOTES = 13


@pytest.fixture
def vault_root(write_vault: Any) -> Path:
    root: Path = write_vault(NOTES)
    return root


@pytest.fixture
def vault(vault_root: Path, tmp_path: Path) -> Any:
    with Vault.open(vault_root, tmp_path / "state", embedder="fake:16") as opened:
        opened.index()
        assert opened.stats().chunks >= LONG_CHUNKS + MATCHING_NOTES - 1
        yield opened


def _first_per_note(hits: list[Hit]) -> list[Hit]:
    """Return each note's first hit, in order: grouping that keeps the ranking's order."""
    seen: set[str] = set()
    kept = []
    for hit in hits:
        if hit.path not in seen:
            seen.add(hit.path)
            kept.append(hit)
    return kept


def test_one_long_note_fills_the_first_keyword_pool(vault: Vault) -> None:
    """The fixture does what it is for: the 50 best chunks all belong to one note."""
    assert {hit.path for hit in vault.search("zebra", k=50, mode="keyword")} == {"Zebras.md"}


@pytest.mark.parametrize("mode", MODES)
def test_per_note_gives_k_distinct_notes_each_at_its_best_chunk(vault: Vault, mode: str) -> None:
    """k distinct notes: in one ranking's mode, in its chunks' order; fused, each note scores
    its best chunk in each ranking and is cited at its best fused chunk."""
    chunks = vault.search("zebra", k=200, mode=mode)
    found = {hit.path for hit in chunks}  # by meaning, the garden is only far away
    assert len(found) == MATCHING_NOTES + (mode in ("vector", "hybrid")), found
    assert len(chunks) > len(found), "chunk-level hits repeat the long note"
    for k in (1, 5, 10, len(found)):
        notes = vault.search("zebra", k=k, mode=mode, per_note=True)
        assert len(notes) == k and len({hit.path for hit in notes}) == k
        expected = _first_per_note(chunks)
        if mode in ("keyword", "vector"):
            assert [(h.path, h.chunk_id) for h in notes] == [
                (h.path, h.chunk_id) for h in expected[:k]
            ]
        else:  # fused by note (`FusedCandidates.by_group`), each cited at its best chunk
            best = {h.path: h.chunk_id for h in expected}
            assert all(best[h.path] == h.chunk_id for h in notes)
    more = vault.search("zebra", k=50, mode=mode, per_note=True)
    assert {hit.path for hit in more} == found, "every note once, and no more"
    assert len(more) == len(found)


def test_search_report_and_expansion_keep_per_note(vault: Vault) -> None:
    report = vault.search("zebra", k=4, per_note=True, expand_context=True, fallback=True)
    assert len({hit.path for hit in report.results}) == 4 == len(report.results)
    assert all(hit.context_text for hit in report.results)
    chunks = vault.search("zebra", k=4, mode="keyword", fallback=True)
    assert [hit.path for hit in chunks.results] == ["Zebras.md"] * 4


# -- the faces ---------------------------------------------------------------------------------


def test_vault_search_over_mcp_gives_notes_unless_asked_for_chunks(vault_root: Path) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from vrom.server.app import build_server
    from vrom.server.state import ServerState

    state = ServerState(vault_root, embedder="fake:16", watch=False)
    state.open_explicit()

    async def main() -> None:
        async with Client(build_server(state), mode="legacy") as client:
            by_note = await client.call_tool("vault_search", {"query": "zebra", "k": 8})
            by_chunk = await client.call_tool(
                "vault_search", {"query": "zebra", "k": 8, "chunks": True, "mode": "keyword"}
            )
            for result in (by_note, by_chunk):
                assert not result.is_error, result.content[0].text
            notes = [hit["path"] for hit in by_note.structured_content["results"]]
            assert len(notes) == 8 == len(set(notes))
            chunks = [hit["path"] for hit in by_chunk.structured_content["results"]]
            assert chunks == ["Zebras.md"] * 8
            assert by_note.content[0].text.startswith("8 hits")

    try:
        asyncio.run(main())
    finally:
        state.close()


def test_vrom_search_gives_notes_unless_told_chunks(vault_root: Path, tmp_path: Path) -> None:
    def vrom(*args: str) -> subprocess.CompletedProcess[str]:
        done = run_vrom(tmp_path / "cli-state", *args, embedder="none")
        assert done.returncode == 0, done.stderr
        return done

    vrom("index", str(vault_root), "--quiet")
    for command in ("search", "hybrid-search"):
        by_note = json.loads(
            vrom(command, "zebra", "-k", "6", "--json", "--vault", str(vault_root)).stdout
        )
        notes = [hit["path"] for hit in by_note["results"]]
        assert len(notes) == 6 == len(set(notes)), command
    by_chunk = json.loads(
        vrom("search", "zebra", "-k", "6", "--chunks", "--json", "--vault", str(vault_root)).stdout
    )
    assert [hit["path"] for hit in by_chunk["results"]] == ["Zebras.md"] * 6
    text = vrom("search", "zebra", "-k", "3", "--vault", str(vault_root)).stdout
    assert text.startswith("1. Zebras.md") and text.count("Zebras.md") == 1
