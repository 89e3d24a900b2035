"""Benchmark vrom's vector indexes against other engines on the same vectors, in one run.

    python bench/vector_engines.py [--sizes 10000,100000] [--dims 384] [--queries 200]
        [--embeddings bench/results/cache] [--out bench/results/vector_engines.json]
        [--plot docs/vector_engines.png]

With ``--embeddings DIR`` the vectors are real: every distinct ``*.document.npy`` row in DIR
(bench/hybrid_peers.py caches all-MiniLM-L6-v2 vectors of SciFact and NFCorpus chunks and
documents there, ~27k) in a seeded shuffle, padded with synthetic vectors when a size needs more
(100k: ~27k real + ~73k synthetic), and the queries are real BEIR queries (``*.query.npy``).
Without it, vectors are synthetic, no model: unit vectors around 100 seeded Gaussian cluster
centres, and queries drawn the same way (not from the set). Every engine gets the same vectors
and queries:

- vrom exact and vrom HNSW: a `SQLiteStore` holding the vectors, searched by `ExactIndex` (its
  matrix file beside the database, memory-mapped) and `HnswIndex` (usearch f16, its graph
  cached beside the database), as a collection does; vrom exact (store) is `ExactIndex` without
  the file, decoding every vector from the store as it did before the file existed;
- usearch f16 and f32, hnswlib, faiss (IndexFlatIP, IndexHNSWFlat), sqlite-vec (vec0, brute
  force) and numpy brute force (the baseline recall is measured against).

HNSW engines share M=16, ef_construction=128, ef_search=64 (the table), and ef_search is swept
over 16-256 for the plot. For each engine and size: build time (all cores), p50 single-query
latency (k=10, queries one at a time), recall@10, and, where the engine persists, open from disk
→ first answer and peak RSS, each in a fresh process (median of ``--repeat``; the files are in
the page cache, so "open" is warm; peak RSS is the process's VmHWM on Linux, since
``getrusage`` in a child of this large process reports the parent's peak). A missing peer package is skipped with a note.

Prints a table with vrom÷peer ratios (below 1: vrom is faster), writes JSON and, when
matplotlib is installed, a latency-vs-recall plot.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from vrom import __version__
from vrom.index.codec import encode
from vrom.index.exact import ExactIndex
from vrom.index.graph_file import CONNECTIVITY
from vrom.index.hnsw import EXPANSION_ADD, EXPANSION_SEARCH, HnswIndex
from vrom.store import ChunkRecord, DocumentRecord
from vrom.store.sqlite import SQLiteStore

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "vector_engines.json"
PLOT = REPO / "docs" / "vector_engines.png"
K = 10
CLUSTERS = 100
SPREAD = 0.7
"""Norm of a point's offset from its (unit) cluster centre, before re-normalising."""
EF_SWEEP = (16, 32, 64, 128, 256)
WARM_UP = 5
STORE_BATCH = 1_000
Matrix = npt.NDArray[np.float32]

_CHILD = """
import json, resource, sys, time
import numpy as np


def peak_rss_mb():
    # A child started from this (large) benchmark inherits its peak in getrusage's ru_maxrss,
    # which exec keeps; Linux's VmHWM is the child's own peak. macOS counts ru_maxrss in bytes.
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024


query = np.load(sys.argv[1])
path, dims = sys.argv[2], int(sys.argv[3])
started = time.perf_counter()
{imports}
imported = time.perf_counter()
{body}
answered = time.perf_counter()
print(json.dumps({{"import_s": imported - started, "open_s": answered - imported,
    "first_answer_s": answered - started, "hits": len(list(hits)), "peak_rss_mb": peak_rss_mb()}}))
"""


def clustered_unit_vectors(count: int, dims: int, seed: int) -> Matrix:
    """Return ``count`` unit vectors around `CLUSTERS` seeded centres (the same for any seed)."""
    centres = np.random.default_rng(0).standard_normal((CLUSTERS, dims))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    rng = np.random.default_rng(seed)
    points = centres[rng.integers(CLUSTERS, size=count)]
    points = points + rng.standard_normal((count, dims)) * (SPREAD / np.sqrt(dims))
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    return points.astype(np.float32)


