"""Walking a vault: what is indexed, what is skipped, and what is warned about."""

from __future__ import annotations

import os
from pathlib import Path

from vrom.ingest.walk import read_note_text, walk_vault


def test_walk_finds_notes_and_skips_what_it_must(write_vault, tmp_path: Path) -> None:
    root = write_vault(
        {
            "a.md": "a",
            "Sub/b.markdown": "b",
            "Sub/image.png": b"\x89PNG",
            "notes.txt": "not markdown",
            ".obsidian/workspace.md": "x",
            ".git/HEAD.md": "x",
            ".trash/old.md": "x",
            "node_modules/pkg/readme.md": "x",
            ".hidden/secret.md": "x",
            "Sub/.dotfile.md": "x",
            "big.md": "y" * 2000,
        }
    )
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "leak.md").write_text("secret")
    os.symlink(outside / "leak.md", root / "leak.md")
    os.symlink(outside, root / "outside-dir")
    os.symlink(root / "a.md", root / "alias.md")  # inside the vault: allowed
    os.symlink(root, root / "Sub" / "loop")  # a loop back to the root
    os.symlink(root / "gone.md", root / "dangling.md")

    files, warnings = walk_vault(root, max_file_bytes=1000)
    assert [f.path for f in files] == ["Sub/b.markdown", "a.md", "alias.md"]
    reasons = {w.path: w.reason for w in warnings}
    assert "over the 1,000-byte limit" in reasons["big.md"]
    assert "outside the vault" in reasons["leak.md"]
    assert "outside the vault" in reasons["outside-dir"]
    assert "loop" in reasons["Sub/loop"]
    assert "broken symlink" in reasons["dangling.md"]
    assert len(warnings) == 5


def test_read_note_text_handles_binary_bom_and_bad_utf8() -> None:
    assert read_note_text(b"plain") == ("plain", None)
    assert read_note_text(b"\xef\xbb\xbf# Title") == ("# Title", None)
    text, problem = read_note_text(b"ok \xff\xfe bad")
    assert text == "ok \ufffd\ufffd bad"
    assert problem is not None and "invalid UTF-8 at byte 3" in problem
    text, problem = read_note_text(b"abc\x00def")
    assert text is None and problem is not None and "binary" in problem
