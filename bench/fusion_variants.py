"""How hybrid search should combine its two rankings: fusion rules compared on the dev sets.

    python bench/fusion_variants.py [DATASET_DIR ...] [--split SPLIT ...] [--cache DIR]
        [--embedder default|fake] [--out FILE]

Default datasets: SciFact (train), NFCorpus (dev) and LoCoMo's five conversations
(``locomo-dev``, dev) under ``shared/data`` next to the repository. Each is added to a
`Collection` as `vrom.evaluation.beir.corpus_documents` makes it (so each chunk is embedded with
its document's title), vectors cached by text in ``--cache`` as in `bench/quality.py`. For
every judged query the script takes the collection's own keyword ranking (BM25) and vector
ranking (exact cosine), 400 chunks each (what a search for 100 documents asks for), and ranks
the documents (each at its best chunk, or best plus a share of its second) by each rule:

- ``keyword``, ``vector``: one ranking alone;
- ``rrf``: reciprocal rank fusion, k=60 (vrom's fusion before this round);
- ``convex w``: `vrom.search.fusion.fuse` with the keyword weight ``w`` (0.5 is vrom's);
- ``convex 0.5, second β``: a document scores its best chunk plus β times its second;
- ``convex 0.5, by document``: a document's keyword and vector parts are its best chunk's in
  each ranking (`FusedCandidates.by_group`, what vrom does since).

nDCG@10, recall@10 and recall@100 per rule and dataset come from
`vrom.evaluation.metrics.score_ranking`. Every rule sees the same candidates, so differences
are the rule's alone. Prints a table and writes JSON to bench/results/fusion_variants.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from beir_datasets import add_dataset_arguments, chosen_dev_sets
from hybrid_peers import CACHE, PrecomputedEmbedder, VectorCache, cache_stem

from vrom import Collection, __version__
from vrom.documents import MAX_TEXT_CHARS
from vrom.embed import Embedder
from vrom.evaluation.beir import corpus_documents, load_beir
from vrom.evaluation.metrics import RECALL_DEPTH, score_ranking
from vrom.evaluation.runs import add_corpus
from vrom.search import fusion
from vrom.search.query import parse_query

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results" / "fusion_variants.json"
POOL = 4 * RECALL_DEPTH
"""Candidates per ranking: what a search for `RECALL_DEPTH` documents fetches."""
Ranking = list[tuple[int, float]]
Rule = Callable[[Ranking, Ranking, dict[int, str]], dict[int, float]]
"""Chunk scores from the two rankings and each chunk's document."""


def rules() -> dict[str, tuple[Rule, float]]:
    """Return each rule by name: (chunk scores from the two rankings, second-chunk share)."""

    def keyword(kw: Ranking, _: Ranking, __: dict[int, str]) -> dict[int, float]:
        return dict(kw)

    def vector(_: Ranking, vec: Ranking, __: dict[int, str]) -> dict[int, float]:
        return dict(vec)

    def rrf(kw: Ranking, vec: Ranking, _: dict[int, str] | None = None) -> dict[int, float]:
        fused = fusion.reciprocal_rank_fusion([("bm25", kw), ("vector", vec)])
        return {chunk: parts["rrf"] for chunk, parts in fused.items()}

    def convex(weight: float) -> Rule:
        def rule(kw: Ranking, vec: Ranking, _: dict[int, str]) -> dict[int, float]:
            keyword_parts, vector_parts = fusion.normalised(kw), fusion.normalised(vec)
            ties = rrf(kw, vec)
            return {
                chunk: weight * keyword_parts.get(chunk, 0.0)
                + (1 - weight) * vector_parts.get(chunk, 0.0)
                + 1e-9 * ties[chunk]  # equal fused scores go by rrf, as in vrom
                for chunk in ties
            }

        return rule

    chosen: dict[str, tuple[Rule, float]] = {
        "keyword": (keyword, 0.0),
        "vector": (vector, 0.0),
        "rrf": (rrf, 0.0),
    }
    for weight in (0.4, 0.5, 0.6):
        chosen[f"convex {weight}"] = (convex(weight), 0.0)
    for share in (0.1, 0.2):
        chosen[f"convex 0.5, second {share}"] = (convex(0.5), share)
    chosen["convex 0.5, by document"] = (by_document, 0.0)
    return chosen


