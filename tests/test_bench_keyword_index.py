"""The keyword index benchmark runs end to end on a tiny BEIR folder and finds the copy exact."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_bench_keyword_peers import _tiny_beir

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "keyword_index.py"


def test_keyword_index_benchmark_runs_on_a_tiny_beir_folder(tmp_path: Path) -> None:
    data = _tiny_beir(tmp_path / "tiny")
    out = tmp_path / "keyword_index.json"
    command = [sys.executable, str(SCRIPT), str(data), "--split", "test", "--chunks", "40"]
    result = subprocess.run(
        [*command, "--out", str(out)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    numbers = json.loads(out.read_text())
    assert numbers["chunks"] == 40  # the 10 documents four times over, one chunk each
    assert numbers["plain_queries"] == numbers["queries"] == 5
    assert numbers["same_rows"] is True
    assert numbers["postings"] > 0 and numbers["terms"] > 0 and numbers["array_mb"] > 0
    for timing in (numbers["rank_p50_ms"], *numbers["search_p50_ms"].values()):
        assert timing["fts5"] > 0 and timing["copy"] > 0
    assert "copy/FTS5" in result.stdout
