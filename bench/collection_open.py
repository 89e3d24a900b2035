"""Benchmark a large Collection: open → first answer for flat and HNSW, catching up, filters.

    python bench/collection_open.py [--documents 100000] [--dims 384] [--repeat 3]

Embeddings come from the fake embedder (hashed words, ``--dims`` dimensions): the model's speed
is not what is measured here (see bench/beir_eval.py for that), and 100k real embeddings would
take hours on two cores. Each open is timed in a fresh process (``python -c``), so imports,
reading the store and loading or building the index all count (and the process's peak RSS is
taken). The flat index's first open reads every vector from the store and writes the matrix
file beside it; later opens map that file. Baselines run in the same
invocation: HNSW open after a few adds is compared with rebuilding the graph from scratch.

Prints a table and writes JSON to bench/results/collection_open.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vrom import Collection, Embedder, __version__

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "collection_open.json"
VOCABULARY = 5_000
WORDS_PER_DOCUMENT = 12
BATCH = 5_000

_OPEN_AND_ASK = """
import json, sys, time
started = time.perf_counter()
from vrom import Collection, Embedder
import numpy  # the fake embedder's: imported here with vrom, so what follows is opening
imported = time.perf_counter()
docs = Collection.open("bench", embedder=Embedder.fake({dims}), storage={storage!r}, index={index!r})
opened = time.perf_counter()
hits = docs.search("w17 w230 w4001 topic3", k=10)
answered = time.perf_counter()
if {wait}:  # a graph is built beside the searches (which answer exactly meanwhile), not in one
    docs._corpus.index.wait_for_graph()
graph_s = time.perf_counter() - answered
docs.close()
closed = time.perf_counter()
peak_mb = 0.0  # the process's own peak (VmHWM; Linux only)
if sys.platform == "linux":
    with open("/proc/self/status") as status:
        peak_mb = next(int(n.split()[1]) / 1024 for n in status if n.startswith("VmHWM:"))
print(json.dumps({{"open_s": opened - started, "first_answer_s": answered - started,
                  "after_imports_s": answered - imported,
                  "graph_s": graph_s, "close_s": closed - answered - graph_s, "hits": len(hits),
                  "peak_rss_mb": peak_mb}}))