def exact_top_k(vectors: Matrix, queries: Matrix, k: int) -> npt.NDArray[np.int64]:
    """Return the rows of the ``k`` highest dot products for each query, best first."""
    result = np.empty((len(queries), k), dtype=np.int64)
    for start in range(0, len(queries), 256):  # chunks: a big score matrix is gigabytes
        scores = queries[start : start + 256] @ vectors.T
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1, kind="stable")
        result[start : start + 256] = np.take_along_axis(top, order, axis=1)
    return result


# -- engines ---------------------------------------------------------------------------------
# Each engine builds from the vectors (rows are ids 0..n-1), answers one query with row ids,
# names the files it persisted and gives the code a fresh process runs to open them and answer.


class Engine:
    name = ""
    kind = "exact"  # or "hnsw": swept over ef_search, compared with vrom hnsw
    open_imports = "pass"  # code for _CHILD that imports the engine (timed apart)
    open_body = ""  # code for _CHILD that opens the files and sets `hits` (`path`, `dims`)

    def build(self, vectors: Matrix, folder: Path) -> None:
        raise NotImplementedError

    def persist(self, folder: Path) -> Path | None:
        """Write the engine's files (untimed) and return the path its open code reads."""
        return None

    def search(self, query: Matrix, ef: int) -> list[int]:
        raise NotImplementedError

    def files(self, folder: Path) -> list[Path]:
        return []


class VromExact(Engine):
    name, kind = "vrom exact", "exact"
    open_imports = (
        "from vrom.store.sqlite import SQLiteStore\n"
        "from vrom.index.exact import MATRIX_FILE_MIN, ExactIndex\n"
        "from pathlib import Path"
    )
    open_body = (
        "index = ExactIndex.for_chunks(SQLiteStore(Path(path), create=False))\n"
        "hits = index.search(query, 10)\n"
        "assert index.load_count == 0 or len(index) < MATRIX_FILE_MIN, 'the file was refused'"
    )

    def __init__(self, store: SQLiteStore, row_of: dict[int, int]) -> None:
        self.store, self.row_of = store, row_of

    def build(self, vectors: Matrix, folder: Path) -> None:
        self.index = ExactIndex.for_chunks(self.store)
        self.index.refresh()  # reads every vector from the store, writes the matrix file

    def persist(self, folder: Path) -> Path | None:
        return self.store.path

    def search(self, query: Matrix, ef: int) -> list[int]:
        return [self.row_of[i] for i, _ in self.index.search(query, K)]

    def files(self, folder: Path) -> list[Path]:
        return [folder / "vrom.db", folder / "vrom.db.matrix"]


class VromExactFromStore(VromExact):
    """vrom's exact index without its matrix file: every vector decoded from the store."""

    name = "vrom exact (store)"
    open_body = "hits = ExactIndex(SQLiteStore(Path(path), create=False).vectors).search(query, 10)"

    def build(self, vectors: Matrix, folder: Path) -> None:
        self.index = ExactIndex(self.store.vectors)
        self.index.refresh()  # reads every vector from the store into one matrix

    def files(self, folder: Path) -> list[Path]:
        return [folder / "vrom.db"]


class VromHnsw(VromExact):
    name, kind = "vrom hnsw", "hnsw"
    open_imports = (
        "from vrom.store.sqlite import SQLiteStore\n"
        "from vrom.index.hnsw import HnswIndex\n"
        "from pathlib import Path"
    )
    open_body = (
        "index = HnswIndex.for_chunks(SQLiteStore(Path(path), create=False))\n"
        "hits = index.search(query, 10)\n"
        "assert index.build_count == 0, 'the cached graph was rebuilt'"
    )

    def build(self, vectors: Matrix, folder: Path) -> None:
        self.index = HnswIndex.for_chunks(self.store)  # type: ignore[assignment]
        self.index.refresh()  # reads the store, builds the graph and saves it beside the db

    def search(self, query: Matrix, ef: int) -> list[int]:
        return [self.row_of[i] for i, _ in self.index.search(query, K, ef_search=ef)]

    def files(self, folder: Path) -> list[Path]:
        return [folder / "vrom.db", folder / "vrom.db.hnsw.usearch"]


