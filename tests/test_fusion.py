"""Hybrid fusion (`vrom.search.fusion.fuse`): normalised scores, half keyword and half vector.

What it claims: each ranking counts 1 for its best candidate and 0 from its `FUSION_DEPTH`-th
down; a confident retriever is not outvoted by a flat one (where reciprocal rank fusion is);
the first hits do not depend on how many candidates were asked for; a store still being
embedded leans on keyword search; a candidate without a vector is neither helped nor hurt.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vrom.search.fusion import (
    FUSION_DEPTH,
    KEYWORD_WEIGHT,
    fuse,
    fuse_arrays,
    normalised,
    reciprocal_rank_fusion,
)

RANKINGS = given(
    st.lists(st.floats(0, 50, allow_nan=False), min_size=1, max_size=400, unique=True),
    st.lists(st.floats(-1, 1, allow_nan=False), min_size=1, max_size=400, unique=True),
    st.integers(0, 2**31),
)
"""Keyword scores, vector scores (each ranking's, up to 400) and a seed to shuffle ids with."""


def _ranked(fused: dict[str, dict[str, float]]) -> list[str]:
    return sorted(fused, key=lambda c: (-fused[c]["fused"], -fused[c]["rrf"], c))


def test_scores_are_rescaled_from_the_best_to_the_depth_th() -> None:
    ranking = [(f"c{i}", 100.0 - i) for i in range(FUSION_DEPTH + 10)]
    parts = normalised(ranking)
    assert parts["c0"] == 1.0
    assert parts[f"c{FUSION_DEPTH - 1}"] == 0.0
    assert parts["c1"] == pytest.approx(1 - 1 / (FUSION_DEPTH - 1))
    assert all(parts[f"c{i}"] == 0.0 for i in range(FUSION_DEPTH, FUSION_DEPTH + 10))
    short = normalised([("a", 3.0), ("b", 1.5), ("c", 0.75)])
    assert short == {"a": 1.0, "b": 0.5, "c": 0.25}, "all there is: the floor is 0, not the last"
    below = normalised([("a", 0.5), ("b", -0.5)])
    assert below == {"a": 1.0, "b": 0.0}, "a last score below 0 is the floor"
    assert normalised([("a", 0.4), ("b", 0.4)]) == {"a": 1.0, "b": 1.0}, "no spread: all best"
    assert normalised([]) == {}


def test_the_fused_score_is_the_weighted_sum_of_the_parts() -> None:
    keyword = [("a", 9.0), ("b", 5.0), ("c", 1.0)]
    vector = [("b", 0.9), ("d", 0.7), ("a", 0.5)]
    fused = fuse(keyword, vector)
    w = KEYWORD_WEIGHT
    assert fused["a"]["fused"] == pytest.approx(w * 1.0 + (1 - w) * 0.5 / 0.9)
    assert fused["b"]["fused"] == pytest.approx(w * 5 / 9 + (1 - w) * 1.0)
    assert fused["d"]["fused"] == pytest.approx((1 - w) * 0.7 / 0.9), "absent from keyword: 0"
    assert fused["c"]["fused"] == pytest.approx(w * 1 / 9), "absent from vector: 0"
    assert fused["b"]["bm25"] == 5.0 and fused["b"]["vector"] == 0.9, "raw scores kept"
    assert "vector" not in fused["c"] and "bm25" not in fused["d"]
    assert fused["b"]["rrf"] == pytest.approx(1 / 62 + 1 / 61), "rrf kept to order ties"


def test_a_confident_retriever_is_not_outvoted_by_a_flat_one() -> None:
    """Keyword search finds the answer far ahead of the rest; the vector ranking is nearly
    flat (short texts that all look alike) and has the answer at rank 30. Reciprocal rank
    fusion puts the documents both rankings hold near the top ahead of it; fusing scores
    keeps it first, as keyword search alone has it."""
    rng = random.Random(7)
    others = [f"doc{i}" for i in range(200)]
    keyword = [("answer", 30.0)] + [(d, 8.0 - i * 0.02) for i, d in enumerate(others)]
    flat = [(d, 0.61 - i * 0.0004) for i, d in enumerate(rng.sample(others, 200))]
    vector = [*flat[:29], ("answer", 0.599), *flat[29:]]
    assert _ranked(fuse(keyword, vector))[0] == "answer"
    rrf = reciprocal_rank_fusion([("bm25", keyword), ("vector", vector)])
    assert sorted(rrf, key=lambda c: -rrf[c]["rrf"])[0] != "answer", "RRF loses it"


def test_agreement_wins_when_neither_retriever_is_sure() -> None:
    keyword = [("x", 10.0), ("both", 9.9)] + [(f"k{i}", 9.8 - i * 0.01) for i in range(60)]
    vector = [("y", 0.80), ("both", 0.799)] + [(f"v{i}", 0.798 - i * 0.001) for i in range(60)]
    assert _ranked(fuse(keyword, vector))[0] == "both"


@settings(max_examples=200, deadline=None)
@RANKINGS
def test_the_first_hits_do_not_depend_on_how_many_candidates_were_fetched(
    keyword_scores: list[float], vector_scores: list[float], seed: int
) -> None:
    """A search for 10 hits fetches 50 candidates a retriever, one for 100 fetches 400: every
    candidate with a fused score above 0 is ranked the same from either pool."""
    rng = random.Random(seed)
    ids = [f"c{i}" for i in range(500)]
    keyword = list(
        zip(rng.sample(ids, len(keyword_scores)), sorted(keyword_scores)[::-1], strict=True)
    )
    vector = list(
        zip(rng.sample(ids, len(vector_scores)), sorted(vector_scores)[::-1], strict=True)
    )
    small, large = fuse(keyword[:FUSION_DEPTH], vector[:FUSION_DEPTH]), fuse(keyword, vector)
    positive = [c for c in small if small[c]["fused"] > 0]
    for candidate in positive:
        assert small[candidate]["fused"] == large[candidate]["fused"]
    by_fused = sorted(positive, key=lambda c: -small[c]["fused"])
    assert by_fused == sorted(positive, key=lambda c: -large[c]["fused"])


def test_a_barely_embedded_store_leans_on_keyword_search() -> None:
    keyword = [("k", 10.0), ("mid", 5.0), ("low", 1.0)]
    vector = [("v", 0.9), ("low", 0.1)]
    full, barely = fuse(keyword, vector, coverage=1.0), fuse(keyword, vector, coverage=0.01)
    assert full["v"]["fused"] == pytest.approx(1 - KEYWORD_WEIGHT)
    assert barely["v"]["fused"] == pytest.approx((1 - KEYWORD_WEIGHT) * 0.01)
    assert _ranked(barely)[:2] == ["k", "mid"], "keyword's order, as vectors are 1% there"
    assert fuse(keyword, vector, coverage=1.0) == fuse(keyword, vector), "complete: plain"


def test_a_candidate_without_a_vector_is_neither_helped_nor_hurt() -> None:
    keyword = [("new", 9.0), ("old", 5.0), ("z", 1.0)]
    vector = [("old", 0.9), ("z", 0.2)]
    fused = fuse(keyword, vector, unseen={"new"})
    assert fused["new"]["fused"] == pytest.approx(1.0), "its keyword part stands in"
    assert "vector" not in fused["new"], "no vector part invented"
    assert fused["new"]["rrf"] == pytest.approx(2 / 61)
    assert fuse(keyword, vector)["new"]["fused"] == pytest.approx(KEYWORD_WEIGHT), "else: 0"


def test_a_document_is_matched_by_its_best_chunk_in_each_ranking() -> None:
    """Document A matches the words in one chunk (a1) and the meaning in another (a2); B's one
    chunk is second in both. Chunk by chunk, b1 outranks each of A's; by document, A is
    first: matched both ways. A is cited at its best fused chunk, and its raw scores are its
    best chunks'."""
    keyword = [("a1", 9.0), ("b1", 8.5)] + [(f"k{i}", 5.0 - i * 0.01) for i in range(60)]
    vector = [("a2", 0.9), ("b1", 0.88)] + [(f"v{i}", 0.5 - i * 0.001) for i in range(60)]
    by_chunk = fuse(keyword, vector)
    assert _ranked(by_chunk)[0] == "b1"
    names = sorted({c for c, _ in (*keyword, *vector)})
    number = {c: n for n, c in enumerate(names)}
    fused = fuse_arrays(
        np.array([number[c] for c, _ in keyword]),
        np.array([s for _, s in keyword]),
        np.array([number[c] for c, _ in vector]),
        np.array([s for _, s in vector]),
    )
    document = {"a1": 0, "a2": 0, "b1": 1}  # every other chunk is its own document
    groups = np.array([document.get(names[i], 10 + i) for i in fused.ids.tolist()])
    by_document, cited = fused.by_group(groups)
    order = np.lexsort((cited, -by_document.rrf, -by_document.fused)).tolist()
    assert by_document.ids[order[:2]].tolist() == [0, 1]
    a, b = order[0], order[1]
    assert by_document.fused[a] == pytest.approx(1.0), "best in both rankings"
    assert by_document.fused[b] == pytest.approx(by_chunk["b1"]["fused"]), "one chunk: as it was"
    assert names[int(cited[a])] == "a1", "a tie between its chunks: the lower id"
    assert by_document.parts(a)["bm25"] == 9.0 and by_document.parts(a)["vector"] == 0.9
    singles = [i for i, g in enumerate(by_document.ids.tolist()) if g >= 10]
    for at in singles:  # a document of one chunk scores as its chunk
        assert by_document.fused[at] == pytest.approx(by_chunk[names[int(cited[at])]]["fused"])


def test_a_document_s_cited_chunk_is_its_best_fused_one() -> None:
    keyword = [("x", 9.0), ("y", 8.0), ("z", 1.0)]
    vector = [("y", 0.9), ("x", 0.1), ("z", 0.05)]
    fused = fuse_arrays(
        np.array([0, 1, 2]),
        np.array([s for _, s in keyword]),
        np.array([1, 0, 2]),
        np.array([s for _, s in vector]),
    )
    grouped, cited = fused.by_group(np.array([7, 7, 7]))
    assert grouped.ids.tolist() == [7] and cited.tolist() == [1], "y: high in both"
    masked = fused.take(np.array([True, False, True]))
    assert masked.ids.tolist() == [0, 2]


@settings(max_examples=100, deadline=None)
@RANKINGS
def test_the_first_documents_do_not_depend_on_how_many_candidates_were_fetched(
    keyword_scores: list[float], vector_scores: list[float], seed: int
) -> None:
    """As for chunks: a document's parts are its chunks' normalised parts, so every document
    scored above 0 from the first 50 candidates a ranking scores the same from 400."""
    rng = random.Random(seed)
    document = [rng.randrange(120) for _ in range(500)]  # 500 chunks of 120 documents
    keyword = list(
        zip(rng.sample(range(500), len(keyword_scores)), sorted(keyword_scores)[::-1], strict=True)
    )
    vector = list(
        zip(rng.sample(range(500), len(vector_scores)), sorted(vector_scores)[::-1], strict=True)
    )

    def by_document(depth: int) -> dict[int, float]:
        fused = fuse_arrays(
            np.array([i for i, _ in keyword[:depth]], dtype=np.int64),
            np.array([score for _, score in keyword[:depth]]),
            np.array([i for i, _ in vector[:depth]], dtype=np.int64),
            np.array([score for _, score in vector[:depth]]),
        )
        grouped, _ = fused.by_group(np.array([document[i] for i in fused.ids.tolist()]))
        return dict(zip(grouped.ids.tolist(), grouped.fused.tolist(), strict=True))

    small, large = by_document(FUSION_DEPTH), by_document(400)
    assert any(score > 0 for score in small.values())
    for group, score in small.items():
        if score > 0:
            assert large[group] == score


def test_a_tie_in_a_ranking_shares_one_reciprocal_rank() -> None:
    """Equal scores in a ranking share the rank of the first of them (1, 2, 2, 4): the order a
    retriever lists a tie in is not a preference RRF passes on to the ordering of equal fused
    scores."""
    fused = fuse_arrays(
        np.array([4, 3, 2, 1]),
        np.array([9.0, 5.0, 5.0, 1.0]),
        np.array([1, 2, 3, 4]),
        np.array([0.5, 0.5, 0.5, 0.5]),
    )
    rrf = dict(zip(fused.ids.tolist(), fused.rrf.tolist(), strict=True))
    assert rrf[4] == pytest.approx(1 / 61 + 1 / 61)
    assert rrf[3] == pytest.approx(1 / 62 + 1 / 61) == rrf[2], "tied in both: one rank each"
    assert rrf[1] == pytest.approx(1 / 64 + 1 / 61)
