"""Time each search of a fresh process one by one: does any of them pay for building something?

    python bench/search_stalls.py STORE [--mode keyword|vector|hybrid] [--queries N]
        [--embedder none|fake] [--wait] [--copy-seconds-per-chunk S]

Opens the store (a vault's ``store.db``, indexed beforehand, e.g. with ``vrom index PATH --db
STORE --embedder none``) as a long-lived process would (`vrom mcp`), runs ``--queries``
different searches in a row and prints each one's wall and CPU time (the whole process's
``time.process_time``, so work any thread does during the call counts), then what the search
core holds afterwards (the keyword copy, the vector index kind). A search that builds the
keyword copy or an HNSW graph inside the call stands out by seconds; a build done beside the
searches shows as CPU spread over them with no wall-time stall. ``--wait`` then waits for the
background builds and times the same queries again (the structures in use).
``--copy-seconds-per-chunk 0`` makes the keyword copy due at the first search.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from vrom.corpus import Corpus
from vrom.embed import Embedder, EmbedderBinding
from vrom.search import keyword_copy as keyword_module
from vrom.store import open_store

QUERIES = [
    "plugin settings sync",
    "daily notes template",
    "graph view filters",
    "dataview query table",
    "mobile app vault",
    "community theme css",
    "canvas cards",
    "backlinks outline",
    "publish website",
    "keyboard shortcuts hotkeys",
    "markdown tables formatting",
    "zettelkasten workflow",
]


def _holds(corpus: Corpus) -> tuple[bool, str]:
    """Return whether the keyword copy is held, and the vector index searched (loading none)."""
    index = corpus.index._index  # the one searched now, if loaded
    return corpus.keyword.index is not None, type(index).__name__ if index else "none"


def _run(corpus: Corpus, queries: list[str], mode: str, label: str) -> None:
    held = _holds(corpus)
    for number, query in enumerate(queries, 1):
        wall, cpu = time.perf_counter(), time.process_time()
        hits = corpus.search(query, k=10, mode=mode)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        now = _holds(corpus)
        if now != held:
            print(f"-- from here on: keyword copy {'held' if now[0] else 'none'}, vectors {now[1]}")
            held = now
        print(
            f"{label} {number:2d}  wall {1000 * wall:9.1f} ms  cpu {1000 * cpu:8.1f} ms  "
            f"hits {len(hits):2d}  {query!r}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--mode", default="keyword", choices=("keyword", "vector", "hybrid"))
    parser.add_argument("--queries", type=int, default=10)
    parser.add_argument("--embedder", default="none", choices=("none", "fake"))
    parser.add_argument("--wait", action="store_true")
    parser.add_argument(
        "--copy-seconds-per-chunk",
        type=float,
        default=keyword_module.COPY_SECONDS_PER_CHUNK,
        help="the keyword copy's first estimate (0: due at the first search)",
    )
    args = parser.parse_args()
    keyword_module.COPY_SECONDS_PER_CHUNK = args.copy_seconds_per_chunk
    embedder = Embedder.fake() if args.embedder == "fake" else None
    corpus = Corpus(open_store(str(args.store)), EmbedderBinding.of(embedder))
    queries = (QUERIES * (1 + args.queries // len(QUERIES)))[: args.queries]
    try:
        _run(corpus, queries, args.mode, "search")
        if args.wait:
            corpus.keyword.wait_for_copy()
            corpus.index.wait_for_graph()
            _run(corpus, queries, args.mode, "after ")
        copy, index = _holds(corpus)
        print(f"keyword copy: {'held' if copy else 'none'}; vector index: {index}")
    finally:
        corpus.close()


if __name__ == "__main__":
    main()
