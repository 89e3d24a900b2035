"""Issue 26 item 14, speed: a sync writes a batch of notes with `put_many` (on PostgreSQL a few
statements and ``COPY``, `vrom.store.postgres_batch`) and its vectors inside `loading` (into
a namespace without vectors, the HNSW index is built once at the end). What they write is what
`put` and `put` of vectors write, on both backends; speed itself is measured on the hub, not
asserted here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from postgres_server import StoreSpot
from store_records import note_record

from vrom.filters import Instant
from vrom.store import (
    ChunkRecord,
    Condition,
    DocumentWrite,
    KeywordQuery,
    LinkRecord,
    Store,
    Where,
)
from vrom.store.postgres_schema import NAMESPACE_SCHEMA_PREFIX, REGISTRY_SCHEMA


@pytest.fixture
def stores(store_spot: StoreSpot) -> Iterator[tuple[Store, Store]]:
    """Two stores on this test's backend: one written note by note, one a batch at a time."""
    other = StoreSpot(
        store_spot.backend,
        store_spot.location.replace("store.db", "batched.db"),
        None if store_spot.namespace is None else store_spot.namespace + " batched",
    )
    one, many = store_spot.open(), other.open()
    yield one, many
    one.close()
    many.close()


def _writes(version: int) -> list[DocumentWrite]:
    """Notes of every kind: chunks (a collection's slices of its text too), links, duplicate
    tags, nested frontmatter fields; ``version`` 2 changes some and moves one."""
    text = "Alpha beta gamma. Delta epsilon."
    writes = [
        DocumentWrite(
            note_record(
                f"n{i}.md",
                title=f"Note {i} v{version}",
                status="active",
                n={"k": i, "on": i % 2 == 0},
                due="2026-04-15",
                score=i / 3,
            ),
            [
                ChunkRecord(0, "Top", f"first chunk {i} v{version}", 0, 10, f"h{i}a{version}"),
                ChunkRecord(1, "Top > Sub", f"second chunk {i}", 10, 20, f"h{i}b"),
            ],
            [LinkRecord("wikilink", "Other", "other", "Part", "alias", 0)],
            ["tag", "tag", f"t{i}"],
        )
        for i in range(5)
    ]
    writes.append(
        DocumentWrite(
            note_record("doc", text=text),
            [
                ChunkRecord(0, "", text[:18], 0, 18, "d0"),
                ChunkRecord(1, "", text[18:], 18, 32, "d1"),
            ],
            [],
            [],
        )
    )
    return writes


def _contents(store: Store) -> dict[str, Any]:
    docs = store.documents
    held: dict[str, Any] = {}
    for path, state in docs.states().items():
        doc = docs.get(state.document_id)
        assert doc is not None
        held[path] = (
            doc.title,
            dict(doc.frontmatter),
            [
                (c.position, c.heading_path, c.text, c.char_start, c.char_end, c.content_hash)
                for c in docs.chunks_of(state.document_id)
            ],
            [(c.prev_id is None, c.next_id is None) for c in docs.chunks_of(state.document_id)],
            [link for _, link in docs.links(sources=[state.document_id])],
            docs.tags_of(state.document_id),
            docs.texts([state.document_id]),
        )
    return held


def test_put_many_writes_what_put_writes_note_by_note(stores: tuple[Store, Store]) -> None:
    one, many = stores
    for version in (1, 2):
        held = one.documents.states()
        batch = [
            DocumentWrite(
                w.document,
                w.chunks,
                w.links,
                w.tags,
                held[w.document.path].document_id if w.document.path in held else None,
            )
            for w in _writes(version)
        ]
        for write in batch:
            one.documents.put(
                write.document, write.chunks, write.links, write.tags, write.document_id
            )
        held_many = many.documents.states()
        ids = many.documents.put_many(
            [
                DocumentWrite(
                    w.document,
                    w.chunks,
                    w.links,
                    w.tags,
                    held_many[w.document.path].document_id
                    if w.document.path in held_many
                    else None,
                )
                for w in batch
            ]
        )
        assert ids == [many.documents.states()[w.document.path].document_id for w in batch]
        assert _contents(many) == _contents(one)
        assert many.documents.chunk_count() == one.documents.chunk_count() == 12
        for condition in (
            Condition("status", "eq", "active"),
            Condition("n.k", "gte", 2),
            Condition("n.on", "eq", True),
            Condition("due", "lt", Instant.of("2026-05-01T00:00:00Z")),
            Condition("score", "gt", 0.5),
        ):
            where = Where(conditions=(condition,))
            found = [
                many.documents.get_chunks([i])[0].path
                for i in many.documents.chunk_ids_matching(where)
            ]
            expected = [
                one.documents.get_chunks([i])[0].path
                for i in one.documents.chunk_ids_matching(where)
            ]
            assert found and sorted(found) == sorted(expected), condition
        for word in ("gamma", "v2", "Sub"):
            query = KeywordQuery(terms=(word,))
            assert len(many.documents.keyword_search(query, 20)) == len(
                one.documents.keyword_search(query, 20)
            ), word
    assert many.documents.put_many([]) == []


