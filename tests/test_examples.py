"""The examples run: each is started as a real subprocess, the way a reader would run it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 120


def test_agent_loop_answers_citing_the_leave_document() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "examples" / "agent_loop.py")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("system: ")
    assert any(line.startswith("assistant -> search_handbook({") for line in lines)
    assert any(line.startswith('tool: {"results": [{"id": "leave"') for line in lines)
    assert lines[-1].startswith("assistant: Annual leave is 25 days a year")
    assert lines[-1].endswith("[source: leave]")
