"""BM25 over an in-memory copy of a store's keyword index, scoring exactly as SQLite's FTS5 does.

FTS5 ranks a query by computing ``bm25()`` for every matching row on disk: ~1.2 µs a row, so a
query whose terms match 10,000 chunks costs milliseconds before any hit is built. This index
holds the same postings in numpy arrays (`vrom.store.KeywordPostings`) and scores a plain-term
query with vectorised arithmetic, term by term in query order, with FTS5's formula and
constants, so the scores are the same doubles FTS5 computes:

    score(chunk) = Σ_term idf(term) · f·(k1 + 1) / (f + k1·(1 − b + b·|chunk| / avgdl))
    idf(term)    = ln((N − n + 0.5) / (n + 0.5)), or 1e-6 where that is not positive

with ``f`` the term's column-weighted frequency in the chunk, ``N`` the index's rows, ``n`` the
rows holding the term, ``avgdl`` its tokens over ``N``; k1 = 1.2, b = 0.75 (FTS5's). Rows come
best score first, ties by chunk id, as the store's own SQL orders them.

Memory: 12 bytes a posting (a 4-byte chunk row and an 8-byte term-frequency part) and 32 bytes
a chunk, plus the vocabulary (a dict of its terms); see `KeywordIndex.nbytes`. A term held by half
the rows or more (`KeywordPostings.floor_terms`: FTS5's floor IDF) is held as one dense array of
its weighted frequency by chunk instead, a byte a chunk for most, and its term-frequency parts are
computed when a query holds it, with the same operations: the longest posting lists cost 1–2
bytes a chunk rather than 12 a posting, and every plain-term query is answered here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from vrom.store import KeywordPostings, KeywordRow

K1, B = 1.2, 0.75
"""FTS5's bm25() constants."""
_BLOCK = 1 << 18
"""Postings turned into index rows at a time (~6 MB of temporaries)."""
MIN_IDF = 1e-6
"""FTS5's IDF for a term in at least half the rows (where the formula is not positive)."""


