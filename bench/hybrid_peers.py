"""Benchmark vrom's hybrid search against LanceDB and Chroma on BEIR data, all on the same vectors.

    python bench/hybrid_peers.py [DATASET_DIR ...] [--split SPLIT ...] [--limit-docs N]
        [--limit-queries N] [--embedder default|fake] [--cache DIR] [--out FILE]

Default datasets: scifact (split train) and nfcorpus (split dev) under ``shared/data/beir`` next
to the repository; one ``--split`` applies to every dataset, or give one per dataset. Run it with
a Python that has lancedb and chromadb (``pip install -e '.[bench]'``); without one of them the
script says so and reports the rest (exit 0).

Same vectors for everyone. Every text is embedded once with vrom's default model
(all-MiniLM-L6-v2, int8 ONNX; ``--embedder fake`` is the instant test model) and cached under
``--cache`` (bench/results/cache: one ``.npy`` of vectors and one ``.json`` of their texts per
dataset, model fingerprint and hash of the corpus texts), so a re-run skips the model. vrom gets
its vectors through its normal interface: an `Embedder` that looks texts up in that cache (and
embeds a text it lacks with the real model) and reports the model's fingerprint. vrom chunks a
long document (about 1,000 characters a chunk) and embeds each chunk; LanceDB and Chroma hold one
row per document, with the vector of the whole document text (``title\\n\\ntext``, cut at 100,000
characters as vrom cuts it), which the model truncates at its 256 tokens: what a user of those
tools gets from this model. Each query is embedded once (``embed_query``) and shared. Build
times therefore exclude model time for everyone.

The stores, each in a temporary folder, with their defaults otherwise:

- vrom: `Collection.open` (exact vector index below 20k chunks, FTS5 BM25), documents added in
  batches of 256 with metadata ``{"bucket": b}``; modes hybrid (RRF, k=60), vector, keyword;
- LanceDB: one table (id, text, bucket, vector), no vector index (a flat, exact scan at this
  size), a native FTS index on the text (``create_index("text", config=FTS())``: its default
  tokenizer stems and drops English stopwords; Tantivy FTS is gone from 0.40); modes hybrid
  (its FTS and vector results fused by ``RRFReranker``, K=60), vector (cosine) and FTS;
- Chroma: ``PersistentClient`` (telemetry off), one collection in cosine space (HNSW, defaults),
  vectors, texts and metadata added in batches under its maximum; vector search only.

Every search asks for 100 documents (the recall@100 depth); each query then runs again at k=10
for a second latency (``p50 k=10``), the depth agents usually ask for. vrom fuses up to 400 candidates per
retriever at that depth, LanceDB fuses ``limit`` (100) per retriever. nDCG@10 and recall@100 come
from `vrom.evaluation.metrics.score_ranking`; latency is the wall time of one query (its vector looked up,
not computed), p50 and p95, after one untimed query per store and mode. Build time is opening an
empty store, adding every document and building the indexes; disk is the store's folder after it
is closed.

Filtered search (on the dataset with the most documents): every document's ``bucket`` is an
integer in [0, 100) from a hash of its id; ``bucket == 0`` keeps about 1% of them and
``bucket < 30`` about 30%. k=10, vector mode for everyone (vrom ``where``, LanceDB ``.where(...,
prefilter=True)``, Chroma ``where``) and hybrid for vrom and LanceDB. Reported: p50 latency, the
share of queries that got min(10, documents passing) hits, whether every hit passes the filter,
and (vector mode) recall@10 against an exact numpy search over the same vectors among the
passing documents (vrom: a document scores as its best chunk), a tie with the 10th score counting
as found.

Ratios are vrom / peer: above 1 means vrom scores higher, takes longer, or uses more disk.
Machines shared with other work make absolute times noisy; ratios come from the same run.
Prints tables and writes JSON to bench/results/hybrid_peers.json.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.metadata
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt
from beir_datasets import add_dataset_arguments, chosen_datasets

from vrom import Collection, __version__
from vrom.documents import MAX_TEXT_CHARS, Document
from vrom.embed import Embedder, Fingerprint
from vrom.evaluation.beir import BeirDataset, Qrels, corpus_documents, load_beir
from vrom.evaluation.metrics import RECALL_DEPTH, percentile, score_ranking
from vrom.evaluation.runs import ADD_BATCH
from vrom.index.codec import decode
from vrom.store.sqlite import SQLiteStore

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "hybrid_peers.json"
PLOT = REPO / "docs" / "hybrid_peers.png"
CACHE = REPO / "bench" / "results" / "cache"
K = 10
BUCKETS = 100
SAVE_EVERY = 1_024
"""New vectors between two writes of the cache."""
PEERS_INSTALL = "pip install 'lancedb==0.40.0' 'chromadb==1.5.9'"
FILTERS: tuple[tuple[str, dict[str, Any], str, Callable[[int], bool]], ...] = (
    # name, vrom and Chroma where, LanceDB SQL, the test on a bucket
    ("1%", {"bucket": 0}, "bucket = 0", lambda bucket: bucket == 0),
    ("30%", {"bucket": {"$lt": 30}}, "bucket < 30", lambda bucket: bucket < 30),
)
Matrix = npt.NDArray[np.float32]
Search = Callable[[int, str, Matrix], list[str]]
"""``search(k, query text, query vector)`` → document ids, best first."""


def _optional(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def bucket_of(doc_id: str) -> int:
    """Return the document's filter bucket: an integer in [0, 100) from a hash of its id."""
    return int.from_bytes(hashlib.sha256(doc_id.encode()).digest()[:8], "big") % BUCKETS


