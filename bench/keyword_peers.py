"""Benchmark vrom's keyword search against bm25s on BEIR datasets: quality, indexing, queries/s.

    python bench/keyword_peers.py [DATASET_DIR ...] [--split SPLIT ...] [--out FILE]

Default datasets: scifact (split train) and nfcorpus (split dev) under ``shared/data/beir`` next
to the repository. One ``--split`` applies to every dataset, or give one per dataset.

Both sides see the same corpus and queries in the same run. vrom: a `Collection` without an
embedder in a temporary folder, filled by `vrom.evaluation.runs.add_corpus` (one document per
entry, ``title\\n\\ntext``, chunked as usual, one hit per document), queried by
`vrom.evaluation.runs.search_queries` (keyword mode, 100 documents per query). bm25s: the same
document texts, bm25s's English stopwords and PyStemmer's English stemmer (when PyStemmer is
installed; the JSON says which), BM25 with bm25s's defaults (method ``lucene``, k1 1.5, b 0.75),
100 documents per query (documents scoring 0 matched no query term and are dropped, as vrom
never returns them). Its build time counts tokenizing the corpus and indexing it; a query's time
counts tokenizing it and retrieving. Queries/s is measured twice for bm25s: one query at a time
(as vrom is asked) and all queries in one batched ``retrieve`` (single process, ``n_threads=0``).
Each side runs one untimed query first.

nDCG@10 and recall@100 come from `vrom.evaluation.metrics.score_ranking` on both runs. Ratios are
vrom / bm25s: above 1 means vrom scores higher, takes longer to build, or answers more queries/s.
Without bm25s the script says so and reports vrom's numbers only (exit 0).

Prints a table and writes JSON to bench/results/keyword_peers.json.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from beir_datasets import add_dataset_arguments, chosen_datasets

from vrom import Collection, __version__
from vrom.documents import MAX_TEXT_CHARS
from vrom.evaluation.beir import BeirDataset, Qrels, corpus_documents, load_beir
from vrom.evaluation.metrics import RECALL_DEPTH, percentile, score_ranking
from vrom.evaluation.runs import add_corpus, search_queries

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "keyword_peers.json"
K = 10
BM25S_INSTALL = "pip install 'bm25s==0.3.16' 'PyStemmer==3.1.0'"


def _optional(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _quality(rankings: Mapping[str, Sequence[str]], qrels: Qrels) -> dict[str, float]:
    scores = [score_ranking(ranking, qrels[qid], K) for qid, ranking in rankings.items()]
    return {
        f"ndcg_at_{K}": statistics.fmean(s.ndcg for s in scores),
        "recall_at_100": statistics.fmean(s.recall_100 for s in scores),
    }


def _speed(latencies_s: Sequence[float]) -> dict[str, float]:
    return {
        "queries_per_s": len(latencies_s) / sum(latencies_s),
        "latency_p50_ms": 1000 * percentile(latencies_s, 0.5),
        "latency_p95_ms": 1000 * percentile(latencies_s, 0.95),
    }


def run_vrom(dataset: BeirDataset) -> dict[str, Any]:
    """Return vrom's keyword numbers on the dataset: quality, build time, single-query speed."""
    with (
        tempfile.TemporaryDirectory(prefix="vrom-bench-", ignore_cleanup_errors=True) as work,
        Collection.open("beir", embedder=None, storage=work) as collection,
    ):
        index = add_corpus(collection, dataset.folder)
        run = search_queries(collection, dataset.queries, ["keyword"], RECALL_DEPTH)["keyword"]
    return {
        "documents": index.documents,
        "truncated": index.truncated,
        "build_s": index.total_s,
        **_quality(run.rankings, dataset.qrels),
        **_speed(run.latencies_s),
    }


def run_bm25s(dataset: BeirDataset, bm25s: ModuleType, stemmer: Any) -> dict[str, Any]:
    """Return bm25s's numbers on the dataset: quality, build time, single and batched speed."""
    ids, texts = [], []
    for doc in corpus_documents(dataset.folder):
        ids.append(doc.id)
        texts.append(doc.text[:MAX_TEXT_CHARS])  # the text vrom holds
    depth = min(RECALL_DEPTH, len(ids))

    def tokens(batch: list[str]) -> Any:
        return bm25s.tokenize(
            batch, stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False
        )

    def ranking(doc_indices: Any, scores: Any) -> list[str]:
        return [ids[i] for i, score in zip(doc_indices, scores, strict=True) if score > 0]

    started = time.perf_counter()
    corpus_tokens = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(corpus_tokens, show_progress=False)
    build_s = time.perf_counter() - started

    def retrieve(batch: list[str]) -> tuple[Any, Any]:
        result = retriever.retrieve(tokens(batch), k=depth, show_progress=False, n_threads=0)
        return result[0], result[1]

    texts_to_run = [(qid, text) for qid, text in dataset.queries if text.strip()]
    if texts_to_run:
        retrieve([texts_to_run[0][1]])  # untimed, as vrom's first query
    rankings: dict[str, list[str]] = {qid: [] for qid, _ in dataset.queries}
    latencies = []
    for qid, text in texts_to_run:
        started = time.perf_counter()
        docs, scores = retrieve([text])
        latencies.append(time.perf_counter() - started)
        rankings[qid] = ranking(docs[0], scores[0])

    started = time.perf_counter()
    batch_docs, batch_scores = retrieve([text for _, text in texts_to_run])
    batched_s = time.perf_counter() - started
    same = all(
        ranking(d, s) == rankings[qid]
        for (qid, _), d, s in zip(texts_to_run, batch_docs, batch_scores, strict=True)
    )
    return {
        "documents": len(ids),
        "build_s": build_s,
        **_quality(rankings, dataset.qrels),
        **_speed(latencies),
        "batched_queries_per_s": len(texts_to_run) / batched_s,
        "batched_rankings_match_single": same,
    }


