"""The indexing progress bar: drawn on a terminal, absent when output is piped."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from vrom import Embedder, Vault
from vrom.cli.progress import LineProgress
from vrom.cli.vault_format import format_summary
from vrom.results import rough_duration


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


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_pipe_gets_a_line_every_few_seconds_with_a_measured_rate() -> None:
    clock, out = _Clock(), io.StringIO()
    lines = LineProgress(out, interval=5.0, clock=clock)
    lines.notes(10, 100, "a.md")
    assert out.getvalue() == "", "nothing before the first interval"
    clock.now += 6
    lines.notes(100, 100, "z.md")
    lines.chunks(0, 1000)  # right after: not due yet
    clock.now += 6
    lines.chunks(0, 1000)  # the model is still loading
    clock.now += 30
    lines.chunks(100, 1000)  # the first batch, after a slow model load: not a rate yet
    clock.now += 10
    lines.chunks(300, 1000)  # 200 chunks in 10 s
    assert out.getvalue().splitlines() == [
        "indexing: 100 / 100 notes",
        "embedding: 0 / 1,000 chunks (0%), loading the model",
        "embedding: 100 / 1,000 chunks (10%)",
        "embedding: 300 / 1,000 chunks (30%), 20.0 chunks/s, about 35 s left",
    ]


def test_durations_read_at_a_glance() -> None:
    assert [rough_duration(s) for s in (4.2, 59, 61, 29 * 60 + 10, 3 * 3600 + 7 * 60)] == [
        "4 s",
        "59 s",
        "1 min",
        "29 min",
        "3 h 07 min",
    ]


def test_the_summary_counts_embedding_in_the_wall_time(tmp_path: Path) -> None:
    class Slow(type(Embedder.fake())):  # type: ignore[misc]
        def _embed(self, texts: Any, kind: str) -> Any:
            time.sleep(0.05)
            return super()._embed(texts, kind)

    vault = _vault(tmp_path / "vault", 20)
    seen: list[tuple[int, int]] = []
    with Vault.open(vault, tmp_path / "state", embedder=Slow(16)) as opened:
        summary = opened.index(embed_progress=lambda done, total: seen.append((done, total)))
    assert summary.embedded == 20 and seen[0] == (0, 20) and seen[-1] == (20, 20)
    assert summary.embed_seconds >= 0.05, "one batch of 20 chunks, 50 ms"
    parts = summary.parse_seconds + summary.index_seconds + summary.embed_seconds
    assert 0 < parts <= summary.seconds + 0.01 and summary.seconds >= summary.embed_seconds
    line = format_summary(summary)
    assert line.startswith("indexed 20 notes, 20 chunks in ") and "chunks/s)" in line
