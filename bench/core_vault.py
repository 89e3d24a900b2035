"""Benchmark the core on a real vault: full index, no-change and one-note re-index, keyword search.

    python bench/core_vault.py [--vault ../shared/data/vault/obsidian-hub] [--queries 100]
                               [--embedder none]

It measures the keyword core by default (``--embedder none``); pass ``--embedder default`` to
include embedding with the default model (much slower: every chunk goes through the model).

The vault is copied to a temporary folder first (the source is never written). Prints a table
and writes JSON to bench/results/core_vault.json. Numbers are wall-clock on this machine; run it
twice and compare, rather than trusting one run.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vrom import Vault, __version__

REPO = Path(__file__).resolve().parents[1]
DEFAULT_VAULT = REPO.parent / "shared" / "data" / "vault" / "obsidian-hub"


def _cli(state: Path, embedder: str, *args: str) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "vrom", "--state-dir", str(state), "--embedder", embedder, *args],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - started


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run(source: Path, queries: int, embedder: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="vrom-bench-") as tmp:
        vault_dir = Path(tmp) / "vault"
        shutil.copytree(source, vault_dir, symlinks=True)
        state = Path(tmp) / "state"
        results: dict[str, object] = {
            "vault": str(source),
            "vrom": __version__,
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
            "machine": f"{platform.machine()}, {len(__import__('os').sched_getaffinity(0))} cores",
            "embedder": embedder,
        }

        with Vault.open(vault_dir, state, embedder=embedder) as vault:
            started = time.perf_counter()
            summary = vault.index()
            full = time.perf_counter() - started
            results |= {
                "notes": summary.notes,
                "chunks": summary.chunks,
                "skipped": summary.skipped,
                "full_index_s": round(full, 3),
                "notes_per_s": round(summary.notes / full, 1),
                "chunks_per_s": round(summary.chunks / full, 1),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            }
            results["store_mb"] = round(vault.stats().store_bytes / 1e6, 1)

            started = time.perf_counter()
            unchanged = vault.index()
            results["noop_reindex_api_s"] = round(time.perf_counter() - started, 3)
            assert unchanged.unchanged == summary.notes, unchanged

            notes = sorted(vault_dir.rglob("*.md"))
            target = next(p for p in notes if not any(s.startswith(".") for s in p.parts))
            with target.open("a", encoding="utf-8") as handle:
                handle.write("\nAn edit made by the benchmark: quokka.\n")
            started = time.perf_counter()
            edited = vault.index()
            results["one_note_reindex_api_s"] = round(time.perf_counter() - started, 3)
            assert edited.changed == 1, edited
            with target.open("a", encoding="utf-8") as handle:
                handle.write("A second edit: wombat.\n")
            started = time.perf_counter()
            vault.reindex_paths([target])
            results["one_note_reindex_paths_s"] = round(time.perf_counter() - started, 4)

            # queries: the titles of every n-th note; found@10 checks the note comes back
            docs = sorted(vault.store.documents.states())
            step = max(1, len(docs) // queries)
            picked = [vault.get_note(path) for path in docs[::step][:queries]]
            latencies: list[float] = []
            found = 0
            for note in picked:
                started = time.perf_counter()
                hits = vault.search(note.title, k=10)
                latencies.append((time.perf_counter() - started) * 1000)
                found += any(hit.path == note.path for hit in hits)
            results |= {
                "queries": len(picked),
                "search_p50_ms": round(statistics.median(latencies), 2),
                "search_p95_ms": round(_percentile(latencies, 0.95), 2),
                "title_query_found_at_10": round(found / len(picked), 3),
            }

        results["noop_reindex_cli_s"] = round(
            _cli(state, embedder, "index", str(vault_dir), "--quiet"), 3
        )
        with target.open("a", encoding="utf-8") as handle:
            handle.write("A third edit: numbat.\n")
        results["one_note_reindex_cli_s"] = round(
            _cli(state, embedder, "index", str(vault_dir), "--quiet"), 3
        )
        results["cli_startup_s"] = round(_cli(state, embedder, "--version"), 3)
        return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vault", type=Path, default=DEFAULT_VAULT)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--embedder", default="none", help="embedder spec (default: none)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "core_vault.json")
    args = parser.parse_args()
    if not args.vault.is_dir():
        print(f"no vault at {args.vault}", file=sys.stderr)
        return 1
    results = run(args.vault, args.queries, args.embedder)
    width = max(len(k) for k in results)
    for key, value in results.items():
        print(f"{key:<{width}}  {value}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
