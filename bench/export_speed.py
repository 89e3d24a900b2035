"""Export a real vault for analytics: a full export against an incremental one after a few edits.

    python bench/export_speed.py [--vault ../shared/data/vault/obsidian-hub] [--sample 2000]
        [--changed 3] [--added 1] [--vectors] [--out FILE]

``--sample N`` copies every k-th note in sorted path order (k = notes // N, at most N notes,
folders kept) to a temporary vault, so the source is never written; it is indexed keyword only
(``--vectors``: with the fake embedder at 384 dimensions, as the default model has, and the
vectors exported too). For each format (a Parquet folder, a DuckDB file) the run times:

1. a full export into a new place;
2. an incremental export after ``--changed`` notes were edited and ``--added`` notes added
   (and the vault re-indexed), into the same place;
3. a full export of that same state into a new place (``--full`` semantics), measured right
   after, so the ratio full / incremental compares the two at much the same machine load.

Prints a table and writes JSON to bench/results/export_speed.json. The machine may be shared:
the ratio is the number to watch, not the absolute times.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from vrom import Embedder, Vault

REPO = Path(__file__).resolve().parents[1]
DEFAULT_VAULT = REPO.parent / "shared" / "data" / "vault" / "obsidian-hub"
SKIPPED = (".git", ".obsidian", ".trash")


def sample_vault(source: Path, target: Path, sample: int) -> int:
    """Copy every k-th note of ``source`` to ``target`` (at most ``sample``); return how many."""
    notes = sorted(
        p
        for p in source.rglob("*.md")
        if p.is_file() and not any(part in SKIPPED for part in p.relative_to(source).parts)
    )
    step = max(1, len(notes) // sample)
    chosen = notes[::step][:sample]
    for path in chosen:
        copy = target / path.relative_to(source)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, copy)
    return len(chosen)


def edit(vault: Vault, changed: int, added: int, label: str) -> None:
    """Append a line to ``changed`` indexed notes (spread over the vault), write ``added`` new
    ones (named after ``label``), and re-index."""
    notes = [ref.path for ref in vault.notes(limit=1_000_000)]
    for path in notes[:: max(1, len(notes) // max(1, changed))][:changed]:
        with open(vault.root / path, "a", encoding="utf-8") as file:
            file.write(f"\n\nEdited for the export benchmark ({label}).\n")
    for number in range(added):
        (vault.root / f"Added {label} {number}.md").write_text(
            f"# Added {number}\n\nA new note linking to [[{Path(notes[0]).stem}]]. #benchmark\n",
            encoding="utf-8",
        )
    vault.index()


def timed_export(vault: Vault, out: Path, fmt: str, vectors: bool) -> dict[str, Any]:
    started = time.perf_counter()
    summary = vault.export(out, fmt, vectors=vectors)
    seconds = time.perf_counter() - started
    return {
        "seconds": round(seconds, 3),
        "incremental": summary.incremental,
        "changed": summary.changed,
        "added": summary.added,
        "removed": summary.removed,
        "unchanged": summary.unchanged,
        "tables": dict(summary.tables),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--vault", type=Path, default=DEFAULT_VAULT)
    parser.add_argument("--sample", type=int, default=2000, help="notes to copy (default 2000)")
    parser.add_argument("--changed", type=int, default=3, help="notes to edit (default 3)")
    parser.add_argument("--added", type=int, default=1, help="notes to add (default 1)")
    parser.add_argument(
        "--vectors", action="store_true", help="embed (fake, 384 d) and export the vectors"
    )
    parser.add_argument(
        "--out", type=Path, default=REPO / "bench" / "results" / "export_speed.json"
    )
    args = parser.parse_args()
    if not args.vault.is_dir():
        parser.error(f"no vault at {args.vault}")
    embedder = Embedder.fake(384) if args.vectors else None
    results: dict[str, Any] = {"vault": str(args.vault), "vectors": args.vectors}
    with tempfile.TemporaryDirectory(prefix="vrom-export-bench-") as temporary:
        base = Path(temporary)
        root = base / "vault"
        results["copied"] = sample_vault(args.vault, root, args.sample)
        with Vault.open(root, base / "state", embedder=embedder) as vault:
            index = vault.index()
            results["notes"], results["chunks"] = index.notes, index.chunks
            for fmt, name in (("parquet", "export"), ("duckdb", "export.duckdb")):
                out = base / fmt / name
                out.parent.mkdir()
                first = timed_export(vault, out, fmt, args.vectors)
                edit(vault, args.changed, args.added, fmt)
                incremental = timed_export(vault, out, fmt, args.vectors)
                full = timed_export(vault, base / fmt / f"full-{name}", fmt, args.vectors)
                results[fmt] = {"first": first, "incremental": incremental, "full": full}
    print(
        f"{results['copied']:,} notes copied, {results['notes']:,} indexed, "
        f"{results['chunks']:,} chunks; vectors: {args.vectors}"
    )
    print(f"{'format':<9} {'full s':>8} {'incremental s':>14} {'full/incr':>10}  changed")
    for fmt in ("parquet", "duckdb"):
        row = results[fmt]
        ratio = row["full"]["seconds"] / max(row["incremental"]["seconds"], 1e-9)
        what = f"{row['incremental']['changed']} changed, {row['incremental']['added']} added"
        print(
            f"{fmt:<9} {row['full']['seconds']:>8.2f} {row['incremental']['seconds']:>14.2f}"
            f" {ratio:>9.1f}x  {what}"
        )
        row["full_over_incremental"] = round(ratio, 2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
