"""The indexing progress bar: drawn on a terminal, absent when output is piped."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path


def _vault(root: Path, notes: int) -> Path:
    root.mkdir()
    for i in range(notes):
        (root / f"note {i}.md").write_text(f"# Note {i}\n" + "words and more words\n" * 20)
    return root


def test_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    vault = _vault(tmp_path / "vault", 300)
    controller, terminal = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "100"}
    process = subprocess.Popen(
        [sys.executable, "-m", "vrom", "--state-dir", str(tmp_path / "s"), "index", str(vault)],
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        env=env,
        close_fds=True,
    )
    os.close(terminal)
    output = b""
    while True:
        try:
            data = os.read(controller, 65536)
        except OSError:  # the terminal closed when the process ended
            break
        if not data:
            break
        output += data
    os.close(controller)
    assert process.wait(timeout=60) == 0
    text = output.decode("utf-8", "replace")
    assert "indexing" in text, "the progress bar is drawn"
    assert "\x1b[" in text, "with terminal control sequences"
    assert "indexed 300 notes" in text


def test_no_progress_bar_when_piped(tmp_path: Path) -> None:
    vault = _vault(tmp_path / "vault", 20)
    result = subprocess.run(
        [sys.executable, "-m", "vrom", "--state-dir", str(tmp_path / "s"), "index", str(vault)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stderr == ""
    assert "\x1b[" not in result.stdout
    assert result.stdout.startswith("indexed 20 notes") and result.stdout.count("\n") == 1
