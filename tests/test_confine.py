"""`confine`: the one rule that keeps a user's path inside the vault, for each purpose.

Each test builds a tiny vault in ``tmp_path`` (with a sibling ``outside/`` folder and symlinks
made here) and asks `confine` directly; the last tests check that the facade applies it and that
the MCP face leaves the checking to the facade.
"""

from __future__ import annotations

import ast
import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from vrom import ValidationError, Vault
from vrom.ingest.confine import (
    IS_SYMLINK,
    NOT_A_NOTE,
    OUTSIDE,
    TOO_LONG,
    UNRESOLVED,
    ConfinedPath,
    Purpose,
    confine,
    is_inside,
    is_symlink_free,
)

TOOLS_MODULE = Path(__file__).parent.parent / "src" / "vrom" / "server" / "tools.py"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A vault with a note, a subfolder, hidden folders, and symlinks in and out."""
    vault = tmp_path / "vault"
    (vault / "Projects").mkdir(parents=True)
    (vault / "Projects/Atlas.md").write_text("# Atlas\n")
    (vault / "Home.md").write_text("# Home\n")
    (vault / ".obsidian").mkdir()
    (vault / ".obsidian/app.json").write_text("{}")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n")
    (vault / "leak.md").symlink_to(outside / "secret.md")
    (vault / "linked").symlink_to(outside, target_is_directory=True)
    (vault / "Alias.md").symlink_to("Home.md")
    (vault / "Shortcut").symlink_to("Projects", target_is_directory=True)
    (vault / "settings.md").symlink_to(".obsidian/app.json")
    return vault


def _refused(root: Path, path: str, purpose: Purpose, code: str = OUTSIDE) -> str:
    with pytest.raises(ValidationError) as caught:
        confine(root, path, purpose)
    assert caught.value.code == code, str(caught.value)
    assert "\n" not in str(caught.value)
    return str(caught.value)


# -- read: a path from the vault root ---------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "relative"),
    [
        ("Home.md", "Home.md"),
        ("./Projects//Atlas.md", "Projects/Atlas.md"),
        ("Projects\\Atlas", "Projects/Atlas"),  # no .md added: only writes add it
        ("Alias.md", "Alias.md"),  # a symlink that stays inside is read through
        ("Shortcut/Atlas.md", "Shortcut/Atlas.md"),
        ("Not yet.md", "Not yet.md"),  # need not exist
        ("100%25 done.md", "100%25 done.md"),  # other % text is literal
        ("12", "12"),  # a note id, looked up by the caller
    ],
)
def test_read_takes_paths_from_the_vault_root(root: Path, path: str, relative: str) -> None:
    confined = confine(root, path, "read")
    assert confined == ConfinedPath(root.resolve().joinpath(*relative.split("/")), relative)


@pytest.mark.parametrize(
    "path",
    [
        "../outside/secret.md",
        "Projects/../Home.md",  # even a '..' that stays inside
        "..\\outside\\secret.md",
        "%2e%2e/outside/secret.md",
        "\uff0e\uff0e/outside/secret.md",
        "..\uff0foutside\uff0fsecret.md",
        "...",
        "/etc/passwd",
        "\\\\server\\share\\x.md",
        "//server/share/x.md",
        "C:\\Windows\\x.md",
        "C:x.md",
        "~/x.md",
        "file:///tmp/x.md",
        "Home\x00.md",
        "Notes/\x1b[2Jx.md",
        ".obsidian/app.json",
        "%2eobsidian/app.json",
        "Projects/.hidden.md",
        "node_modules/x.md",
        "leak.md",
        "linked/secret.md",
        "settings.md",  # a symlink into a hidden folder
        "",
        " ",
        ".",
        "./",
    ],
)
def test_read_refuses_paths_that_could_escape(root: Path, path: str) -> None:
    _refused(root, path, "read")


def test_read_refuses_an_absolute_path_even_inside_the_vault(root: Path) -> None:
    assert "absolute paths" in _refused(root, str(root / "Home.md"), "read")


def test_a_refusal_names_the_path_and_the_reason(root: Path) -> None:
    message = _refused(root, "linked/secret.md", "read")
    assert message.startswith("refused path 'linked/secret.md': a symlink on the way resolves")
    assert "outside the vault" in message


# -- reference: read, or an absolute path inside the vault ------------------------------------


def test_reference_takes_an_absolute_path_inside_the_vault(root: Path) -> None:
    assert confine(root, str(root / "Projects/Atlas.md"), "reference").relative == (
        "Projects/Atlas.md"
    )
    # '..' in an absolute path is folded before the check
    assert confine(root, f"{root}/Projects/../Home.md", "reference").relative == "Home.md"
    # and relative paths follow the read rules
    assert confine(root, "Projects/Atlas.md", "reference").relative == "Projects/Atlas.md"
    _refused(root, "Projects/../Home.md", "reference")


def test_reference_finds_the_vault_through_a_symlinked_root(root: Path, tmp_path: Path) -> None:
    alias = tmp_path / "alias-of-vault"
    alias.symlink_to(root, target_is_directory=True)
    assert confine(root, str(alias / "Home.md"), "reference").relative == "Home.md"
    assert confine(alias, str(alias / "Home.md"), "reference").relative == "Home.md"


@pytest.mark.parametrize(
    "path",
    [
        "{outside}/secret.md",
        "{vault}/../outside/secret.md",
        "{vault}/leak.md",
        "{vault}/linked/secret.md",
        "{vault}/.obsidian/app.json",
        "{vault}/settings.md",
        "{vault}",
        "/etc/passwd",
    ],
)
def test_reference_refuses_absolute_paths_that_leave_the_vault(
    root: Path, tmp_path: Path, path: str
) -> None:
    _refused(root, path.format(vault=root, outside=tmp_path / "outside"), "reference")


# -- write: read rules, Markdown only, no symlink on the way ----------------------------------


@pytest.mark.parametrize(
    ("path", "relative"),
    [
        ("Inbox/Idea", "Inbox/Idea.md"),
        ("Dr. Who", "Dr. Who.md"),
        ("v1..2", "v1..2.md"),
        ("Notes.MARKDOWN", "Notes.MARKDOWN"),
        ("Home.md", "Home.md"),
    ],
)
def test_write_takes_markdown_notes_and_adds_md(root: Path, path: str, relative: str) -> None:
    assert confine(root, path, "write").relative == relative


def test_write_refuses_other_files_symlinks_and_absolute_paths(root: Path) -> None:
    assert "'.txt'" in _refused(root, "notes.txt", "write", NOT_A_NOTE)
    assert "use 'Home.md'" in _refused(root, "Alias.md", "write", IS_SYMLINK)
    assert "'Projects/Atlas.md'" in _refused(root, "Shortcut/Atlas.md", "write", IS_SYMLINK)
    for path in ["leak.md", "linked/new.md", "settings.md", str(root / "Home.md"), "../x.md"]:
        _refused(root, path, "write")


# -- reindex: a file as it is on disk ---------------------------------------------------------


def test_reindex_takes_relative_and_absolute_paths_even_of_gone_files(root: Path) -> None:
    real = root.resolve()
    assert confine(root, "Home.md", "reindex") == ConfinedPath(real / "Home.md", "Home.md")
    assert confine(root, str(root / "Projects/Atlas.md"), "reindex").relative == (
        "Projects/Atlas.md"
    )
    assert confine(root, "Gone.md", "reindex").relative == "Gone.md"
    assert confine(root, "Projects/../Home.md", "reindex").relative == "Home.md"


def test_reindex_resolves_symlinks_to_the_note_they_lead_to(root: Path) -> None:
    assert confine(root, "Alias.md", "reindex").relative == "Home.md"
    assert confine(root, "Shortcut/Atlas.md", "reindex").relative == "Projects/Atlas.md"


def test_reindex_takes_names_as_they_are_on_disk(root: Path) -> None:
    # the indexer skips hidden and ignored folders itself, as the full index does; and odd
    # names are real files that the watcher reports, not tricks
    for path in [".obsidian/x.md", "node_modules/x.md", "~draft.md", "A: idea.md", "%2e%2e.md"]:
        assert confine(root, path, "reindex").relative == path
    assert confine(root, "settings.md", "reindex").relative == ".obsidian/app.json"


@pytest.mark.parametrize(
    "path",
    [
        "../outside/secret.md",
        "Projects/../../outside/secret.md",
        "{outside}/secret.md",
        "/etc/passwd",
        "leak.md",
        "linked/secret.md",
        "linked/gone.md",
        ".",
        "",
        "{vault}",
        "Home.md\x00/../../outside/secret.md",
    ],
)
def test_reindex_refuses_what_leads_outside(root: Path, tmp_path: Path, path: str) -> None:
    _refused(root, path.format(vault=root, outside=tmp_path / "outside"), "reindex")


# -- every purpose ----------------------------------------------------------------------------


@pytest.mark.parametrize("purpose", ["read", "reference", "write", "reindex"])
def test_every_purpose_refuses_the_same_escapes(root: Path, purpose: Purpose) -> None:
    for path in ["../outside/secret.md", "leak.md", "linked/secret.md", "x\x00.md", "."]:
        _refused(root, path, purpose)
    with pytest.raises(ValidationError, match="must be a string") as caught:
        confine(root, Path("Home.md"), purpose)  # type: ignore[arg-type]
    assert caught.value.code == OUTSIDE


def test_an_unknown_purpose_is_refused(root: Path) -> None:
    with pytest.raises(ValidationError, match="purpose"):
        confine(root, "Home.md", "execute")  # type: ignore[arg-type]


def test_the_shared_predicates(root: Path, tmp_path: Path) -> None:
    real = root.resolve()
    assert is_inside(real, real) and is_inside(real, real / "a/b.md")
    assert not is_inside(real, tmp_path / "outside") and not is_inside(real, f"{real}-2/x.md")
    assert is_symlink_free(real / "Home.md") and is_symlink_free(real / "new/folder/x.md")
    assert not is_symlink_free(real / "Alias.md")
    assert not is_symlink_free(real / "linked/new/x.md")


# -- the facade applies it; the MCP face does not check paths itself --------------------------


def test_get_note_takes_absolute_paths_unless_asked_for_a_path_from_the_root(
    root: Path, tmp_path: Path
) -> None:
    with Vault.open(root, tmp_path / "state", embedder=None) as vault:
        vault.index()
        absolute = str(root / "Projects/Atlas.md")
        assert vault.get_note(absolute).path == "Projects/Atlas.md"
        assert vault.related(absolute).note.path == "Projects/Atlas.md"
        for read in (vault.get_note, vault.related):
            with pytest.raises(ValidationError) as caught:
                read(absolute, purpose="read")
            assert caught.value.code == OUTSIDE
        # names and ids are not paths, and work either way
        note = vault.get_note("Atlas", purpose="read")
        assert vault.get_note(str(note.note_id), purpose="read").path == "Projects/Atlas.md"
        with pytest.raises(ValidationError, match="purpose"):
            vault.get_note("Atlas", purpose="write")  # type: ignore[arg-type]


def test_reindex_paths_refuses_a_batch_before_reindexing_any(root: Path, tmp_path: Path) -> None:
    with Vault.open(root, tmp_path / "state", embedder=None) as vault:
        vault.index()
        (root / "Home.md").write_text("# Home\nkayaks\n")
        with pytest.raises(ValidationError) as caught:
            vault.reindex_paths(["Home.md", "../outside/secret.md"])
        assert caught.value.code == OUTSIDE
        assert vault.search("kayaks") == []
        assert vault.reindex_paths(["Home.md"]).changed == 1
        assert [h.path for h in vault.search("kayaks")] == ["Home.md"]


def test_a_symlink_in_the_trash_makes_no_folder_outside(root: Path, tmp_path: Path) -> None:
    (root / "Projects/Sub").mkdir()
    (root / "Projects/Sub/Deep.md").write_text("# Deep\n")
    (root / ".trash").mkdir()
    (root / ".trash/Projects").symlink_to(tmp_path / "outside", target_is_directory=True)
    with Vault.open(root, tmp_path / "state", embedder=None) as vault:
        vault.index()
        with pytest.raises(ValidationError) as caught:
            vault.delete_note("Projects/Sub/Deep.md")
        assert caught.value.code == OUTSIDE
    assert sorted(p.name for p in (tmp_path / "outside").iterdir()) == ["secret.md"]
    assert (root / "Projects/Sub/Deep.md").is_file()


def test_the_mcp_tools_leave_path_checks_to_the_facade() -> None:
    tree = ast.parse(TOOLS_MODULE.read_text(encoding="utf-8"))
    names = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    names |= {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    checks = {"resolve_note_path", "confine", "is_inside", "resolve_in_vault", "realpath"}
    assert not names & checks
    imported = [
        node.module or ""
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("vrom.ingest")
    ]
    assert imported == []


def test_the_mcp_tools_refuse_an_absolute_path_even_inside_the_vault(root: Path) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from vrom.server.app import build_server
    from vrom.server.state import ServerState

    state = ServerState(root, embedder=None, watch=False)
    state.open_explicit()
    absolute = str(root / "Projects/Atlas.md")

    async def main() -> list[Any]:
        async with Client(build_server(state), mode="legacy") as client:
            results = [
                await client.call_tool(name, {"path": path})
                for name in ("vault_read", "vault_frontmatter", "vault_wikilinks", "vault_related")
                for path in (absolute, "Projects/Atlas.md")
            ]
        return results

    try:
        results = asyncio.run(main())
    finally:
        state.close()
    for refused, allowed in zip(results[::2], results[1::2], strict=True):
        assert refused.is_error and "absolute paths" in refused.content[0].text
        assert not allowed.is_error, allowed.content[0].text
        assert "Projects/Atlas.md" in json.dumps(json.loads(allowed.content[0].text))


@pytest.mark.parametrize("purpose", ["read", "write", "reindex"])
def test_issue26_item7_a_folder_swapped_while_its_path_is_resolved_is_a_refusal(
    root: Path, purpose: Purpose, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    real_realpath = os.path.realpath

    def swapped_meanwhile(path: Any, **options: Any) -> str:
        if str(path).endswith("Atlas.md"):  # readlink after lstat: the symlink is gone again
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real_realpath(path, **options)

    monkeypatch.setattr(os.path, "realpath", swapped_meanwhile)
    message = _refused(root, "Projects/Atlas.md", purpose, UNRESOLVED)
    assert message == (
        "refused path 'Projects/Atlas.md': it could not be resolved (No such file or"
        " directory); a folder on the way changed meanwhile: try again"
    )


LONG_NAME = "x" * 300


@pytest.mark.parametrize("purpose", ["read", "reference", "write"])
@pytest.mark.parametrize(
    "path", [LONG_NAME, f"Projects/{LONG_NAME}.md", "/".join(["deep" * 50] * 25)]
)
def test_issue26_item10_a_path_too_long_for_the_file_system_is_a_one_line_refusal(
    root: Path, purpose: Purpose, path: str
) -> None:
    message = _refused(root, path, purpose, TOO_LONG)
    assert message.endswith(("use a shorter name", "use a shorter path"))
    assert len(message) < 400


def test_issue26_item10_every_vault_call_refuses_a_300_character_path(
    root: Path, tmp_path: Path
) -> None:
    with Vault.open(root, tmp_path / "state", embedder=None) as vault:
        vault.index()
        calls = [
            lambda: vault.list_folder(LONG_NAME),
            lambda: vault.get_note(LONG_NAME),
            lambda: vault.related(LONG_NAME),
            lambda: vault.resolve_note_path(LONG_NAME),
            lambda: vault.write_note(LONG_NAME, "# Long\n"),
            lambda: vault.write_note(f"{LONG_NAME}/n.md", "# Long\n"),
            lambda: vault.set_frontmatter(LONG_NAME, {"x": 1}),
            lambda: vault.delete_note(LONG_NAME),
            lambda: vault.check_format(LONG_NAME),
        ]
        for call in calls:
            with pytest.raises(ValidationError) as caught:
                call()
            assert caught.value.code == TOO_LONG, str(caught.value)
        # the longest name the file system takes is a note like any other
        longest = "y" * 252 + ".md"
        assert vault.write_note(longest, "# Longest\n").indexed
        assert vault.get_note(longest).path == longest


def test_issue26_item15_a_bidi_override_is_read_but_never_written(root: Path) -> None:
    # a note named with one is indexed; every face shows its name escaped (shown_path)
    assert confine(root, "Notes/\u202ex.md", "read").relative == "Notes/\u202ex.md"
    assert confine(root, "Notes/%E2%80%AEx.md", "read").relative == "Notes/%E2%80%AEx.md"
    for path in ("Notes/\u202ex.md", "Notes/%E2%80%AEx.md", "\u2066x"):
        assert "bidirectional-override" in _refused(root, path, "write")
