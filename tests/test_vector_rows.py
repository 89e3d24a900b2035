"""A vector search reads chunk rows only as far as its hits need, and still returns what the
whole ranking gives: k distinct documents under duplicates and narrow filters, each at its
best chunk, in the order and with the scores of the chunk-level search."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from vrom import Collection, Embedder
from vrom.results import Hit
from vrom.store import StoredChunk

WORDS = [
    "river",
    "stone",
    "lamp",
    "garden",
    "violin",
    "harbour",
    "copper",
    "meadow",
    "lantern",
    "orchard",
]


def _sections(n: int, count: int) -> str:
    """A document of ``count`` paragraphs, each long enough to be a chunk of its own, all
    holding the document's own word ``marker{n}``: its chunks are nearer each other than any
    other document's."""
    return "\n\n".join(
        " ".join([f"marker{n}"] * 10 + [WORDS[(n + i + j) % len(WORDS)] for j in range(20)])
        for i in range(count)
    )


@pytest.fixture
def collection(tmp_path: Any) -> Iterator[Collection]:
    with Collection.open(
        "rows", Embedder.fake(256), storage=tmp_path / "rows.db", chunk_chars=200, chunk_overlap=0
    ) as opened:
        # documents of several chunks each: the nearest chunks repeat documents
        opened.add(
            {"id": f"d{n}", "text": _sections(n, 6), "metadata": {"bucket": n % 10}}
            for n in range(40)
        )
        yield opened


def _counting(collection: Collection) -> tuple[list[list[int]], list[list[int]]]:
    """Record every whole read and every light read of chunk rows the collection makes."""
    documents = collection._store.documents
    whole: list[list[int]] = []
    light: list[list[int]] = []
    get_chunks, chunk_owners = documents.get_chunks, documents.chunk_owners

    def counted_chunks(ids: Sequence[int]) -> list[StoredChunk]:
        whole.append(list(ids))
        return get_chunks(ids)

    def counted_owners(ids: Sequence[int]) -> dict[int, tuple[int, float]]:
        light.append(list(ids))
        return chunk_owners(ids)

    documents.get_chunks = counted_chunks  # type: ignore[method-assign]
    documents.chunk_owners = counted_owners  # type: ignore[method-assign]
    return whole, light


def _best_chunk_of_each_document(hits: list[Hit], k: int) -> list[tuple[str, int, float]]:
    seen: set[str] = set()
    kept = []
    for hit in hits:
        if hit.path not in seen:
            seen.add(hit.path)
            kept.append((hit.path, hit.chunk_id, hit.score))
    return kept[:k]


@pytest.mark.parametrize("where", [None, {"bucket": 3}, {"bucket": {"$in": [1, 7]}}])
@pytest.mark.parametrize("k", [1, 3, 10])
def test_per_document_vector_hits_are_the_chunk_rankings_first_per_document(
    collection: Collection, where: dict[str, Any] | None, k: int
) -> None:
    """Duplicates and filters that exclude most candidates still fill k (when k documents
    pass), and the hits are exactly the chunk-level ranking's first chunk per document."""
    corpus = collection._corpus
    passing = sum(1 for n in range(40) if where is None or _passes(n, where))
    hits = corpus.search("river lantern", k, where, "vector", per_document=True)
    chunks = corpus.search("river lantern", 240, where, "vector")  # every passing chunk
    assert len({h.path for h in chunks}) == passing
    expected = _best_chunk_of_each_document(chunks, k)
    assert [(h.path, h.chunk_id, h.score) for h in hits] == expected
    assert len(hits) == min(k, passing)


def _passes(n: int, where: dict[str, Any]) -> bool:
    wanted = where["bucket"]
    return n % 10 in (wanted["$in"] if isinstance(wanted, dict) else [wanted])


def test_one_chunk_documents_read_only_the_hits_whole(tmp_path: Any) -> None:
    """When the first k candidates are k documents, the search reads those k chunks whole,
    once, and looks up no other candidate's document."""
    with Collection.open("one", Embedder.fake(16), storage=tmp_path / "one.db") as collection:
        collection.add(
            {"id": f"d{n}", "text": f"{WORDS[n % 10]} {n} {WORDS[n % 7]}"} for n in range(60)
        )
        whole, light = _counting(collection)
        hits = collection.search("violin copper", k=5, mode="vector")
        assert len(hits) == 5
        assert len(whole) == 1 and sorted(whole[0]) == sorted(h.chunk_id for h in hits)
        assert light == []


def test_documents_of_many_chunks_look_further_only_when_short(collection: Collection) -> None:
    """The first k candidates are read whole; when they hold fewer than k documents the later
    candidates' documents are looked up light, and only the hits beyond are read whole."""
    whole, light = _counting(collection)
    hits = collection.search("marker7", k=10, mode="vector")
    assert len({h.id for h in hits}) == 10 and hits[0].id == "d7"
    assert len(whole[0]) <= 10  # the first read: the first k candidates
    read_whole = {i for ids in whole for i in ids}
    assert {h.chunk_id for h in hits} <= read_whole
    assert len(read_whole) < 20  # never every candidate of the pool whole
    assert light, "the first k candidates held fewer than k documents: looked further"