# -- the same vectors for everyone ------------------------------------------------------------


class VectorCache:
    """Texts → vectors of one model, per kind (document or query), kept in .npy + .json files."""

    def __init__(self, folder: Path, stem: str, dims: int) -> None:
        self.folder, self.stem, self.dims = folder, stem, dims
        self.rows: dict[str, dict[str, int]] = {}
        self.matrices: dict[str, Matrix] = {}
        self.embedded = {"document": 0, "query": 0}
        """Texts of each kind the model embedded since the cache was read."""
        self.unsaved = 0
        for kind in self.embedded:
            texts_file, vectors_file = self._files(kind)
            if texts_file.is_file() and vectors_file.is_file():
                texts = json.loads(texts_file.read_text(encoding="utf-8"))
                self.matrices[kind] = np.load(vectors_file)
                self.rows[kind] = {text: row for row, text in enumerate(texts)}
            else:
                self.matrices[kind] = np.zeros((0, dims), dtype=np.float32)
                self.rows[kind] = {}

    def _files(self, kind: str) -> tuple[Path, Path]:
        return self.folder / f"{self.stem}.{kind}.json", self.folder / f"{self.stem}.{kind}.npy"

    def missing(self, kind: str, texts: Sequence[str]) -> list[str]:
        known = self.rows[kind]
        return list(dict.fromkeys(text for text in texts if text not in known))

    def put(self, kind: str, texts: Sequence[str], matrix: Matrix) -> None:
        known = self.rows[kind]
        for text in texts:
            known[text] = len(known)
        self.matrices[kind] = np.concatenate([self.matrices[kind], matrix.astype(np.float32)])
        self.embedded[kind] += len(texts)
        self.unsaved += len(texts)
        if self.unsaved >= SAVE_EVERY:  # an interrupted first run keeps most of its work
            self.save()

    def get(self, kind: str, texts: Sequence[str]) -> Matrix:
        rows = [self.rows[kind][text] for text in texts]
        result: Matrix = self.matrices[kind][rows]
        return result

    def save(self) -> None:
        """Write every kind's texts (in row order) and matrix, if any vector is new."""
        if not self.unsaved:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        for kind, known in self.rows.items():
            texts_file, vectors_file = self._files(kind)
            np.save(vectors_file, self.matrices[kind])
            texts_file.write_text(json.dumps(sorted(known, key=known.__getitem__)), "utf-8")
        self.unsaved = 0


