"""Benchmark single-query exact search with BLAS on one thread against BLAS's own thread count.

    python bench/blas_threads.py [--sizes 10000,20000,50000,100000] [--dims 384]
        [--queries 200] [--rounds 6] [--busy 0,1] [--out bench/results/blas_threads.json]

Exact search scores a query with one float32 matrix-vector product, then picks the top 10
(`vrom.index.scoring.best_rows`); this measures that, on seeded random unit vectors, with BLAS
limited to one thread (threadpoolctl) and with BLAS's default, in alternating rounds in one
process (so both see the same machine), and prints the p50 of each, median over the rounds, and
their ratio (below 1: one thread is faster). ``--busy N`` also runs each size with N processes
spinning on a core meanwhile: the neighbours a shared machine has (an embedding job, another
agent). The load average before each size is printed: a busy machine makes "0" busy too.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from vrom import __version__
from vrom.index.scoring import best_rows

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "blas_threads.json"
K = 10


def _spin(stop: Any) -> None:
    while not stop.is_set():
        sum(range(10_000))


def _p50_ms(matrix: np.ndarray, ids: np.ndarray, queries: np.ndarray) -> float:
    for query in queries[:5]:  # warm up: threads started, pages in
        best_rows(ids, matrix @ query, K)
    times = []
    for query in queries:
        started = time.perf_counter()
        best_rows(ids, matrix @ query, K)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def measure(size: int, dims: int, queries: int, rounds: int, busy: int) -> dict[str, Any]:
    """Return the p50 latency with one BLAS thread and with the default, over ``rounds``."""
    from threadpoolctl import ThreadpoolController  # a vrom dependency; --help works without

    rng = np.random.default_rng(size)
    matrix = rng.standard_normal((size, dims)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    asked = rng.standard_normal((queries, dims)).astype(np.float32)
    ids = np.arange(size, dtype=np.int64)
    blas = ThreadpoolController().select(user_api="blas")
    default = max((lib["num_threads"] for lib in blas.info()), default=1)
    stop = multiprocessing.Event()
    spinners = [multiprocessing.Process(target=_spin, args=(stop,)) for _ in range(busy)]
    for spinner in spinners:
        spinner.start()
    load = os.getloadavg()[0]
    runs: dict[int, list[float]] = {1: [], default: []}
    try:
        for round_ in range(rounds):
            for threads in (1, default) if round_ % 2 else (default, 1):
                with blas.limit(limits=threads):
                    runs[threads].append(_p50_ms(matrix, ids, asked))
    finally:
        stop.set()
        for spinner in spinners:
            spinner.join()
    one, own = statistics.median(runs[1]), statistics.median(runs[default])
    return {
        "size": size,
        "busy": busy,
        "load_before": load,
        "default_threads": default,
        "one_thread_p50_ms": one,
        "default_p50_ms": own,
        "one_over_default": one / own,
        "rounds": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,20000,50000,100000")
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--busy", default="0,1", help="comma-separated spinning neighbours")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    rows = [
        measure(int(size), args.dims, args.queries, args.rounds, int(busy))
        for busy in args.busy.split(",")
        for size in args.sizes.split(",")
    ]
    results = {
        "vrom": __version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores",
        "dims": args.dims,
        "queries": args.queries,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"{results['machine']}, numpy {np.__version__}, {args.dims} d, k={K}")
    print(
        f"{'size':>8} {'busy':>4} {'load':>5} {'1 thread ms':>11} {'default ms':>10} {'1÷default':>9}"
    )
    for row in rows:
        print(
            f"{row['size']:>8,} {row['busy']:>4} {row['load_before']:5.1f} "
            f"{row['one_thread_p50_ms']:11.3f} {row['default_p50_ms']:10.3f} "
            f"{row['one_over_default']:9.2f}  (default = {row['default_threads']} threads)"
        )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
