"""The quality benchmarks run end to end on a tiny BEIR folder with the fake embedder:
`bench/quality.py` (every mode, as a collection and as memories) and `bench/fusion_variants.py`
(every fusion rule on the same candidates)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_bench_keyword_peers import _tiny_beir

REPO = Path(__file__).resolve().parents[1]


def _bench(script: str, data: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """Run a bench script on ``data`` (split test, the fake model), its JSON to ``out``."""
    options = ["--split", "test", "--cache", str(out.parent / "cache"), "--out", str(out)]
    command = [sys.executable, str(REPO / "bench" / script), str(data), *options]
    return subprocess.run(
        [*command, "--embedder", "fake"], capture_output=True, text=True, timeout=180
    )


def test_quality_runs_every_mode_as_a_collection_and_as_memories(tmp_path: Path) -> None:
    data, out = _tiny_beir(tmp_path / "tiny"), tmp_path / "quality.json"
    result = _bench("quality.py", data, out)
    assert result.returncode == 0, result.stderr
    runs = json.loads(out.read_text())["runs"]
    assert [(r["dataset"], r["target"]) for r in runs] == [
        ("tiny", "collection"),
        ("tiny", "memories"),
    ]
    for run in runs:
        assert [r["mode"] for r in run["results"]] == ["keyword", "vector", "hybrid"]
        for mode in run["results"]:
            assert 0 < mode["ndcg"] <= 1 and mode["queries"] == 5
    assert "memories" in result.stdout and "nDCG@10" in result.stdout


def test_fusion_variants_scores_every_rule_on_the_same_candidates(tmp_path: Path) -> None:
    data, out = _tiny_beir(tmp_path / "tiny"), tmp_path / "fusion.json"
    result = _bench("fusion_variants.py", data, out)
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(out.read_text())["datasets"]
    assert row["queries"] == 5
    assert {"keyword", "vector", "rrf", "convex 0.5", "convex 0.5, second 0.1"} <= set(row["rules"])
    assert "convex 0.5, by document" in row["rules"]
    for scores in row["rules"].values():
        assert 0 <= scores["ndcg@10"] <= 1 and 0 <= scores["recall@100"] <= 1
    assert row["rules"]["keyword"]["ndcg@10"] > 0, "each topic's notes share the query's word"
    assert "convex 0.5" in result.stdout
