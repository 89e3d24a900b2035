"""Benchmark the fixed cost of a collection's vector search against the engines under it, in CPU.

    python bench/vector_overhead.py [--size 100000] [--queries 200] [--rounds 3]
        [--work /tmp/vrom-vector-overhead] [--base /path/to/other/src]

Two stores are built once under ``--work`` (kept for later runs; delete the folder to rebuild):

- ``graph``: ``--size`` one-line documents whose vectors (384 d) are unit vectors around 1,000
  seeded Gaussian cluster centres, added to a `Collection` with ``index="hnsw"``, so its graph
  file is saved beside the database; queries are drawn the same way (not from the set).
- ``scifact``: SciFact's 5,183 real documents (``title\\n\\ntext``) in a default collection
  (``index="auto"``: ~11k chunks, its graph saved beside it once), and the same documents, one
  vector a document, in a Chroma ``PersistentClient`` collection (cosine, its defaults).
  Queries are SciFact's real query texts.

No model runs: vectors come from a table-lookup `Embedder` (documents of ``graph`` by number,
SciFact's by vrom's hashed-words test embedder at 384 d, queries by their text from a table
made once), so a search's cost is vrom's own plus the embedder's dictionary lookup.

Each timing runs in a child process, alternating between this tree's vrom and ``--base``'s
(``PYTHONPATH``; the same stores), ``--rounds`` times. Inside a child, per query and in turn:
vrom's ``Collection.search(text, k=10, mode="vector")``; raw usearch on the very graph file the
collection searches (`usearch.index.Index.restore(view=True)`, the same k=10 and expansion 128,
its Python API, and its compiled ``search_many`` as vrom calls it); Chroma's ``query`` with the
query vector. Each call is timed with ``time.process_time()`` (CPU of the process: the machine
may be loaded). Prints p50 CPU per call and vrom÷peer ratios (below 1: vrom is cheaper) for each
child, and, with ``--base``, whether both trees returned the same ids, order and scores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from vrom import Collection
from vrom.embed import Embedder, Fingerprint

REPO = Path(__file__).resolve().parents[1]
SCIFACT = REPO.parent.parent / "shared" / "data" / "beir" / "scifact"
if not SCIFACT.exists():  # a worktree beside the main checkout
    SCIFACT = Path("/work/shared/data/beir/scifact")
DIMS = 384
K = 10
EXPANSION = 128
CLUSTERS = 1_000
SPREAD = 0.6
Matrix = npt.NDArray[np.float32]


class TableEmbedder(Embedder):
    """Queries by their text from a table; documents ``v{i}`` as row i of one, others hashed."""

    def __init__(self, queries: dict[str, Matrix], documents: Matrix | None = None) -> None:
        self._queries, self._documents = queries, documents
        self._fingerprint = Fingerprint("bench-table", "1", DIMS, "none", 0)
        self._hashed: Embedder | None = None

    @property
    def fingerprint(self) -> Fingerprint:
        return self._fingerprint

    def _embed(self, texts: Sequence[str], kind: str) -> Matrix:
        if kind == "query":
            return np.stack([self._queries[text] for text in texts])
        if self._documents is not None:
            return self._documents[[int(text[1:]) for text in texts]]
        if self._hashed is None:
            self._hashed = Embedder.fake(DIMS)
        return self._hashed.embed_documents(texts)


def _clustered(rng: np.random.Generator, centres: Matrix, count: int) -> Matrix:
    rows = centres[rng.integers(0, len(centres), count)] + SPREAD * rng.normal(size=(count, DIMS))
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def _scifact() -> tuple[list[tuple[str, str]], list[str]]:
    documents = []
    for line in (SCIFACT / "corpus.jsonl").read_text("utf-8").splitlines():
        entry = json.loads(line)
        title, text = entry.get("title", ""), entry.get("text", "")
        documents.append((entry["_id"], f"{title}\n\n{text}" if title and text else title or text))
    queries = [
        json.loads(line)["text"] for line in (SCIFACT / "queries.jsonl").open(encoding="utf-8")
    ]
    return documents, [q for q in queries if q.strip()]


def build(work: Path, size: int, queries: int) -> None:
    """Build both stores and the query tables under ``work`` unless they are there already."""
    work.mkdir(parents=True, exist_ok=True)
    if not (work / "graph.queries.npy").exists():
        rng = np.random.default_rng(29)
        centres = rng.normal(size=(CLUSTERS, DIMS)).astype(np.float32)
        documents = _clustered(rng, centres, size)
        table = _clustered(rng, centres, queries)
        embedder = TableEmbedder({}, documents)
        with Collection.open("graph", embedder, storage=work / "graph.db", index="hnsw") as c:
            for start in range(0, size, 5_000):
                c.add(
                    [
                        {"id": f"v{i}", "text": f"v{i}"}
                        for i in range(start, min(size, start + 5_000))
                    ]
                )
                print(f"  graph: {min(size, start + 5_000):,} documents", file=sys.stderr)
            c._corpus.index.wait_for_graph()
        np.save(work / "graph.queries.npy", table)
    if not (work / "scifact.queries.json").exists():
        import chromadb

        documents, texts = _scifact()
        hashed = Embedder.fake(DIMS)
        table = {text: hashed.embed_query(text).tolist() for text in texts[:queries]}
        embedder = TableEmbedder({})
        with Collection.open("scifact", embedder, storage=work / "scifact.db") as c:
            for start in range(0, len(documents), 256):
                c.add([{"id": i, "text": t} for i, t in documents[start : start + 256]])
        with Collection.open("scifact", embedder, storage=work / "scifact.db", index="hnsw") as c:
            c._corpus.index.wait_for_graph()  # the graph file an auto collection then opens
        client = chromadb.PersistentClient(
            str(work / "chroma"), chromadb.Settings(anonymized_telemetry=False)
        )
        chroma = client.create_collection("scifact", metadata={"hnsw:space": "cosine"})
        vectors = hashed.embed_documents([t for _, t in documents])
        for start in range(0, len(documents), 5_000):
            part = documents[start : start + 5_000]
            chroma.add(
                ids=[i for i, _ in part],
                documents=[t for _, t in part],
                embeddings=vectors[start : start + len(part)],
            )
        (work / "scifact.queries.json").write_text(json.dumps(table), "utf-8")


def _cpu(call: Any) -> tuple[float, Any]:
    started = time.process_time()
    result = call()
    return time.process_time() - started, result


def child(work: Path) -> dict[str, Any]:
    """Time every engine per query, in turn, in this process; return p50s and vrom's hits."""
    from usearch.compiled import ScalarKind
    from usearch.index import Index

    out: dict[str, Any] = {"vrom": __import__("vrom").__file__}
    graph_queries = np.load(work / "graph.queries.npy")
    table = {f"q{j}": row for j, row in enumerate(graph_queries)}
    with Collection.open("graph", TableEmbedder(table), storage=work / "graph.db") as c:
        c.search("q0", k=K, mode="vector")  # opens the graph: untimed
        raw = Index.restore(str(work / "graph.db.hnsw.usearch"), view=True)
        compiled = raw._compiled
        calls = {
            "vrom": lambda j: c.search(f"q{j}", k=K, mode="vector"),
            "usearch": lambda j: raw.search(graph_queries[j], K),
            "usearch compiled": lambda j: compiled.search_many(
                graph_queries[j : j + 1], count=K, exact=False, threads=1, dtype=ScalarKind.Unknown
            ),
        }
        raw.expansion_search = EXPANSION
        times, hits = _rotated(calls, len(graph_queries))
        out["graph"] = {"p50_ms": _p50s(times), "hits": hits, "mode": c._corpus.index.mode()}
    import chromadb

    scifact = {
        t: np.asarray(v, np.float32)
        for t, v in json.loads((work / "scifact.queries.json").read_text("utf-8")).items()
    }
    client = chromadb.PersistentClient(
        str(work / "chroma"), chromadb.Settings(anonymized_telemetry=False)
    )
    chroma = client.get_collection("scifact")
    with Collection.open("scifact", TableEmbedder(scifact), storage=work / "scifact.db") as c:
        first = next(iter(scifact))
        c.search(first, k=K, mode="vector")
        chroma.query(query_embeddings=[scifact[first]], n_results=K)
        texts = list(scifact)
        calls = {
            "vrom": lambda j: c.search(texts[j], k=K, mode="vector"),
            "chroma": lambda j: chroma.query(query_embeddings=[scifact[texts[j]]], n_results=K),
        }
        times, hits = _rotated(calls, len(texts))
        out["scifact"] = {"p50_ms": _p50s(times), "hits": hits, "mode": c._corpus.index.mode()}
    return out


