"""The BEIR benchmark runs end to end on a tiny dataset, and its metrics match hand computation."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "beir_eval.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("beir_eval", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


beir = _load_script()

DOCS = [
    ("d1", "Cats", "Cats are small domestic felines that purr when content."),
    ("d2", "Dogs", "Dogs are loyal animals that bark at strangers."),
    ("d3", "Fish", "Fish swim in water and breathe with gills."),
    ("d4", "Birds", "Birds fly with wings and lay eggs in nests."),
    ("MED/5.x", "Cars", "Cars drive on roads and burn fuel in engines."),
]
QUERIES = [
    ("q1", "purring felines"),
    ("q2", "loyal animals that bark"),
    ("q3", "roads and engines"),
]
QRELS = [("q1", "d1", 2), ("q2", "d2", 1), ("q3", "MED/5.x", 1), ("q3", "d3", 0)]


def _write_dataset(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    with (folder / "corpus.jsonl").open("w") as handle:
        for doc_id, title, text in DOCS:
            handle.write(json.dumps({"_id": doc_id, "title": title, "text": text}) + "\n")
    with (folder / "queries.jsonl").open("w") as handle:
        for query_id, text in QUERIES:
            handle.write(json.dumps({"_id": query_id, "text": text}) + "\n")
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{s}" for q, d, s in QRELS]
    (folder / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    return folder


def test_script_runs_on_a_tiny_dataset(tmp_path: Path) -> None:
    dataset = _write_dataset(tmp_path / "tiny")
    out = tmp_path / "result.json"
    result = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            str(dataset),
            "--split",
            "test",
            "--embedder",
            "fake",
            "--first-answer-runs",
            "1",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    for label in ("nDCG@10", "R@10", "R@100", "MRR@10", "p50 ms", "p95 ms", "vrom/raw"):
        assert label in result.stdout, label
    assert "open → first hybrid answer" in result.stdout
    numbers = json.loads(out.read_text())
    assert numbers["queries"] == 3 and numbers["index"]["notes"] == 5
    assert numbers["index"]["embedded"] == 5
    assert numbers["index"]["raw_vs_stored_max_abs_diff"] == 0.0
    by_mode = numbers["results"]["100"]
    assert set(by_mode) == {"keyword", "vector", "hybrid"}
    # every query's relevant document shares words with it, so BM25 finds it first
    assert by_mode["keyword"]["mrr@10"] == 1.0 and by_mode["keyword"]["ndcg@10"] == 1.0
    for mode in by_mode.values():
        assert 0.0 <= mode["ndcg@10"] <= 1.0 and mode["p95_ms"] >= mode["p50_ms"] > 0


def test_metrics_match_hand_computed_values() -> None:
    judged = {"a": 2, "b": 1, "c": 1, "z": 0}  # z judged not relevant; c never retrieved
    ranking = ["x", "b", "a", "z", "y"]
    # DCG = 1/log2(3) + 2/log2(4) = 0.63093 + 1.0; ideal (2, 1, 1) = 2 + 1/log2(3) + 1/2
    dcg = 1 / math.log2(3) + 2 / 2
    idcg = 2 + 1 / math.log2(3) + 1 / 2
    assert beir.ndcg_at_k(ranking, judged, 10) == pytest.approx(dcg / idcg)
    assert beir.ndcg_at_k(ranking, judged, 10) == pytest.approx(1.63093 / 3.13093, abs=1e-5)
    assert beir.ndcg_at_k(ranking, judged, 2) == pytest.approx(
        (1 / math.log2(3)) / (2 + 1 / math.log2(3))
    )
    assert beir.recall_at_k(ranking, judged, 10) == pytest.approx(2 / 3)
    assert beir.recall_at_k(ranking, judged, 2) == pytest.approx(1 / 3)
    assert beir.recall_at_k(ranking, judged, 1) == 0.0
    assert beir.mrr_at_k(ranking, judged, 10) == 0.5
    assert beir.mrr_at_k(ranking, judged, 1) == 0.0
    assert beir.ndcg_at_k(["a", "b", "c"], judged, 10) == pytest.approx(1.0)
    assert beir.ndcg_at_k(["a"], {"a": 0}, 10) == 0.0  # no relevant judgement: 0, not a crash
    assert beir.ndcg_at_k([], judged, 10) == 0.0


def test_chunks_collapse_to_documents_at_their_best_rank() -> None:
    doc_of = {"a.md": "A", "b.md": "B", "c.md": "A"}
    assert beir.collapse(["c.md", "b.md", "a.md", "b.md"], doc_of) == ["A", "B"]


def test_note_names_are_safe_and_unique() -> None:
    used: set[str] = set()
    names = [beir.note_name(i, used) for i in ("MED-10", "med-10", "../x", ".hidden", "4983")]
    assert names[0] == "MED-10.md" and names[4] == "4983.md"
    assert len({n.lower() for n in names}) == 5
    assert all("/" not in n and not n.startswith(".") for n in names)
    assert beir.note_text("A  title\n", "Body.") == "# A title\n\nBody.\n"


def test_partial_vectors_benchmark_runs_on_a_tiny_dataset(tmp_path: Path) -> None:
    dataset = _write_dataset(tmp_path / "tiny")
    out = tmp_path / "partial.json"
    result = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).resolve().parents[1] / "bench" / "partial_vectors.py"),
            *("--dataset", str(dataset), "--split", "test", "--shares", "0.5,1"),
            *("--embedder", "fake", "--out", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    numbers = json.loads(out.read_text())
    assert set(numbers["shares"]) == {"0.5", "1.0"} and numbers["queries"] == 3
    for row in numbers["shares"].values():
        assert 0 <= row["keyword_ndcg10"] <= 1 and 0 <= row["hybrid_ndcg10"] <= 1
    assert "hybrid" in result.stdout
