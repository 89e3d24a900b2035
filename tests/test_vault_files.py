"""Writing, listing, tagging and deleting notes through `Vault`: atomic, re-indexed, confined."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from vrom import NotFoundError, StorageError, ValidationError, Vault
from vrom.results import IndexSummary

NOTES = {
    "Home.md": "---\ntitle: Home\ntags: [hub]\n---\n# Home\nWelcome. #project\n",
    "Projects/Atlas.md": "---\ntags: [project/atlas, team]\nstatus: draft\n---\n# Atlas\nMaps.\n",
    "Projects/Beacon.md": "# Beacon\nLights. #project/beacon #team\n",
    "Projects/Deep/Core.md": "# Core\nInner. #projects\n",
    "Empty folder/.keep": "",
    ".obsidian/app.json": "{}",
    ".git/HEAD": "ref: refs/heads/main\n",
    "node_modules/pkg/readme.md": "# pkg\n",
}


@pytest.fixture
def vault(write_vault, open_vault) -> Vault:
    v: Vault = open_vault(write_vault(NOTES))
    v.index()
    return v


def _stray_temporaries(root: Path) -> list[str]:
    return [p.name for p in root.rglob(".vrom-*")]


def _paths(hits) -> list[str]:
    return [hit.path for hit in hits]


# -- write_note ---------------------------------------------------------------------------------


def test_create_writes_the_note_and_search_finds_it_at_once(vault: Vault) -> None:
    result = vault.write_note("Inbox/Idea", "# Idea\nA zeppelin made of kelp.\n")
    assert result.path == "Inbox/Idea.md"  # .md appended, folder created
    assert result.created and result.indexed and result.warning is None
    assert result.bytes == len(b"# Idea\nA zeppelin made of kelp.\n")
    assert (vault.root / "Inbox/Idea.md").read_text() == "# Idea\nA zeppelin made of kelp.\n"
    assert _paths(vault.search("zeppelin")) == ["Inbox/Idea.md"]
    assert vault.get_note("Inbox/Idea").title == "Idea"
    assert _stray_temporaries(vault.root) == []


def test_create_refuses_an_existing_note_and_leaves_it(vault: Vault) -> None:
    before = (vault.root / "Home.md").read_bytes()
    with pytest.raises(ValidationError) as caught:
        vault.write_note("Home.md", "clobbered")
    assert caught.value.code == "exists"
    assert (vault.root / "Home.md").read_bytes() == before


def test_overwrite_replaces_text_keeps_mode_and_reindexes(vault: Vault) -> None:
    path = vault.root / "Projects/Beacon.md"
    path.chmod(0o640)
    result = vault.write_note(
        "Projects/Beacon.md", "# Beacon\nNow a lighthouse.\n", mode="overwrite"
    )
    assert not result.created and result.indexed
    assert path.read_text() == "# Beacon\nNow a lighthouse.\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert _paths(vault.search("lighthouse")) == ["Projects/Beacon.md"]
    assert vault.search("Lights") == []
    assert _stray_temporaries(vault.root) == []


def test_overwrite_of_a_missing_note_creates_it(vault: Vault) -> None:
    result = vault.write_note("New.md", "fresh", mode="overwrite")
    assert result.created and (vault.root / "New.md").read_text() == "fresh"


def test_append_adds_one_blank_line_between(vault: Vault, write_vault) -> None:
    write_vault({"Log.md": "# Log\nfirst", "Crlf.md": "# Log\r\nfirst\r\n", "Blank.md": "a\n\n"})
    vault.write_note("Log.md", "second entry", mode="append")
    assert (vault.root / "Log.md").read_text() == "# Log\nfirst\n\nsecond entry"
    vault.write_note("Log.md", "third\n", mode="append")
    assert (vault.root / "Log.md").read_text() == "# Log\nfirst\n\nsecond entry\n\nthird\n"
    vault.write_note("Crlf.md", "second", mode="append")
    assert (vault.root / "Crlf.md").read_bytes() == b"# Log\r\nfirst\r\n\r\nsecond"
    vault.write_note("Blank.md", "b", mode="append")
    assert (vault.root / "Blank.md").read_text() == "a\n\nb"
    assert _paths(vault.search("third")) == ["Log.md"]


def test_append_keeps_a_byte_order_mark_and_needs_an_existing_note(vault, write_vault) -> None:
    write_vault({"Bom.md": b"\xef\xbb\xbf# Bom\n"})
    vault.write_note("Bom.md", "more", mode="append")
    assert (vault.root / "Bom.md").read_bytes() == b"\xef\xbb\xbf# Bom\n\nmore"
    with pytest.raises(NotFoundError):
        vault.write_note("Nope.md", "text", mode="append")
    assert not (vault.root / "Nope.md").exists()


def test_write_with_frontmatter_merges_into_the_result(vault: Vault) -> None:
    vault.write_note("Task.md", "---\nstatus: open\nowner: Ana\n---\n# Task\n")
    result = vault.write_note(
        "Task.md", "body added", mode="append", frontmatter={"status": "done", "tags": ["ops"]}
    )
    assert result.indexed
    text = (vault.root / "Task.md").read_text()
    assert text == "---\nstatus: done\nowner: Ana\ntags:\n- ops\n---\n# Task\n\nbody added"
    note = vault.get_note("Task")
    assert note.frontmatter == {"status": "done", "owner": "Ana", "tags": ["ops"]}
    assert note.tags == ["ops"]


@pytest.mark.parametrize(
    ("path", "content", "kwargs", "code"),
    [
        ("notes.txt", "x", {}, "not_a_note"),
        ("script.sh", "x", {}, "not_a_note"),
        ("Big.md", "x" * 2048, {}, "too_large"),
        ("Home.md", "x", {"mode": "replace"}, "invalid_value"),
        ("Nul.md", "a\x00b", {}, "invalid_value"),
        ("Lone.md", "\udcff", {}, "invalid_value"),
        ("Fm.md", "x", {"frontmatter": {"when": object()}}, "bad_frontmatter"),
    ],
)
def test_bad_writes_are_refused_before_anything_is_written(
    write_vault, open_vault, path, content, kwargs, code
) -> None:
    root = write_vault(NOTES)
    vault = Vault.open(root, state_dir=root.parent / "state", max_file_bytes=1024)
    try:
        before = sorted(p.relative_to(root) for p in root.rglob("*"))
        with pytest.raises(ValidationError) as caught:
            vault.write_note(path, content, **kwargs)
        assert caught.value.code == code
        assert sorted(p.relative_to(root) for p in root.rglob("*")) == before
    finally:
        vault.close()


def test_a_failed_replace_leaves_the_old_note_and_no_temporary(
    vault: Vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = (vault.root / "Home.md").read_bytes()

    def broken_replace(src: object, dst: object, **at_folders: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(StorageError, match="No space left"):
        vault.write_note("Home.md", "half", mode="overwrite")
    with pytest.raises(StorageError):
        vault.set_frontmatter("Home.md", {"x": 1})
    assert (vault.root / "Home.md").read_bytes() == before
    assert _stray_temporaries(vault.root) == []
    assert vault.get_note("Home").body == "# Home\nWelcome. #project\n"


def test_a_failed_reindex_keeps_the_write_and_says_so(
    vault: Vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_reindex(paths: object) -> IndexSummary:
        raise StorageError("database is locked")

    monkeypatch.setattr(vault, "reindex_paths", broken_reindex)
    result = vault.write_note("Later.md", "# Later\nunindexed words\n")
    assert result.created and not result.indexed
    assert result.warning is not None and "database is locked" in result.warning
    assert (vault.root / "Later.md").read_text() == "# Later\nunindexed words\n"
    with pytest.raises(StorageError, match="was written"):
        vault.set_frontmatter("Home.md", {"x": 1})
    assert "x: 1" in (vault.root / "Home.md").read_text()
    monkeypatch.undo()
    vault.index()
    assert _paths(vault.search("unindexed")) == ["Later.md"]


def test_read_only_notes_are_left_alone(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    before = (vault.root / "Home.md").read_bytes()
    (vault.root / "Home.md").chmod(0o444)
    monkeypatch.setattr(os, "access", lambda path, mode, **at: False)  # as if not root
    with pytest.raises(ValidationError) as caught:
        vault.write_note("Home.md", "x", mode="overwrite")
    assert caught.value.code == "read_only"
    assert (vault.root / "Home.md").read_bytes() == before


# -- set_frontmatter ----------------------------------------------------------------------------


def test_set_frontmatter_merges_and_keeps_the_body_byte_for_byte(vault, write_vault) -> None:
    body = "# Odd\r\n\r\n  spaced  \ttabs\r\n---\r\nnot frontmatter\r\n\r\n"
    write_vault({"Odd.md": "---\r\ntitle: Odd\r\nwhen: 2024-01-05\r\n---\r\n" + body})
    vault.index()
    note = vault.set_frontmatter("Odd", {"status": "done", "title": "Even"})
    assert note.title == "Even" and note.frontmatter["status"] == "done"
    data = (vault.root / "Odd.md").read_bytes()
    assert data.endswith(body.encode())
    assert data.startswith(b"---\r\ntitle: Even\r\nwhen: 2024-01-05\r\nstatus: done\r\n---\r\n")


def test_set_frontmatter_adds_replaces_and_removes(vault: Vault) -> None:
    body = "# Beacon\nLights. #project/beacon #team\n"
    note = vault.set_frontmatter("Projects/Beacon.md", {"owner": "Ana", "rank": 2})
    assert note.frontmatter == {"owner": "Ana", "rank": 2}
    assert (vault.root / "Projects/Beacon.md").read_text() == (
        "---\nowner: Ana\nrank: 2\n---\n" + body
    )
    note = vault.set_frontmatter("Projects/Beacon.md", {"rank": 3}, merge=False)
    assert note.frontmatter == {"rank": 3}
    note = vault.set_frontmatter("Projects/Beacon.md", {}, merge=False)
    assert note.frontmatter == {}
    assert (vault.root / "Projects/Beacon.md").read_text() == body


def test_broken_frontmatter_is_never_clobbered(vault, write_vault) -> None:
    broken = "---\ntitle: [unclosed\n---\n# Broken\n"
    write_vault({"Broken.md": broken, "Open.md": "---\ntitle: x\n# no closing\n"})
    vault.index()
    for path in ("Broken.md", "Open.md"):
        before = (vault.root / path).read_bytes()
        with pytest.raises(ValidationError) as caught:
            vault.set_frontmatter(path, {"x": 1})
        assert caught.value.code == "bad_frontmatter"
        with pytest.raises(ValidationError):
            vault.write_note(path, "more", mode="append", frontmatter={"x": 1})
        assert (vault.root / path).read_bytes() == before


def test_frontmatter_values_cannot_end_the_block_early(vault: Vault) -> None:
    tricky = "line\n---\nbody: injected"
    note = vault.set_frontmatter("Home.md", {"summary": tricky, "---": "key"})
    assert note.frontmatter["summary"] == tricky and note.frontmatter["---"] == "key"
    assert note.body == "# Home\nWelcome. #project\n"


def test_set_frontmatter_needs_an_existing_note(vault: Vault) -> None:
    with pytest.raises(NotFoundError):
        vault.set_frontmatter("Missing.md", {"x": 1})
    assert not (vault.root / "Missing.md").exists()


# -- delete_note --------------------------------------------------------------------------------


def test_delete_moves_to_trash_and_drops_from_the_store(vault: Vault, write_vault) -> None:
    result = vault.delete_note("Projects/Atlas")
    assert result.path == "Projects/Atlas.md"
    assert result.trashed_to == ".trash/Projects/Atlas.md" and result.index_updated
    assert not (vault.root / "Projects/Atlas.md").exists()
    assert (vault.root / ".trash/Projects/Atlas.md").read_text().endswith("Maps.\n")
    assert vault.search("Maps") == []
    with pytest.raises(NotFoundError):
        vault.get_note("Projects/Atlas")
    # a second note of the same path gets a timestamped name in the trash
    write_vault({"Projects/Atlas.md": "# Atlas again\n"})
    again = vault.delete_note("Projects/Atlas.md")
    assert again.trashed_to is not None and again.trashed_to != result.trashed_to
    assert again.trashed_to.startswith(".trash/Projects/Atlas.") and again.trashed_to.endswith(
        ".md"
    )
    assert (vault.root / again.trashed_to).read_text() == "# Atlas again\n"
    assert vault.index().added == 0  # the trash is never indexed


def test_delete_permanently_and_missing_notes(vault: Vault) -> None:
    result = vault.delete_note("Home.md", permanent=True)
    assert result.trashed_to is None and result.index_updated
    assert not (vault.root / "Home.md").exists() and not (vault.root / ".trash").exists()
    with pytest.raises(NotFoundError):
        vault.delete_note("Home.md")
    with pytest.raises(NotFoundError):
        vault.delete_note("Projects")  # means Projects.md; the folder is never deleted
    (vault.root / "Folder.md").mkdir()
    with pytest.raises(ValidationError, match="is a folder"):
        vault.delete_note("Folder.md")
    assert (vault.root / "Folder.md").is_dir()


# -- listing and tags ---------------------------------------------------------------------------


def test_list_folder_shows_subfolders_and_notes_directly_inside(vault: Vault) -> None:
    root = vault.list_folder()
    assert root.folder == ""
    assert list(root.folders) == ["Empty folder", "Projects"]
    assert [n.path for n in root.notes] == ["Home.md"]
    projects = vault.list_folder("Projects/")
    assert projects.folder == "Projects"
    assert list(projects.folders) == ["Projects/Deep"]
    assert [(n.path, n.title) for n in projects.notes] == [
        ("Projects/Atlas.md", "Atlas"),
        ("Projects/Beacon.md", "Beacon"),
    ]
    assert [n.path for n in vault.list_folder("Projects\\Deep").notes] == ["Projects/Deep/Core.md"]
    with pytest.raises(NotFoundError):
        vault.list_folder("Nowhere")
    for hidden in (".obsidian", ".git", "node_modules", "../"):
        with pytest.raises(ValidationError) as caught:
            vault.list_folder(hidden)
        assert caught.value.code == "path_outside_vault"


def test_tags_are_counted_and_nested_tags_match(vault: Vault) -> None:
    counts = {t.tag: t.count for t in vault.tags()}
    assert counts == {
        "hub": 1,
        "project": 1,
        "project/atlas": 1,
        "project/beacon": 1,
        "team": 2,
        "projects": 1,
    }
    assert vault.tags()[0].tag == "team"  # most used first, then by name
    assert [n.path for n in vault.notes_with_tag("project")] == [
        "Home.md",
        "Projects/Atlas.md",
        "Projects/Beacon.md",
    ]
    assert [n.path for n in vault.notes_with_tag("#Project/Atlas")] == ["Projects/Atlas.md"]
    assert vault.notes_with_tag("nothing") == []
    with pytest.raises(ValidationError):
        vault.notes_with_tag(" # ")


def test_resolve_note_path_normalises_inside_paths(vault: Vault) -> None:
    assert vault.resolve_note_path("./Projects//Atlas.md") == "Projects/Atlas.md"
    assert vault.resolve_note_path("Projects\\Atlas") == "Projects/Atlas"
    assert vault.resolve_note_path("100%25 done.md") == "100%25 done.md"  # kept literally


def test_symlinks_inside_the_vault_are_read_but_not_written_through(vault: Vault) -> None:
    (vault.root / "Alias.md").symlink_to("Home.md")
    (vault.root / "Shortcut").symlink_to("Projects", target_is_directory=True)
    vault.index()
    assert vault.get_note("Alias.md").body == vault.get_note("Home.md").body
    assert vault.resolve_note_path("Shortcut/Atlas.md") == "Shortcut/Atlas.md"
    assert "Shortcut" in vault.list_folder().folders
    for path in ("Alias.md", "Shortcut/Atlas.md", "Shortcut/New.md"):
        with pytest.raises(ValidationError) as caught:
            vault.write_note(path, "x", mode="overwrite")
        assert caught.value.code == "path_is_symlink"
    assert (vault.root / "Alias.md").is_symlink()
    assert not (vault.root / "Projects/New.md").exists()


# -- issue 26 item 7: a folder swapped for a symlink once the path was checked -------------------


def _swap_for_symlink(folder: Path, target: Path) -> None:
    """Move ``folder`` aside (inside the vault) and put a symlink to ``target`` in its place."""
    folder.rename(folder.with_name(folder.name + " aside"))
    folder.symlink_to(target, target_is_directory=True)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    place = tmp_path / "outside"
    place.mkdir()
    (place / "Atlas.md").write_text("# Not the vault's\n")
    return place


def test_issue26_item7_a_folder_swapped_for_a_symlink_mid_write_gets_no_note_outside(
    vault: Vault, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import secrets

    real_token_hex = secrets.token_hex

    def swap_then_name(nbytes: int) -> str:  # the temporary file is named after every check
        monkeypatch.setattr(secrets, "token_hex", real_token_hex)
        _swap_for_symlink(vault.root / "Projects", outside)
        return real_token_hex(nbytes)

    monkeypatch.setattr(secrets, "token_hex", swap_then_name)
    vault.write_note("Projects/New.md", "# New\n")
    assert sorted(p.name for p in outside.iterdir()) == ["Atlas.md"], "nothing written outside"
    assert (vault.root / "Projects aside/New.md").read_text() == "# New\n"
    assert _stray_temporaries(vault.root) == []


def _swap_after_confine(vault: Vault, outside: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every write tool find ``Projects`` swapped for a symlink to ``outside`` right after
    its path was confined: the race a write must lose safely, made certain."""
    import vrom._vault_files as vault_files

    real_confine = vault_files.confine

    def confine_then_swap(root: Path, path: str, purpose: str) -> object:
        confined = real_confine(root, path, purpose)  # type: ignore[arg-type]
        _swap_for_symlink(vault.root / "Projects", outside)
        return confined

    monkeypatch.setattr(vault_files, "confine", confine_then_swap)


