"""Measure what checking each hit's freshness costs a search (issue 16 item 10).

    python bench/search_freshness.py [--notes 2000] [--queries 200] [-k 10]
                                     [--vault PATH] [--embedder none]

Every hit from a vault says whether its note on disk still holds what was indexed
(`vrom.ingest.freshness`): one ``stat`` per distinct note (its indexed state comes with the hit's
chunk row), and a read and SHA-256 of the note only when its modification time moved. This
times the same queries through the search core with the check off (``vault.corpus.search``,
``corpus.freshness`` None) and through ``vault.search`` (core plus check), interleaved, in three states of the vault: unchanged (stat only), every note
touched (same bytes, a new time: each hit's note is read and hashed) and every note grown (a new
size: stat only, no read). It prints median and 95th-percentile latencies and their ratio; the
numbers are this machine's, so compare the columns of one run rather than runs.

A vault of ``--notes`` generated notes (deterministic; about 1.5 KB and three chunks each) is
written to a temporary folder, or ``--vault`` is copied there; the source is never written.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from vrom import Vault, __version__
from vrom.ingest.freshness import fresh_notes

REPO = Path(__file__).resolve().parents[1]
WORDS = [
    "heron",
    "budget",
    "garden",
    "switch",
    "release",
    "meeting",
    "archive",
    "river",
    "ledger",
    "beacon",
    "harbour",
    "orchard",
    "lantern",
    "compass",
    "quarry",
    "meadow",
    "signal",
    "timber",
    "willow",
    "basalt",
    "cedar",
    "falcon",
    "glacier",
    "kestrel",
]


def write_vault(root: Path, notes: int, seed: int = 7) -> None:
    """Write ``notes`` Markdown notes of three sections each, from a small vocabulary."""
    rng = random.Random(seed)
    for i in range(notes):
        folder = root / ("Projects", "Journal", "Areas", "Inbox")[i % 4]
        folder.mkdir(parents=True, exist_ok=True)
        sections = "\n\n".join(
            f"## Part {s}\n\n" + " ".join(rng.choice(WORDS) for _ in range(80)) + "."
            for s in range(3)
        )
        (folder / f"Note {i:05d}.md").write_text(f"# Note {i}\n\n{sections}\n", encoding="utf-8")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _time(vault: Vault, queries: list[str], k: int) -> dict[str, float]:
    """Time each query through the core alone and through the facade (core + check)."""
    core: list[float] = []
    checked: list[float] = []
    check_only: list[float] = []
    check = vault.corpus.freshness  # the vault's: the core decides each hit's ``fresh``
    for query in queries:
        vault.corpus.freshness = None
        started = time.perf_counter()
        hits = vault.corpus.search(query, k, per_document=True)
        core.append((time.perf_counter() - started) * 1000)
        vault.corpus.freshness = check
        started = time.perf_counter()
        vault.search(query, k, per_note=True)
        checked.append((time.perf_counter() - started) * 1000)
        chunks = vault.store.documents.get_chunks([hit.chunk_id for hit in hits])
        started = time.perf_counter()
        fresh_notes(vault.root, chunks)  # the indexed states come with the chunk rows
        check_only.append((time.perf_counter() - started) * 1000)
    core_p50, checked_p50 = statistics.median(core), statistics.median(checked)
    return {
        "core_p50_ms": round(core_p50, 3),
        "core_p95_ms": round(_percentile(core, 0.95), 3),
        "with_check_p50_ms": round(checked_p50, 3),
        "with_check_p95_ms": round(_percentile(checked, 0.95), 3),
        "check_alone_p50_ms": round(statistics.median(check_only), 3),
        "ratio_p50": round(checked_p50 / core_p50, 3) if core_p50 else 0.0,
    }


def run(source: Path | None, notes: int, queries: int, k: int, embedder: str) -> dict[str, object]:
    """Index a vault in a temporary folder and time searches in its three states."""
    with tempfile.TemporaryDirectory(prefix="vrom-fresh-") as tmp:
        root = Path(tmp) / "vault"
        if source is None:
            write_vault(root, notes)
        else:
            shutil.copytree(source, root, symlinks=True)
        rng = random.Random(11)
        asked = [" ".join(rng.sample(WORDS, 2)) for _ in range(queries)]
        if source is not None:  # a real vault: its own note titles as queries
            asked = [path.stem for path in sorted(root.rglob("*.md"))[:: max(1, notes // 50)]]
            asked = (asked * (queries // max(1, len(asked)) + 1))[:queries]
        results: dict[str, object] = {
            "vrom": __version__,
            "python": platform.python_version(),
            "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores",
            "embedder": embedder,
            "k": k,
            "queries": len(asked),
        }
        with Vault.open(root, Path(tmp) / "state", embedder=embedder) as vault:
            summary = vault.index()
            results |= {"notes": summary.notes, "chunks": summary.chunks}
            files = sorted(root.rglob("*.md"))
            for query in asked[:20]:  # warm the page cache and SQLite's
                vault.search(query, k, per_note=True)
            results["unchanged"] = _time(vault, asked, k)
            for path in files:  # same bytes, a new time: each hit's note is read and hashed
                now = path.stat()
                os.utime(path, ns=(now.st_atime_ns, now.st_mtime_ns + 5_000_000_000))
            results["touched"] = _time(vault, asked, k)
            for path in files:  # a new size: stale, seen by stat alone
                with path.open("a", encoding="utf-8") as note:
                    note.write("\nEdited after indexing.\n")
            results["grown"] = _time(vault, asked, k)
        return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=2000, help="notes to generate")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("-k", type=int, default=10, help="notes a search returns")
    parser.add_argument("--vault", type=Path, default=None, help="copy this vault instead")
    parser.add_argument("--embedder", default="none", help="embedder spec (default: none)")
    parser.add_argument(
        "--out", type=Path, default=REPO / "bench" / "results" / "search_freshness.json"
    )
    args = parser.parse_args()
    if args.vault is not None and not args.vault.is_dir():
        print(f"no vault at {args.vault}", file=sys.stderr)
        return 1
    results = run(args.vault, args.notes, args.queries, args.k, args.embedder)
    print(
        f"{results['notes']:,} notes, {results['chunks']:,} chunks, {results['queries']} "
        f"queries, k={results['k']} notes ({results['embedder']}; {results['machine']})"
    )
    print(
        f"{'state':<10} {'core p50/p95 ms':>17} {'+check p50/p95 ms':>19} {'check':>8} {'ratio':>6}"
    )
    for state in ("unchanged", "touched", "grown"):
        row = results[state]
        assert isinstance(row, dict)
        print(
            f"{state:<10} {row['core_p50_ms']:>8.3f}/{row['core_p95_ms']:<8.3f} "
            f"{row['with_check_p50_ms']:>9.3f}/{row['with_check_p95_ms']:<9.3f} "
            f"{row['check_alone_p50_ms']:>8.3f} {row['ratio_p50']:>6.2f}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
