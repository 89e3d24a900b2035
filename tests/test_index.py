"""Indexing a vault: incremental updates, renames, warnings, and the vault left untouched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vrom import NotFoundError, ValidationError, Vault
from vrom.ingest import indexer
from vrom.state import store_path

NOTES = {
    "Welcome.md": "---\ntitle: Welcome\ntags: [start]\n---\n# Welcome\nSee [[Guide]] and #intro.\n",
    "Guide.md": "# Guide\n## Install\nRun the installer.\n## Use\nSearch your notes.\n",
    "folder/Deep.md": "# Deep\nA note in a folder linking [[Welcome]].\n",
}


def _snapshot(root: Path) -> dict[str, tuple[bytes, float]]:
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_index_builds_the_store_outside_the_vault_and_never_writes_the_vault(
    write_vault, open_vault, tmp_path: Path
) -> None:
    root = write_vault(NOTES)
    before = _snapshot(root)
    vault = open_vault(root)
    summary = vault.index()
    assert (summary.added, summary.notes, summary.skipped) == (3, 3, 0)
    assert summary.chunks >= 3
    assert _snapshot(root) == before
    assert vault.store.location == str(store_path(root, tmp_path / "state"))
    assert not Path(vault.store.location).is_relative_to(root)
    assert vault.store.integrity_problems() == []


def test_second_index_touches_nothing(write_vault, open_vault) -> None:
    vault = open_vault(write_vault(NOTES))
    vault.index()
    summary = vault.index()
    assert (summary.added, summary.changed, summary.removed, summary.unchanged) == (0, 0, 0, 3)


def test_changed_deleted_added_and_touched_notes(write_vault, open_vault) -> None:
    root = write_vault(NOTES)
    vault = open_vault(root)
    vault.index()
    guide_id = vault.get_note("Guide").note_id
    (root / "Guide.md").write_text("# Guide\nNow about bicycles.\n")
    (root / "folder/Deep.md").unlink()
    (root / "New.md").write_text("# New\nfresh\n")
    welcome = root / "Welcome.md"
    os.utime(welcome, (1_000_000, 1_000_000))  # same content, new mtime
    summary = vault.index()
    assert (summary.added, summary.changed, summary.removed, summary.unchanged) == (1, 1, 1, 1)
    assert vault.get_note("Guide").note_id == guide_id
    assert [h.path for h in vault.search("bicycles")] == ["Guide.md"]
    assert vault.search("installer") == []
    assert vault.get_note("Welcome").modified_unix == 1_000_000
    with pytest.raises(NotFoundError):
        vault.get_note("folder/Deep")
    assert vault.store.integrity_problems() == []


def test_a_rename_keeps_the_note_id(write_vault, open_vault) -> None:
    root = write_vault(NOTES)
    vault = open_vault(root)
    vault.index()
    old_id = vault.get_note("folder/Deep.md").note_id
    (root / "folder/Deep.md").rename(root / "Moved.md")
    summary = vault.index()
    assert (summary.renamed, summary.added, summary.removed) == (1, 0, 0)
    note = vault.get_note("Moved")
    assert note.note_id == old_id and note.path == "Moved.md"
    assert [h.path for h in vault.search("folder linking")] == ["Moved.md"]


def test_changing_the_chunk_strategy_rechunks_everything(write_vault, tmp_path: Path) -> None:
    root = write_vault(NOTES)
    with Vault.open(root, tmp_path / "state") as vault:
        vault.index()
    with Vault.open(root, tmp_path / "state", chunk_chars=500, chunk_overlap=50) as vault:
        summary = vault.index()
        assert summary.changed == 3
        assert vault.stats().chunk_strategy["target_chars"] == 500
        assert vault.index().unchanged == 3


def test_a_strategy_change_is_finished_even_after_an_interrupted_run(
    write_vault, tmp_path: Path
) -> None:
    root = write_vault(NOTES)
    with Vault.open(root, tmp_path / "state") as vault:
        vault.index()
    # a run with another strategy got as far as one note before it was stopped
    with Vault.open(root, tmp_path / "state", chunk_chars=500, chunk_overlap=50) as vault:
        assert vault.reindex_paths(["Guide.md"]).changed == 1
    with Vault.open(root, tmp_path / "state") as vault:
        summary = vault.index()
        assert (summary.changed, summary.unchanged) == (1, 2)


def test_two_indexers_on_one_new_store_both_succeed(write_vault, tmp_path: Path) -> None:
    root = write_vault(NOTES)
    first = Vault.open(root, tmp_path / "state")
    second = Vault.open(root, tmp_path / "state")

    def race(done: int, total: int, path: str) -> None:
        if done == 1:  # the second indexer runs to the end while the first is under way
            second.index()

    summary = first.index(race)
    assert summary.notes == 3
    assert first.store.integrity_problems() == []
    first.close()
    second.close()


def test_a_store_opened_by_file_keeps_its_chunk_strategy(write_vault, tmp_path: Path) -> None:
    root = write_vault(NOTES)
    with Vault.open(root, tmp_path / "state", chunk_chars=500, chunk_overlap=50) as vault:
        vault.index()
        location = vault.store.location
    with Vault.open_store(location) as vault:
        assert vault.index().unchanged == 3


def test_force_rewrites_every_note(write_vault, open_vault) -> None:
    vault = open_vault(write_vault(NOTES))
    vault.index()
    assert vault.index(force=True).changed == 3


def test_bad_files_are_skipped_with_warnings_and_never_crash(write_vault, open_vault) -> None:
    root = write_vault(
        {
            "good.md": "# Good\nfine\n",
            "binary.md": b"\x00\x01\x02binary",
            "latin1.md": b"caf\xe9 au lait",
            "broken.md": "---\n: : :\n  - [unclosed\n---\nbody text survives\n",
            "huge.md": "z" * 5000,
        }
    )
    vault = Vault.open(root, max_file_bytes=4096)
    summary = vault.index()
    reasons = {w.path: w.reason for w in summary.warnings}
    assert "binary" in reasons["binary.md"]
    assert "invalid UTF-8" in reasons["latin1.md"]
    assert "malformed frontmatter" in reasons["broken.md"]
    assert "4,096-byte limit" in reasons["huge.md"]
    assert summary.skipped == 2
    assert summary.notes == 3
    assert [h.path for h in vault.search("survives")] == ["broken.md"]
    assert [h.path for h in vault.search("caf*")] == ["latin1.md"]
    vault.close()


def test_a_note_that_becomes_binary_is_removed(write_vault, open_vault) -> None:
    root = write_vault({"a.md": "# A\ntext\n"})
    vault = open_vault(root)
    vault.index()
    (root / "a.md").write_bytes(b"\x00binary now")
    summary = vault.index()
    assert summary.removed == 1 and summary.notes == 0


def test_reindex_paths_updates_only_the_named_notes(write_vault, open_vault) -> None:
    root = write_vault(NOTES)
    vault = open_vault(root)
    vault.index()
    (root / "Guide.md").write_text("# Guide\nkayaks now\n")
    (root / "Welcome.md").write_text("# Welcome\nnot re-indexed yet\n")
    summary = vault.reindex_paths(["Guide.md"])
    assert (summary.changed, summary.unchanged, summary.added) == (1, 0, 0)
    assert [h.path for h in vault.search("kayaks")] == ["Guide.md"]
    assert vault.search("re-indexed") == []

    (root / "folder/Deep.md").unlink()
    (root / "Brand new.md").write_text("# Brand new\nzebras\n")
    summary = vault.reindex_paths([root / "folder/Deep.md", "Brand new.md"])
    assert (summary.removed, summary.added) == (1, 1)
    assert [h.path for h in vault.search("zebras")] == ["Brand new.md"]
    assert vault.reindex_paths(".obsidian/x.md").skipped == 1
    assert vault.reindex_paths("node_modules/pkg/readme.md").skipped == 1


def test_reindex_paths_drops_a_note_that_grew_past_the_limit(write_vault, tmp_path) -> None:
    root = write_vault({"a.md": "# A\nsmall\n"})
    with Vault.open(root, tmp_path / "state", max_file_bytes=100) as vault:
        vault.index()
        (root / "a.md").write_text("# A\n" + "big " * 100)
        summary = vault.reindex_paths(["a.md"])
        assert (summary.removed, summary.skipped, summary.notes) == (1, 1, 0)
        assert "100-byte limit" in summary.warnings[0].reason


@pytest.mark.parametrize("path", ["../outside.md", "/etc/passwd", "folder/../../x.md", "."])
def test_reindex_paths_refuses_paths_outside_the_vault(write_vault, open_vault, path: str) -> None:
    vault = open_vault(write_vault(NOTES))
    with pytest.raises(ValidationError):
        vault.reindex_paths([path])


def test_reindex_paths_refuses_symlinks_leaving_the_vault(
    write_vault, open_vault, tmp_path: Path
) -> None:
    root = write_vault(NOTES)
    secret = tmp_path / "secret.md"
    secret.write_text("secret")
    os.symlink(secret, root / "link.md")
    vault = open_vault(root)
    with pytest.raises(ValidationError, match="outside the vault"):
        vault.reindex_paths(["link.md"])


def test_opening_a_missing_folder_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="does not exist"):
        Vault.open(tmp_path / "missing")
    with pytest.raises(ValidationError):
        Vault.open(tmp_path, chunk_chars=10)


def test_a_note_the_parser_cannot_handle_costs_only_that_note(
    write_vault, open_vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_parse = indexer.parse_note

    def fragile_parse(text: str, path: str):  # a stand-in for a parser bug on one input
        if "trigger" in text:
            raise RuntimeError("parser bug")
        return real_parse(text, path)

    monkeypatch.setattr(indexer, "parse_note", fragile_parse)
    vault = open_vault(write_vault({"ok.md": "# Ok\nfine\n", "bad.md": "# Bad\ntrigger\n"}))
    summary = vault.index()
    assert (summary.added, summary.skipped, summary.notes) == (1, 1, 1)
    assert "could not be parsed (RuntimeError: parser bug)" in summary.warnings[0].reason


def test_a_store_without_vectors_looks_no_vector_up_while_indexing(write_vault, open_vault) -> None:
    """Reusing a stored vector needs one to exist: a keyword-only store's index probes once per
    write, rather than looking every chunk's embedded input up (116 lookups on the hub vault)."""
    vault = open_vault(write_vault(NOTES))
    statements: list[str] = []
    vault.store._db.conn.set_trace_callback(statements.append)
    try:
        vault.index()
    finally:
        vault.store._db.conn.set_trace_callback(None)
    assert any(s.startswith("INSERT INTO chunks") for s in statements)
    assert not [s for s in statements if "FROM vectors WHERE input_hash" in s]
