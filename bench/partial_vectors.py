"""Search quality while a store is still being embedded: keyword vs hybrid at a share of vectors.

    python bench/partial_vectors.py [--dataset ../shared/data/beir/scifact] [--split train]
        [--store FILE] [--shares 0.02,0.1,0.3,0.6,1] [--embedder default] [--out FILE]

Adds the BEIR corpus to a collection with the model (``--store`` keeps it, so a second run
skips the embedding: about 25 minutes for SciFact on 2 cores), then for each share copies the
store, deletes the vectors of a random (seeded) rest of the chunks, as if background embedding
had got that far, and measures nDCG@10 of keyword and hybrid search over the split's queries.
Run it with ``PYTHONPATH=<another checkout>/src`` for a baseline. Writes JSON to
bench/results/partial_vectors.json.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sqlite3
import statistics
import tempfile
from pathlib import Path

from vrom import Collection
from vrom.evaluation.beir import load_beir
from vrom.evaluation.metrics import ndcg_at_k
from vrom.evaluation.runs import add_corpus

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "beir"


def _with_share(source: Path, target: Path, share: float) -> None:
    """Copy the store, keeping the vectors of a seeded random ``share`` of its chunks."""
    shutil.copy(source, target)
    with sqlite3.connect(target) as raw:
        ids = [row[0] for row in raw.execute("SELECT chunk_id FROM vectors ORDER BY chunk_id")]
        keep = set(random.Random(7).sample(ids, round(share * len(ids))))
        raw.executemany(
            "DELETE FROM vectors WHERE chunk_id = ?", [(i,) for i in ids if i not in keep]
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATA / "scifact")
    parser.add_argument("--split", default="train")
    parser.add_argument("--store", type=Path, default=None, help="keep the embedded store here")
    parser.add_argument("--shares", default="0.02,0.1,0.3,0.6,1")
    parser.add_argument("--embedder", default="default")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "partial_vectors.json"
    )
    args = parser.parse_args(argv)
    data = load_beir(args.dataset, args.split)
    shares = [float(share) for share in args.shares.split(",")]
    with tempfile.TemporaryDirectory(prefix="vrom-partial-") as tmp:
        store = args.store or Path(tmp) / "full.db"
        built = Collection.open(args.dataset.name, embedder=args.embedder, storage=store)
        if built.count() == 0:
            add_corpus(built, args.dataset)
        built.close()
        rows = {}
        for share in shares:
            copy = Path(tmp) / f"share-{share}.db"
            _with_share(store, copy, share)
            collection = Collection.open(args.dataset.name, embedder=args.embedder, storage=copy)
            row = {}
            for mode in ("keyword", "hybrid"):
                scores = [
                    ndcg_at_k(
                        [hit.id for hit in collection.search(text, k=10, mode=mode)],
                        data.qrels[qid],
                        10,
                    )
                    for qid, text in data.queries
                ]
                row[f"{mode}_ndcg10"] = round(statistics.mean(scores), 4)
            collection.close()
            rows[str(share)] = row
            print(
                f"vectors {share:>5.0%}  keyword {row['keyword_ndcg10']:.4f}  "
                f"hybrid {row['hybrid_ndcg10']:.4f}",
                flush=True,
            )
    result = {"dataset": str(args.dataset), "split": args.split, "queries": len(data.queries)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**result, "shares": rows}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
