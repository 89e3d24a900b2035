"""No derived structure is built inside a search: the keyword copy, the HNSW graphs (of chunks
and of memories) and the exact index's matrix file are built beside the searches, which answer
the exact way meanwhile.

Each test holds the real builder on an `threading.Event` (through the store's or the index's
own interface): a build started on the searching thread fails the test at once (it would have
made that search wait), one started elsewhere waits until released. While it is held, searches
return exactly what the exact path returns; once released the structure is taken and used.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from vrom import Collection, Embedder, Vault
from vrom.index import exact as exact_module
from vrom.index.exact import ExactIndex
from vrom.index.hnsw import HnswIndex
from vrom.search import keyword_copy as keyword_module
from vrom.search.vector import VectorIndex

WORDS = tuple(f"{stem}{n}" for stem in ("river", "lantern", "copper", "violet") for n in range(10))
"""Forty words, each in a few notes: a word in half the chunks or more is left to FTS5."""


class HeldBuild:
    """Wraps a builder: refused on the thread that searches, held elsewhere until released."""

    def __init__(self) -> None:
        self.searching_thread = threading.get_ident()
        self.started = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def around(self, build: Callable[..., Any]) -> Callable[..., Any]:
        def held(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() == self.searching_thread:
                raise AssertionError(f"{build.__name__} ran inside the search call")
            self.calls += 1
            self.started.set()
            self.release.wait()
            return build(*args, **kwargs)

        return held


def _write_notes(root: Path, count: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for n in range(count):
        words = " ".join(WORDS[(n * 7 + i * 3) % len(WORDS)] for i in range(n % 5 + 2))
        (root / f"note{n:03d}.md").write_text(f"# Note {n}\n\n{words} number{n}\n", "utf-8")


@pytest.fixture
def held() -> Iterator[HeldBuild]:
    hold = HeldBuild()
    yield hold
    hold.release.set()  # a failing test leaves no thread waiting


def _keyword_hits(vault: Vault, query: str) -> list[tuple[str, float]]:
    return [(h.chunk_id, h.score) for h in vault.search(query, k=10, mode="keyword")]


def test_a_keyword_search_never_pays_for_building_the_keyword_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held: HeldBuild
) -> None:
    """Issue 27 item 3: the search that found the copy paid for made it inside the call (120 s
    wall on a loaded machine). Now it is made beside the searches, which go to FTS5 meanwhile."""
    _write_notes(tmp_path / "vault", 60)
    queries = ["river1 lantern3", "lantern5", "copper2 violet7 river9", "number7 copper4"]
    with Vault.open(tmp_path / "vault", tmp_path / "state", embedder=None) as vault:
        vault.index()
        ranker, documents = vault.corpus.keyword, vault.corpus.store.documents
        monkeypatch.setattr(keyword_module, "COPY_SECONDS_PER_CHUNK", 1e6)  # never copied
        exact = {query: _keyword_hits(vault, query) for query in queries}
        assert all(exact.values())
        for name in ("keyword_postings", "keyword_postings_apart"):
            monkeypatch.setattr(documents, name, held.around(getattr(documents, name)))
        monkeypatch.setattr(keyword_module, "COPY_SECONDS_PER_CHUNK", 0.0)  # due at once
        for query in queries:
            assert _keyword_hits(vault, query) == exact[query], "FTS5's answer meanwhile"
        held.started.wait()
        assert ranker.index is None and held.calls == 1, "one copy at a time"

        held.release.set()
        assert ranker.wait_for_copy() is not None
        asked: list[object] = []
        store_search = documents.keyword_search
        monkeypatch.setattr(
            documents, "keyword_search", lambda *a: asked.append(a) or store_search(*a)
        )
        for query in queries:
            assert _keyword_hits(vault, query) == exact[query], "the copy's answer"
        assert not asked, "every plain query was answered from the copy"


def test_a_keyword_copy_that_fails_is_logged_and_searches_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _write_notes(tmp_path / "vault", 30)
    with Vault.open(tmp_path / "vault", tmp_path / "state", embedder=None) as vault:
        vault.index()
        documents = vault.corpus.store.documents
        exact = _keyword_hits(vault, "river1 lantern3")

        def broken() -> None:
            raise OSError("disk went away")

        monkeypatch.setattr(documents, "keyword_postings_apart", broken)
        monkeypatch.setattr(keyword_module, "COPY_SECONDS_PER_CHUNK", 0.0)
        with caplog.at_level(logging.WARNING, logger="vrom"):
            assert _keyword_hits(vault, "river1 lantern3") == exact
            assert vault.corpus.keyword.wait_for_copy() is None
        assert "building the keyword copy failed (OSError: disk went away)" in caplog.text
        assert _keyword_hits(vault, "river1 lantern3") == exact, "FTS5 still answers"


def _vector_ids(vault: Vault, query: str) -> list[str]:
    return [h.chunk_id for h in vault.search(query, k=5, mode="vector")]


def test_a_vector_search_never_builds_the_hnsw_graph_inside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held: HeldBuild
) -> None:
    """A store past the graph threshold is searched exactly while its graph is built beside."""
    _write_notes(tmp_path / "vault", 80)
    queries = ["river1 lantern3", "copper2 violet7", "number12"]
    with Vault.open(tmp_path / "vault", tmp_path / "flat", embedder=Embedder.fake()) as flat:
        flat.index()  # 80 vectors: far below the threshold, searched exactly
        exact = {query: _vector_ids(flat, query) for query in queries}
        assert all(exact.values())
    monkeypatch.setattr(HnswIndex, "_build", held.around(HnswIndex._build))
    monkeypatch.setattr(HnswIndex, "built", held.around(HnswIndex.built))
    options: dict[str, Any] = {"embedder": Embedder.fake(), "hnsw_threshold": 10}
    with Vault.open(tmp_path / "vault", tmp_path / "state", **options) as vault:
        vault.index()
        for query in queries:
            assert _vector_ids(vault, query) == exact[query], "the exact answer meanwhile"
        held.started.wait()
        assert isinstance(vault.corpus.index.current, ExactIndex) and held.calls == 1

        held.release.set()
        graph = vault.corpus.index.wait_for_graph()
        assert isinstance(graph, HnswIndex) and graph.build_count == 1
        for query in queries:  # a graph as small as its search beam answers exactly
            assert _vector_ids(vault, query) == exact[query], "the graph's answer"
        assert vault.corpus.index.current is graph, "the graph is the one searched"


def test_a_memory_recall_never_builds_the_hnsw_graph_inside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held: HeldBuild
) -> None:
    """Issue 29 item 1: the first vector recall past the threshold built the memories' graph
    inside the user's query (1,478 s wall at 100k). Now it is recalled exactly meanwhile."""
    (tmp_path / "vault").mkdir()
    monkeypatch.setattr(HnswIndex, "_build", held.around(HnswIndex._build))
    monkeypatch.setattr(HnswIndex, "built", held.around(HnswIndex.built))
    options: dict[str, Any] = {"embedder": Embedder.fake(), "hnsw_threshold": 5}
    with Vault.open(tmp_path / "vault", tmp_path / "state", **options) as vault:
        for n in range(40):
            vault.memories.remember(f"fact {n}", f"{WORDS[n]} {WORDS[(n * 7) % 40]} detail{n}")
        index: VectorIndex = vault.corpus._memory_index
        recalled = [r.memory.id for r in vault.memories.recall("river1 copper3", mode="vector")]
        assert recalled, "recalled exactly meanwhile"
        held.started.wait()
        assert isinstance(index.current, ExactIndex) and held.calls == 1

        held.release.set()
        graph = index.wait_for_graph()
        assert isinstance(graph, HnswIndex) and graph.build_count == 1
        again = [r.memory.id for r in vault.memories.recall("river1 copper3", mode="vector")]
        assert again == recalled and index.current is graph