class Usearch(Engine):
    kind = "hnsw"
    open_imports = "from usearch.index import Index"
    open_body = "index = Index.restore(path, view=True)\nhits = index.search(query, 10).keys"

    def __init__(self, dtype: str) -> None:
        self.dtype, self.name = dtype, f"usearch {dtype}"

    def build(self, vectors: Matrix, folder: Path) -> None:
        from usearch.index import Index

        self.index = Index(
            ndim=vectors.shape[1],
            metric="ip",
            dtype=self.dtype,
            connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD,
            expansion_search=EXPANSION_SEARCH,
        )
        self.index.add(np.arange(len(vectors), dtype=np.uint64), vectors, threads=0)

    def persist(self, folder: Path) -> Path | None:
        path = folder / f"usearch-{self.dtype}.usearch"
        self.index.save(str(path))
        return path

    def search(self, query: Matrix, ef: int) -> list[int]:
        self.index.expansion_search = ef
        return [int(key) for key in self.index.search(query, K).keys]

    def files(self, folder: Path) -> list[Path]:
        return [folder / f"usearch-{self.dtype}.usearch"]


class Hnswlib(Engine):
    name, kind = "hnswlib", "hnsw"
    open_imports = "import hnswlib"
    open_body = (
        "index = hnswlib.Index(space='ip', dim=dims)\n"
        "index.load_index(path)\n"
        "index.set_ef(64)\n"
        "hits = index.knn_query(query, k=10)[0][0]"
    )

    def build(self, vectors: Matrix, folder: Path) -> None:
        import hnswlib

        self.index = hnswlib.Index(space="ip", dim=vectors.shape[1])
        self.index.init_index(len(vectors), ef_construction=EXPANSION_ADD, M=CONNECTIVITY)
        self.index.add_items(vectors, np.arange(len(vectors)))

    def persist(self, folder: Path) -> Path | None:
        self.index.save_index(str(folder / "hnswlib.bin"))
        return folder / "hnswlib.bin"

    def search(self, query: Matrix, ef: int) -> list[int]:
        self.index.set_ef(ef)
        return [int(i) for i in self.index.knn_query(query, k=K, num_threads=1)[0][0]]

    def files(self, folder: Path) -> list[Path]:
        return [folder / "hnswlib.bin"]


class Faiss(Engine):
    open_imports = "import faiss"
    open_body = "index = faiss.read_index(path)\nhits = index.search(query[None, :], 10)[1][0]"

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.name = "faiss flat" if kind == "exact" else "faiss hnsw"
        self.file = "faiss-flat.index" if kind == "exact" else "faiss-hnsw.index"

    def build(self, vectors: Matrix, folder: Path) -> None:
        import faiss

        dims = vectors.shape[1]
        if self.kind == "exact":
            self.index = faiss.IndexFlatIP(dims)
        else:
            self.index = faiss.IndexHNSWFlat(dims, CONNECTIVITY, faiss.METRIC_INNER_PRODUCT)
            self.index.hnsw.efConstruction = EXPANSION_ADD
            self.index.hnsw.efSearch = EXPANSION_SEARCH
        self.index.add(vectors)

    def persist(self, folder: Path) -> Path | None:
        import faiss

        faiss.write_index(self.index, str(folder / self.file))
        return folder / self.file

    def search(self, query: Matrix, ef: int) -> list[int]:
        if self.kind == "hnsw":
            self.index.hnsw.efSearch = ef
        return [int(i) for i in self.index.search(query[None, :], K)[1][0]]

    def files(self, folder: Path) -> list[Path]:
        return [folder / self.file]