def _rotated(calls: dict[str, Any], queries: int) -> tuple[dict[str, list[float]], list[Any]]:
    """Time each engine on every query, in turn: at step j engine e runs query ``j + e·n/E``,
    so no engine finds the CPU caches warm from another engine's search of the same query."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    hits: list[Any] = [None] * queries
    for step in range(queries):
        for at, (name, call) in enumerate(calls.items()):
            j = (step + at * queries // len(calls)) % queries
            spent, found = _cpu(lambda call=call, j=j: call(j))
            times[name].append(spent)
            if name == "vrom":
                hits[j] = [(h.id, h.score) for h in found]
    return times, hits


def _p50s(times: dict[str, list[float]]) -> dict[str, float]:
    return {name: round(statistics.median(spent) * 1e3, 4) for name, spent in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/vrom-vector-overhead"))
    parser.add_argument("--base", type=Path, help="another tree's src/, timed in turn")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.work)))
        return
    build(args.work, args.size, args.queries)
    trees = {"after": REPO / "src"}
    if args.base is not None:
        trees = {"before": args.base, **trees}
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, src in trees.items():
            env = {**os.environ, "PYTHONPATH": str(src)}
            done = subprocess.run(
                [sys.executable, __file__, "--child", "--work", str(args.work)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            result = json.loads(done.stdout)
            results[name].append(result)
            graph, scifact = result["graph"]["p50_ms"], result["scifact"]["p50_ms"]
            print(
                f"{name:>6} ({result['graph']['mode']}, {result['scifact']['mode']}):"
                f" 100k vrom {graph['vrom']:.3f} ms, usearch {graph['usearch']:.3f}"
                f" (compiled {graph['usearch compiled']:.3f}) -> "
                f"{graph['vrom'] / graph['usearch']:.2f}x"
                f" ({graph['vrom'] / graph['usearch compiled']:.2f}x compiled);"
                f" scifact vrom {scifact['vrom']:.3f} ms, chroma {scifact['chroma']:.3f}"
                f" -> {scifact['vrom'] / scifact['chroma']:.2f}x"
            )
    if "before" in results:
        for store in ("graph", "scifact"):
            same = results["before"][0][store]["hits"] == results["after"][0][store]["hits"]
            print(f"{store}: same ids, order and scores (1e-6) before and after: {same}")


if __name__ == "__main__":
    main()