def test_a_vector_search_never_writes_the_matrix_file_inside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held: HeldBuild
) -> None:
    """The exact index's matrix file (every vector, written once the store holds a thousand) is
    written beside the searches; the vectors read from the store answer meanwhile."""
    monkeypatch.setattr(exact_module, "write_matrix", held.around(exact_module.write_matrix))
    documents = [
        {"id": f"d{n}", "text": f"{WORDS[n % 40]} {WORDS[n % 13]} item{n}"} for n in range(1_200)
    ]
    with Collection.open("docs", embedder=Embedder.fake(), storage=tmp_path) as docs:
        docs.add(documents)
        matrix = tmp_path / "docs.db.matrix"
        found = [h.id for h in docs.search("river1 copper3", k=5, mode="vector")]
        assert len(found) == 5
        held.started.wait()
        index = docs._corpus.index.current
        assert isinstance(index, ExactIndex) and index.load_count == 1
        assert not matrix.exists() and held.calls == 1

        held.release.set()
        index.wait_for_file()
        assert matrix.exists()
        assert [h.id for h in docs.search("river1 copper3", k=5, mode="vector")] == found
        assert docs._corpus.index.current is index and index.load_count == 1
        assert not index._state.base.matrix.flags.writeable, "the file's mapping is searched"


