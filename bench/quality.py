"""Retrieval quality of every search mode, through a collection and through memories.

    python bench/quality.py [DATASET_DIR ...] [--split SPLIT ...] [--as collection memories]
        [--cache DIR] [--out FILE]

Default datasets: the development sets of the retrieval rounds, when present under
``shared/data`` next to the repository: SciFact (train), NFCorpus (dev) and LoCoMo's five
conversations (``locomo-dev``, dev). Each is run through `vrom.evaluation.evaluate` (what
``vrom eval`` runs) for each target, ``collection`` (one document per entry) and ``memories``
(each entry remembered, each query recalled): nDCG@10, recall@10, recall@100, MRR@10 and the
query p50 of keyword, vector and hybrid search.

The model is vrom's default, its vectors cached by text in ``--cache`` (the same cache
`bench/hybrid_peers.py` fills: a collection's chunks are the same texts), so a second run
embeds nothing; the first embeds SciFact and NFCorpus in about 85 minutes on two cores.
Latency counts the query's embedding (a cache lookup here, not the model).

Prints a table and writes JSON to bench/results/quality.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from beir_datasets import add_dataset_arguments, chosen_dev_sets
from hybrid_peers import CACHE, PrecomputedEmbedder, VectorCache, cache_stem

from vrom import __version__
from vrom.documents import MAX_TEXT_CHARS
from vrom.embed import Embedder
from vrom.evaluation import TARGETS, evaluate
from vrom.evaluation.beir import corpus_documents

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "quality.json"


def run(
    datasets: Sequence[tuple[Path, str]], targets: Sequence[str], model: Embedder, cache_dir: Path
) -> list[dict[str, Any]]:
    """Return each dataset's evaluation through each target."""
    rows = []
    for folder, split in datasets:
        texts = [doc.text[:MAX_TEXT_CHARS] for doc in corpus_documents(folder)]
        name = folder.resolve().name
        cache = VectorCache(
            cache_dir, cache_stem(name, model.fingerprint, texts), model.fingerprint.dims
        )
        embedder = PrecomputedEmbedder(model, cache)
        try:
            for target in targets:
                print(f"  {name}: as {target} ...", file=sys.stderr, flush=True)
                started = time.perf_counter()
                evaluation = evaluate(folder, split=split, embedder=embedder, target=target)
                rows.append({"wall_s": time.perf_counter() - started, **asdict(evaluation)})
        finally:
            cache.save()
    return rows


def table(rows: Sequence[dict[str, Any]]) -> str:
    """Return the evaluations as one table: a line per dataset, target and mode."""
    lines = [
        f"{'dataset':<12} {'as':<10} {'mode':<8} {'nDCG@10':>8} {'R@10':>7} {'R@100':>7} "
        f"{'MRR@10':>7} {'p50 ms':>7}"
    ]
    for row in rows:
        for result in row["results"]:
            lines.append(
                f"{row['dataset']:<12} {row['target']:<10} {result['mode']:<8} "
                f"{result['ndcg']:>8.4f} {result['recall']:>7.4f} {result['recall_100']:>7.4f} "
                f"{result['mrr']:>7.4f} {result['latency_p50_ms']:>7.2f}"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_dataset_arguments(parser)
    parser.add_argument("--as", dest="targets", nargs="+", choices=TARGETS, default=TARGETS)
    parser.add_argument("--cache", type=Path, default=CACHE, help="folder of cached vectors")
    parser.add_argument("--embedder", choices=("default", "fake"), default="default")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    datasets = chosen_dev_sets(args.datasets, args.split)
    model = Embedder.default() if args.embedder == "default" else Embedder.fake()
    rows = run(datasets, args.targets, model, args.cache)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"vrom": __version__, "runs": rows}, indent=2))
    print(f"vrom {__version__}; vectors: {model.fingerprint.describe()}")
    print(table(rows))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