class PrecomputedEmbedder(Embedder):
    """The model's vectors looked up by text; a text not cached yet is embedded and kept.

    Reports the model's fingerprint, so a collection sees the same interface as the real model.
    ``document_seconds`` adds up the time spent in `embed_documents` (lookups and model).
    """

    def __init__(self, model: Embedder, cache: VectorCache) -> None:
        self.model, self.cache = model, cache
        self.document_seconds = 0.0

    @property
    def fingerprint(self) -> Fingerprint:
        return self.model.fingerprint

    def _embed(self, texts: Sequence[str], kind: str) -> Matrix:
        missing = self.cache.missing(kind, texts)
        for start in range(0, len(missing), SAVE_EVERY // 4):
            if len(missing) > SAVE_EVERY // 4:
                print(f"  embedding {start:,}/{len(missing):,} {kind} texts", file=sys.stderr)
            batch = missing[start : start + SAVE_EVERY // 4]
            matrix = (
                self.model.embed_documents(batch)
                if kind == "document"
                else np.stack([self.model.embed_query(text) for text in batch])
            )
            self.cache.put(kind, batch, matrix)
        return self.cache.get(kind, texts)

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        started = time.perf_counter()
        try:
            return super().embed_documents(texts)
        finally:
            self.document_seconds += time.perf_counter() - started


def cache_stem(dataset: str, fingerprint: Fingerprint, texts: Sequence[str]) -> str:
    """Return the cache files' stem: dataset, model, and a hash of the model and corpus texts."""
    digest = hashlib.sha256(fingerprint.to_json().encode())
    for text in texts:
        digest.update(text.encode("utf-8", "surrogatepass") + b"\0")
    model = fingerprint.model.rsplit("/", 1)[-1]
    return f"{dataset}-{model}-{digest.hexdigest()[:16]}"


@dataclass(frozen=True)
class Corpus:
    """A dataset's documents as every store gets them, with the shared vectors."""

    ids: list[str]
    texts: list[str]
    buckets: npt.NDArray[np.int64]
    vectors: Matrix
    """One row per document: the vector of its whole text."""
    query_vectors: dict[str, Matrix]
    """Query id → its vector."""


def load_corpus(
    dataset: BeirDataset, embedder: PrecomputedEmbedder, limit_docs: int | None
) -> Corpus:
    """Return the first ``limit_docs`` documents (all by default) and the vectors of everything."""
    ids: list[str] = []
    texts: list[str] = []
    for doc in corpus_documents(dataset.folder):
        if limit_docs is not None and len(ids) >= limit_docs:
            break
        ids.append(doc.id)
        texts.append(doc.text[:MAX_TEXT_CHARS])  # the text vrom holds
    vectors = embedder.embed_documents(texts)
    queries = {qid: embedder.embed_query(text) for qid, text in dataset.queries if text.strip()}
    buckets = np.fromiter((bucket_of(doc_id) for doc_id in ids), dtype=np.int64, count=len(ids))
    return Corpus(ids, texts, buckets, vectors, queries)


# -- stores ------------------------------------------------------------------------------------


@dataclass
class Store:
    """One built store: its searches by mode, build time, and how to close it."""

    name: str
    folder: Path
    build_s: float
    modes: dict[str, Search]
    filtered: dict[str, Callable[[int, str, Matrix, int], list[str]]]
    """Mode → ``search(k, text, vector, filter number)`` with `FILTERS`[filter number]."""
    close: Callable[[], None]


def build_vrom(folder: Path, corpus: Corpus, embedder: PrecomputedEmbedder) -> Store:
    """Return vrom's collection holding the corpus (chunked, embedded through ``embedder``)."""
    documents = [
        Document(doc_id, text, {"bucket": int(bucket)})
        for doc_id, text, bucket in zip(corpus.ids, corpus.texts, corpus.buckets, strict=True)
    ]
    model_before = embedder.document_seconds
    started = time.perf_counter()
    collection = Collection.open("beir", embedder=embedder, storage=folder)
    for start in range(0, len(documents), ADD_BATCH):
        collection.add(documents[start : start + ADD_BATCH])
    build_s = time.perf_counter() - started - (embedder.document_seconds - model_before)

    def search(mode: str) -> Search:
        return lambda k, text, _: [hit.id for hit in collection.search(text, k=k, mode=mode)]

    def filtered(mode: str) -> Callable[[int, str, Matrix, int], list[str]]:
        def run(k: int, text: str, _: Matrix, number: int) -> list[str]:
            hits = collection.search(text, k=k, where=FILTERS[number][1], mode=mode)
            return [hit.id for hit in hits]

        return run

    return Store(
        "vrom",
        folder,
        build_s,
        {mode: search(mode) for mode in ("hybrid", "vector", "keyword")},
        {mode: filtered(mode) for mode in ("vector", "hybrid")},
        collection.close,
    )


def build_lancedb(folder: Path, corpus: Corpus, lancedb: ModuleType) -> Store:
    """Return a LanceDB table of the corpus with a native FTS index on its text."""
    import pyarrow as pa
    from lancedb.index import FTS
    from lancedb.rerankers import RRFReranker

    started = time.perf_counter()
    dims = corpus.vectors.shape[1]
    data = pa.table(
        {
            "id": pa.array(corpus.ids, pa.string()),
            "text": pa.array(corpus.texts, pa.string()),
            "bucket": pa.array(corpus.buckets, pa.int64()),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(corpus.vectors.ravel()), dims),
        }
    )
    table = lancedb.connect(str(folder)).create_table("beir", data=data)
    table.create_index("text", config=FTS())
    build_s = time.perf_counter() - started

    def ids(query: Any) -> list[str]:
        found: list[str] = query.select(["id"]).to_arrow()["id"].to_pylist()
        return found

    def hybrid(vector: Matrix, text: str) -> Any:
        query = table.search(query_type="hybrid").vector(vector).text(text)
        return query.distance_type("cosine").rerank(RRFReranker())

    def vector(vector: Matrix, text: str) -> Any:
        return table.search(vector, query_type="vector").distance_type("cosine")

    def fts(vector: Matrix, text: str) -> Any:
        return table.search(text, query_type="fts")

    queries = {"hybrid": hybrid, "vector": vector, "keyword": fts}

    def search(make: Callable[[Matrix, str], Any]) -> Search:
        return lambda k, text, vec: ids(make(vec, text).limit(k))

    def filtered(
        make: Callable[[Matrix, str], Any],
    ) -> Callable[[int, str, Matrix, int], list[str]]:
        def run(k: int, text: str, vec: Matrix, number: int) -> list[str]:
            return ids(make(vec, text).where(FILTERS[number][2], prefilter=True).limit(k))

        return run

    return Store(
        "lancedb",
        folder,
        build_s,
        {mode: search(make) for mode, make in queries.items()},
        {mode: filtered(queries[mode]) for mode in ("vector", "hybrid")},
        lambda: None,
    )


def build_chroma(folder: Path, corpus: Corpus, chromadb: ModuleType) -> Store:
    """Return a persistent Chroma collection of the corpus (cosine space, no embedding model)."""
    from chromadb.config import Settings

    started = time.perf_counter()
    client = chromadb.PersistentClient(
        path=str(folder), settings=Settings(anonymized_telemetry=False)
    )
    collection = client.create_collection(
        "beir", embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
    )
    batch = client.get_max_batch_size()
    for start in range(0, len(corpus.ids), batch):
        end = start + batch
        collection.add(
            ids=corpus.ids[start:end],
            embeddings=corpus.vectors[start:end],
            documents=corpus.texts[start:end],
            metadatas=[{"bucket": int(b)} for b in corpus.buckets[start:end]],
        )
    build_s = time.perf_counter() - started

    def query(k: int, vector: Matrix, where: Mapping[str, Any] | None) -> list[str]:
        result = collection.query(
            query_embeddings=[vector], n_results=k, where=where, include=["distances"]
        )
        found: list[str] = result["ids"][0]
        return found

    def filtered(k: int, text: str, vector: Matrix, number: int) -> list[str]:
        return query(k, vector, FILTERS[number][1])

    return Store(
        "chroma",
        folder,
        build_s,
        {"vector": lambda k, text, vector: query(k, vector, None)},
        {"vector": filtered},
        client.close,
    )


def folder_mb(folder: Path) -> float:
    """Return the size of every file under ``folder``, in MB."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


# -- measuring ---------------------------------------------------------------------------------


def _queries(dataset: BeirDataset, corpus: Corpus) -> Iterator[tuple[str, str, Matrix]]:
    for qid, text in dataset.queries:
        if text.strip():  # a blank query finds nothing (vrom refuses it): it scores 0
            yield qid, text, corpus.query_vectors[qid]


def run_mode(search: Search, dataset: BeirDataset, corpus: Corpus) -> dict[str, Any]:
    """Return a mode's quality (nDCG@10, recall@100) and single-query latency (p50, p95).

    Latency is measured at the quality depth (100 documents) and again at k=10, what an agent
    usually asks for (``latency_p50_k10_ms``).
    """
    queries = list(_queries(dataset, corpus))
    if queries:
        search(RECALL_DEPTH, queries[0][1], queries[0][2])  # untimed: loads and warms
    rankings: dict[str, list[str]] = {qid: [] for qid, _ in dataset.queries}
    latencies, latencies_k = [], []
    for qid, text, vector in queries:
        started = time.perf_counter()
        rankings[qid] = search(RECALL_DEPTH, text, vector)
        latencies.append(time.perf_counter() - started)
    for _, text, vector in queries:
        started = time.perf_counter()
        search(K, text, vector)
        latencies_k.append(time.perf_counter() - started)
    p50_k = {"latency_p50_k10_ms": 1000 * percentile(latencies_k, 0.5)} if latencies_k else {}
    return {**_quality(rankings, dataset.qrels), **_latency(latencies), **p50_k}


def _quality(rankings: Mapping[str, Sequence[str]], qrels: Qrels) -> dict[str, float]:
    scores = [score_ranking(ranking, qrels[qid], K) for qid, ranking in rankings.items()]
    return {
        f"ndcg_at_{K}": statistics.fmean(s.ndcg for s in scores),
        "recall_at_100": statistics.fmean(s.recall_100 for s in scores),
    }


def _latency(latencies_s: Sequence[float]) -> dict[str, float]:
    return {
        "latency_p50_ms": 1000 * percentile(latencies_s, 0.5),
        "latency_p95_ms": 1000 * percentile(latencies_s, 0.95),
    }


def vrom_document_scores(folder: Path, ids: Sequence[str]) -> Callable[[Matrix], Matrix]:
    """Return ``scores(query)``: each document's best chunk similarity, from vrom's own store."""
    store = SQLiteStore(folder / "beir.db", create=False)  # not read_only: it skips the WAL
    try:
        rows = store.vectors.rows()
        chunk_ids = [chunk_id for chunk_id, _ in rows]
        matrix = decode([blob for _, blob in rows], store.vectors.encoding())
        path_of: dict[int, str] = {}
        for start in range(0, len(chunk_ids), 500):
            path_of.update(
                (c.chunk_id, c.path) for c in store.documents.get_chunks(chunk_ids[start:][:500])
            )
    finally:
        store.close()
    index = {doc_id: n for n, doc_id in enumerate(ids)}
    owner = np.array([index[path_of[chunk_id]] for chunk_id in chunk_ids], dtype=np.int64)

    def scores(query: Matrix) -> Matrix:
        best = np.full(len(ids), -np.inf, dtype=np.float32)
        np.maximum.at(best, owner, matrix @ query)
        return best

    return scores


def run_filtered(
    search: Callable[[int, str, Matrix, int], list[str]],
    number: int,
    dataset: BeirDataset,
    corpus: Corpus,
    scores: Callable[[Matrix], Matrix] | None,
) -> dict[str, Any]:
    """Return a filtered mode's p50, share of full answers, filter check and recall@10."""
    passes = np.array([FILTERS[number][3](int(b)) for b in corpus.buckets], dtype=bool)
    position = {doc_id: n for n, doc_id in enumerate(corpus.ids)}
    expected = min(K, int(passes.sum()))
    queries = list(_queries(dataset, corpus))
    if queries:
        search(K, queries[0][1], queries[0][2], number)  # untimed
    latencies, full, all_pass, recalls = [], 0, True, []
    for _, text, vector in queries:
        started = time.perf_counter()
        found = search(K, text, vector, number)
        latencies.append(time.perf_counter() - started)
        full += len(found) == expected
        all_pass &= all(passes[position[doc_id]] for doc_id in found)
        if scores is not None and expected:
            exact = np.where(passes, scores(vector), -np.inf)
            kth = np.partition(exact, -expected)[-expected]  # the 10th best passing score
            hits = sum(1 for doc_id in found if exact[position[doc_id]] >= kth - 1e-5)
            recalls.append(hits / expected)
    return {
        **_latency(latencies),
        "expected_hits": expected,
        "share_with_expected_hits": full / len(queries) if queries else float("nan"),
        "all_hits_pass": all_pass,
        f"recall_at_{K}": statistics.fmean(recalls) if recalls else None,
    }


PAIRS = (  # (label, vrom row, peer row): the ratios reported
    ("hybrid vs lancedb hybrid", "vrom hybrid", "lancedb hybrid"),
    ("vector vs lancedb vector", "vrom vector", "lancedb vector"),
    ("keyword vs lancedb fts", "vrom keyword", "lancedb keyword"),
    ("hybrid vs chroma vector", "vrom hybrid", "chroma vector"),
    ("vector vs chroma vector", "vrom vector", "chroma vector"),
)


def _ratios(runs: Mapping[str, Any], stores: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    ratios = {}
    for label, mine, theirs in PAIRS:
        if theirs not in runs:
            continue
        peer = theirs.split()[0]
        pair = {**runs[mine], **stores["vrom"]}, {**runs[theirs], **stores[peer]}
        keys = (f"ndcg_at_{K}", "recall_at_100", "latency_p50_ms", "latency_p95_ms")
        ratios[label] = {
            key: pair[0][key] / pair[1][key] if pair[1].get(key) else float("nan")
            for key in (*keys, "latency_p50_k10_ms", "build_s", "disk_mb")
        }
    return ratios


def run_dataset(
    dataset: BeirDataset,
    model: Embedder,
    cache_folder: Path,
    limit_docs: int | None,
    peers: Mapping[str, ModuleType],
    with_filters: bool,
) -> dict[str, Any]:
    """Build every store on the dataset, run its queries (and the filters); return the numbers."""
    texts = [doc.text[:MAX_TEXT_CHARS] for doc in corpus_documents(dataset.folder)]
    name = dataset.folder.resolve().name
    cache = VectorCache(
        cache_folder, cache_stem(name, model.fingerprint, texts), model.fingerprint.dims
    )
    embedder = PrecomputedEmbedder(model, cache)
    try:
        corpus = load_corpus(dataset, embedder, limit_docs)
        builders: dict[str, Callable[[Path], Store]] = {
            "vrom": lambda folder: build_vrom(folder, corpus, embedder)
        }
        if "lancedb" in peers:
            builders["lancedb"] = lambda folder: build_lancedb(folder, corpus, peers["lancedb"])
        if "chromadb" in peers:
            builders["chroma"] = lambda folder: build_chroma(folder, corpus, peers["chromadb"])
        with tempfile.TemporaryDirectory(prefix="vrom-hybrid-", ignore_cleanup_errors=True) as tmp:
            with ExitStack() as closing:
                stores = {}
                for label, build in builders.items():
                    print(f"  {name}: building {label} ...", file=sys.stderr, flush=True)
                    stores[label] = build(Path(tmp) / label)
                    closing.callback(stores[label].close)
                runs = {}
                for label, store in stores.items():
                    for mode, search in store.modes.items():
                        print(f"  {name}: {label} {mode} ...", file=sys.stderr, flush=True)
                        runs[f"{label} {mode}"] = run_mode(search, dataset, corpus)
                chunks = _vrom_chunks(stores["vrom"].folder)
                filtered = run_filters(stores, dataset, corpus) if with_filters else None
            sizes = {
                label: {"build_s": store.build_s, "disk_mb": folder_mb(store.folder)}
                for label, store in stores.items()
            }
        embedded = dict(cache.embedded)
    finally:
        cache.save()
    return {
        "dataset": name,
        "split": dataset.split,
        "queries": len(dataset.queries),
        "documents": len(corpus.ids),
        "vrom_chunks": chunks,
        "embedded_by_model": embedded,
        "runs": runs,
        "stores": sizes,
        "ratios": _ratios(runs, sizes),
        "filtered": filtered,
    }


def _vrom_chunks(folder: Path) -> int:
    store = SQLiteStore(folder / "beir.db", create=False)  # not read_only: it skips the WAL
    try:
        return int(store.counts().chunks)
    finally:
        store.close()


def run_filters(
    stores: Mapping[str, Store], dataset: BeirDataset, corpus: Corpus
) -> dict[str, Any]:
    """Return every store's filtered searches at each selectivity in `FILTERS`."""
    exact = {
        "vrom": vrom_document_scores(stores["vrom"].folder, corpus.ids),
        "peer": lambda query: corpus.vectors @ query,
    }
    results: dict[str, Any] = {"k": K, "filters": []}
    for number, (label, where, sql, test) in enumerate(FILTERS):
        passing = sum(1 for b in corpus.buckets if test(int(b)))
        entry: dict[str, Any] = {
            "selectivity": label,
            "where": where,
            "lancedb_where": sql,
            "documents_passing": passing,
            "runs": {},
        }
        for name, store in stores.items():
            for mode, search in store.filtered.items():
                print(f"  filter {label}: {name} {mode} ...", file=sys.stderr, flush=True)
                scores = None if mode != "vector" else exact["vrom" if name == "vrom" else "peer"]
                run = run_filtered(search, number, dataset, corpus, scores)
                entry["runs"][f"{name} {mode}"] = run
        results["filters"].append(entry)
    return results


# -- running and reporting ---------------------------------------------------------------------


def run(
    datasets: Sequence[tuple[Path, str]],
    embedder: str,
    cache_folder: Path,
    limit_docs: int | None = None,
    limit_queries: int | None = None,
) -> dict[str, Any]:
    """Return the comparison on every (folder, split); a missing peer's rows are left out."""
    # LanceDB's Rust log warns on every query that selecting "id" still projects the score
    os.environ.setdefault("LANCEDB_LOG", "error")
    peers = {name: module for name in ("lancedb", "chromadb") if (module := _optional(name))}
    model = Embedder.default() if embedder == "default" else Embedder.fake()
    loaded = [load_beir(folder, split, limit_queries) for folder, split in datasets]
    biggest = max(range(len(loaded)), key=lambda n: _count_documents(loaded[n], limit_docs))
    results: dict[str, Any] = {
        "vrom": __version__,
        "versions": _versions(),
        "missing_peers": [name for name in ("lancedb", "chromadb") if name not in peers],
        "embedder": model.fingerprint.describe(),
        "fingerprint": model.fingerprint.to_json(),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores",
        "depth": RECALL_DEPTH,
        "limit_docs": limit_docs,
        "limit_queries": limit_queries,
        "datasets": [],
    }
    try:
        for number, dataset in enumerate(loaded):
            results["datasets"].append(
                run_dataset(dataset, model, cache_folder, limit_docs, peers, number == biggest)
            )
    finally:
        model.close()
    return results


def _count_documents(dataset: BeirDataset, limit_docs: int | None) -> int:
    with (dataset.folder / "corpus.jsonl").open(encoding="utf-8") as handle:
        count = sum(1 for line in handle if line.strip())
    return count if limit_docs is None else min(count, limit_docs)


def _versions() -> dict[str, str]:
    found = {}
    for package in ("lancedb", "chromadb", "pyarrow", "numpy"):
        with suppress(importlib.metadata.PackageNotFoundError):
            found[package] = importlib.metadata.version(package)
    return found


def _table(results: Mapping[str, Any]) -> str:
    lines = []
    for entry in results["datasets"]:
        runs, stores = entry["runs"], entry["stores"]
        lines.append(
            f"\n{entry['dataset']} ({entry['split']}): {entry['documents']:,} documents "
            f"({entry['vrom_chunks']:,} vrom chunks), {entry['queries']:,} queries, "
            f"{results['depth']} documents a query"
        )
        lines.append(
            f"{'':18} {'nDCG@10':>8} {'recall@100':>10} {'p50 ms':>8} {'p95 ms':>8} {'p50 k=10':>8}"
        )
        for label, run in runs.items():
            lines.append(
                f"{label:18} {run[f'ndcg_at_{K}']:8.4f} {run['recall_at_100']:10.4f} "
                f"{run['latency_p50_ms']:8.2f} {run['latency_p95_ms']:8.2f} "
                f"{run.get('latency_p50_k10_ms', float('nan')):8.2f}"
            )
        lines.append(f"{'store':18} {'build s':>8} {'disk MB':>10}")
        for label, store in stores.items():
            lines.append(f"{label:18} {store['build_s']:8.2f} {store['disk_mb']:10.1f}")
        if entry["ratios"]:
            lines.append(
                f"{'vrom / peer':26} {'nDCG@10':>8} {'p50':>7} {'p95':>7} {'p50@10':>7} "
                f"{'build':>7} {'disk':>7}"
            )
        for label, ratio in entry["ratios"].items():
            lines.append(
                f"{label:26} {ratio[f'ndcg_at_{K}']:8.3f} {ratio['latency_p50_ms']:7.2f} "
                f"{ratio['latency_p95_ms']:7.2f} {ratio['latency_p50_k10_ms']:7.2f} "
                f"{ratio['build_s']:7.2f} {ratio['disk_mb']:7.2f}"
            )
        if entry["filtered"]:
            lines.append(_filter_table(entry))
    return "\n".join(lines)


def _filter_table(entry: Mapping[str, Any]) -> str:
    lines = [f"\nfiltered search on {entry['dataset']}, k={K}"]
    lines.append(
        f"{'':17} {'store, mode':18} {'p50 ms':>8} {'p95 ms':>8} {'full':>6} {'pass':>5} "
        f"{'recall@10':>9}"
    )
    for selection in entry["filtered"]["filters"]:
        title = f"{selection['selectivity']} ({selection['documents_passing']:,} docs)"
        for label, run in selection["runs"].items():
            recall = run[f"recall_at_{K}"]
            lines.append(
                f"{title:17} {label:18} {run['latency_p50_ms']:8.2f} {run['latency_p95_ms']:8.2f} "
                f"{run['share_with_expected_hits']:6.3f} {'yes' if run['all_hits_pass'] else 'NO':>5} "
                f"{'-' if recall is None else f'{recall:.4f}':>9}"
            )
            title = ""
    lines.append(
        "full = share of queries that got min(k, documents passing) hits; pass = every hit "
        "passes the filter; recall@10 against exact numpy search among the passing documents"
    )
    return "\n".join(lines)


def draw_plot(results: Mapping[str, Any], path: Path) -> bool:
    """Draw p50 latency against nDCG@10 for every store and mode, one panel per dataset: a
    filled marker at k=10, a hollow one at depth 100. False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    datasets = results["datasets"]
    figure, axes = plt.subplots(1, len(datasets), figsize=(6 * len(datasets), 4.4), squeeze=False)
    colours = {"vrom": "tab:red", "lancedb": "tab:blue", "chroma": "tab:green"}
    shapes = {"hybrid": "o", "vector": "s", "keyword": "^", "fts": "^"}
    for axis, dataset in zip(axes[0], datasets, strict=True):
        for name, run in dataset["runs"].items():
            store, mode = name.split(" ", 1)
            style = {"color": colours.get(store, "grey"), "marker": shapes.get(mode, "D")}
            ndcg = run[f"ndcg_at_{K}"]
            axis.plot(run["latency_p50_k10_ms"], ndcg, linestyle="", **style, markersize=8)
            axis.plot(run["latency_p50_ms"], ndcg, linestyle="", **style, fillstyle="none")
            axis.annotate(
                name,
                (run["latency_p50_k10_ms"], ndcg),
                fontsize=7,
                xytext=(4, 3),
                textcoords="offset points",
            )
        axis.set_xscale("log")
        axis.set_xlabel("p50 single-query latency, ms (filled: k=10, hollow: depth 100)")
        axis.set_ylabel(f"nDCG@{K}")
        axis.set_title(f"{dataset['dataset']} ({dataset['documents']:,} documents)")
        axis.grid(True, which="both", alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_dataset_arguments(parser)
    parser.add_argument("--limit-docs", type=int, help="index only the first N documents")
    parser.add_argument("--limit-queries", type=int, help="run only the first N queries")
    parser.add_argument(
        "--embedder",
        choices=("default", "fake"),
        default="default",
        help="default: vrom's model; fake: instant hashed words (for tests)",
    )
    parser.add_argument("--cache", type=Path, default=CACHE, help="folder of cached vectors")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--plot", type=Path, default=PLOT, help="latency vs nDCG@10 figure")
    args = parser.parse_args()
    started = time.perf_counter()
    results = run(
        chosen_datasets(args.datasets, args.split),
        args.embedder,
        args.cache,
        args.limit_docs,
        args.limit_queries,
    )
    results["wall_s"] = time.perf_counter() - started
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))

    versions = results["versions"]
    peers = ", ".join(
        f"{name} {versions[name]}"
        for name in ("lancedb", "chromadb")
        if name in versions and name not in results["missing_peers"]
    )
    print(
        f"vrom {results['vrom']} vs {peers or 'no peer'}; vectors: {results['embedder']} for "
        f"everyone (model time not in build times); {results['machine']}"
    )
    for name in results["missing_peers"]:
        print(f"{name} is not installed: its rows are left out (to compare: {PEERS_INSTALL})")
    print(_table(results))
    print(f"\nwrote {args.out} ({results['wall_s']:.0f} s)")
    if draw_plot(results, args.plot):
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
