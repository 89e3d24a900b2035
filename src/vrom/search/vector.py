"""Vector indexes over a source of vectors: exact below a size, an HNSW graph above it.

`VectorIndex` picks the index kind for a source (a store's chunk vectors or its memory
vectors) and chooses again when the vectors change; the search core (`vrom.corpus`) asks it
for nearest neighbours. A source that searches itself (`vrom.store.NearestVectors`: pgvector's
HNSW in PostgreSQL) is asked directly, exactly or through its index by the same rules, and no
index is built here.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from vrom.errors import ValidationError, shown
from vrom.index.background import BackgroundBuild
from vrom.store import NearestVectors, Sidecar, VectorSource

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from vrom.index.exact import ExactIndex
    from vrom.index.hnsw import HnswIndex

HNSW_THRESHOLD = 5_000
"""Sources with at least this many vectors are searched with an HNSW graph, smaller ones exactly.

bench/vector_engines.py on real all-MiniLM-L6-v2 vectors (384 d, 2 cores, 200 queries): exact
search took 0.19 ms at 5k vectors, 0.36 ms at 10k, 1.7 ms at 20k and 17 ms at 100k; the graph,
at the default ef_search of 128, 0.15 ms at 5k, 0.18 ms at 10k and 0.33 ms at 20k with recall@10
0.998, 0.993 and 0.988 against exact. Inside a collection's search the gap is wider (the matrix
is no longer in the CPU cache): a whole vector search at k=10 took 1.25 ms exact and 0.87 ms
with the graph on NFCorpus's 8.3k chunks, 1.7 and 0.9 ms on SciFact's 11.4k. The graph costs a
build (~0.25 s at 5k, 0.6 s at 10k, 1.6 s at 20k, about a minute at 100k on a busy machine),
made once, when a source first reaches the threshold: later changes are replayed into it.
Below 5k exact answers in about 0.2 ms, misses nothing and needs no build."""
EXACT_CEILING = 20_000
"""Below this many vectors exact search takes at most ~2 ms, so an ``auto`` index builds no
graph in a search's path until searching has paid for it: it searches exactly until the time
spent there adds up to what a build would take (`BUILD_SECONDS_PER_VECTOR`), and uses a graph
file already saved beside the store whenever one is current or a few changes behind. A
one-shot ``vrom search`` (or many of them while another process re-indexes, which leaves the
graph file far behind) never waits for a build; a long-lived process (``vrom mcp``) builds
once, after its first few hundred searches, and saves the graph for every later process. An
index given ``kind="hnsw"`` or its own ``hnsw_threshold`` builds its graph when due, as asked.
No search waits for a build either way: the graph is built beside the searches, from the exact
index's vectors, while they are searched exactly (`VectorIndex.current`)."""
BUILD_SECONDS_PER_VECTOR = 80e-6
"""What building the graph is taken to cost per vector (bench/vector_engines.py on two cores:
0.25 s at 5k vectors, 0.6 s at 10k, 1.6 s at 20k); exact searches count their CPU time against
it (`time.thread_time`: on a loaded machine wall time counts the wait for a core)."""
MODES = ("hybrid", "keyword", "vector", "rerank")
INDEX_KINDS = ("auto", "flat", "hnsw")


