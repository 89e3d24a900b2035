"""bench/agent_loop.py runs end to end on the example vault, so it cannot rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

REPO = Path(__file__).resolve().parents[1]


def test_the_agent_loop_bench_runs_both_sides_on_the_example_vault(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "agent_loop.py"),
            "--vault",
            str(REPO / "examples" / "vault"),
            "--state-dir",
            str(tmp_path / "state"),
            "--calls",
            "4",
            "--imports",
            "1",
            "--base",
            str(REPO / "src"),  # this tree as "before" too: both paths run
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("in process Vault.search: wall p50") for line in lines), lines
    for side in ("after", "before"):
        (line,) = [line for line in lines if line.strip().startswith(f"{side}:")]
        assert "initialize" in line and "server CPU" in line and "import vrom CPU" in line