class SqliteVec(Engine):
    name, kind = "sqlite-vec", "exact"

    def __init__(self, sqlite_module: str) -> None:
        self.module = sqlite_module
        self.open_imports = f"import {sqlite_module} as sqlite3, sqlite_vec"
        self.open_body = (
            "db = sqlite3.connect(path)\n"
            "db.enable_load_extension(True)\n"
            "sqlite_vec.load(db)\n"
            "hits = db.execute('SELECT rowid FROM items WHERE embedding MATCH ? AND k = 10'"
            " ' ORDER BY distance', (query.tobytes(),)).fetchall()"
        )

    def build(self, vectors: Matrix, folder: Path) -> None:
        import sqlite_vec

        sqlite3 = __import__(self.module)
        self.db = sqlite3.connect(str(folder / "sqlite-vec.db"))
        self.db.enable_load_extension(True)
        sqlite_vec.load(self.db)
        self.db.execute(
            "CREATE VIRTUAL TABLE items USING vec0("
            f"embedding float[{vectors.shape[1]}] distance_metric=cosine)"
        )
        with self.db:  # rowid 0 is refused: row n is rowid n + 1
            self.db.executemany(
                "INSERT INTO items(rowid, embedding) VALUES (?, ?)",
                ((n + 1, row.tobytes()) for n, row in enumerate(vectors)),
            )

    def persist(self, folder: Path) -> Path | None:
        return folder / "sqlite-vec.db"

    def search(self, query: Matrix, ef: int) -> list[int]:
        rows = self.db.execute(
            "SELECT rowid FROM items WHERE embedding MATCH ? AND k = ? ORDER BY distance",
            (query.tobytes(), K),
        ).fetchall()
        return [rowid - 1 for (rowid,) in rows]

    def files(self, folder: Path) -> list[Path]:
        return [folder / "sqlite-vec.db"]


class NumpyExact(Engine):
    name, kind = "numpy", "exact"
    open_body = (
        "matrix = np.load(path, mmap_mode='r')\n"
        "scores = matrix @ query\n"
        "top = np.argpartition(-scores, 9)[:10]\n"
        "hits = top[np.argsort(-scores[top])]"
    )

    def build(self, vectors: Matrix, folder: Path) -> None:
        self.matrix = np.ascontiguousarray(vectors)

    def persist(self, folder: Path) -> Path | None:
        np.save(folder / "numpy.npy", self.matrix)
        return folder / "numpy.npy"

    def search(self, query: Matrix, ef: int) -> list[int]:
        scores = self.matrix @ query
        top = np.argpartition(-scores, K - 1)[:K]
        return [int(i) for i in top[np.argsort(-scores[top])]]

    def files(self, folder: Path) -> list[Path]:
        return [folder / "numpy.npy"]


def _sqlite_with_extensions() -> str:
    """Return the name of a sqlite3 module that can load extensions (sqlite-vec needs one)."""
    import sqlite3

    if hasattr(sqlite3.Connection, "enable_load_extension"):
        return "sqlite3"
    import pysqlite3  # noqa: F401  (this Python's sqlite3 was built without extension loading)

    return "pysqlite3"


def peer_engines(notes: list[str]) -> list[Callable[[], Engine]]:
    """Return makers of the peer engines whose packages import; note the ones that don't."""
    makers: list[Callable[[], Engine]] = []

    def need(label: str, check: Callable[[], object], *adds: Callable[[], Engine]) -> None:
        try:
            check()
        except ImportError as exc:
            notes.append(f"skipped {label}: {exc} (pip install the 'bench' extra)")
            return
        makers.extend(adds)

    need(
        "usearch",
        lambda: __import__("usearch.index"),
        lambda: Usearch("f16"),
        lambda: Usearch("f32"),
    )
    need("hnswlib", lambda: __import__("hnswlib"), Hnswlib)
    need("faiss", lambda: __import__("faiss"), lambda: Faiss("exact"), lambda: Faiss("hnsw"))

    def sqlite_vec() -> None:
        __import__("sqlite_vec")
        module.append(_sqlite_with_extensions())

    module: list[str] = []
    need("sqlite-vec", sqlite_vec, lambda: SqliteVec(module[0]))
    return makers