def test_put_many_of_one_path_twice_writes_as_put_does(stores: tuple[Store, Store]) -> None:
    one, many = stores
    first, second = _writes(1)[0], _writes(2)[0]
    for write in (first, second):
        one.documents.put(write.document, write.chunks, write.links, write.tags)
    many.documents.put_many([first, second])
    assert _contents(many) == _contents(one)


def _hnsw_indexes(url: str, namespace: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            f"SELECT count(*) FROM pg_indexes i JOIN {REGISTRY_SCHEMA}.namespaces n"
            f" ON i.schemaname = '{NAMESPACE_SCHEMA_PREFIX}' || n.id WHERE n.name = %s"
            " AND i.indexdef ILIKE '%%USING hnsw%%' AND i.tablename = 'vectors'",
            (namespace,),
        ).fetchone()
        assert row is not None
        return int(row[0])


def test_vectors_loaded_into_an_empty_store_get_their_index_once_at_the_end(
    store_spot: StoreSpot,
) -> None:
    store = store_spot.open()
    try:
        ids = store.documents.put_many(_writes(1))
        chunks = [c.chunk_id for i in ids for c in store.documents.chunks_of(i)]
        rng = np.random.default_rng(7)
        vectors = [(c, rng.standard_normal(8).astype("<f4").tobytes()) for c in chunks]
        with store.vectors.loading():
            assert store.vectors.put(vectors[:5]) == 5
            assert store.vectors.put([*vectors[5:], vectors[0]]) == len(vectors) - 4
        if store_spot.namespace is not None:
            assert _hnsw_indexes(store_spot.location, store_spot.namespace) == 1
        assert store.vectors.of(chunks) == dict(vectors)
        with store.vectors.loading():  # a store with vectors keeps its index as it is
            assert store.vectors.put(vectors[:1]) == 1
        if store_spot.namespace is not None:
            assert _hnsw_indexes(store_spot.location, store_spot.namespace) == 1
    finally:
        store.close()


def _search_vectors(url: str, namespace: str) -> list[tuple[str, int, str]]:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            f"SELECT id FROM {REGISTRY_SCHEMA}.namespaces WHERE name = %s", (namespace,)
        ).fetchone()
        assert row is not None
        return [
            (str(path), int(position), str(search))
            for path, position, search in conn.execute(
                f"SELECT d.path, c.position, c.search::text FROM {NAMESPACE_SCHEMA_PREFIX}{row[0]}"
                f".chunks c JOIN {NAMESPACE_SCHEMA_PREFIX}{row[0]}.documents d"
                " ON d.id = c.document_id ORDER BY d.path, c.position"
            )
        ]


@pytest.mark.parametrize("store_spot", ["postgresql"], indirect=True)  # its search vectors
def test_put_many_computes_each_chunks_search_vector_as_put_does(
    stores: tuple[Store, Store], store_spot: StoreSpot
) -> None:
    """The search vectors `put_many` has computed on a second connection, a slice of notes at a
    time, and inserted from their text are the ones `put` computes in its own statement."""
    assert store_spot.namespace is not None
    one, many = stores
    texts = (
        "Crème brûlée, naïve café",
        "東京の天気は晴れ",
        "",
        "the running runners ran",
        "a-b c",
        "it's O'Brien's \\back\\slash 'quoted' \"said\" x:1A",
    )
    writes = [
        DocumentWrite(
            note_record(f"s{i:03}.md", title=f"Title {texts[i % len(texts)]} {i}"),
            [
                ChunkRecord(0, "", texts[(i + 1) % len(texts)], 0, 9, f"a{i}"),
                ChunkRecord(1, "Top > Café", texts[(i + 2) % len(texts)], 9, 19, f"b{i}"),
            ],
            [],
            [],
        )
        for i in range(150)  # three slices of `postgres_batch.SLICE_NOTES`
    ]
    for write in writes:
        one.documents.put(write.document, write.chunks, write.links, write.tags)
    many.documents.put_many(writes)
    url, namespace = store_spot.location, store_spot.namespace
    by_put, by_put_many = (
        _search_vectors(url, namespace),
        _search_vectors(url, namespace + " batched"),
    )
    assert len(by_put) == 300
    assert by_put_many == by_put
    assert all(search for _, _, search in by_put)  # each has its title's lexemes at least
