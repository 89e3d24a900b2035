"""A note whose write to the store fails costs that note only, and leaves nothing half-written.

Notes are written in batched transactions; a note that raises midway (after its row and chunks
went in) is rolled back with its batch, which is written again without it. The note is skipped
with a warning naming the exception; the next run, once the cause is gone, indexes it.

And a folder swapped for a symlink while notes are written, appended to and deleted in it never
sends a write or a delete outside the vault (issue 26, item 7).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hostile import GOOD_NOTES

from vrom import Vault
from vrom.errors import NotFoundError, VromError
from vrom.store import sqlite_documents
from vrom.store.sqlite import SQLiteStore

WriteVault = Callable[[dict[str, str | bytes]], Path]
OpenVault = Callable[[Path], Vault]

POISONED = {f"poison-{i}.md": f"# Poison {i}\n\nPOISON kiwi{i} orchard\n" for i in range(3)}


def poison(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make writing a chunk that holds POISON fail after the note's rows went in."""
    real = sqlite_documents.segment

    def segment(text: str) -> str:
        if "POISON" in text:
            raise RuntimeError("poisoned chunk")
        return real(text)

    monkeypatch.setattr(sqlite_documents, "segment", segment)


@pytest.fixture
def poisoned_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    poison(monkeypatch)


def stored_rows(vault: Vault) -> tuple[int, int, list[str]]:
    """Return (documents, chunks, integrity problems) read straight from the store file."""
    path = Path(vault.stats().store_path)
    with sqlite3.connect(path) as conn:
        documents = conn.execute("SELECT count(*) FROM documents").fetchone()[0]
        chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        poisoned = conn.execute("SELECT count(*) FROM chunks WHERE text LIKE '%POISON%'")
        assert poisoned.fetchone()[0] == 0, "a poisoned note was half-written"
    conn.close()
    store = SQLiteStore(path, create=False)
    try:
        return documents, chunks, store.integrity_problems()
    finally:
        store.close()


def test_a_note_that_fails_midway_through_its_write_is_rolled_back_alone(
    write_vault: WriteVault, open_vault: OpenVault, poisoned_writes: None
) -> None:
    vault = open_vault(write_vault({**GOOD_NOTES, **POISONED}))
    summary = vault.index()
    assert (summary.added, summary.skipped, summary.notes) == (len(GOOD_NOTES), 3, len(GOOD_NOTES))
    assert {w.path: w.reason for w in summary.warnings} == {
        path: "could not be stored (RuntimeError: poisoned chunk)" for path in POISONED
    }
    assert stored_rows(vault) == (len(GOOD_NOTES), len(GOOD_NOTES), [])
    for path in POISONED:
        with pytest.raises(NotFoundError):
            vault.get_note(path)
    hits = vault.search("orchard", k=50)
    assert {hit.path for hit in hits} == set(GOOD_NOTES)


def test_the_next_run_indexes_a_note_once_its_write_succeeds(
    write_vault: WriteVault, open_vault: OpenVault, monkeypatch: pytest.MonkeyPatch
) -> None:
    vault = open_vault(write_vault({**GOOD_NOTES, **POISONED}))
    with monkeypatch.context() as patched:
        poison(patched)
        assert vault.index().skipped == 3
    summary = vault.index()
    assert (summary.added, summary.unchanged, summary.skipped) == (3, len(GOOD_NOTES), 0)
    stats = vault.stats()
    assert (stats.notes, stats.chunks) == (len(GOOD_NOTES) + 3, len(GOOD_NOTES) + 3)


def test_a_changed_note_whose_rewrite_fails_keeps_its_last_version_whole(
    write_vault: WriteVault, open_vault: OpenVault, poisoned_writes: None
) -> None:
    root = write_vault(GOOD_NOTES)
    vault = open_vault(root)
    vault.index()
    (root / "good/note-03.md").write_text("# Changed\n\nPOISON now\n")
    summary = vault.index()
    assert (summary.changed, summary.skipped) == (0, 1)
    assert summary.warnings[0].path == "good/note-03.md"
    assert stored_rows(vault) == (len(GOOD_NOTES), len(GOOD_NOTES), [])
    assert [hit.path for hit in vault.search("kiwi3")] == ["good/note-03.md"]


def test_writing_a_note_whose_store_write_fails_says_so(
    write_vault: WriteVault, open_vault: OpenVault, poisoned_writes: None
) -> None:
    vault = open_vault(write_vault(GOOD_NOTES))
    vault.index()
    result = vault.write_note("inbox/poison.md", "# Poison\n\nPOISON\n")
    assert not result.indexed
    assert result.warning is not None
    assert "could not be stored (RuntimeError: poisoned chunk)" in result.warning
    assert stored_rows(vault) == (len(GOOD_NOTES), len(GOOD_NOTES), [])


SWAPS = 3000
VICTIMS = {f"n{i}.md": f"# Victim {i}\n" for i in range(20)}
SWAPPER = """
import contextlib, os, sys
folder, aside, outside, swaps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
for n in range(swaps):  # the folder, then a symlink out of the vault in its place
    with contextlib.suppress(OSError):  # a write made the folder again between two steps
        os.rename(folder, os.path.join(aside, f"inbox-{n}"))
        os.symlink(outside, folder)
        os.unlink(folder)
        os.mkdir(folder)
"""


@pytest.mark.slow
def test_issue26_item7_a_folder_swapped_for_a_symlink_during_writes_puts_nothing_outside(
    write_vault: WriteVault, open_vault: OpenVault, tmp_path: Path
) -> None:
    root = write_vault({"inbox/start.md": "# Start\n", "aside/keep.md": "# Keep\n"})
    outside = tmp_path / "outside"
    outside.mkdir()
    for name, text in VICTIMS.items():
        (outside / name).write_text(text)
    vault = open_vault(root)
    args = [root / "inbox", root / "aside", outside, SWAPS]
    # another process, as an attacker is: it runs alongside the writes, not between them
    swapper = subprocess.Popen([sys.executable, "-c", SWAPPER, *map(str, args)])
    calls = written = 0
    failures: list[str] = []
    while swapper.poll() is None or calls < 200:
        try:
            if calls % 4 == 3:
                vault.delete_note(f"inbox/n{calls % 20}.md", permanent=calls % 8 == 7)
            else:
                name = f"inbox/n{calls % 20}.md" if calls % 4 else f"inbox/new-{calls}.md"
                mode = ("create", "overwrite", "append")[calls % 4]
                vault.write_note(name, f"# Written {calls}\n", mode=mode)
                written += 1
        except VromError as exc:  # refused, or nothing there: said in one line
            failures.append(str(exc))
        calls += 1
    assert swapper.wait() == 0
    assert written > 0 and all("\n" not in failure for failure in failures)
    assert sorted(os.listdir(outside)) == sorted(VICTIMS), "nothing was written or left outside"
    for name, text in VICTIMS.items():
        assert (outside / name).read_text() == text, f"{name} outside the vault was changed"
    assert not any(root.rglob(".vrom-*")), "no temporary file is left behind"