def test_issue26_item7_a_delete_through_a_swapped_folder_takes_nothing_from_outside(
    vault: Vault, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _swap_after_confine(vault, outside, monkeypatch)
    for permanent in (False, True):
        with pytest.raises(ValidationError) as caught:
            vault.delete_note("Projects/Atlas.md", permanent=permanent)
        assert caught.value.code == "path_is_symlink"
        assert "'Projects' of the vault is a symlink" in str(caught.value)
        (vault.root / "Projects").unlink()
        (vault.root / "Projects aside").rename(vault.root / "Projects")
    assert (outside / "Atlas.md").read_text() == "# Not the vault's\n"
    assert not (vault.root / ".trash").exists()
    assert (vault.root / "Projects/Atlas.md").is_file()


def test_a_folder_that_is_a_symlink_when_the_write_opens_it_is_refused(
    vault: Vault, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _swap_after_confine(vault, outside, monkeypatch)
    calls = [
        lambda: vault.write_note("Projects/New.md", "# New\n"),
        lambda: vault.write_note("Projects/Atlas.md", "more", mode="append"),
        lambda: vault.write_note("Projects/Atlas.md", "# Over\n", mode="overwrite"),
        lambda: vault.set_frontmatter("Projects/Atlas.md", {"x": 1}),
    ]
    for call in calls:
        with pytest.raises(ValidationError) as caught:
            call()
        assert caught.value.code == "path_is_symlink"
        (vault.root / "Projects").unlink()
        (vault.root / "Projects aside").rename(vault.root / "Projects")
    assert sorted(p.name for p in outside.iterdir()) == ["Atlas.md"]
    assert (outside / "Atlas.md").read_text() == "# Not the vault's\n"
