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


def test_vector_engine_benchmark_takes_real_embeddings_and_pads_them(tmp_path: Path) -> None:
    import numpy as np

    rng = np.random.default_rng(7)
    for kind, count in (("document", 300), ("query", 20)):
        rows = rng.standard_normal((count, 16)).astype(np.float32)
        np.save(tmp_path / f"tiny.{kind}.npy", rows / np.linalg.norm(rows, axis=1, keepdims=True))
    out = tmp_path / "engines.json"
    command = [sys.executable, str(REPO / "bench" / "vector_engines.py"), "--sizes", "200,500"]
    command += ["--dims", "16", "--queries", "10", "--repeat", "1", "--out", str(out)]
    command += ["--plot", str(tmp_path / "p.png"), "--embeddings", str(tmp_path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    numbers = json.loads(out.read_text())
    assert numbers["vectors"].startswith("real embeddings: 300 distinct")
    assert numbers["real_vectors"] == {"200": 200, "500": 300}  # 500 = 300 real + 200 padding
    exact = [row for row in numbers["rows"] if row["engine"] == "numpy"]
    assert [row["recall_at_10"] for row in exact] == [1.0, 1.0]


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True