class VectorIndex:
    """The index over one vector source: loaded on first use, its kind chosen by size.

    ``cache`` is where the HNSW graph is cached and ``matrix_cache`` where the exact index's
    matrix is (None: not cached; see `vrom.store.Store.sidecar`).
    """

    def __init__(
        self,
        vectors: VectorSource,
        cache: Sidecar | None = None,
        *,
        matrix_cache: Sidecar | None = None,
        metric: str = "cosine",
        kind: str = "auto",
        hnsw_threshold: int = HNSW_THRESHOLD,
        ef_search: int | None = None,
    ) -> None:
        if kind not in INDEX_KINDS:
            raise ValidationError(
                f"index must be one of {', '.join(INDEX_KINDS)}, not {shown(kind)}"
            )
        self._vectors = vectors
        self._cache = cache
        self._matrix_cache = matrix_cache
        self._metric = metric
        self._kind = kind
        self._hnsw_threshold = hnsw_threshold
        self._ef_search = ef_search
        self._index: ExactIndex | HnswIndex | None = None
        self._chosen_at = -1  # the vector generation the index kind was chosen for
        self._native = vectors if isinstance(vectors, NearestVectors) else None
        self._native_choice: tuple[int, bool] | None = None  # (generation, uses its HNSW)
        self._counted: tuple[int, int] | None = None  # (change number, vectors then)
        self._exact_seconds = 0.0  # spent in exact searches while a graph was due but unpaid
        self._renting: float | None = None  # what the due graph costs, while searching exactly
        self._graph_build: BackgroundBuild[HnswIndex] = BackgroundBuild(
            "the vector graph", stops_at_exit=True
        )
        self._wants_graph = False  # the last choice was a graph (built beside, if need be)

    @classmethod
    def opened(cls, index: HnswIndex, vectors: VectorSource) -> VectorIndex:
        """Return a `VectorIndex` over an index opened already (a pack's graph file)."""
        fixed = cls(vectors, kind="hnsw")
        fixed._index = index
        fixed._chosen_at = vectors.generation()
        return fixed

    @property
    def current(self) -> ExactIndex | HnswIndex:
        """The index: exact below ``hnsw_threshold`` vectors, HNSW at or above.

        ``kind="flat"`` or ``"hnsw"`` fixes the kind instead. It loads on first use (numpy and
        usearch are imported only then), and the choice is made again whenever the vectors
        change, and once exact searches have paid for a graph that was due (`EXACT_CEILING`).
        A graph is never built here: one that is due and has no file to open (or only one too
        far behind) is built beside the searches (`vrom.index.background`) from the exact
        index's vectors, which answer meanwhile; the first search after it is done takes it.
        A source that searches itself (`NearestVectors`) has no index here: asking is an error.
        """
        if self._native is not None:
            raise TypeError("the database searches its own vector index: nothing loads here")
        generation = self._vectors.generation()
        built = self._graph_build.take()
        if built is not None and self._wants_graph:
            self._index = built[0]  # the exact index goes (its file, a cache, is caught up later)
        paid = self._renting is not None and self._exact_seconds >= self._renting
        if self._index is None or generation != self._chosen_at or paid:
            # heavy imports: only vector search needs them, and usearch only the graph
            from vrom.index.exact import ExactIndex

            due = self._uses_hnsw()
            self._renting = None
            self._wants_graph = due and self._graph_paid_for()
            if self._wants_graph:
                from vrom.index.hnsw import HnswIndex

                if not isinstance(self._index, HnswIndex):
                    graph = self._saved_graph()
                    if graph is None:
                        self._build_beside()
                    else:
                        self.close()
                        self._index = graph
            else:
                if due:  # a graph is due but not paid for: exact, timed, until it is
                    self._renting = self._build_seconds()
                if not isinstance(self._index, ExactIndex):
                    self.close()
                    self._index = self._exact()
            self._chosen_at = generation
        assert self._index is not None
        return self._index

    def wait_for_graph(self) -> ExactIndex | HnswIndex | None:
        """Wait for a graph (or an exact index's matrix file) being built beside the searches,
        if one is, and return the index searches use then (for tests and benches: searches
        never wait); None for a source that searches itself, which builds nothing here."""
        from vrom.index.exact import ExactIndex

        if self._native is not None:
            return None

        index = self.current  # chooses the index, starting a build that is due
        if isinstance(index, ExactIndex):
            index.wait_for_file()
        self._graph_build.wait()
        return self.current

    def _exact(self) -> ExactIndex:
        from vrom.index.exact import ExactIndex

        return ExactIndex(self._vectors, self._metric, cache=self._matrix_cache, writes_beside=True)

    def _saved_graph(self) -> HnswIndex | None:
        """Return the graph saved beside the store if it catches up without a build, else None."""
        from vrom.index.hnsw import EXPANSION_SEARCH, GraphBehind, HnswIndex

        graph = HnswIndex(
            self._vectors,
            self._metric,
            cache=self._cache,
            expansion_search=self._ef_search or EXPANSION_SEARCH,
            rebuilds=False,
        )
        try:
            graph.refresh()
        except GraphBehind:
            return None
        return graph

    def _build_beside(self) -> None:
        """Search exactly, and have a graph built from the exact index's vectors meanwhile."""
        from vrom.index.exact import ExactIndex
        from vrom.index.hnsw import EXPANSION_SEARCH, HnswIndex

        if not isinstance(self._index, ExactIndex):
            self.close()
            self._index = self._exact()
        if self._graph_build.running:
            return
        rows, change_number = self._index.rows_now()
        vectors, identity, metric = self._vectors, self._vectors.identity(), self._metric
        cache, search = self._cache, self._ef_search or EXPANSION_SEARCH
        self._graph_build.start(
            lambda: HnswIndex.built(
                vectors, rows, change_number, identity, metric, cache=cache, expansion_search=search
            )
        )

    def _graph_paid_for(self) -> bool:
        """True when an ``auto`` index due for a graph may use one now (see `EXACT_CEILING`):
        it holds one already, the store is too large for exact search, a saved graph needs no
        rebuild, or exact searches here have cost as much as a build."""
        from vrom.index.hnsw import HnswIndex

        if self._kind != "auto" or self._hnsw_threshold != HNSW_THRESHOLD:
            return True  # a graph asked for, or a threshold chosen: built when due
        if isinstance(self._index, HnswIndex):
            return True
        if self._holds_at_least(EXACT_CEILING):
            return True
        if self.graph()["state"] in ("current", "behind"):
            return True
        return self._exact_seconds >= self._build_seconds()

    def _build_seconds(self) -> float:
        """Return what building the graph is taken to cost, for the vectors last counted."""
        assert self._counted is not None  # counted by _uses_hnsw and _holds_at_least
        return self._counted[1] * BUILD_SECONDS_PER_VECTOR

    def _uses_hnsw(self) -> bool:
        """True when searches use the HNSW graph: fixed so, or ``hnsw_threshold`` vectors."""
        if self._kind != "auto":
            return self._kind == "hnsw"
        if self._native is not None:  # the database's index: chosen again as vectors change
            generation = self._vectors.generation()
            if self._native_choice is None or self._native_choice[0] != generation:
                self._native_choice = (generation, self._vectors.count() >= self._hnsw_threshold)
            return self._native_choice[1]
        return self._holds_at_least(self._hnsw_threshold)

    def _holds_at_least(self, threshold: int) -> bool:
        """True when the source holds at least ``threshold`` vectors.

        Counting a store's vectors reads its whole table (~80 ms at 100k), and the choice is
        made again after every change. So a count is kept with the change it was made at: each
        key changed since added or removed at most one vector, and while that bound stays on
        one side of ``threshold`` nothing is counted again. A cache file that reflects the
        store's latest change knows the count too.
        """
        if self._counted is not None:
            counted_at, count = self._counted
            changes = self._vectors.changes(counted_at)
            if changes is not None:
                if count + len(changes.keys) < threshold:
                    return False
                if count - len(changes.keys) >= threshold:
                    return True
        # read before counting: a change in between is counted, and bounded again later
        change_number = self._vectors.change_number()
        from vrom.index.matrix_file import current_count  # numpy: only when vectors are used

        found = current_count(self._vectors, self._matrix_cache)
        if found is None:
            from vrom.index.graph_file import cached_vector_count

            found = cached_vector_count(self._vectors, self._cache)
        count = self._vectors.count() if found is None else found
        self._counted = (change_number, count)
        return count >= threshold

    def mode(self) -> str:
        """Return how a search by meaning runs on the vectors held now, loading nothing:
        ``usearch-hnsw`` (the graph), ``exact-float32`` (every vector scored as float32, int8
        ones decoded first) or ``none`` (no vector to search)."""
        if not self._vectors.count():
            return "none"
        if self._native is not None:
            kind = str(self._native.search_engine()["kind"])
            return kind if self._uses_hnsw() else kind.split("-")[0] + "-exact"
        uses = self._uses_hnsw() and self._graph_paid_for()
        return "usearch-hnsw" if uses else "exact-float32"

    def settings(self) -> dict[str, Any]:
        """Return how this index is configured: the choice (``auto``, ``flat``, ``hnsw``), the
        metric, the HNSW threshold and search width, and the graph's build parameters."""
        from vrom.index.graph_file import CONNECTIVITY, GRAPH_DTYPE
        from vrom.index.hnsw import EXPANSION_ADD, EXPANSION_SEARCH

        if self._native is not None:
            engine = self._native.search_engine()
            return {
                "index": self._kind,
                "metric": self._metric,
                "hnsw_threshold": self._hnsw_threshold,
                "ef_search": self._ef_search or engine["ef_search"],
                "connectivity": engine["m"],
                "ef_construction": engine["ef_construction"],
                "graph_dtype": "f32 (pgvector)",
            }
        return {
            "index": self._kind,
            "metric": self._metric,
            "hnsw_threshold": self._hnsw_threshold,
            "ef_search": self._ef_search or EXPANSION_SEARCH,
            "connectivity": CONNECTIVITY,
            "ef_construction": EXPANSION_ADD,
            "graph_dtype": GRAPH_DTYPE,
        }

    def graph(self) -> dict[str, Any]:
        """Return what the graph file cached beside the store is (see
        `vrom.index.graph_file.graph_facts`); nothing is loaded."""
        from vrom.index.graph_file import graph_facts

        return graph_facts(self._vectors, self._cache, self._metric)

    def nearest(
        self,
        vector: npt.NDArray[np.float32],
        k: int,
        allowed: Sequence[int] | None = None,
        ef_search: int | None = None,
    ) -> list[tuple[int, float]]:
        """Return up to ``k`` (key, score) pairs nearest ``vector``, among ``allowed`` if given."""
        if self._native is not None:
            return self._native.nearest(
                vector,
                k,
                allowed,
                ef_search=ef_search or self._ef_search,
                exact=not self._uses_hnsw(),
                metric=self._metric,
            )
        from vrom.index.hnsw import GraphBehind

        try:
            index = self.current
            if self._renting is None:
                return index.search(vector, k, allowed, ef_search)
            started = time.thread_time()  # what a search costs, not its wait for a core
            try:
                return index.search(vector, k, allowed, ef_search)
            finally:
                self._exact_seconds += time.thread_time() - started
        except GraphBehind:  # too far behind to catch up: exact, and a graph built beside
            self._build_beside()
            return self.current.search(vector, k, allowed, ef_search)

    def refresh(self) -> None:
        """Catch up with vectors another process wrote (a database's own index always has)."""
        if self._native is None:
            from vrom.index.hnsw import GraphBehind

            try:
                self.current.refresh()
            except GraphBehind:
                self._build_beside()

    def close(self) -> None:
        """Let the index go, saving an HNSW graph's unsaved changes."""
        if self._index is not None:
            self._index.close()
        self._index = None
        self._chosen_at = -1


def check_ef_search(ef_search: int | None, k: int) -> None:
    """Raise `ValidationError` unless ``ef_search`` is None or an integer of at least ``k``."""
    if ef_search is None:
        return
    if isinstance(ef_search, bool) or not isinstance(ef_search, int) or ef_search < k:
        raise ValidationError(
            f"ef_search must be an integer of at least k={k}, not {shown(ef_search)}"
        )


def check_mode(mode: str) -> str:
    """Return ``mode`` if it is a search mode, else raise `ValidationError`."""
    if mode not in MODES:
        raise ValidationError(f"mode must be one of {', '.join(MODES)}, not {shown(mode)}")
    return mode
