"""Freshness: every hit from a vault says whether its note on disk still holds what was indexed
(``fresh``), so an agent never cites text that changed under it; ``vrom index`` makes it fresh
again. Through the Python API, the CLI (a subprocess) and the MCP server (the SDK's client)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from vrom import Collection, Embedder, Vault, to_jsonable
from vrom.ingest import freshness
from vrom.search.context import CHANGED_ON_DISK

NOTES: dict[str, str] = {
    "Touched.md": "# Touched\n\nThe heron waits by the pond.\n",
    "Same size.md": "# Same size\n\nThe heron waits by the lake.\n",
    "Grown.md": "# Grown\n\nThe heron flies over the river.\n",
    "Deleted.md": "# Deleted\n\nThe heron is gone from the marsh.\n",
    "Kept.md": "# Kept\n\nThe heron stands in the reeds.\n",
}


def _later(path: Path, seconds: int = 5) -> None:
    """Move a file's modification time ``seconds`` on (a save a second later, say)."""
    now = path.stat()
    os.utime(path, ns=(now.st_atime_ns, now.st_mtime_ns + seconds * 1_000_000_000))


def _change_the_notes(root: Path) -> None:
    """Touch one note, rewrite one at the same size, grow one, delete one; keep one."""
    _later(root / "Touched.md")  # saved again, unchanged: same bytes, another time
    same = root / "Same size.md"
    same.write_text(NOTES["Same size.md"].replace("lake", "mere"), encoding="utf-8")
    _later(same)
    assert same.stat().st_size == len(NOTES["Same size.md"])
    with (root / "Grown.md").open("a", encoding="utf-8") as note:
        note.write("It came back in spring.\n")
    (root / "Deleted.md").unlink()


EXPECTED = {
    "Touched.md": True,
    "Same size.md": False,
    "Grown.md": False,
    "Deleted.md": False,
    "Kept.md": True,
}


def _freshness(hits: Any) -> dict[str, bool | None]:
    return {hit.path: hit.fresh for hit in hits}


@pytest.fixture
def vault(write_vault: Any, open_vault: Any) -> Vault:
    opened: Vault = open_vault(write_vault(NOTES))
    opened.index()
    return opened


def test_hits_say_whether_their_note_changed_on_disk(vault: Vault) -> None:
    assert _freshness(vault.search("heron", k=10)) == dict.fromkeys(NOTES, True)
    _change_the_notes(vault.root)
    assert _freshness(vault.search("heron", k=10)) == EXPECTED
    assert _freshness(vault.search("heron", k=10, per_note=True, fallback=True).results) == EXPECTED
    expanded = vault.search("heron", k=10, expand_context=True)
    assert _freshness(expanded) == EXPECTED
    context = vault.context("heron", max_tokens=2000)
    assert _freshness(context.sources) == EXPECTED
    sources = context.text.split("Sources:\n", 1)[1].splitlines()
    stale = {
        line.split(" · ")[0].split("] ")[1].split("#")[0]
        for line in sources
        if CHANGED_ON_DISK in line
    }
    assert stale == {path for path, fresh in EXPECTED.items() if not fresh}

    summary = vault.index()  # what `vrom index` does
    assert (summary.changed, summary.removed, summary.unchanged) == (2, 1, 2)
    hits = vault.search("heron", k=10)
    assert _freshness(hits) == {path: True for path in EXPECTED if path != "Deleted.md"}
    assert "mere" in next(hit.text for hit in hits if hit.path == "Same size.md")