# -- measuring -------------------------------------------------------------------------------


def vrom_store(vectors: Matrix, folder: Path) -> tuple[SQLiteStore, dict[int, int], float]:
    """Write the vectors into a new vrom store as chunks; return it, chunk id → row, seconds."""
    started = time.perf_counter()
    store = SQLiteStore(folder / "vrom.db")
    blobs = encode(vectors, "float32")
    row_of: dict[int, int] = {}
    with store.transaction():
        for start in range(0, len(vectors), STORE_BATCH):
            rows = range(start, min(start + STORE_BATCH, len(vectors)))
            chunks = [
                ChunkRecord(n - start, "", f"v{n}", 0, len(f"v{n}"), f"vector-{n}") for n in rows
            ]
            document_id = store.documents.put(_document(f"batch-{start}"), chunks, [], [])
            stored = store.documents.chunks_of(document_id)
            row_of.update((chunk.chunk_id, start + chunk.position) for chunk in stored)
            store.vectors.put([(chunk.chunk_id, blobs[row_of[chunk.chunk_id]]) for chunk in stored])
    return store, row_of, time.perf_counter() - started


def _document(path: str) -> DocumentRecord:
    return DocumentRecord(path, path, path, "", {}, path, 0.0, 0, 0.5, "bench")


def latency_and_recall(
    engine: Engine, queries: Matrix, truth: npt.NDArray[np.int64], ef: int
) -> dict[str, float]:
    """Return the p50 single-query latency (ms) and mean recall@K of ``engine`` at ``ef``."""
    for query in queries[:WARM_UP]:
        engine.search(query, ef)
    times, recalls = [], []
    for query, expected in zip(queries, truth, strict=True):
        started = time.perf_counter()
        found = engine.search(query, ef)
        times.append((time.perf_counter() - started) * 1000)
        recalls.append(len(set(found) & set(expected.tolist())) / K)
    return {"ef": ef, "p50_ms": statistics.median(times), "recall": statistics.fmean(recalls)}


def open_in_fresh_process(
    imports: str, body: str, path: Path, query_file: Path, dims: int, repeat: int
) -> dict[str, float]:
    """Return the median open → first answer time and peak RSS of fresh processes."""
    runs = []
    for _ in range(repeat):
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                _CHILD.format(imports=imports, body=body),
                str(query_file),
                str(path),
                str(dims),
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        runs.append(json.loads(out))
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def measure(
    engine: Engine,
    vectors: Matrix,
    queries: Matrix,
    truth: npt.NDArray[np.int64],
    folder: Path,
    repeat: int,
) -> dict[str, Any]:
    """Build ``engine`` and return its row: build, latency, recall, open, RSS, disk."""
    started = time.perf_counter()
    engine.build(vectors, folder)
    row: dict[str, Any] = {"engine": engine.name, "kind": engine.kind}
    row["build_s"] = time.perf_counter() - started
    sweep = EF_SWEEP if engine.kind == "hnsw" else (EXPANSION_SEARCH,)
    row["sweep"] = [latency_and_recall(engine, queries, truth, ef) for ef in sweep]
    default = next(point for point in row["sweep"] if point["ef"] == EXPANSION_SEARCH)
    row["p50_ms"], row["recall_at_10"] = default["p50_ms"], default["recall"]
    path = engine.persist(folder)
    row["disk_mb"] = sum(f.stat().st_size for f in engine.files(folder) if f.exists()) / 1e6
    if path is not None:
        row["open"] = open_in_fresh_process(
            engine.open_imports,
            engine.open_body,
            path,
            folder / "query.npy",
            vectors.shape[1],
            repeat,
        )
    return row


