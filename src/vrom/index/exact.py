"""Exact vector search: every vector scored against the query (numpy), optionally over a subset.

An `ExactIndex` over a store with files beside it keeps the vectors in a matrix file there
(`vrom.index.matrix_file`) and reads it memory-mapped: at 100k vectors that opens in a few ms
where decoding every vector from the store took ~340 ms, and its pages are the page cache's,
shared by every process searching the store. The file is derived data: missing, damaged, of
another store, or further behind than the store's change log reaches, it is written again
from the store. Changes since it was written are replayed in memory: each changed key's row in
the file is masked and its current vector, if it has one, is kept in a small matrix beside it,
searched too. Once those changes reach a tenth of the vectors (at least `COMPACT_CHANGES`) the
two are merged and the file is written again, as it is on `ExactIndex.close`. A store without
files (in memory, encrypted) keeps everything in memory, caught up the same way.

Rows are scored by `vrom.index.scoring`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from vrom.errors import ValidationError
from vrom.index import MATRIX_SUFFIX, METRICS, replay_limit
from vrom.index.background import BackgroundBuild
from vrom.index.cache_files import remove_stale_temporaries
from vrom.index.codec import decode
from vrom.index.matrix_file import MatrixHeader, read_matrix, write_matrix
from vrom.index.scoring import best_rows, score_rows
from vrom.store import Sidecar, Store, VectorChanges, VectorSource

MATRIX_FILE_MIN = 1_000
"""Fewer vectors than this are read from the store (a few ms), not cached in a file beside it."""
COMPACT_CHANGES = 1_000
"""Replayed changes are merged into the matrix (and its file written) at this many, or a tenth of
the vectors if more."""
MERGE_ROWS = 8_192
"""Rows are merged, decoded and written this many at a time (12 MB at 384 dimensions)."""


@dataclass(frozen=True)
class _Rows:
    """Vectors by key: ``ids`` ascending, a row of ``matrix`` for each."""

    ids: npt.NDArray[np.int64]
    matrix: npt.NDArray[np.float32]

    @classmethod
    def empty(cls) -> _Rows:
        return cls(np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32))


@dataclass(frozen=True)
class _State:
    """What a search reads, replaced whole on every change, so a search sees one state.

    ``base`` is what was read from the store or the file; ``dropped`` masks its rows changed
    since (None: none); ``added`` holds the current vectors of the changed keys that have one.
    """

    base: _Rows
    dropped: npt.NDArray[np.bool_] | None
    dropped_count: int
    added: _Rows

    @classmethod
    def of(cls, base: _Rows) -> _State:
        return cls(base, None, 0, _Rows.empty())

    def __len__(self) -> int:
        return len(self.base.ids) - self.dropped_count + len(self.added.ids)

    @property
    def dims(self) -> int:
        rows = self.added if len(self.base.ids) == self.dropped_count else self.base
        return int(rows.matrix.shape[1])

    def merged(self) -> tuple[npt.NDArray[np.int64], Iterator[npt.NDArray[np.float32]]]:
        """Return the ids of the live rows of ``base`` and ``added``, ascending, and their
        vectors in that order, `MERGE_ROWS` at a time (the whole matrix is never copied)."""
        live = None if self.dropped is None else np.flatnonzero(~self.dropped)
        base_ids = self.base.ids if live is None else self.base.ids[live]
        ids = np.concatenate([base_ids, self.added.ids])
        order = np.argsort(ids, kind="stable")
        return ids[order], self._rows_in(order, live, len(base_ids))

    def _rows_in(
        self, order: npt.NDArray[np.intp], live: npt.NDArray[np.intp] | None, from_base: int
    ) -> Iterator[npt.NDArray[np.float32]]:
        if live is None and not len(self.added.ids):  # the base as it is, in order
            for start in range(0, len(order), MERGE_ROWS):
                yield self.base.matrix[start : start + MERGE_ROWS]
            return
        for start in range(0, len(order), MERGE_ROWS):
            part = order[start : start + MERGE_ROWS]
            based = part < from_base
            block = np.empty((len(part), self.dims), dtype=np.float32)
            if based.any():
                rows = part[based]
                block[based] = self.base.matrix[rows if live is None else live[rows]]
            if not based.all():
                block[~based] = self.added.matrix[part[~based] - from_base]
            yield block


class ExactIndex:
    """All vectors of a source, each scored per query; scores are cosine/dot similarity or
    -distance (higher is better).

    ``cache`` is where the matrix file lives (None: in memory only). ``load_count`` counts the
    times this object read every vector from the store rather than open the file. With
    ``writes_beside`` the file is written in a background thread (`vrom.index.background`),
    never inside a search: the rows in memory answer meanwhile, and the first search after
    the file is written maps it instead.
    """

    def __init__(
        self,
        vectors: VectorSource,
        metric: str = "cosine",
        *,
        cache: Sidecar | None = None,
        writes_beside: bool = False,
    ) -> None:
        if metric not in METRICS:
            raise ValidationError(f"metric must be one of {', '.join(METRICS)}, not {metric!r}")
        self._vectors = vectors
        self._metric = metric
        self._cache = cache
        self._generation = -1
        self._change_number: int | None = None  # the store change the vectors reflect
        self._state = _State.of(_Rows.empty())
        self._unsaved = 0  # changes replayed since the base rows were read or written
        self._swept = False  # the stale temporaries beside the cache file were removed
        self.load_count = 0
        self._writes_beside = writes_beside
        self._writing: BackgroundBuild[bool] = BackgroundBuild("the vector matrix file")

    @classmethod
    def for_chunks(cls, store: Store, metric: str = "cosine") -> ExactIndex:
        """Return the exact index over a store's chunk vectors, cached beside it if it can be."""
        return cls(store.vectors, metric, cache=store.sidecar(MATRIX_SUFFIX))

    def __len__(self) -> int:
        self.refresh()
        return len(self._state)

    def refresh(self) -> bool:
        """Catch up with the store's vectors if they changed since; True if anything was read."""
        # Read the generation before the rows: a write in between makes the index look older
        # than it is (one needless catch-up later), never newer.
        generation = self._vectors.generation()
        written = self._writing.take()
        if written is not None and written[0] and self._open_cached():  # map it: shared pages
            self._generation = generation
            return True
        if generation == self._generation:
            return False
        if not (self._replay_current() or self._open_cached()):
            self._load()
        self._generation = generation
        return True

    def close(self) -> None:
        """Write replayed changes to the matrix file, and let the vectors go (they load again
        on the next search)."""
        if self._unsaved and self._change_number is not None:
            self._save(self._state, self._change_number)
        self._generation = -1
        self._change_number = None
        self._state = _State.of(_Rows.empty())
        self._unsaved = 0

    def rows_now(
        self,
    ) -> tuple[Callable[[], tuple[npt.NDArray[np.int64], Iterator[npt.NDArray[np.float32]]]], int]:
        """Return the vectors held now, as a function giving their ids (ascending) and rows a
        block at a time, and the store change they reflect: what a graph is built from in
        another thread (the rows are never changed in place, so reading them there is safe)."""
        self.refresh()
        assert self._change_number is not None  # set by refresh
        return self._state.merged, self._change_number

    # -- searching -------------------------------------------------------------------------

    def search(
        self,
        query: npt.NDArray[np.float32],
        k: int,
        allowed: Sequence[int] | None = None,
        ef_search: int | None = None,
    ) -> list[tuple[int, float]]:
        """Return up to ``k`` (chunk id, score) pairs, best first, among ``allowed`` ids if given.

        Equal scores go by id, lowest first. ``ef_search`` is accepted for the approximate
        index's sake and ignored: this is exact.
        """
        self.refresh()
        state = self._state
        if not len(state):
            return []
        if query.shape[-1] != state.dims:
            raise ValidationError(f"query has {query.shape[-1]} dimensions, the index {state.dims}")
        wanted = None if allowed is None else np.asarray(allowed, dtype=np.int64)
        parts = []
        if len(state.base.ids) > state.dropped_count:
            parts.append(_best_of(state.base, state.dropped, wanted, query, k, self._metric))
        if len(state.added.ids):
            parts.append(_best_of(state.added, None, wanted, query, k, self._metric))
        ids = np.concatenate([part[0] for part in parts])
        scores = np.concatenate([part[1] for part in parts])
        return [(int(ids[i]), float(scores[i])) for i in best_rows(ids, scores, k)]

    # -- keeping up with the store ---------------------------------------------------------

    def _replay_current(self) -> bool:
        """Replay the store's changes into the rows held now; False if a reload is due."""
        if self._change_number is None:
            return False
        changes = self._vectors.changes(self._change_number)
        if changes is None or len(changes.keys) > replay_limit(len(self._state)):
            return False
        return self._replay(changes)

    def _replay(self, changes: VectorChanges) -> bool:
        """Mask each changed key's row and keep its current vector beside them, if it has one;
        False (nothing replayed) when the new vectors have other dimensions than the old."""
        if changes.keys:
            keys = np.unique(np.asarray(changes.keys, dtype=np.int64))
            state = _with_changes(self._state, keys, self._current(changes.keys))
            if state is None:
                return False  # another model's vectors: read them all again
            self._state = state
            self._unsaved += len(keys)
        self._change_number = changes.latest
        if self._unsaved >= max(COMPACT_CHANGES, len(self._state) // 10):
            self._compact()
        return True

    def _current(self, keys: Sequence[int]) -> _Rows:
        """Return the vectors these keys have now (a removed one has none)."""
        current = self._vectors.of(keys)
        if not current:
            return _Rows.empty()
        ids = np.fromiter(current, dtype=np.int64, count=len(current))
        order = np.argsort(ids)
        return _Rows(ids[order], decode(list(current.values()), self._vectors.encoding())[order])

    def _open_cached(self) -> bool:
        """Open the matrix file and catch it up with the store; True if it could."""
        if self._cache is None:
            return False
        if not self._swept:
            self._swept = True
            remove_stale_temporaries(self._cache.path)
        stored = read_matrix(self._cache.path)
        if stored is None or stored.header.store != self._vectors.identity():
            return False
        if stored.header.encoding != self._vectors.encoding():
            return False
        changes = self._vectors.changes(stored.header.changes)
        # a file newer than the store's latest change is from another history (a restored
        # backup of the store): it cannot be caught up
        if changes is None or changes.latest < stored.header.changes:
            return False
        if len(changes.keys) > replay_limit(len(stored.ids)):
            return False
        self._state = _State.of(_Rows(stored.ids, stored.matrix))
        self._change_number = stored.header.changes
        self._unsaved = 0
        return self._replay(changes)

    def _load(self, *, save: bool = True) -> None:
        """Read every vector from the store, and write the matrix file from them if ``save``."""
        # the change number is read before the rows: a change in between is replayed later
        change_number = self._vectors.change_number()
        rows = self._vectors.rows()  # by key
        self.load_count += 1
        self._state = _State.of(_decoded(rows, self._vectors.encoding()))
        self._change_number = change_number
        self._unsaved = 0
        if save:
            self._save_and_map(change_number)

    def _compact(self) -> None:
        """Merge the replayed changes into the matrix, and write it to the file."""
        assert self._change_number is not None
        self._unsaved = 0
        if not self._save_and_map(self._change_number):  # no file: merged in memory
            ids, blocks = self._state.merged()
            matrix = np.empty((len(ids), self._state.dims), dtype=np.float32)
            for start, block in zip(range(0, len(ids), MERGE_ROWS), blocks, strict=True):
                matrix[start : start + len(block)] = block
            self._state = _State.of(_Rows(ids, matrix))

    def wait_for_file(self) -> None:
        """Wait for a matrix file being written beside the searches, if one is (for tests and
        benches: searches never wait)."""
        self._writing.wait()

    def _save_and_map(self, change_number: int) -> bool:
        """Write the rows held to the matrix file and search its mapping instead; True if the
        file was written (or, with ``writes_beside``, is being written)."""
        count = len(self._state)
        if self._writes_beside and self._cache is not None and count >= MATRIX_FILE_MIN:
            state, header = self._state, self._header(change_number)
            self._writing.start(lambda: self._write(state, header))
            return True
        if not self._save(self._state, change_number):
            return False
        assert self._cache is not None
        self._state = _State.of(_Rows.empty())  # let the old rows go first: no two copies held
        stored = read_matrix(self._cache.path)
        if stored is None or (stored.header.changes, len(stored.ids)) != (change_number, count):
            self._load(save=False)  # unreadable, or another process saved another state meanwhile
        else:
            self._state = _State.of(_Rows(stored.ids, stored.matrix))
        return True

    def _header(self, change_number: int) -> MatrixHeader:
        return MatrixHeader(self._vectors.identity(), change_number, self._vectors.encoding())

    def _save(self, state: _State, change_number: int) -> bool:
        """Write the live rows of ``state`` to the matrix file if there is one to write; True if
        they were."""
        if self._cache is None:
            return False
        if len(state) < MATRIX_FILE_MIN:
            self._cache.path.unlink(missing_ok=True)  # a stale file would only be read in vain
            return False
        if not self._write(state, self._header(change_number)):
            return False
        self._unsaved = 0
        return True

    def _write(self, state: _State, header: MatrixHeader) -> bool:
        """Write the live rows of ``state`` to the matrix file; True if it was written. It
        reads nothing from the store and changes nothing here (it runs in any thread)."""
        assert self._cache is not None
        ids, blocks = state.merged()
        try:
            write_matrix(self._cache, header, ids, blocks)
        except OSError as exc:
            warnings.warn(
                f"cannot save the vector matrix cache {self._cache.path}: {exc}; the vectors "
                "will be read from the store again the next time it is opened",
                RuntimeWarning,
                stacklevel=5,
            )
            return False
        return True


def _decoded(rows: list[tuple[int, bytes]], encoding: str) -> _Rows:
    """Return the rows read from a store as ids and a float32 matrix; ``rows`` is emptied as it
    is decoded, so the bytes and the matrix are not both held whole."""
    ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
    if not rows:
        return _Rows.empty()
    matrix: npt.NDArray[np.float32] | None = None
    for start in range(0, len(ids), MERGE_ROWS):
        block = decode([row[1] for row in rows[:MERGE_ROWS]], encoding)
        del rows[:MERGE_ROWS]
        if matrix is None:
            matrix = np.empty((len(ids), block.shape[1]), dtype=np.float32)
        matrix[start : start + len(block)] = block
    assert matrix is not None
    return _Rows(ids, matrix)


def _with_changes(state: _State, keys: npt.NDArray[np.int64], current: _Rows) -> _State | None:
    """Return ``state`` with the rows of ``keys`` masked or replaced by their ``current``
    vectors; None when those have other dimensions than the rows kept."""
    dropped = state.dropped
    changed = _present(state.base.ids, keys)
    if len(changed):
        dropped = np.zeros(len(state.base.ids), dtype=bool) if dropped is None else dropped.copy()
        dropped[changed] = True
    kept = state.added
    if len(kept.ids):
        stays = ~np.isin(kept.ids, keys)
        kept = _Rows(kept.ids[stays], kept.matrix[stays])
    added = _union(kept, current)
    dropped_count = 0 if dropped is None else int(np.count_nonzero(dropped))
    changed_state = _State(state.base, dropped, dropped_count, added)
    live_base = len(state.base.ids) > dropped_count
    if live_base and len(added.ids) and added.matrix.shape[1] != state.base.matrix.shape[1]:
        return None
    return changed_state


def _union(first: _Rows, second: _Rows) -> _Rows:
    """Return the rows of both (their keys are distinct), by key."""
    if not len(first.ids):
        return second
    if not len(second.ids):
        return first
    ids = np.concatenate([first.ids, second.ids])
    order = np.argsort(ids, kind="stable")
    return _Rows(ids[order], np.concatenate([first.matrix, second.matrix])[order])


def _best_of(
    rows: _Rows,
    dropped: npt.NDArray[np.bool_] | None,
    wanted: npt.NDArray[np.int64] | None,
    query: npt.NDArray[np.float32],
    k: int,
    metric: str,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """Return the ids and scores of the ``k`` best of ``rows`` not ``dropped``, among
    ``wanted`` ids if given (in no particular order)."""
    if wanted is None:
        ids, scores = rows.ids, score_rows(rows.matrix, query, metric)
        if dropped is not None:
            ids, scores = ids[~dropped], scores[~dropped]
    else:
        found = _present(rows.ids, wanted)
        if dropped is not None:
            found = found[~dropped[found]]
        ids, scores = rows.ids[found], score_rows(rows.matrix[found], query, metric)
    best = best_rows(ids, scores, k)
    return ids[best], scores[best]


def _present(ids: npt.NDArray[np.int64], wanted: npt.NDArray[np.int64]) -> npt.NDArray[np.intp]:
    """Return the rows of sorted ``ids`` that hold one of ``wanted`` (missing ones are skipped)."""
    rows = np.searchsorted(ids, wanted)
    inside = rows < len(ids)
    rows, wanted = rows[inside], wanted[inside]
    found: npt.NDArray[np.intp] = rows[ids[rows] == wanted]
    return found
