"""The real ``vrom`` CLI on a vault of hostile notes: exit 0, one warning per bad file, every
good note searchable, and a one-line error (exit 1) wherever a request must be refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hostile import GOOD_NOTES, HOSTILE_NOTES, make_file
from vrom_cli import run_vrom

TIMEOUT = 60
BAD_FRONTMATTER = ["bomb.md", "self.md", "deep.md", "too-many-digits.md", "tag.md"]


def vrom(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_vrom(state, *args, cwd=state.parent, timeout=TIMEOUT)


def assert_one_line_error(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 1, done
    assert done.stderr.startswith("vrom: error: ") and done.stderr.count("\n") == 1, done.stderr
    for word in words:
        assert word in done.stderr


@pytest.fixture
def hostile_vault(write_vault: Callable[[dict[str, str | bytes]], Path]) -> tuple[Path, bool, bool]:
    """Return a vault of good and hostile notes, and whether it holds the byte and newline names."""
    files: dict[str, str | bytes] = {**GOOD_NOTES, "binary.md": b"\x00\x01binary"}
    files.update({path: HOSTILE_NOTES[path] for path in ["inf.md", "nan.md", *BAD_FRONTMATTER]})
    root = write_vault(files)
    byte_names = make_file(root, b"caf\xe9.md") and sys.platform not in ("win32", "darwin")
    try:
        (root / "new\nline.md").write_text("# Newline\n")
        newline = True
    except OSError:
        newline = False
    return root, byte_names, newline


def test_indexing_a_hostile_vault_warns_per_bad_file_and_indexes_every_good_note(
    hostile_vault: tuple[Path, bool, bool], tmp_path: Path
) -> None:
    root, byte_names, newline = hostile_vault
    state = tmp_path / "state"
    indexed = vrom(state, "index", str(root))
    assert indexed.returncode == 0, indexed.stderr
    warned = [line for line in indexed.stderr.splitlines() if line.startswith("warning: ")]
    expected = ["binary.md", "inf.md", "nan.md", *BAD_FRONTMATTER]  # inf, nan: stored as text
    expected += ["caf\\xe9.md"] if byte_names else []
    expected += ["new\\nline.md"] if newline else []
    assert sorted(line.split(": ", 2)[1] for line in warned) == sorted(expected), warned
    good = len(GOOD_NOTES) + 2 + len(BAD_FRONTMATTER)  # inf.md, nan.md and the plain-text ones
    assert f"indexed {good} notes" in indexed.stdout

    found = json.loads(
        vrom(state, "--vault", str(root), "search", "orchard", "-k", "50", "--json").stdout
    )
    assert {hit["path"] for hit in found["results"]} == set(GOOD_NOTES)
    note = vrom(state, "--vault", str(root), "get-note", "inf.md", "--json")
    assert "Infinity" not in note.stdout  # JSON has no such number
    assert json.loads(note.stdout)["frontmatter"] == {
        "x": "inf",
        "y": "-inf",
    }

    if byte_names:
        assert_one_line_error(
            vrom(state, "--vault", str(root), "get-note", os.fsdecode(b"caf\xe9.md")),
            "caf\\xe9.md",
            "not valid UTF-8",
        )
    if newline:
        assert_one_line_error(vrom(state, "--vault", str(root), "get-note", "new\nline.md"))


def test_an_empty_vault_path_is_a_one_line_error_and_creates_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert_one_line_error(vrom(state, "index", ""), "vault path is empty")
    assert_one_line_error(vrom(state, "--vault", "", "stats"), "vault path is empty")
    assert not state.exists()


def test_issue26_item10_a_300_character_path_is_a_one_line_error(
    write_vault: Callable[[dict[str, str | bytes]], Path], tmp_path: Path
) -> None:
    root = write_vault(GOOD_NOTES)
    state = tmp_path / "state"
    assert vrom(state, "index", str(root)).returncode == 0
    long_path = "x" * 300
    for command in (["format", "check"], ["format", "enrich"], ["get-note"], ["related"]):
        done = vrom(state, "--vault", str(root), *command, long_path)
        assert_one_line_error(done, "over the file system's 255-byte limit for one name")