def _ratios(vrom: Mapping[str, Any], peer: Mapping[str, Any]) -> dict[str, float]:
    keys = (f"ndcg_at_{K}", "recall_at_100", "build_s", "queries_per_s")
    ratios = {key: vrom[key] / peer[key] if peer[key] else float("nan") for key in keys}
    ratios["queries_per_s_vs_batched"] = vrom["queries_per_s"] / peer["batched_queries_per_s"]
    return ratios


def run(datasets: Sequence[tuple[Path, str]]) -> dict[str, Any]:
    """Return the comparison on every (folder, split); bm25s's parts are None without it."""
    bm25s = _optional("bm25s")
    stemmer_module = _optional("Stemmer")
    stemmer = None if stemmer_module is None else stemmer_module.Stemmer("english")
    results: dict[str, Any] = {
        "vrom": __version__,
        "bm25s": None if bm25s is None else bm25s.__version__,
        "bm25s_setup": None
        if bm25s is None
        else {
            "method": "lucene",
            "k1": 1.5,
            "b": 0.75,
            "stopwords": "bm25s 'en'",
            "stemmer": "PyStemmer english (Snowball)" if stemmer else None,
            "backend": "numpy",
        },
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores",
        "depth": RECALL_DEPTH,
        "datasets": [],
    }
    for folder, split in datasets:
        dataset = load_beir(folder, split)
        vrom = run_vrom(dataset)
        peer = None if bm25s is None else run_bm25s(dataset, bm25s, stemmer)
        results["datasets"].append(
            {
                "dataset": dataset.folder.resolve().name,
                "split": split,
                "queries": len(dataset.queries),
                "vrom": vrom,
                "bm25s": peer,
                "ratios": None if peer is None else _ratios(vrom, peer),
            }
        )
    return results


def _table(results: Mapping[str, Any]) -> str:
    rows = [
        (f"nDCG@{K}", f"ndcg_at_{K}", "{:.4f}"),
        ("recall@100", "recall_at_100", "{:.4f}"),
        ("index build (s)", "build_s", "{:.3f}"),
        ("queries/s, one at a time", "queries_per_s", "{:.1f}"),
        ("query p50 (ms)", "latency_p50_ms", "{:.2f}"),
        ("queries/s, bm25s batched", "batched_queries_per_s", "{:.1f}"),
    ]
    lines = []
    for entry in results["datasets"]:
        vrom, peer, ratios = entry["vrom"], entry["bm25s"], entry["ratios"] or {}
        lines.append(
            f"\n{entry['dataset']} ({entry['split']}): {vrom['documents']:,} documents, "
            f"{entry['queries']:,} queries"
        )
        lines.append(f"{'':26} {'vrom':>10} {'bm25s':>10} {'vrom/bm25s':>11}")
        for label, key, fmt in rows:
            mine = fmt.format(vrom[key]) if key in vrom else "-"
            theirs = fmt.format(peer[key]) if peer and key in peer else "-"
            ratio_key = "queries_per_s_vs_batched" if key == "batched_queries_per_s" else key
            ratio = f"{ratios[ratio_key]:.3f}" if ratio_key in ratios else "-"
            lines.append(f"{label:26} {mine:>10} {theirs:>10} {ratio:>11}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_dataset_arguments(parser)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    results = run(chosen_datasets(args.datasets, args.split))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))

    if results["bm25s"] is None:
        print(f"bm25s is not installed: vrom's numbers only (to compare: {BM25S_INSTALL})")
    else:
        setup = results["bm25s_setup"]
        print(
            f"vrom {results['vrom']} vs bm25s {results['bm25s']} ({setup['method']}, k1 "
            f"{setup['k1']}, b {setup['b']}, stopwords {setup['stopwords']}, stemmer "
            f"{setup['stemmer'] or 'none (PyStemmer not installed)'}), {results['machine']}"
        )
    print(_table(results))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