EXITS_MID_BUILD = """
import sys, threading
from vrom import Collection, Embedder
from vrom.index import background, hnsw

adding = threading.Event()
real_add = hnsw.add_rows

def add_once_the_process_exits(*args):
    adding.set()
    background._EXITING.wait()  # the graph's threads run while the process exits
    real_add(*args)

hnsw.add_rows = add_once_the_process_exits
docs = Collection.open("docs", embedder=Embedder.fake(256), storage=sys.argv[1], index="hnsw")
assert len(docs.search("river1 copper3", k=5)) == 5
adding.wait()
print("exiting mid-build", flush=True)
"""


def test_a_process_that_exits_while_a_graph_is_built_exits_cleanly(tmp_path: Path) -> None:
    """usearch builds on native threads; a process exiting under them aborted ("terminate
    called without an active exception"). The exit waits for the part under way, then the
    build stops."""
    documents = [{"id": f"d{n}", "text": f"{WORDS[n % 40]} item{n}"} for n in range(3_000)]
    with Collection.open("docs", embedder=Embedder.fake(256), storage=tmp_path) as docs:
        docs.add(documents)
    done = subprocess.run(
        [sys.executable, "-c", EXITS_MID_BUILD, str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "exiting mid-build\n" and "terminate" not in done.stderr
    assert not (tmp_path / "docs.db.hnsw.usearch").exists(), "stopped, not finished"


def test_a_store_in_memory_is_searched_by_fts5_and_never_copied_beside(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A store in memory has no second connection to read its index on: it keeps FTS5 (a copy
    is made there only when asked, `KeywordRanker.copy_index`)."""
    monkeypatch.setattr(keyword_module, "COPY_SECONDS_PER_CHUNK", 0.0)
    with Collection.open("docs", embedder=None) as docs:
        docs.add([{"id": f"d{n}", "text": f"{WORDS[n % 40]} item{n}"} for n in range(50)])
        ranker = docs._corpus.keyword
        first = [h.id for h in docs.search("river1 lantern3", k=5, mode="keyword")]
        assert first and ranker.wait_for_copy() is None
        assert [h.id for h in docs.search("river1 lantern3", k=5, mode="keyword")] == first
        assert ranker.wait_for_copy() is None, "not tried again"
        assert ranker.copy_index() is not None, "made when asked"
        assert [h.id for h in docs.search("river1 lantern3", k=5, mode="keyword")] == first