"""


def _documents(start: int, count: int, seed: int) -> list[dict[str, object]]:
    rng = random.Random(seed)
    docs = []
    for n in range(start, start + count):
        topic = n % 100
        words = [f"w{rng.randrange(VOCABULARY)}" for _ in range(WORDS_PER_DOCUMENT)]
        docs.append(
            {
                "id": f"doc-{n}",
                "text": f"topic{topic} " + " ".join(words),
                "metadata": {"topic": topic, "group": n % 10, "rank": n},
            }
        )
    return docs


def _open_in_fresh_process(
    storage: Path, index: str, dims: int, *, wait: bool = False
) -> dict[str, float]:
    """Open the collection in a new process, search once and close; ``wait``: wait for the
    graph being built beside the search (and saved) before closing, timed as ``graph_s``."""
    code = _OPEN_AND_ASK.format(dims=dims, storage=str(storage), index=index, wait=wait)
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    result: dict[str, float] = json.loads(out)
    return result


def _median_open(storage: Path, index: str, dims: int, repeat: int) -> dict[str, float]:
    runs = [_open_in_fresh_process(storage, index, dims) for _ in range(repeat)]
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


def _latency_ms(docs: Collection, queries: list[str], **options: object) -> tuple[float, float]:
    times = []
    for query in queries:
        started = time.perf_counter()
        docs.search(query, **options)  # type: ignore[arg-type]
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


def run(documents: int, dims: int, repeat: int) -> dict[str, object]:
    results: dict[str, object] = {
        "vrom": __version__,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores",
        "documents": documents,
        "dims": dims,
        "embeddings": f"fake (hashed words, {dims} d)",
    }
    with tempfile.TemporaryDirectory(prefix="vrom-bench-") as tmp:
        storage = Path(tmp)
        started = time.perf_counter()
        with Collection.open("bench", embedder=Embedder.fake(dims), storage=storage) as docs:
            for start in range(0, documents, BATCH):
                docs.add(_documents(start, min(BATCH, documents - start), seed=start))
        results["add_s"] = time.perf_counter() - started
        results["store_mb"] = (storage / "bench.db").stat().st_size / 1e6

        # the first reads every vector from the store and writes the matrix file beside it
        results["flat_first_open_writes"] = _open_in_fresh_process(storage, "flat", dims)
        results["flat_open"] = _median_open(storage, "flat", dims, repeat)
        first_hnsw = _open_in_fresh_process(storage, "hnsw", dims, wait=True)  # builds, saves it
        results["hnsw_first_open_builds"] = first_hnsw
        results["hnsw_open"] = _median_open(storage, "hnsw", dims, repeat)

        with Collection.open(
            "bench", embedder=Embedder.fake(dims), storage=storage, index="hnsw"
        ) as docs:
            docs.search("warm up", k=10)
            started = time.perf_counter()
            docs.add(_documents(documents, 100, seed=-1))
            docs.search("w1 w2", k=10)
            results["hnsw_add_100_then_search_s"] = time.perf_counter() - started
        # the graph file now holds those 100 (saved on close); add 100 more from a process
        # that does not touch the graph, so the next open must catch up with them
        with Collection.open(
            "bench", embedder=Embedder.fake(dims), storage=storage, index="flat"
        ) as docs:
            docs.add(_documents(documents + 100, 100, seed=-2))
        results["hnsw_open_100_behind"] = _open_in_fresh_process(storage, "hnsw", dims)
        # the matrix file is 200 documents behind: neither process above searched it
        results["flat_open_200_behind"] = _open_in_fresh_process(storage, "flat", dims)
        for suffix in (".hnsw.usearch", ".hnsw.json"):
            (storage / f"bench.db{suffix}").unlink()
        results["hnsw_open_rebuild"] = _open_in_fresh_process(storage, "hnsw", dims, wait=True)

        queries = [" ".join(_documents(n, 1, seed=n)[0]["text"].split()[:5]) for n in range(200)]  # type: ignore[union-attr]
        latency: dict[str, object] = {}
        for index in ("flat", "hnsw"):
            with Collection.open(
                "bench", embedder=Embedder.fake(dims), storage=storage, index=index
            ) as docs:
                docs.search("warm up", k=10)
                latency[index] = {
                    "p50_ms": _latency_ms(docs, queries, k=10)[0],
                    "filter_1pct_p50_ms": _latency_ms(docs, queries[:50], k=10, where={"topic": 7})[
                        0
                    ],
                    "filter_30pct_p50_ms": _latency_ms(
                        docs, queries[:50], k=10, where={"group": {"$in": [1, 2, 3]}}
                    )[0],
                    "filter_1pct_hits": len(docs.search(queries[0], k=10, where={"topic": 7})),
                }
        results["latency"] = latency
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    results = run(args.documents, args.dims, args.repeat)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))

    def first(key: str) -> float:
        value = results[key]
        assert isinstance(value, dict)
        return float(value["first_answer_s"])

    print(f"{results['documents']:,} documents, {results['embeddings']}, {results['machine']}")
    print(f"add (batches of {BATCH:,}):              {results['add_s']:8.1f} s")
    print(f"store file:                          {results['store_mb']:8.1f} MB")
    print(f"open → first answer, flat (file):    {first('flat_open'):8.3f} s")
    print(f"open → first answer, flat 200 behind:{first('flat_open_200_behind'):8.3f} s")
    print(f"open → first answer, flat, writes it:{first('flat_first_open_writes'):8.3f} s")
    for key in ("flat_open", "flat_open_200_behind", "flat_first_open_writes", "hnsw_open"):
        row = results[key]
        assert isinstance(row, dict)
        print(
            f"  {key}: {row['after_imports_s'] * 1000:6.1f} ms after imports, "
            f"peak RSS {row['peak_rss_mb']:.0f} MB"
        )
    print(f"open → first answer, hnsw (cached):  {first('hnsw_open'):8.3f} s")
    print(f"open → first answer, hnsw 100 behind:{first('hnsw_open_100_behind'):8.3f} s")
    print(f"open → first answer, hnsw rebuild:   {first('hnsw_open_rebuild'):8.3f} s")
    rebuild = results["hnsw_open_rebuild"]
    assert isinstance(rebuild, dict)
    print(f"  the graph built beside it in:      {rebuild['graph_s']:8.3f} s")
    print(
        "  cached / rebuild:                  "
        f"{first('hnsw_open') / first('hnsw_open_rebuild'):8.3f}"
    )
    print(f"add 100 then search (hnsw, warm):    {results['hnsw_add_100_then_search_s']:8.3f} s")
    latency = results["latency"]
    assert isinstance(latency, dict)
    for index, row in latency.items():
        print(
            f"{index:5} search p50 {row['p50_ms']:7.2f} ms · where 1% {row['filter_1pct_p50_ms']:7.2f} ms"
            f" ({row['filter_1pct_hits']} hits) · where 30% {row['filter_30pct_p50_ms']:7.2f} ms"
        )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
