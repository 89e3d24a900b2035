"""The benchmark script runs end to end on the example vault, so it cannot rot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]


def run_bench(script: str, out: Path, *args: str, timeout: float) -> tuple[dict[str, Any], str]:
    """Run ``bench/<script>`` with ``args`` and ``--out out``; return its JSON and its stdout."""
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), *args, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stderr
    numbers: dict[str, Any] = json.loads(out.read_text())
    return numbers, result.stdout


def test_core_vault_benchmark_runs_on_the_example_vault(tmp_path: Path) -> None:
    numbers, stdout = run_bench(
        "core_vault.py",
        tmp_path / "core.json",
        "--vault",
        str(REPO / "examples" / "vault"),
        "--queries",
        "5",
        timeout=120,
    )
    assert numbers["notes"] == 7 and numbers["queries"] == 5
    for key in ("full_index_s", "noop_reindex_cli_s", "one_note_reindex_paths_s", "search_p50_ms"):
        assert numbers[key] > 0, key
    assert "search_p95_ms" in stdout


def test_collection_open_benchmark_runs_on_a_small_collection(tmp_path: Path) -> None:
    numbers, stdout = run_bench(
        "collection_open.py",
        tmp_path / "collection.json",
        "--documents",
        "400",
        "--dims",
        "32",
        "--repeat",
        "1",
        timeout=180,
    )
    assert numbers["documents"] == 400
    opens = ("flat_open", "flat_first_open_writes", "flat_open_200_behind")
    for key in (*opens, "hnsw_open", "hnsw_open_100_behind", "hnsw_open_rebuild"):
        assert numbers[key]["hits"] == 10, key
        assert numbers[key]["first_answer_s"] > 0, key
    # 400 documents, then 200 more while measuring catch-up: topic 7 of 100 is 6 of them
    assert numbers["latency"]["hnsw"]["filter_1pct_hits"] == 6
    assert "cached / rebuild" in stdout


def test_pack_mount_benchmark_runs_on_a_small_pack(tmp_path: Path) -> None:
    numbers, stdout = run_bench(
        "pack_mount.py",
        tmp_path / "pack.json",
        "--chunks",
        "300",
        "--dims",
        "32",
        "--repeat",
        "1",
        timeout=300,
    )
    assert numbers["chunks"] == 300
    assert numbers["mount_from_cache"]["results"] == 10
    assert numbers["mount_from_cache"]["first_answer_s"] > 0
    assert numbers["mount_from_cache_verify"]["results"] == 10
    assert "the stat check" in stdout
    assert numbers["default_model_load_s"] > 0
    assert "first answer with the default model" in stdout


def test_first_hour_benchmark_runs_on_a_generated_vault(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    for i in range(200):  # one chunk each: 8 s of embedding at 40 ms a chunk
        (vault / f"note {i}.md").write_text(f"# Note {i}\n\nPlugins and templates {i}.\n")
    numbers, stdout = run_bench(
        "first_hour.py",
        tmp_path / "first_hour.json",
        "--vault",
        str(vault),
        "--minutes",
        "0.25",
        "--search-minutes",
        "0.03",
        "--embedder",
        "fake:16:40",
        timeout=120,
    )
    assert 0 < numbers["initialize_s"] <= numbers["keyword_complete_s"]
    assert numbers["chunks"] > 0 and numbers["searches_while_embedding"] > 0
    assert numbers["search_p50_ms"] > 0
    assert numbers["raw_chunks_per_second"] > 0 and numbers["background_over_raw"] > 0
    assert "background_over_raw" in stdout


def test_context_budget_benchmark_runs_on_the_example_vault(tmp_path: Path) -> None:
    numbers, stdout = run_bench(
        "context_budget.py",
        tmp_path / "context.json",
        *("--vault", str(REPO / "examples" / "vault"), "--max-tokens", "300"),
        timeout=120,
    )
    assert numbers["contexts"] == 20 and len(numbers["rows"]) == 20
    assert 0 <= numbers["repeated_share_mean"] <= numbers["repeated_share_max"] <= 1
    assert all(row["tokens"] <= 300 for row in numbers["rows"])
    assert "distinct_chars_mean" in stdout


def test_sync_speed_benchmark_times_both_trees_on_the_example_vault(
    tmp_path: Path, postgres_url: str
) -> None:
    numbers, stdout = run_bench(
        "sync_speed.py",
        tmp_path / "sync.json",
        "--baseline",
        str(REPO),  # this tree against itself: the bench runs, whatever the numbers
        "--vault",
        str(REPO / "examples" / "vault"),
        "--runs",
        "2",
        "--embedder",
        "fake:16",
        "--url",
        postgres_url,
        timeout=300,
    )
    for side in ("baseline", "this"):
        assert numbers["index_s"][side] > 0
        assert len(numbers["sync_s"][side]) == 2 and min(numbers["sync_s"][side]) > 0
    low, high = numbers["ratio_range"]
    assert 0 < low <= high
    assert stdout.count(" s\n") == 4 and "baseline / this" in stdout


def test_write_speed_benchmark_runs_on_a_few_documents_and_the_example_vault(
    tmp_path: Path,
) -> None:
    for peer in ("lancedb", "chromadb", "bm25s"):
        pytest.importorskip(peer)
    numbers, stdout = run_bench(
        "write_speed.py",
        tmp_path / "writes.json",
        "--rounds",
        "1",
        "--limit-docs",
        "40",
        "--vault",
        str(REPO / "examples" / "vault"),
        "--before",
        str(REPO / "src"),  # this code on both sides: the run, not a comparison
        timeout=300,
    )
    assert set(numbers["add"]) == {"vrom before", "vrom after", "lancedb", "chroma"}
    assert set(numbers["index"]) == {"vrom before", "vrom after", "bm25s"}
    assert all(
        side["median"] > 0 for side in (*numbers["add"].values(), *numbers["index"].values())
    )
    assert "vrom after / lancedb" in stdout and "vrom after / bm25s" in stdout


def test_scale_benchmark_runs_at_a_tiny_size(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    abstracts = [
        {
            "_id": str(n),
            "title": f"Study {n} of cells",
            "text": f"Cells divide in tissue {n}. "
            "Proteins fold into shapes that decide what they do. Genes turn on when asked.",
        }
        for n in range(50)
    ]
    corpus.write_text("".join(json.dumps(row) + "\n" for row in abstracts), encoding="utf-8")
    numbers, stdout = run_bench(
        "scale.py",
        tmp_path / "scale.json",
        *("--corpus", str(corpus), "--sizes", "600", "--batch", "200", "--queries", "5"),
        "--work",
        str(tmp_path),
        timeout=180,
    )
    (run,) = numbers["runs"]
    assert run["size"] == 600 and run["add_per_step_wall_cpu_s"][-1][0] == 600
    assert 0 < run["recall@10"] <= 1 and run["disk_mb"] > 0 and run["peak_rss_mb"] > 0
    for mode in ("vector", "keyword", "hybrid"):
        assert run[f"{mode}_p50_cpu_ms"] > 0, mode
    assert run["keyword_copied_p50_cpu_ms"] > 0 and run["hybrid_copied_p50_cpu_ms"] > 0
    assert "recall@10" in stdout and "with the keyword copy" in stdout
