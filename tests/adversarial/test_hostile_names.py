"""Hostile file names never stop the index: a name vrom cannot hold is one note skipped, named.

Issue 15, items 2 and 9 (names), as named regression tests, and hypothesis over file names made
of arbitrary bytes: indexing never raises, every good note is indexed, a note is indexed exactly
when its name can be stored and named back, and every warning is one printable line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hostile import GOOD_NOTES, make_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from vrom_cli import run_vrom

from vrom import Vault
from vrom.errors import NotFoundError, ValidationError, VromError
from vrom.ingest.parse import name_problem, shown_path, unshown_path

WriteVault = Callable[[dict[str, str | bytes]], Path]
OpenVault = Callable[[Path], Vault]

needs_byte_names = pytest.mark.skipif(
    sys.platform in ("win32", "darwin"), reason="the file system takes only Unicode names"
)


def assert_printable_lines(vault_warnings: object) -> None:
    for warning in vault_warnings:  # type: ignore[attr-defined]
        for text in (warning.path, warning.reason):
            assert "\n" not in text and "\r" not in text, warning
            text.encode("utf-8")  # no lone surrogates: prints, and goes into JSON and SQLite


@needs_byte_names
def test_issue15_item2_a_file_name_that_is_not_utf8_is_skipped_with_a_warning(
    write_vault: WriteVault, open_vault: OpenVault
) -> None:
    root = write_vault(GOOD_NOTES)
    assert make_file(root, b"caf\xe9.md")
    vault = open_vault(root)
    summary = vault.index()
    assert summary.notes == len(GOOD_NOTES)
    assert [(w.path, w.reason) for w in summary.warnings] == [
        ("caf\\xe9.md", "skipped: its name is not valid UTF-8: rename the file to index it")
    ]
    assert_printable_lines(summary.warnings)
    assert vault.index().skipped == 1, "the next run says so again"
    assert vault.reindex_paths([root / os.fsdecode(b"caf\xe9.md")]).skipped == 1


@needs_byte_names
def test_issue15_item2_get_note_on_a_name_that_is_not_utf8_is_a_one_line_error(
    write_vault: WriteVault, open_vault: OpenVault
) -> None:
    root = write_vault(GOOD_NOTES)
    assert make_file(root, b"caf\xe9.md")
    vault = open_vault(root)
    vault.index()
    for name in (os.fsdecode(b"caf\xe9.md"), os.fsdecode(b"caf\xe9"), "x\ud800"):
        with pytest.raises(NotFoundError, match="not valid UTF-8") as raised:
            vault.get_note(name)
        assert "\n" not in str(raised.value)
        with pytest.raises(NotFoundError, match="not valid UTF-8"):
            vault.related(name)


def test_issue15_item2_writing_a_note_under_a_name_that_is_not_utf8_is_refused_first(
    write_vault: WriteVault, open_vault: OpenVault
) -> None:
    root = write_vault(GOOD_NOTES)
    vault = open_vault(root)
    for name in ("caf\udce9.md", "x\ud800.md"):
        with pytest.raises(ValidationError, match=r"not valid UTF-8.*nothing was written"):
            vault.write_note(name, "# Hi\n")
    assert sorted(p.name for p in root.iterdir()) == ["good"], "nothing was created"


@needs_byte_names
def test_a_vault_folder_whose_name_is_not_utf8_is_refused_before_a_store_is_made(
    tmp_path: Path,
) -> None:
    folder = os.path.join(os.fsencode(tmp_path), b"v\xe9")
    os.mkdir(folder)
    with pytest.raises(ValidationError, match="not valid UTF-8"):
        Vault.open(os.fsdecode(folder), state_dir=tmp_path / "state")
    assert not (tmp_path / "state").exists()


def test_issue15_item9_a_name_with_a_newline_is_skipped_and_a_stored_one_removed(
    write_vault: WriteVault, open_vault: OpenVault, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_vault(GOOD_NOTES)
    try:
        (root / "new\nline.md").write_text("# Newline\n\nbody\n")
    except OSError:
        pytest.skip("the file system refuses a newline in a name")
    vault = open_vault(root)
    # a store written by a vrom that indexed the name: the next run takes it out
    with monkeypatch.context() as patched:
        patched.setattr("vrom.ingest.indexer.name_problem", lambda path: None)
        assert vault.index().notes == len(GOOD_NOTES) + 1
    summary = vault.index()
    assert (summary.notes, summary.removed, summary.skipped) == (len(GOOD_NOTES), 1, 1)
    assert summary.warnings[0].path == "new\\nline.md"
    assert "control character" in summary.warnings[0].reason
    with pytest.raises(VromError) as raised:
        vault.get_note("new\nline.md")
    assert "\n" not in str(raised.value)
    reindexed = vault.reindex_paths(["new\nline.md"])
    assert reindexed.skipped == 1 and reindexed.notes == len(GOOD_NOTES)


def test_issue15_item9_an_empty_vault_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="vault path is empty"):
        Vault.open("", state_dir=tmp_path / "state")  # not the current folder
    assert not (tmp_path / "state").exists()


SPECIAL_NAMES = [
    b"caf\xe9", b"\xff\xfe", b"\xed\xa0\x80", b"new\nline", b"tab\there", b"\x1b[31mred",
    b"\x7f", b"a\\b", b"%2e%2e", b"a%2Fb", b"\xe2\x80\xae", b"\xef\xbc\x8f", b"\xc2\x85",
    b"\xe2\x80\xa8", b" ", b"...", b"-", b"#tag", b"[[x]]", b"*", b"\xf0\x9f\x98\x80",
    b"CON", b".hidden",
]  # fmt: skip
byte_names = (
    st.sampled_from(SPECIAL_NAMES)
    | st.binary(min_size=1, max_size=40)
    | st.text(min_size=1, max_size=30).map(lambda text: text.encode("utf-8", "surrogatepass"))
).filter(lambda name: b"/" not in name and b"\x00" not in name and name not in (b".", b".."))


@needs_byte_names
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(byte_names, min_size=1, max_size=4, unique=True))
def test_any_byte_file_names_lose_no_good_note(stems: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "vault"
        for rel, text in GOOD_NOTES.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text, encoding="utf-8")
        names = [os.fsdecode(stem + b".md") for stem in stems if make_file(root, stem + b".md")]
        with Vault.open(root, state_dir=Path(scratch) / "state", embedder=None) as vault:
            summary = vault.index()
            assert_printable_lines(summary.warnings)
            hidden = [name for name in names if name.startswith(".")]
            refused = [name for name in names if name not in hidden and name_problem(name)]
            assert summary.notes == len(GOOD_NOTES) + len(names) - len(hidden) - len(refused)
            assert {w.path for w in summary.warnings} == {shown_path(name) for name in refused}
            for rel in GOOD_NOTES:
                assert vault.get_note(rel).path == rel
            indexed = {*GOOD_NOTES, *(set(names) - set(hidden) - set(refused))}
            for name in names:
                try:  # names differing in case only, or in outer spaces, name the same note
                    assert vault.get_note(name).path in indexed
                except VromError as exc:  # a name the path rules refuse, or one not indexed
                    assert "\n" not in str(exc)
            try:
                again = vault.reindex_paths([root / name for name in names])
            except VromError as exc:
                assert "\n" not in str(exc)
            else:
                assert again.notes == summary.notes
                assert_printable_lines(again.warnings)


def test_an_empty_vault_path_is_refused_by_the_mcp_server_too(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "vrom",
            "--state-dir",
            str(tmp_path / "state"),
            "mcp",
            "--vault",
            "",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip() == (
        "vrom: error: the vault path is empty: give a folder ('.' for this one)"
    )
    assert not (tmp_path / "state").exists(), "nothing was created"


BIDI = "bidi \u202egnp.md"  # shows as "bidi dm.png" where printed raw


def test_issue26_item15_a_bidi_name_is_shown_escaped_and_read_back_by_the_same_name(
    write_vault: WriteVault, open_vault: OpenVault
) -> None:
    root = write_vault({**GOOD_NOTES, BIDI: "# Bidi\n\nkumquat\n"})
    vault = open_vault(root)
    assert vault.index().notes == len(GOOD_NOTES) + 1
    assert shown_path(BIDI) == "bidi \\u202egnp.md" and unshown_path(shown_path(BIDI)) == BIDI
    for name in (BIDI, shown_path(BIDI), BIDI[:-3], shown_path(BIDI)[:-3]):
        assert vault.get_note(name, purpose="read").path == BIDI, name
        assert vault.related(name, purpose="read").note.path == BIDI
    assert vault.list_folder().notes[-1].path == BIDI
    with pytest.raises(ValidationError, match="bidirectional-override") as refused:
        vault.write_note("new \u202egnp.md", "# Spoof\n")
    assert refused.value.code == "path_outside_vault"
    with pytest.raises(NotFoundError):  # an escape of a plain character is no escape
        vault.get_note("bidi \\u0041gnp.md")


def test_issue26_item15_the_cli_prints_a_bidi_name_escaped_and_takes_it_back(
    write_vault: WriteVault, tmp_path: Path
) -> None:
    root = write_vault({**GOOD_NOTES, BIDI: "# Bidi\n\nkumquat\n"})
    state = tmp_path / "state"
    assert run_vrom(state, "index", str(root)).returncode == 0
    found = run_vrom(state, "--vault", str(root), "search", "kumquat")
    assert found.returncode == 0, found.stderr
    assert "1. bidi \\u202egnp.md" in found.stdout and "\u202e" not in found.stdout
    printed = found.stdout.split("1. ", 1)[1].split(" › ")[0]
    note = run_vrom(state, "--vault", str(root), "get-note", printed)
    assert note.returncode == 0, note.stderr
    assert note.stdout.splitlines()[1].startswith("bidi \\u202egnp.md · id ")
    assert "\u202e" not in note.stdout
    as_json = run_vrom(state, "--vault", str(root), "--json", "get-note", printed)
    assert json.loads(as_json.stdout)["path"] == BIDI, "JSON keeps the real name"
