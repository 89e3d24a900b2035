"""The vector engine benchmark runs end to end on tiny data, with or without its peers."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_vector_engine_benchmark_runs_on_tiny_data(tmp_path: Path) -> None:
    out, plot = tmp_path / "engines.json", tmp_path / "engines.png"
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "vector_engines.py"),
            "--sizes",
            "500",
            "--dims",
            "16",
            "--queries",
            "10",
            "--repeat",
            "1",
            "--out",
            str(out),
            "--plot",
            str(plot),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    numbers = json.loads(out.read_text())
    assert numbers["vectors"].startswith("synthetic, no model")
    rows = {row["engine"]: row for row in numbers["rows"]}
    # peers whose packages are missing are skipped with a note; these three always run
    for engine in ("numpy", "vrom exact", "vrom hnsw"):
        row = rows[engine]
        assert row["size"] == 500, engine
        assert 0.0 <= row["recall_at_10"] <= 1.0, engine
        assert row["p50_ms"] > 0, engine
        assert row["open"]["hits"] == 10, engine
    assert rows["numpy"]["recall_at_10"] == 1.0  # the baseline recall is measured against
    assert [point["ef"] for point in rows["vrom hnsw"]["sweep"]] == [16, 32, 64, 128, 256]
    assert "vrom÷ p50" in result.stdout
    if _importable("matplotlib"):
        assert plot.stat().st_size > 0
    else:
        assert "no plot" in result.stdout


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True