def real_embeddings(folder: Path, dims: int) -> tuple[Matrix, Matrix]:
    """Return the distinct document and query vectors cached in ``folder``, shuffled (seed 0).

    The files are what bench/hybrid_peers.py caches: ``*.document.npy`` and ``*.query.npy``.
    """

    def load(kind: str) -> Matrix:
        files = sorted(folder.glob(f"*.{kind}.npy"))
        matrices = [np.load(f) for f in files]
        matrices = [m for m in matrices if m.ndim == 2 and m.shape[1] == dims]
        if not matrices:
            raise SystemExit(f"no {dims}-d *.{kind}.npy files in {folder}")
        rows = np.unique(np.concatenate(matrices).astype(np.float32), axis=0)
        rows = rows[np.random.default_rng(0).permutation(len(rows))]
        return np.ascontiguousarray(rows)

    return load("document"), load("query")


def dataset(
    size: int, dims: int, real: tuple[Matrix, Matrix] | None, query_count: int
) -> tuple[Matrix, Matrix, int]:
    """Return (vectors, queries, how many vectors are real) for one size."""
    if real is None:
        queries = clustered_unit_vectors(query_count, dims, seed=2)
        return clustered_unit_vectors(size, dims, seed=1), queries, 0
    documents, queries = real
    taken = documents[:size]
    padding = clustered_unit_vectors(size - len(taken), dims, seed=1)
    return np.concatenate([taken, padding]), queries[:query_count], len(taken)


def run(
    sizes: list[int],
    dims: int,
    query_count: int,
    repeat: int,
    embeddings: Path | None = None,
) -> dict[str, Any]:
    """Measure every available engine at every size; return the results as a JSON-ready dict."""
    notes: list[str] = []
    makers = peer_engines(notes)
    real = None if embeddings is None else real_embeddings(embeddings, dims)
    vectors_note = f"synthetic, no model: unit vectors around {CLUSTERS} seeded Gaussian clusters"
    if real is not None:
        vectors_note = (
            f"real embeddings: {len(real[0]):,} distinct document/chunk vectors and "
            f"{len(real[1]):,} query vectors from {embeddings}, padded with synthetic "
            f"vectors around {CLUSTERS} seeded Gaussian clusters where a size needs more"
        )
    results: dict[str, Any] = {
        "vrom": __version__,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores",
        "vectors": f"{vectors_note}, {dims} d",
        "dims": dims,
        "queries": query_count,
        "k": K,
        "hnsw": {
            "M": CONNECTIVITY,
            "ef_construction": EXPANSION_ADD,
            "ef_search": EXPANSION_SEARCH,
        },
        "ef_sweep": list(EF_SWEEP),
        "versions": _versions(),
        "notes": notes,
        "rows": [],
    }
    for size in sizes:
        vectors, queries, real_count = dataset(size, dims, real, query_count)
        results.setdefault("real_vectors", {})[str(size)] = real_count
        truth = exact_top_k(vectors, queries, K)
        with tempfile.TemporaryDirectory(prefix="vrom-engines-") as tmp:
            folder = Path(tmp)
            np.save(folder / "query.npy", queries[0])
            results.setdefault("baseline_process", {})[str(size)] = open_in_fresh_process(
                "pass", "hits = [query]", folder, folder / "query.npy", dims, repeat
            )
            store, row_of, store_s = vrom_store(vectors, folder)
            results.setdefault("vrom_store_write_s", {})[str(size)] = store_s
            engines: list[Callable[[], Engine]] = [
                NumpyExact,
                functools.partial(VromExact, store, row_of),
                functools.partial(VromExactFromStore, store, row_of),
                functools.partial(VromHnsw, store, row_of),
                *makers,
            ]
            for make in engines:
                engine = make()
                print(f"  {size:,}: {engine.name} ...", file=sys.stderr, flush=True)
                row = measure(engine, vectors, queries, truth, folder, repeat)
                results["rows"].append({"size": size, **row})
                del engine
            store.close()
    return results