def by_document(kw: Ranking, vec: Ranking, owner: dict[int, str]) -> dict[int, float]:
    """Return vrom's fusion by document: each document's score on its cited chunk alone."""
    import numpy as np

    fused = fusion.fuse_arrays(
        np.array([chunk for chunk, _ in kw], dtype=np.int64),
        np.array([score for _, score in kw]),
        np.array([chunk for chunk, _ in vec], dtype=np.int64),
        np.array([score for _, score in vec]),
    )
    number = {path: n for n, path in enumerate(sorted({owner[c] for c in fused.ids.tolist()}))}
    grouped, cited = fused.by_group(
        np.array([number[owner[c]] for c in fused.ids.tolist()], dtype=np.int64)
    )
    return {
        int(chunk): score + 1e-9 * ties
        for chunk, score, ties in zip(
            cited.tolist(), grouped.fused.tolist(), grouped.rrf.tolist(), strict=True
        )
    }


def documents_of(scores: dict[int, float], owner: dict[int, str], share: float) -> list[str]:
    """Return documents best first: each scores its best chunk plus ``share`` of its second."""
    per: dict[str, list[float]] = {}
    for chunk, score in scores.items():
        per.setdefault(owner[chunk], []).append(score)
    totals = {}
    for document, values in per.items():
        values.sort(reverse=True)
        totals[document] = values[0] + (share * values[1] if len(values) > 1 else 0.0)
    return sorted(totals, key=lambda d: -totals[d])[:RECALL_DEPTH]


def run_dataset(folder: Path, split: str, model: Embedder, cache_dir: Path) -> dict[str, Any]:
    """Return each rule's mean nDCG@10, recall@10 and recall@100 on one dataset."""
    dataset = load_beir(folder, split)
    texts = [doc.text[:MAX_TEXT_CHARS] for doc in corpus_documents(folder)]
    cache = VectorCache(
        cache_dir, cache_stem(folder.name, model.fingerprint, texts), model.fingerprint.dims
    )
    embedder = PrecomputedEmbedder(model, cache)
    chosen = rules()
    totals = {name: [0.0, 0.0, 0.0] for name in chosen}
    try:
        with (
            tempfile.TemporaryDirectory(prefix="vrom-fusion-") as work,
            Collection.open("beir", embedder=embedder, storage=work, index="flat") as collection,
        ):
            add_corpus(collection, folder)
            core = collection._corpus
            owner = {
                chunk.chunk_id: chunk.path
                for chunk in core.store.documents.get_chunks(
                    [chunk_id for chunk_id, _ in core.store.vectors.rows()]
                )
            }
            for qid, text in dataset.queries:
                kw = [
                    (r.chunk_id, r.bm25) for r in core.keyword.search(parse_query(text), POOL, None)
                ]
                vec = core.index.nearest(embedder.embed_query(text), POOL)
                for name, (rule, share) in chosen.items():
                    ranked = documents_of(rule(kw, vec, owner), owner, share)
                    scores = score_ranking(ranked, dataset.qrels[qid], 10)
                    for i, value in enumerate((scores.ndcg, scores.recall, scores.recall_100)):
                        totals[name][i] += value
    finally:
        cache.save()
    count = max(1, len(dataset.queries))
    return {
        "dataset": folder.resolve().name,
        "split": split,
        "queries": len(dataset.queries),
        "rules": {
            name: dict(
                zip(
                    ("ndcg@10", "recall@10", "recall@100"), [v / count for v in values], strict=True
                )
            )
            for name, values in totals.items()
        },
    }


def table(rows: Sequence[dict[str, Any]]) -> str:
    """Return nDCG@10 / recall@10 / recall@100 per rule (lines) and dataset (columns)."""
    names = list(rows[0]["rules"]) if rows else []
    head = f"{'rule':<24}" + "".join(f" {row['dataset'][:22]:>22}" for row in rows)
    lines = [head]
    for name in names:
        cells = "".join(
            f" {r['rules'][name]['ndcg@10']:.4f}/{r['rules'][name]['recall@10']:.3f}/"
            f"{r['rules'][name]['recall@100']:.3f}"
            for r in rows
        )
        lines.append(f"{name:<24}{cells}")
    return "\n".join(lines) + "\n(each cell: nDCG@10 / recall@10 / recall@100)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_dataset_arguments(parser)
    parser.add_argument("--cache", type=Path, default=CACHE, help="folder of cached vectors")
    parser.add_argument("--embedder", choices=("default", "fake"), default="default")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    datasets = chosen_dev_sets(args.datasets, args.split)
    model = Embedder.default() if args.embedder == "default" else Embedder.fake()
    rows = []
    for folder, split in datasets:
        print(f"  {folder.name} ({split}) ...", file=sys.stderr, flush=True)
        rows.append(run_dataset(folder, split, model, args.cache))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"vrom": __version__, "datasets": rows}, indent=2))
    print(
        f"vrom {__version__}; vectors: {model.fingerprint.describe()}; {POOL} candidates a ranking"
    )
    print(table(rows))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
