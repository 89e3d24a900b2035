"""The hybrid peers benchmark runs end to end on a tiny BEIR folder, with and without its peers."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "hybrid_peers.py"
TOPICS = ["solar panels", "river fish", "mountain snow", "bread yeast", "chess openings"]
PER_TOPIC = 12  # 60 documents: 3 in bucket 0 (fewer than k) and 15 under 30 (more than k)
# runs the script with lancedb and chromadb unimportable (a None entry makes `import` fail)
WITHOUT_PEERS = (
    "import os, runpy, sys; sys.modules['lancedb'] = sys.modules['chromadb'] = None; "
    "sys.argv = sys.argv[1:]; sys.path.insert(0, os.path.dirname(sys.argv[0])); "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)
VROM_RUNS = {"vrom hybrid", "vrom vector", "vrom keyword"}
PEER_RUNS = {"lancedb hybrid", "lancedb vector", "lancedb keyword", "chroma vector"}


def _tiny_beir(folder: Path) -> Path:
    """Write 60 documents (12 per topic), 5 queries (one per topic) and qrels/test.tsv."""
    (folder / "qrels").mkdir(parents=True)
    docs = [
        {"_id": f"d{n}", "title": f"Note {n} on {topic}", "text": f"All about {topic}, part {n}."}
        for n, topic in enumerate(TOPICS * PER_TOPIC)
    ]
    queries = [{"_id": f"q{n}", "text": topic} for n, topic in enumerate(TOPICS)]
    qrels = ["query-id\tcorpus-id\tscore"]
    qrels += [f"q{n % len(TOPICS)}\td{n}\t1" for n in range(len(docs))]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    (folder / "qrels" / "test.tsv").write_text("\n".join(qrels) + "\n")
    return folder


def _run(prefix: list[str], data: Path, tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / "hybrid.json"
    command = [*prefix, str(data), "--split", "test", "--embedder", "fake"]
    plot = tmp_path / "hybrid.png"
    command += ["--cache", str(tmp_path / "cache"), "--out", str(out), "--plot", str(plot)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "nDCG@10" in result.stdout and "filtered search on tiny" in result.stdout
    if importlib.util.find_spec("matplotlib") is not None:
        assert plot.stat().st_size > 0 and f"wrote {plot}" in result.stdout
    numbers: dict[str, Any] = json.loads(out.read_text())
    return numbers


def _check_entry(entry: dict[str, Any], runs: set[str]) -> None:
    assert entry["dataset"] == "tiny" and entry["queries"] == 5
    assert entry["documents"] == 60 and entry["vrom_chunks"] == 60
    assert set(entry["runs"]) == runs
    for label, run in entry["runs"].items():
        assert 0 < run["ndcg_at_10"] <= 1, label
        assert run["latency_p50_ms"] > 0 and run["latency_p50_k10_ms"] > 0, label
    for label, store in entry["stores"].items():
        assert store["build_s"] > 0 and store["disk_mb"] > 0, label
    [few, many] = entry["filtered"]["filters"]
    assert (few["documents_passing"], many["documents_passing"]) == (3, 15)
    for selection in (few, many):
        for label, run in selection["runs"].items():
            assert run["expected_hits"] == min(10, selection["documents_passing"]), label
            assert run["share_with_expected_hits"] == 1.0, label
            assert run["all_hits_pass"] is True, label
            if label.endswith("vector"):
                assert run["recall_at_10"] == 1.0, label  # exact search at this size
            else:
                assert run["recall_at_10"] is None, label


def test_hybrid_peers_benchmark_runs_on_a_tiny_beir_folder(tmp_path: Path) -> None:
    data = _tiny_beir(tmp_path / "tiny")
    numbers = _run([sys.executable, str(SCRIPT)], data, tmp_path)
    assert numbers["embedder"] == "fake-hashed-words (64 d)"
    [entry] = numbers["datasets"]
    assert entry["embedded_by_model"]["document"] >= 60 and entry["embedded_by_model"]["query"] == 5
    present = {spec: importlib.util.find_spec(spec) is not None for spec in ("lancedb", "chromadb")}
    runs = set(VROM_RUNS)
    runs |= {run for run in PEER_RUNS if present["lancedb"] and run.startswith("lancedb")}
    runs |= {run for run in PEER_RUNS if present["chromadb"] and run.startswith("chroma")}
    _check_entry(entry, runs)
    assert numbers["missing_peers"] == [name for name, found in present.items() if not found]
    if present["lancedb"]:
        ratio = entry["ratios"]["hybrid vs lancedb hybrid"]
        assert ratio["ndcg_at_10"] > 0 and ratio["latency_p50_k10_ms"] > 0 and ratio["disk_mb"] > 0
    if present["chromadb"]:
        assert entry["ratios"]["vector vs chroma vector"]["ndcg_at_10"] > 0


def test_hybrid_peers_benchmark_reports_vrom_alone_and_reuses_its_vectors(tmp_path: Path) -> None:
    data = _tiny_beir(tmp_path / "tiny")
    for _ in range(2):
        numbers = _run([sys.executable, "-c", WITHOUT_PEERS, str(SCRIPT)], data, tmp_path)
        assert numbers["missing_peers"] == ["lancedb", "chromadb"]
        [entry] = numbers["datasets"]
        _check_entry(entry, VROM_RUNS)
        assert entry["ratios"] == {}
    # the second run found every vector in the cache the first one wrote
    assert entry["embedded_by_model"] == {"document": 0, "query": 0}