class KeywordIndex:
    """A store's keyword index in memory, as of `version`; see the module docstring.

    It takes over the arrays of the `KeywordPostings` it is made from (rewriting them in
    place): that record is spent once the index exists.
    """

    def __init__(self, postings: KeywordPostings) -> None:
        self.version = postings.version
        self._chunk_ids: npt.NDArray[np.int64] = np.asarray(postings.chunk_ids, dtype=np.int64)
        self._document_ids = np.asarray(postings.document_ids, dtype=np.int64)
        self._human_relevance = np.asarray(postings.human_relevance, dtype=np.float64)
        # k1·(1 − b + b·|chunk| / avgdl) per chunk, FTS5's operations in its order: a posting's
        # saturation adds its frequency to it
        saturation = np.asarray(postings.chunk_lengths, dtype=np.float64)
        self._rows_total = postings.rows
        self._average_length = postings.tokens / postings.rows if postings.rows else 0.0
        saturation *= B
        saturation /= self._average_length or 1.0
        saturation += 1 - B
        saturation *= K1
        self._saturation: npt.NDArray[np.float64] = saturation
        starts = np.asarray(postings.term_starts, dtype=np.int64)
        self._hits = np.diff(starts)  # rows holding each term, orphans included
        # The pair arrays become the index's own, in place and a block at a time, so a copy
        # needs little memory beyond them: chunk ids turn into chunk rows, frequencies into
        # each posting's term-frequency part, FTS5's expression operation by operation (it
        # depends on the chunk and the totals only; a query multiplies it by its term's IDF;
        # a + b and a * b are the same doubles as b + a and b * a).
        rows = np.asarray(postings.pair_chunks, dtype=np.int32)
        parts = np.asarray(postings.pair_frequencies, dtype=np.float64)
        kept = np.ones(len(rows), dtype=bool)
        last = max(len(self._chunk_ids) - 1, 0)
        for start in range(0, len(rows), _BLOCK):
            block = slice(start, start + _BLOCK)
            at = np.minimum(np.searchsorted(self._chunk_ids, rows[block]), last)
            if len(self._chunk_ids):
                # a posting whose chunk is gone from the chunks table still counts for its
                # term's document frequency (FTS5 counts it), but is never returned
                kept[block] = self._chunk_ids[at] == rows[block]
            else:
                kept[block] = False
            rows[block] = at
            saturated = saturation[at]
            saturated += parts[block]
            parts[block] *= K1 + 1.0
            parts[block] /= saturated
        if not kept.all():
            rows, parts = rows[kept], parts[kept]
        self._starts = np.concatenate(([0], np.cumsum(kept)))[starts]
        self._rows: npt.NDArray[np.int32] = rows
        self._term_frequencies: npt.NDArray[np.float64] = parts
        self._terms = {term: number for number, term in enumerate(postings.terms)}
        self._floor: dict[str, npt.NDArray[np.generic]] = dict(
            zip(postings.floor_terms, postings.floor_frequencies, strict=True)
        )

    def __len__(self) -> int:
        return len(self._chunk_ids)

    @property
    def nbytes(self) -> int:
        """Return the bytes the arrays hold (the vocabulary dict adds ~100 bytes a term)."""
        arrays = (
            self._chunk_ids,
            self._document_ids,
            self._human_relevance,
            self._saturation,
            self._starts,
            self._hits,
            self._rows,
            self._term_frequencies,
            *self._floor.values(),
        )
        return sum(int(array.nbytes) for array in arrays)

    @property
    def term_count(self) -> int:
        """Return how many distinct terms the index holds."""
        return len(self._terms) + len(self._floor)

    def rank(
        self, tokens: Sequence[str], limit: int, allowed: Sequence[int] | None = None
    ) -> list[KeywordRow]:
        """Return up to ``limit`` chunks holding any of ``tokens``, best BM25 first (ties by chunk
        id), among the ``allowed`` chunk ids if given; one query term per token, in order."""
        scores = self._scores(tokens)
        if scores is None:
            return []
        best = self._best(scores, limit, allowed)
        return self._keyword_rows(best, scores[best])

    def matches(self, tokens: Sequence[str]) -> _Matches:
        """Return the query's matches (`vrom.store.RankedMatches`: the best by score, ties by
        id, and those tied with a score), scored once."""
        scores = self._scores(tokens)
        if scores is None:  # no row holds a token: nothing matches
            scores = np.zeros(len(self._chunk_ids), dtype=np.float64)
        return _Matches(self, scores)

    def rank_with_prior(
        self,
        tokens: Sequence[str],
        k: int,
        pool: int,
        allowed: Sequence[int] | None,
        *,
        per_document: bool,
        spread: float,
    ) -> tuple[list[tuple[float, KeywordRow]], bool]:
        """Return the ``k`` best (score, row) among the ``pool`` best by BM25 (as `rank`
        gives them), the score BM25 times the prior ``1 + spread·(relevance − 0.5)``, best
        first, ties by chunk id; ``per_document`` keeps each document's best only. And whether
        the pool was full (more chunks match). In numpy: only the kept rows become objects."""
        scores = self._scores(tokens)
        if scores is None:
            return [], False
        best = self._best(scores, pool, allowed)
        final = scores[best] * (1.0 + spread * (self._human_relevance[best] - 0.5))
        order = np.lexsort((self._chunk_ids[best], -final))
        kept, final = best[order], final[order]
        if per_document:
            _, firsts = np.unique(self._document_ids[kept], return_index=True)
            firsts.sort()
            kept, final = kept[firsts], final[firsts]
        kept, final = kept[:k], final[:k]
        ranked = list(zip(final.tolist(), self._keyword_rows(kept, scores[kept]), strict=True))
        return ranked, len(best) == pool

    def _best(
        self,
        scores: npt.NDArray[np.float64],
        limit: int,
        allowed: Sequence[int] | None,
        held: npt.NDArray[np.intp] | None = None,
    ) -> npt.NDArray[np.intp]:
        """Return the rows of the ``limit`` best nonzero ``scores``, best first, ties by id
        (``held``: the nonzero rows, if known)."""
        candidates = nonzero_rows(scores) if held is None else held
        if allowed is not None:
            candidates = candidates[self._allowed_rows(allowed)[candidates]]
        if len(candidates) > limit:
            # every candidate scoring at least the limit-th best: ties at the cut stay in play
            threshold = np.partition(scores[candidates], len(candidates) - limit)[-limit]
            candidates = candidates[scores[candidates] >= threshold]
        order = np.lexsort((self._chunk_ids[candidates], -scores[candidates]))[:limit]
        best: npt.NDArray[np.intp] = candidates[order]
        return best

    def _keyword_rows(
        self, best: npt.NDArray[np.intp], scores: npt.NDArray[np.float64]
    ) -> list[KeywordRow]:
        """Return the keyword rows of chunk rows ``best`` with their BM25 ``scores``."""
        return list(
            map(
                KeywordRow,
                self._chunk_ids[best].tolist(),
                self._document_ids[best].tolist(),
                self._human_relevance[best].tolist(),
                scores.tolist(),
            )
        )

    def owners(self, chunk_ids: Sequence[int]) -> dict[int, tuple[int, float]]:
        """Return chunk id → (document id, human relevance) for the ids the index holds."""
        wanted = np.asarray(chunk_ids, dtype=np.int64)
        if not len(wanted) or not len(self._chunk_ids):
            return {}
        at = np.minimum(np.searchsorted(self._chunk_ids, wanted), len(self._chunk_ids) - 1)
        found = self._chunk_ids[at] == wanted
        at = at[found]
        documents, priors = self._document_ids[at].tolist(), self._human_relevance[at].tolist()
        return dict(zip(wanted[found].tolist(), zip(documents, priors, strict=True), strict=True))

    def _scores(self, tokens: Sequence[str]) -> npt.NDArray[np.float64] | None:
        """Return every chunk's BM25 for the query (0 where no token is held), or None.

        One IDF-weighted term-frequency part per posting, added chunk by chunk in query order
        from 0, as FTS5 adds its phrases' parts: the sums are the same doubles.
        """
        rows: list[npt.NDArray[np.integer]] = []
        parts: list[npt.NDArray[np.float64]] = []
        for token in tokens:
            term = self._terms.get(token)
            if term is None:
                frequencies = self._floor.get(token)
                if frequencies is not None:
                    held = nonzero_rows(frequencies)
                    rows.append(held)
                    parts.append(MIN_IDF * self._floor_parts(held, frequencies[held]))
                continue  # else held by no row: FTS5 adds 0 for it
            start, end = self._starts[term], self._starts[term + 1]
            hits = float(self._hits[term])
            idf = math.log((0.5 + self._rows_total - hits) / (0.5 + hits))  # C's log, as FTS5
            rows.append(self._rows[start:end])
            parts.append((idf if idf > 0.0 else MIN_IDF) * self._term_frequencies[start:end])
        if not rows:
            return None
        if len(rows) == 1:
            scores = np.zeros(len(self._chunk_ids), dtype=np.float64)
            scores[rows[0]] = parts[0]
            return scores
        # bincount adds each chunk's parts in the order given: query order
        summed = np.bincount(
            np.concatenate(rows), np.concatenate(parts), minlength=len(self._chunk_ids)
        )
        return summed.astype(np.float64, copy=False)  # weighted counts are float64 already

    def _floor_parts(
        self, held: npt.NDArray[np.intp], frequencies: npt.NDArray[np.generic]
    ) -> npt.NDArray[np.float64]:
        """Return a floor term's term-frequency parts in the chunk rows ``held``, operation by
        operation as the other terms' were made (`__init__`)."""
        weighted = frequencies.astype(np.float64)
        saturated = self._saturation[held]
        saturated += weighted
        weighted *= K1 + 1.0
        weighted /= saturated
        return weighted

    def _allowed_rows(self, allowed: Sequence[int]) -> npt.NDArray[np.bool_]:
        """Return a mask of the chunk rows whose ids are in ``allowed``."""
        mask = np.zeros(len(self._chunk_ids), dtype=bool)
        wanted = np.asarray(allowed, dtype=np.int64)
        if len(wanted) and len(self._chunk_ids):
            at = np.minimum(np.searchsorted(self._chunk_ids, wanted), len(self._chunk_ids) - 1)
            mask[at[self._chunk_ids[at] == wanted]] = True
        return mask


def nonzero_rows(values: npt.NDArray[Any]) -> npt.NDArray[np.intp]:
    """Return the positions of the nonzero ``values``, in order: numpy finds them 5-8x faster
    in a boolean array than in a float or integer one (0.1 against 0.8 ms over 100k rows)."""
    rows: npt.NDArray[np.intp] = np.flatnonzero(values != 0)
    return rows


class _Matches:
    """One query's scores over a `KeywordIndex`, ranked as FTS5 ranks them (`RankedMatches`)."""

    def __init__(self, index: KeywordIndex, scores: npt.NDArray[np.float64]) -> None:
        self._index, self._scores = index, scores
        self._held = nonzero_rows(scores)  # the rows matching: one pass over every row

    def best(self, limit: int) -> list[tuple[int, float]]:
        best = self._index._best(self._scores, limit, None, self._held)
        ids = self._index._chunk_ids[best].tolist()
        return list(zip(ids, self._scores[best].tolist(), strict=True))

    def tied(self, score: float) -> list[int]:
        held = self._held[self._scores[self._held] == score]  # none for 0: held are nonzero
        tied: list[int] = self._index._chunk_ids[held].tolist()
        return tied