def _versions() -> dict[str, str]:
    found = {}
    for package in ("numpy", "usearch", "hnswlib", "faiss-cpu", "sqlite-vec", "matplotlib"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found[package] = importlib.metadata.version(package)
    return found


# -- reporting -------------------------------------------------------------------------------


def print_table(results: dict[str, Any]) -> None:
    """Print one line per engine and size, with vrom÷peer ratios for latency and open time."""
    print(f"{results['vectors']}; {results['queries']} queries, k={K}; {results['machine']}")
    print(
        f"HNSW: M={CONNECTIVITY}, ef_construction={EXPANSION_ADD}, ef_search={EXPANSION_SEARCH}"
        "\nopen = open files → first answer in a fresh process (after its imports, warm page cache);"
        " RSS = that process's peak; vrom÷peer < 1: vrom is faster (exact rows vs vrom exact)"
    )
    for note in results["notes"]:
        print(note)
    header = (
        f"{'size':>8} {'engine':<18} {'build s':>8} {'p50 ms':>8} {'recall':>7} {'import ms':>9} "
        f"{'open ms':>8} {'RSS MB':>7} {'disk MB':>8} {'vrom÷ p50':>9} {'vrom÷ open':>10}"
    )
    print(header)
    print("-" * len(header))
    rows = results["rows"]
    for row in rows:
        vrom = next(
            r for r in rows if r["size"] == row["size"] and r["engine"] == f"vrom {row['kind']}"
        )
        opened = row.get("open")
        if opened:
            ratio = vrom["open"]["open_s"] / opened["open_s"]
            opening = (
                f"{opened['import_s'] * 1000:9.1f} {opened['open_s'] * 1000:8.1f} "
                f"{opened['peak_rss_mb']:7.0f}"
            )
        else:
            ratio, opening = float("nan"), f"{'—':>9} {'—':>8} {'—':>7}"
        print(
            f"{row['size']:>8,} {row['engine']:<18} {row['build_s']:8.2f} {row['p50_ms']:8.3f} "
            f"{row['recall_at_10']:7.3f} {opening} {row['disk_mb']:8.1f} "
            f"{vrom['p50_ms'] / row['p50_ms']:9.2f} {ratio:10.2f}"
        )
    for size, baseline in results["baseline_process"].items():
        print(
            f"a process that only loads numpy and the query ({int(size):,}): "
            f"{baseline['peak_rss_mb']:.0f} MB RSS; vrom store write "
            f"{results['vrom_store_write_s'][size]:.2f} s (not in build)"
        )


def draw_plot(results: dict[str, Any], path: Path) -> bool:
    """Draw p50 latency against recall@10, one panel per size; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    sizes = sorted({row["size"] for row in results["rows"]})
    figure, axes = plt.subplots(1, len(sizes), figsize=(5.5 * len(sizes), 4.2), squeeze=False)
    for axis, size in zip(axes[0], sizes, strict=True):
        for row in (r for r in results["rows"] if r["size"] == size):
            recall = [point["recall"] for point in row["sweep"]]
            latency = [point["p50_ms"] for point in row["sweep"]]
            style = "o-" if row["kind"] == "hnsw" else "s"
            width = 2.5 if row["engine"].startswith("vrom") else 1.2
            axis.plot(recall, latency, style, label=row["engine"], linewidth=width, markersize=4)
        axis.set_yscale("log")
        axis.set_xlabel(f"recall@{K}")
        axis.set_ylabel("p50 single-query latency (ms)")
        axis.set_title(
            f"{size:,} vectors, {results['dims']} d (ef_search {EF_SWEEP[0]}-{EF_SWEEP[-1]})"
        )
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=7)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated vector counts")
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3, help="fresh-process opens per engine")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--plot", type=Path, default=PLOT)
    parser.add_argument(
        "--embeddings",
        type=Path,
        help="a folder of real *.document.npy/*.query.npy vectors (bench/results/cache after "
        "bench/hybrid_peers.py has run); sizes beyond them are padded with synthetic vectors",
    )
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    results = run(sizes, args.dims, args.queries, args.repeat, args.embeddings)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print_table(results)
    print(f"wrote {args.out}")
    if draw_plot(results, args.plot):
        print(f"wrote {args.plot}")
    else:
        print("no plot: matplotlib is not installed")


if __name__ == "__main__":
    main()
