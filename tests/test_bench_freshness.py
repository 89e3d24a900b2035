"""The freshness benchmark runs end to end on a small generated vault, so it cannot rot (it
measures; nothing here asserts a time)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_freshness_benchmark_runs_and_reports_every_state(tmp_path: Path) -> None:
    out = tmp_path / "fresh.json"
    script = REPO / "bench" / "search_freshness.py"
    done = subprocess.run(
        [
            sys.executable,
            str(script),
            "--notes",
            "40",
            "--queries",
            "5",
            "-k",
            "5",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    numbers = json.loads(out.read_text())
    assert (numbers["notes"], numbers["queries"], numbers["k"]) == (40, 5, 5)
    for state in ("unchanged", "touched", "grown"):
        assert state in done.stdout
        assert all(numbers[state][key] > 0 for key in ("core_p50_ms", "with_check_p50_ms"))
