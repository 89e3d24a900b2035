"""Nothing escapes the vault: every read, write and delete refuses paths that leave it.

The sandbox is ``tmp_path`` holding ``vault/`` (with ``.git``, ``.obsidian``, ``.trash`` and
symlinks that point outside) and a sibling ``outside/`` with a secret. Each escape form is tried
with every file operation of `Vault`; each must raise `ValidationError` with code
``path_outside_vault``, and afterwards the sandbox (outside, the vault and its hidden folders:
bytes, modes, mtimes, symlinks) must be exactly as before, with no new file anywhere.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from vrom import ValidationError, Vault

SECRET = "# Secret\nthe launch codes are 0000\n"

ESCAPES = {
    # parent segments
    "dotdot": "../outside/secret.md",
    "dotdot_no_suffix": "../outside/secret",
    "dotdot_new_file": "../outside/{token}.md",
    "dotdot_two_up": "../../{token}.md",
    "dotdot_after_folder": "Notes/../../outside/secret.md",
    "dotdot_with_dot": "Notes/./../../outside/secret.md",
    "dotdot_that_stays_inside": "Notes/../Home.md",
    "leading_space_dotdot": " ../outside/secret.md",
    "dotdot_trailing_space": ".. /outside/secret.md",
    "three_dots": ".../outside/secret.md",
    # backslashes
    "backslash_dotdot": "..\\outside\\secret.md",
    "backslash_mixed": "Notes\\..\\..\\outside/secret.md",
    "backslash_root": "\\{token}.md",
    # encodings and look-alikes
    "percent_dots": "%2e%2e/outside/secret.md",
    "percent_dots_and_slash": "%2E%2E%2Foutside%2Fsecret.md",
    "percent_double": "%252e%252e/outside/secret.md",
    "percent_backslash": "..%5coutside%5csecret.md",
    "fullwidth_dots": "\uff0e\uff0e/outside/secret.md",
    "two_dot_leader": "\u2025/outside/secret.md",
    "fullwidth_slash": "..\uff0foutside\uff0fsecret.md",
    # absolute paths
    "absolute_secret": "{outside}/secret.md",
    "absolute_new_file": "{outside}/{token}.md",
    "absolute_through_vault": "{vault}/../outside/secret.md",
    "absolute_symlink_in_vault": "{vault}/leak.md",
    "etc_passwd": "/etc/passwd",
    "tmp_new_file": "/tmp/{token}.md",
    "root_only": "/",
    "home": "~/{token}.md",
    "home_of_user": "~root/{token}.md",
    "windows_drive": "C:\\Windows\\{token}.md",
    "windows_drive_relative": "C:{token}.md",
    "unc_backslashes": "\\\\server\\share\\{token}.md",
    "unc_slashes": "//server/share/{token}.md",
    "file_url": "file:///tmp/{token}.md",
    # NUL and control characters
    "nul_byte": "Notes/{token}\x00.md",
    "nul_truncation": "Home.md\x00/../../outside/secret.md",
    "newline": "Notes/{token}\n.md",
    "escape_sequence": "Notes/\x1b[2J{token}.md",
    "delete_char": "Notes/{token}\x7f.md",
    # symlinks inside the vault that lead outside
    "file_symlink": "leak.md",
    "file_symlink_no_suffix": "leak",
    "dir_symlink": "linked/secret.md",
    "dir_symlink_new_file": "linked/{token}.md",
    "dir_symlink_nested": "linked/sub/deep.md",
    "dangling_symlink": "dangling.md",
    "symlink_chain": "chain.md",
    # hidden and reserved folders, directly and through tricks
    "git_config": ".git/config",
    "git_new_file": ".git/hooks/{token}.md",
    "obsidian_settings": ".obsidian/app.json",
    "obsidian_new_note": ".obsidian/{token}.md",
    "trash_note": ".trash/Old.md",
    "hidden_folder": ".hidden/{token}.md",
    "hidden_file": "Notes/.{token}.md",
    "nested_git": "Notes/.git/{token}.md",
    "node_modules": "node_modules/{token}.md",
    "percent_git": "%2egit/config",
    "fullwidth_git": "\uff0egit/config",
    "symlink_to_git_dir": "to_git/config",
    "symlink_to_obsidian_file": "settings.md",
    # nothing at all
    "empty": "",
    "blank": "   ",
    "dot": ".",
    "dot_slash": "./",
}

Operation = Callable[[Vault, str, str], Any]

OPERATIONS: dict[str, Operation] = {
    "resolve_note_path": lambda v, p, c: v.resolve_note_path(p),
    "get_note": lambda v, p, c: v.get_note(p),
    "related": lambda v, p, c: v.related(p),
    "list_folder": lambda v, p, c: v.list_folder(p),
    "write_create": lambda v, p, c: v.write_note(p, c),
    "write_overwrite": lambda v, p, c: v.write_note(p, c, mode="overwrite"),
    "write_append": lambda v, p, c: v.write_note(p, c, mode="append"),
    "write_with_frontmatter": lambda v, p, c: v.write_note(
        p, c, mode="overwrite", frontmatter={"pwned": True}
    ),
    "set_frontmatter_merge": lambda v, p, c: v.set_frontmatter(p, {"pwned": True}),
    "set_frontmatter_replace": lambda v, p, c: v.set_frontmatter(p, {"pwned": 1}, merge=False),
    "delete_to_trash": lambda v, p, c: v.delete_note(p),
    "delete_permanently": lambda v, p, c: v.delete_note(p, permanent=True),
}

# "/" and "." name the vault root, which list_folder lists on purpose
LIST_FOLDER_ROOTS = {"root_only", "dot", "dot_slash", "empty", "blank"}


def _snapshot(base: Path, skip: Path) -> dict[str, tuple[Any, ...]]:
    """Return every entry under ``base`` (except ``skip``) with its bytes, mode and mtime."""
    entries: dict[str, tuple[Any, ...]] = {}
    for folder, dirnames, filenames in os.walk(base):
        here = Path(folder)
        dirnames[:] = [d for d in dirnames if here / d != skip]
        info = os.lstat(here)
        entries[str(here.relative_to(base))] = ("dir", info.st_mode, info.st_mtime_ns)
        for name in dirnames + filenames:
            path = here / name
            info = os.lstat(path)
            key = str(path.relative_to(base))
            if path.is_symlink():
                entries[key] = ("link", os.readlink(path), info.st_mtime_ns)
            elif path.is_file():
                entries[key] = ("file", path.read_bytes(), info.st_mode, info.st_mtime_ns)
    return entries


def _places_outside(tmp_path: Path) -> list[Path]:
    return [
        tmp_path.parent,
        tmp_path.parent.parent,
        Path("/tmp"),
        Path("/"),
        Path.home(),
        Path.cwd(),
    ]


@pytest.fixture
def sandbox(tmp_path: Path, write_vault, open_vault) -> tuple[Vault, Path]:
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "secret.md").write_text(SECRET)
    (outside / "sub/deep.md").write_text("# Deep\nalso secret\n")
    root = write_vault(
        {
            "Home.md": "# Home\nWelcome.\n",
            "Notes/Inside.md": "# Inside\nA note.\n",
            ".git/config": "[core]\n\tbare = false\n",
            ".git/hooks/pre-commit.sample": "#!/bin/sh\n",
            ".obsidian/app.json": '{"token": "plugin secret"}',
            ".trash/Old.md": "# Old\n",
        }
    )
    (root / "leak.md").symlink_to(outside / "secret.md")
    (root / "leak").symlink_to(outside / "secret.md")
    (root / "linked").symlink_to(outside, target_is_directory=True)
    (root / "dangling.md").symlink_to(outside / "not-yet.md")
    (root / "chain.md").symlink_to("leak.md")
    (root / "to_git").symlink_to(".git", target_is_directory=True)
    (root / "settings.md").symlink_to(".obsidian/app.json")
    vault: Vault = open_vault(root)
    vault.index()
    return vault, outside


@pytest.mark.parametrize("form", list(ESCAPES.values()), ids=list(ESCAPES))
def test_escape_is_refused_everywhere_and_changes_nothing(
    form: str, sandbox: tuple[Vault, Path], tmp_path: Path
) -> None:
    vault, outside = sandbox
    token = f"pwned-{uuid.uuid4().hex[:12]}"
    path = form.format(token=token, outside=outside, vault=vault.root)
    content = f"# {token}\nwritten by an escape\n"
    form_id = next(k for k, v in ESCAPES.items() if v == form)
    before = _snapshot(tmp_path, skip=tmp_path / "state")

    for name, operation in OPERATIONS.items():
        if name == "list_folder" and form_id in LIST_FOLDER_ROOTS:
            assert operation(vault, path, content).folder == ""
            continue
        with pytest.raises(ValidationError) as caught:
            operation(vault, path, content)
        assert caught.value.code == "path_outside_vault", f"{name}: {caught.value}"
        assert "\n" not in str(caught.value), f"{name}: message is not one line"

    assert _snapshot(tmp_path, skip=tmp_path / "state") == before
    assert (outside / "secret.md").read_text() == SECRET
    for place in _places_outside(tmp_path):
        assert not [n for n in os.listdir(place) if token in n], f"{token} appeared in {place}"


def test_there_are_enough_escape_forms() -> None:
    assert len(ESCAPES) >= 20


def test_trash_that_is_a_symlink_out_of_the_vault_is_refused(
    sandbox: tuple[Vault, Path], tmp_path: Path
) -> None:
    vault, outside = sandbox
    (vault.root / ".trash/Old.md").unlink()
    (vault.root / ".trash").rmdir()
    (vault.root / ".trash").symlink_to(outside, target_is_directory=True)
    before = _snapshot(tmp_path, skip=tmp_path / "state")
    with pytest.raises(ValidationError) as caught:
        vault.delete_note("Home.md")
    assert caught.value.code == "path_outside_vault"
    assert _snapshot(tmp_path, skip=tmp_path / "state") == before
    # a permanent delete does not go through the trash, so it is allowed
    assert vault.delete_note("Home.md", permanent=True).trashed_to is None
    assert (outside / "secret.md").read_text() == SECRET
    assert sorted(p.name for p in outside.iterdir()) == ["secret.md", "sub"]


def test_a_symlink_inside_the_trash_is_refused(sandbox: tuple[Vault, Path], tmp_path: Path) -> None:
    vault, outside = sandbox
    (vault.root / ".trash/Notes").symlink_to(outside, target_is_directory=True)
    before = _snapshot(tmp_path, skip=tmp_path / "state")
    with pytest.raises(ValidationError) as caught:
        vault.delete_note("Notes/Inside.md")
    assert caught.value.code == "path_outside_vault"
    assert _snapshot(tmp_path, skip=tmp_path / "state") == before


def test_names_that_only_look_odd_stay_inside(sandbox: tuple[Vault, Path]) -> None:
    vault, _ = sandbox
    for name, expected in [
        ("v1..2", "v1..2.md"),
        ("100%25 done.md", "100%25 done.md"),
        ("Dr. Who", "Dr. Who.md"),
        ("Notes/Meeting: 2024.05", "Notes/Meeting: 2024.05.md"),
        ("Notes//./Deep\\Down", "Notes/Deep/Down.md"),
    ]:
        result = vault.write_note(name, "# Odd\ntext\n")
        assert result.path == expected and result.indexed
        assert (vault.root / expected).is_file()
