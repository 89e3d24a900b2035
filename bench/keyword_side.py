"""One side of `bench/keyword_peers.py`'s CPU comparison: a vrom tree's keyword search, timed.

    PYTHONPATH=TREE/src python bench/keyword_side.py

Run by `keyword_peers.py` in a subprocess per vrom tree (the round's start commit, this tree),
so both sides run at once on the same machine and take turns. It reads one JSON request a line
on stdin and answers one JSON line on stdout:

- ``{"open": "beir", "folder": F, "split": S}``: a keyword-only `Collection` of the dataset in a
  temporary folder (`vrom.evaluation.runs.add_corpus`), its keyword copy made
  (`KeywordRanker.copy_index`: a long-running process has one), the queries read;
- ``{"open": "vault", "folder": F, "titles": [...]}``: a keyword-only `Vault` of the folder
  (``vrom index --embedder none``), its copy made, the titles as queries;
- ``{"run": K, "read": R}``: every query once at ``k=K`` in keyword mode, one hit per document,
  each hit's ``id`` read (``R`` true: its ``excerpt`` and ``text`` too); answers each query's
  CPU time (`time.thread_time`, seconds) and whether it went to FTS5 (the store's own
  ``keyword_search`` was called) instead of the in-memory copy;
- ``{"quit": true}``.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from vrom import Collection, Vault
from vrom.evaluation.beir import load_beir
from vrom.evaluation.runs import add_corpus


class Side:
    """What one side holds between requests: the searchable, its queries, FTS5 calls."""

    def __init__(self) -> None:
        self.work = tempfile.TemporaryDirectory(prefix="vrom-kw-side-", ignore_cleanup_errors=True)
        self.opened: Any = None
        self.search: Any = None
        self.queries: list[str] = []
        self.fts5_calls = 0

    def open(self, request: dict[str, Any]) -> dict[str, Any]:
        started = time.process_time()
        if self.opened is not None:
            self.opened.close()
        folder = Path(self.work.name) / str(len(list(Path(self.work.name).iterdir())))
        if request["open"] == "beir":
            dataset = load_beir(Path(request["folder"]), request["split"])
            opened: Any = Collection.open("beir", embedder=None, storage=folder)
            add_corpus(opened, dataset.folder)
            self.queries = [text for _, text in dataset.queries if text.strip()]
        else:
            opened = Vault.open(Path(request["folder"]), embedder=None, state_dir=folder)
            opened.index()
            self.queries = list(request["titles"])
        corpus = opened._corpus if request["open"] == "beir" else opened.corpus
        corpus.keyword.copy_index()
        documents = corpus.store.documents
        stored = documents.keyword_search

        def counted(*args: Any) -> Any:
            self.fts5_calls += 1
            return stored(*args)

        documents.keyword_search = counted  # every call to FTS5 is a query off the copy
        self.opened, self.search = opened, opened.search
        self.search(self.queries[0], k=10, mode="keyword")  # untimed, as any side's first
        return {"queries": len(self.queries), "open_cpu_s": time.process_time() - started}

    def run(self, k: int, read: bool) -> dict[str, Any]:
        seconds, to_fts5 = [], []
        for query in self.queries:
            before = self.fts5_calls
            started = time.thread_time()
            hits = self.search(query, k=k, mode="keyword")
            ids = [hit.id for hit in hits]
            if read:
                ids += [hit.excerpt + hit.text for hit in hits]
            seconds.append(time.thread_time() - started)
            to_fts5.append(self.fts5_calls != before)
        return {"cpu_s": seconds, "fts5": to_fts5}


def main() -> None:
    side = Side()
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("quit"):
            break
        answer = (
            side.open(request) if "open" in request else side.run(request["run"], request["read"])
        )
        print(json.dumps(answer), flush=True)
    if side.opened is not None:
        side.opened.close()
    side.work.cleanup()


if __name__ == "__main__":
    main()
