"""The benchmark script runs end to end on the example vault, so it cannot rot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_core_vault_benchmark_runs_on_the_example_vault(tmp_path: Path) -> None:
    out = tmp_path / "core.json"
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "core_vault.py"),
            "--vault",
            str(REPO / "examples" / "vault"),
            "--queries",
            "5",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    numbers = json.loads(out.read_text())
    assert numbers["notes"] == 7 and numbers["queries"] == 5
    for key in ("full_index_s", "noop_reindex_cli_s", "one_note_reindex_paths_s", "search_p50_ms"):
        assert numbers[key] > 0, key
    assert "search_p95_ms" in result.stdout
