"""Measure the in-memory keyword index against FTS5 on one store: size, copy time, query speed.

    python bench/keyword_index.py [DATASET_DIR ...] [--split SPLIT ...] [--chunks N]
        [--queries N] [--out FILE]

Builds a keyword-only `Collection` (no embedder) of about ``--chunks`` chunks (default 100,000)
from the datasets' corpora (default: SciFact and NFCorpus under ``shared/data/beir``), repeated
under new ids until the count is reached (so the vocabulary is these corpora's: a store of 100k
distinct documents holds more terms, ~100 bytes each in the vocabulary), then reports:

- the copy: its time (`KeywordRanker.copy_index`), postings, terms, array bytes
  (`KeywordIndex.nbytes`) and the process's RSS growth while it was made;
- ranking only, 100 rows per query (the search core's pool for k=25): p50 of the store's own
  FTS5 ``keyword_search`` and of the copy's `KeywordIndex.rank`, on the first dataset's queries
  (SciFact train),
  and whether every query got the same rows in the same order from both;
- whole searches through the collection (`Collection.search`, keyword mode, hits with excerpts
  and provenance) at k=10 and k=100, with the copy and with FTS5 alone.

Prints a table and writes JSON to bench/results/keyword_index.json. Ratios are copy / FTS5 from
the same run.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from beir_datasets import add_dataset_arguments, chosen_datasets

from vrom import Collection, __version__
from vrom.documents import MAX_TEXT_CHARS
from vrom.evaluation.beir import corpus_documents, load_beir
from vrom.evaluation.metrics import percentile
from vrom.search import keyword_copy as keyword_module
from vrom.search.query import parse_query

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "keyword_index.json"


def _documents(
    folders: list[Path], limit_chunks: int, chunk_chars: int
) -> Iterator[dict[str, str]]:
    """Yield BEIR documents, repeated under new ids, until about ``limit_chunks`` chunks."""
    texts = [doc.text[:MAX_TEXT_CHARS] for folder in folders for doc in corpus_documents(folder)]
    chunks, copy = 0, 0
    while True:
        for number, text in enumerate(texts):
            if chunks >= limit_chunks:
                return
            chunks += max(1, -(-len(text) // chunk_chars))
            yield {"id": f"{copy}-{number}", "text": text}
        copy += 1


def _p50_ms(run: Callable[[str], object], queries: list[str]) -> float:
    run(queries[0])  # untimed
    times = []
    for query in queries:
        started = time.perf_counter()
        run(query)
        times.append(time.perf_counter() - started)
    return 1000 * percentile(times, 0.5)


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_dataset_arguments(parser)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    datasets = chosen_datasets(args.datasets, args.split)
    folder, split = datasets[0]
    queries = [text for _, text in load_beir(folder, split).queries][: args.queries]
    with tempfile.TemporaryDirectory() as storage:
        # no copy until asked: the FTS5 numbers are FTS5's alone
        keyword_module.COPY_SECONDS_PER_CHUNK = float("inf")
        with Collection.open("keyword", embedder=None, storage=storage) as docs:
            started = time.perf_counter()
            batch: list[dict[str, str]] = []
            for document in _documents([f for f, _ in datasets], args.chunks, 1000):
                batch.append(document)
                if len(batch) == 1000:
                    docs.add(batch)
                    batch = []
            docs.add(batch)
            build_s = time.perf_counter() - started
            corpus = docs._corpus
            store, ranker = corpus.store, corpus.keyword
            chunks = store.documents.chunk_count()
            parsed = {query: parse_query(query) for query in queries}

            def fts5(query: str) -> object:
                return store.documents.keyword_search(parsed[query], 100, None)

            def search(k: int) -> Callable[[str], object]:
                return lambda query: docs.search(query, k=k, mode="keyword")

            fts5_p50 = _p50_ms(fts5, queries)
            fts5_search = {k: _p50_ms(search(k), queries) for k in (10, 100)}
            rss_before = _rss_mb()
            started = time.perf_counter()
            index = ranker.copy_index()
            copy_s = time.perf_counter() - started
            assert index is not None
            rss_growth = _rss_mb() - rss_before
            plain = {q: ranker._plain_tokens(parsed[q]) for q in queries}
            answered = [q for q in queries if plain[q] is not None]
            same = all(
                [r.chunk_id for r in index.rank(plain[q] or [], 100)]
                == [r.chunk_id for r in store.documents.keyword_search(parsed[q], 100, None)]
                for q in answered
            )
            copy_p50 = _p50_ms(lambda q: index.rank(plain[q] or [], 100), answered)
            copy_search = {k: _p50_ms(search(k), queries) for k in (10, 100)}
            postings = int(index._rows.size)
    result: dict[str, Any] = {
        "vrom": __version__,
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
        "chunks": chunks,
        "build_s": build_s,
        "copy_s": copy_s,
        "postings": postings,
        "terms": index.term_count,
        "array_mb": index.nbytes / 1e6,
        "rss_growth_mb": rss_growth,
        "queries": len(queries),
        "plain_queries": len(answered),
        "same_rows": same,
        "rank_p50_ms": {"fts5": fts5_p50, "copy": copy_p50},
        "search_p50_ms": {
            f"k={k}": {"fts5": fts5_search[k], "copy": copy_search[k]} for k in (10, 100)
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(
        f"{chunks:,} chunks built in {build_s:.1f} s; copy {copy_s:.2f} s, {postings:,} postings,"
    )
    print(
        f"  {index.term_count:,} terms, arrays {index.nbytes / 1e6:.1f} MB, RSS +{rss_growth:.0f} MB"
    )
    print(f"  same rows as FTS5 on all {len(answered)} plain-term queries: {same}")
    print(f"{'p50 ms':<28}{'FTS5':>9}{'copy':>9}{'copy/FTS5':>11}")
    rows = [("rank, 100 rows", fts5_p50, copy_p50)] + [
        (f"search k={k} (with hits)", fts5_search[k], copy_search[k]) for k in (10, 100)
    ]
    for name, slow, fast in rows:
        print(f"{name:<28}{slow:>9.2f}{fast:>9.2f}{fast / slow:>11.3f}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
