"""The keyword peers benchmark runs end to end on a tiny BEIR folder, with and without bm25s."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "keyword_peers.py"
TOPICS = ["solar panels", "river fish", "mountain snow", "bread yeast", "chess openings"]
# runs the script with bm25s unimportable (a None entry in sys.modules makes `import` fail)
WITHOUT_BM25S = (
    "import os, runpy, sys; sys.modules['bm25s'] = None; sys.argv = sys.argv[1:]; "
    "sys.path.insert(0, os.path.dirname(sys.argv[0])); "  # as `python SCRIPT` does
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


def _tiny_beir(folder: Path) -> Path:
    """Write 10 documents (two per topic), 5 queries (one per topic) and qrels/test.tsv."""
    (folder / "qrels").mkdir(parents=True)
    docs = [
        {"_id": f"d{n}", "title": f"Note {n} on {topic}", "text": f"All about {topic}, part {n}."}
        for n, topic in enumerate(TOPICS * 2)
    ]
    queries = [{"_id": f"q{n}", "text": topic} for n, topic in enumerate(TOPICS)]
    qrels = ["query-id\tcorpus-id\tscore"]
    qrels += [f"q{n}\td{n}\t1" for n in range(len(TOPICS))]
    qrels += [f"q{n}\td{n + len(TOPICS)}\t2" for n in range(len(TOPICS))]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    (folder / "qrels" / "test.tsv").write_text("\n".join(qrels) + "\n")
    return folder


def _run(command: list[str], out: Path) -> dict[str, object]:
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "nDCG@10" in result.stdout
    numbers: dict[str, object] = json.loads(out.read_text())
    return numbers


def _vrom_numbers(entry: dict[str, dict[str, float]]) -> None:
    vrom = entry["vrom"]
    assert vrom["documents"] == 10
    assert 0 < vrom["ndcg_at_10"] <= 1 and vrom["recall_at_100"] == 1.0
    assert vrom["build_s"] > 0 and vrom["queries_per_s"] > 0


def test_keyword_peers_benchmark_runs_on_a_tiny_beir_folder(tmp_path: Path) -> None:
    data, out = _tiny_beir(tmp_path / "tiny"), tmp_path / "peers.json"
    numbers = _run(
        [sys.executable, str(SCRIPT), str(data), "--split", "test", "--out", str(out)], out
    )
    [entry] = numbers["datasets"]  # type: ignore[misc]
    assert entry["dataset"] == "tiny" and entry["queries"] == 5
    _vrom_numbers(entry)
    if importlib.util.find_spec("bm25s") is None:
        assert entry["bm25s"] is None and entry["ratios"] is None
        return
    peer = entry["bm25s"]
    assert peer["documents"] == 10 and peer["recall_at_100"] == 1.0
    assert peer["queries_per_s"] > 0 and peer["batched_queries_per_s"] > 0
    assert peer["batched_rankings_match_single"] is True
    assert entry["ratios"]["ndcg_at_10"] > 0


def test_keyword_peers_benchmark_reports_vrom_alone_without_bm25s(tmp_path: Path) -> None:
    data, out = _tiny_beir(tmp_path / "tiny"), tmp_path / "peers.json"
    command = [sys.executable, "-c", WITHOUT_BM25S, str(SCRIPT), str(data), "--split", "test"]
    numbers = _run([*command, "--out", str(out)], out)
    assert numbers["bm25s"] is None
    [entry] = numbers["datasets"]  # type: ignore[misc]
    assert entry["bm25s"] is None and entry["ratios"] is None
    _vrom_numbers(entry)