def test_an_edit_that_keeps_size_and_time_goes_unseen_as_by_vrom_index(vault: Vault) -> None:
    """Size and time unchanged, the note is not read (that is what keeps the check cheap):
    an edit that restores both is not seen, here as by the indexer, which skips the note."""
    note = vault.root / "Kept.md"
    before = note.stat()
    note.write_text(NOTES["Kept.md"].replace("reeds", "sedge"), encoding="utf-8")
    os.utime(note, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert note.stat().st_size == before.st_size
    assert _freshness(vault.search("heron", k=10))["Kept.md"] is True
    assert vault.index().changed == 0, "the indexer does not see it either"
    _later(note)  # the time moves: now the hash is compared, and differs
    assert _freshness(vault.search("heron", k=10))["Kept.md"] is False


@pytest.mark.parametrize("mode", ["keyword", "vector", "hybrid", "rerank"])
def test_hits_of_every_mode_say_whether_their_note_changed(
    write_vault: Any, tmp_path: Path, mode: str
) -> None:
    """Freshness is decided where the hits are made, from the state read with them: no mode
    leaves it unset."""
    root = write_vault(NOTES)
    with Vault.open(root, state_dir=tmp_path / "state", embedder=Embedder.fake()) as vault:
        vault.index()
        _change_the_notes(root)
        hits = vault.search("heron", k=10, mode=mode, per_note=True)
        assert set(_freshness(hits).items()) <= set(EXPECTED.items()), mode
        assert {hit.path for hit in hits} >= {"Kept.md", "Same size.md"}, mode


def test_freshness_is_checked_once_per_note(
    vault: Vault, write_vault: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = "\n\n".join(f"## Part {i}\n\nThe heron, part {i}." for i in range(9))
    write_vault({"Long.md": f"# Long\n\n{parts}\n"})
    vault.index()
    checked: Counter[str] = Counter()
    real = freshness.note_is_fresh

    def counting(root: Path, path: str, indexed: Any) -> bool:
        checked[path] += 1
        return real(root, path, indexed)

    monkeypatch.setattr(freshness, "note_is_fresh", counting)
    hits = vault.search("heron", k=50)
    assert Counter(hit.path for hit in hits)["Long.md"] > 1, "several chunks of one note"
    assert checked == Counter({hit.path for hit in hits}), "one check a note, not a hit"


def test_hits_without_a_file_have_no_freshness(tmp_path: Path) -> None:
    with Collection.open("docs", embedder=Embedder.fake(16), storage=tmp_path / "c") as docs:
        docs.add([{"id": "a", "text": "the heron waits"}])
        (hit,) = docs.search("heron", k=1)
    assert hit.fresh is None and to_jsonable(hit)["fresh"] is None
    assert "fresh" not in to_jsonable(hit, omit_empty=True)


# -- the faces ---------------------------------------------------------------------------------


def test_vrom_search_marks_a_changed_note_until_vrom_index(
    write_vault: Any, tmp_path: Path
) -> None:
    root = write_vault(NOTES)
    env = {k: v for k, v in os.environ.items() if k not in ("VROM_VAULT", "VAULT_ROOT")}
    env.update(VROM_STATE_DIR=str(tmp_path / "cli-state"), VROM_EMBEDDER="none")

    def vrom(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "vrom", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    vrom("index", str(root), "--quiet")
    _change_the_notes(root)
    report = json.loads(vrom("search", "heron", "--json", "--vault", str(root)))
    assert {hit["path"]: hit["fresh"] for hit in report["results"]} == EXPECTED
    text = vrom("search", "heron", "--vault", str(root))
    blocks = text.split("\n")
    marked = {
        blocks[i - 3].split(". ", 1)[1].split(" › ")[0]
        for i, line in enumerate(blocks)
        if line.strip() == f"{CHANGED_ON_DISK}: run 'vrom index'"
    }
    assert marked == {path for path, fresh in EXPECTED.items() if not fresh}
    sources = vrom("context", "heron", "--vault", str(root)).split("Sources:\n", 1)[1]
    assert sources.count(CHANGED_ON_DISK) == 3

    vrom("index", str(root), "--quiet")
    report = json.loads(vrom("search", "heron", "--json", "--vault", str(root)))
    assert all(hit["fresh"] is True for hit in report["results"]) and len(report["results"]) == 4
    assert CHANGED_ON_DISK not in vrom("search", "heron", "--vault", str(root))


def test_vault_search_over_mcp_marks_a_changed_note_until_reindexed(write_vault: Any) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from vrom.server.app import build_server
    from vrom.server.state import ServerState

    root = write_vault(NOTES)
    state = ServerState(root, embedder=None, watch=False)  # no watcher re-indexing the edits
    state.open_explicit()

    async def main() -> None:
        async with Client(build_server(state), mode="legacy") as client:
            before = await client.call_tool("vault_search", {"query": "heron"})
            assert {h["fresh"] for h in before.structured_content["results"]} == {True}
            _change_the_notes(root)
            after = await client.call_tool("vault_search", {"query": "heron"})
            found = {h["path"]: h["fresh"] for h in after.structured_content["results"]}
            assert found == EXPECTED
            lines = after.content[0].text.splitlines()[1:]
            marked = {
                line.split(". ", 1)[1].split(" › ")[0] for line in lines if CHANGED_ON_DISK in line
            }
            assert marked == {path for path, fresh in EXPECTED.items() if not fresh}
            context = await client.call_tool("vault_context", {"query": "heron"})
            sources = context.structured_content["sources"]
            assert {s["path"]: s["fresh"] for s in sources} == EXPECTED
            await client.call_tool("vault_reindex", {})
            again = await client.call_tool("vault_search", {"query": "heron"})
            assert {h["fresh"] for h in again.structured_content["results"]} == {True}
            assert CHANGED_ON_DISK not in again.content[0].text

    try:
        asyncio.run(main())
    finally:
        state.close()
