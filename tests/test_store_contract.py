"""The store roles' contract beyond tests/test_store.py, on both backends (``store_spot``):
keyword query syntax and CJK, nested and date filters, listings, document texts, vectors and
their change log, nearest-vector search, and memories. Every test runs on SQLite and on
PostgreSQL and expects the same answers."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from postgres_server import StoreSpot
from store_records import note_record

from vrom.errors import ValidationError
from vrom.filters import AllOf, Instant, parse_filter
from vrom.store import (
    MEMORY_FIELDS,
    ChunkRecord,
    Condition,
    DocumentWrite,
    KeywordQuery,
    LinkRecord,
    MemoryFilter,
    MemoryHead,
    MemoryRecord,
    NearestVectors,
    Store,
    Where,
)


@pytest.fixture
def store(store_spot: StoreSpot) -> Iterator[Store]:
    s = store_spot.open()
    yield s
    s.close()


def _chunks(*texts: str, heading: str = "H", title: str = "T") -> list[ChunkRecord]:
    """Chunks of these texts; each one's embedded input is its ``title``, heading and text."""
    return [
        ChunkRecord(i, heading, t, 0, len(t), f"c-{t}", f"in-{title}-{heading}-{t}")
        for i, t in enumerate(texts)
    ]


def _paths(store: Store, rows: list) -> list[str]:  # type: ignore[type-arg]
    return [c.path for c in store.documents.get_chunks([r.chunk_id for r in rows])]


def _unit(*values: float) -> bytes:
    vector = np.asarray(values, dtype="<f4")
    return (vector / np.linalg.norm(vector)).astype("<f4").tobytes()


def test_keyword_syntax_words_phrases_prefixes_and_exclusions(store: Store) -> None:
    store.documents.put(note_record("a.md"), _chunks("the cloud backup runs nightly"), [], [])
    store.documents.put(note_record("b.md"), _chunks("backup to a disk, running weekly"), [], [])
    store.documents.put(note_record("c.md"), _chunks("nothing relevant: a cloudy sky"), [], [])

    def paths(**query: tuple[str, ...]) -> list[str]:
        return sorted(_paths(store, store.documents.keyword_search(KeywordQuery(**query), 10)))

    assert paths(terms=("backup",)) == ["a.md", "b.md"]
    assert paths(terms=("backup",), excluded=("cloud",)) == ["b.md"]
    assert paths(phrases=("cloud backup",)) == ["a.md"]
    assert paths(phrases=("backup cloud",)) == [], "a phrase keeps its order"
    assert paths(terms=("cloud*",)) == ["a.md", "c.md"]
    assert paths(terms=("run",)) == ["a.md", "b.md"], "words are stemmed: run finds running"
    assert paths(terms=("the",)) == ["a.md"], "no stop words: every word is searchable"
    assert paths(terms=("disk", "sky")) == ["b.md", "c.md"], "any word may match"
    for hostile in ("'", '"', "a'b", "x:*", "!", "&|", "\\", "(", "<->", "NOT", "*"):
        store.documents.keyword_search(KeywordQuery(terms=(hostile,)), 5)
        store.documents.keyword_search(KeywordQuery(phrases=(hostile + " y",)), 5)


def test_title_beats_heading_beats_body(store: Store) -> None:
    store.documents.put(note_record("title.md", title="Gardening"), _chunks("plain words"), [], [])
    store.documents.put(
        note_record("heading.md", title="X"), _chunks("plain words", heading="Gardening"), [], []
    )
    store.documents.put(note_record("body.md", title="Y"), _chunks("plain words gardening"), [], [])
    rows = store.documents.keyword_search(KeywordQuery(terms=("gardening",)), 10)
    assert _paths(store, rows) == ["title.md", "heading.md", "body.md"]
    assert rows[0].bm25 > rows[1].bm25 > rows[2].bm25 > 0, "higher is better"


def test_cjk_words_are_found_inside_sentences(store: Store) -> None:
    store.documents.put(
        note_record("tokyo.md"), _chunks("東京タワーに行きました。京都も楽しかった。"), [], []
    )
    store.documents.put(
        note_record("seoul.md"), _chunks("서울에서 맛있는 음식을 먹었습니다."), [], []
    )

    def paths(term: str) -> list[str]:
        return _paths(store, store.documents.keyword_search(KeywordQuery(terms=(term,)), 10))

    assert paths("京都") == ["tokyo.md"]
    assert paths("タワー") == ["tokyo.md"]
    assert paths("東") == ["tokyo.md"], "a single character is the prefix of a bigram"
    assert paths("음식") == ["seoul.md"]
    assert paths("大阪") == []


def test_diacritics_are_folded(store: Store) -> None:
    store.documents.put(note_record("cafe.md"), _chunks("un café crème, naïve"), [], [])
    for term in ("cafe", "café", "naive"):
        assert len(store.documents.keyword_search(KeywordQuery(terms=(term,)), 5)) == 1, term


def test_where_reaches_nested_fields_lists_and_dates(store: Store) -> None:
    store.documents.put(
        note_record(
            "a.md",
            generated={"by": "tool", "at": "2026-03-01T12:00:00+02:00"},
            sources=[{"resource": "r1"}, {"resource": "r2"}],
            verified={"people": ["ann", "bo"]},
            n=3,
            flag=True,
            big=2**62 + 1,
        ),
        _chunks("common"),
        [],
        [],
    )
    store.documents.put(
        note_record(
            "b.md", generated={"by": "person", "at": "2026-03-01"}, n=3.5, flag=False, big=2**62
        ),
        _chunks("common"),
        [],
        [],
    )
    query = KeywordQuery(terms=("common",))

    def paths(*conditions: Condition) -> list[str]:
        rows = store.documents.keyword_search(query, 10, Where(conditions=conditions))
        ids = store.documents.chunk_ids_matching(Where(conditions=conditions))
        assert sorted(r.chunk_id for r in rows) == list(ids), "keyword search and filter agree"
        return sorted(_paths(store, rows))

    assert paths(Condition("generated.by", "eq", "tool")) == ["a.md"]
    assert paths(Condition("sources.resource", "eq", "r2")) == ["a.md"]
    assert paths(Condition("verified.people", "in", ("bo", "zed"))) == ["a.md"]
    assert paths(Condition("n", "gt", 3)) == ["b.md"]
    assert paths(Condition("n", "eq", 3)) == ["a.md"]
    assert paths(Condition("n", "eq", "3")) == [], "text is not a number"
    assert paths(Condition("flag", "eq", True)) == ["a.md"]
    assert paths(Condition("flag", "eq", 1)) == [], "true is not 1"
    assert paths(Condition("flag", "ne", True)) == ["b.md"]
    assert paths(Condition("missing", "ne", "x")) == ["a.md", "b.md"], "a missing field passes"
    assert paths(Condition("big", "eq", 2**62 + 1)) == ["a.md"], "64-bit integers stay exact"
    # 12:00+02:00 is 10:00 UTC: after midnight UTC of the same day, before noon UTC
    assert paths(Condition("generated.at", "gt", Instant.of("2026-03-01T00:00:00+00:00"))) == [
        "a.md"
    ]
    assert paths(Condition("generated.at", "lt", Instant.of("2026-03-01T11:00:00+00:00"))) == [
        "a.md",
        "b.md",
    ]
    assert paths(Condition("generated.at", "gte", Instant.of("2026-03-01T00:00:00+00:00"))) == [
        "a.md",
        "b.md",
    ]
    assert paths(Condition("generated.by", "gt", Instant.of("2026-01-01T00:00:00+00:00"))) == [], (
        "text that is no date is never compared as one"
    )
    assert paths(Condition("we'ird\"; --", "eq", "x")) == []


def test_listings_links_and_tags(store: Store) -> None:
    docs = store.documents
    a = docs.put(
        note_record("notes/a.md"),
        _chunks("x"),
        [
            LinkRecord("wikilink", "b", "b", None, None, 0),
            LinkRecord("wikilink", "Gone", "gone", None, None, 1),
            LinkRecord("markdown", "deep/c.md", "deep/c", "H", "see", 2),
        ],
        ["project/atlas", "x"],
    )
    b = docs.put(note_record("notes/b.md"), _chunks("y"), [], ["project", "x"])
    docs.put(note_record("notes/deep/c.md"), _chunks("z"), [], [])
    top = docs.put(note_record("top.md"), _chunks("w"), [], ["x"])
    assert [d.path for d in docs.in_folder("notes")] == ["notes/a.md", "notes/b.md"]
    assert [d.path for d in docs.in_folder("")] == ["top.md"]
    assert [d.path for d in docs.after_path("notes/b.md", 5)] == ["notes/deep/c.md", "top.md"]
    assert [d.path for d in docs.with_tag("project")] == ["notes/a.md", "notes/b.md"]
    assert docs.tag_counts() == [("x", 3), ("project", 1), ("project/atlas", 1)]
    assert docs.sharing_tags(a, 5) == [(b, ["x"]), (top, ["x"])]
    assert [link.target for _, link in docs.links(sources=[a])] == ["b", "Gone", "deep/c.md"]
    assert [(src, link.target) for src, link in docs.links(targets=["b", "deep/c"])] == [
        (a, "b"),
        (a, "deep/c.md"),
    ]
    assert docs.unresolved_link_count() == 1, "only [[Gone]] points nowhere"
    assert docs.count() == 4 and docs.chunk_count() == 4
    counts = store.counts()
    assert (counts.documents, counts.chunks, counts.links, counts.tags) == (4, 4, 3, 3)


def test_a_link_is_unresolved_exactly_when_find_finds_no_document_for_it(store: Store) -> None:
    docs = store.documents
    targets = ["deep/c", "eep/c", "notes/deep/c", "c", "b/x_y", "b/x%y", "x_y", "a/b", "Gone"]
    links = [
        LinkRecord("wikilink", target, target.lower(), None, None, i)
        for i, target in enumerate(targets)
    ]
    docs.put(note_record("notes/deep/c.md"), _chunks("z"), links, [])
    docs.put(note_record("a/b/x_y.md"), _chunks("w"), [], [])
    found = {target: bool(docs.find(target.lower())) for target in targets}
    assert found == {
        "deep/c": True,  # the end of a path, at a folder
        "eep/c": False,  # not at a folder
        "notes/deep/c": True,
        "c": True,
        "b/x_y": True,
        "b/x%y": False,  # LIKE's wildcards are only letters here
        "x_y": True,
        "a/b": False,  # a folder, not a note
        "Gone": False,
    }
    assert docs.unresolved_link_count() == 4 == sum(not hit for hit in found.values())


def test_a_document_text_is_kept_once_and_chunks_read_their_slices(store: Store) -> None:
    text = "First part. Second part, with ünïcode and 東京. Third part."
    chunks = [
        ChunkRecord(0, "", text[:30], 0, 30, "h0"),
        ChunkRecord(1, "", text[20:], 20, len(text), "h1"),
        ChunkRecord(2, "", "not a slice", 0, 5, "h2"),
    ]
    doc_id = store.documents.put(note_record("c.md", text=text), chunks, [], [])
    assert [c.text for c in store.documents.chunks_of(doc_id)] == [
        text[:30],
        text[20:],
        "not a slice",
    ]
    assert store.documents.texts([doc_id, 999]) == {doc_id: text}
    assert store.integrity_problems() == []


def test_a_document_s_turns_are_the_last_texts_stored_before_it_from_its_source(
    store: Store,
) -> None:
    def put(path: str, text: str | None, **frontmatter: object) -> int:
        record = note_record(path, text=text, **frontmatter)
        return store.documents.put(record, [ChunkRecord(0, "", text or "x", 0, 1, "h")], [], [])

    documents = store.documents

    def turns_before(source: str, document_id: int | None, count: int) -> list[str]:
        found = documents.field_texts("source", source, before=document_id, limit=count)
        return [text for _, text in found]

    def turns_after(source: str, document_id: int, count: int) -> list[int]:
        return [
            i for i, _ in documents.field_texts("source", source, after=document_id, limit=count)
        ]

    assert not store.documents.has_shared_value("source")
    first = put("1", "one", source="chat")
    put("x", "elsewhere", source="other")
    put("n", "a number is no source", source=7)
    second = put("2", "two", source="chat")
    put("t", None, source="chat")  # stored without its text (a note): left out
    put("l", "listed", source=["chat", "other"])  # a list of sources is none
    third = put("3", "three", source="chat")
    assert turns_before("chat", third, 2) == ["one", "two"], "oldest first"
    assert turns_before("chat", second, 5) == ["one"]
    assert turns_before("chat", first, 2) == []
    assert turns_before("chat", None, 2) == ["two", "three"], "before a new one"
    assert turns_before("7", None, 2) == [] and turns_before("z", None, 2) == []
    put("4", "again", source="chat")
    assert turns_before("chat", third, 2) == ["one", "two"], "only those before it"
    # a document written again keeps its place
    put("2", "two, edited", source="chat")
    assert turns_before("chat", third, 2) == ["one", "two, edited"]
    assert documents.has_shared_value("source")
    fourth = documents.state("4")
    assert fourth is not None
    assert turns_after("chat", first, 2) == [second, third], "the next two, in order"
    assert turns_after("chat", second, 5) == [third, fourth.document_id]
    assert turns_after("chat", fourth.document_id, 2) == []
    elsewhere = documents.state("x")
    assert elsewhere is not None
    assert turns_after("other", 0, 2) == [elsewhere.document_id], "one source's own"
    assert turns_after("7", 0, 2) == [], "a number is no source"
    store.documents.delete(second)
    assert turns_after("chat", second, 1) == [third], "a removed turn's place"


def test_one_document_a_source_shares_none(store: Store) -> None:
    for path, source in [("a", "s1"), ("b", "s2"), ("c", 3), ("d", 3)]:
        record = note_record(path, text=path, source=source)
        store.documents.put(record, [ChunkRecord(0, "", path, 0, 1, "h")], [], [])
    assert not store.documents.has_shared_value("source"), "numbers are not sources"


def test_chunks_are_read_whole_or_light_with_their_document(store: Store) -> None:
    first = store.documents.put(
        note_record("a.md", n=1, tags=["x"]), _chunks("a1", "a2", "a3"), [], []
    )
    second = store.documents.put(note_record("b.md", n=2), _chunks("b1"), [], [])
    ids = [c.chunk_id for c in store.documents.chunks_of(first)]
    (other,) = [c.chunk_id for c in store.documents.chunks_of(second)]
    wanted = [ids[2], other, 10**9, ids[0], ids[1]]  # one that does not exist
    chunks = store.documents.get_chunks(wanted)
    assert [c.chunk_id for c in chunks] == [ids[2], other, ids[0], ids[1]]
    assert [dict(c.metadata) for c in chunks] == [{"n": 1, "tags": ["x"]}, {"n": 2}] + [
        {"n": 1, "tags": ["x"]}
    ] * 2
    # a document's metadata is parsed once, however many of its chunks are read
    assert chunks[0].metadata is chunks[2].metadata is chunks[3].metadata
    light = store.documents.chunk_owners(wanted)
    assert light == {
        ids[0]: (first, 0.5),
        ids[1]: (first, 0.5),
        ids[2]: (first, 0.5),
        other: (second, 0.5),
    }
    assert store.documents.chunk_owners([]) == {}
    # the states of some documents, in one read (a vault's hits ask whether their notes changed)
    assert store.documents.states(["b.md", "missing.md", "a.md"]) == {
        "a.md": store.documents.state("a.md"),
        "b.md": store.documents.state("b.md"),
    }
    assert store.documents.states([]) == {}
    assert set(store.documents.states()) == {"a.md", "b.md"}


def test_vectors_follow_their_chunks_and_log_every_change(store: Store) -> None:
    doc = store.documents.put(note_record("a.md"), _chunks("one", "two"), [], [])
    first, second = (c.chunk_id for c in store.documents.chunks_of(doc))
    store.vectors.put(
        [(first, _unit(1, 0, 0)), (999_999, _unit(0, 1, 0))], ["in-T-H-one", "in-T-H-gone"]
    )
    assert store.vectors.count() == 1 and store.vectors.has_any(), "a gone chunk is skipped"
    assert [c.chunk_id for c in store.vectors.missing(10)] == [second]
    store.vectors.put([(second, _unit(0, 1, 0))], ["in-T-H-two"])
    assert store.vectors.rows() == [(first, _unit(1, 0, 0)), (second, _unit(0, 1, 0))]
    assert store.vectors.for_inputs(["in-T-H-one", "in-T-H-gone", "c-one"]) == {
        "in-T-H-one": _unit(1, 0, 0)
    }
    assert store.vectors.document_ids() == [(first, doc), (second, doc)]
    changes = store.vectors.changes(0)
    assert changes is not None and set(changes.keys) == {first, second}
    generation = store.vectors.generation()
    # rewriting the note keeps the vector of an unchanged input, under the new chunk's id
    store.documents.put(note_record("a.md"), _chunks("one", "three"), [], [], doc)
    new_first, new_third = (c.chunk_id for c in store.documents.chunks_of(doc))
    assert store.vectors.of([new_first, new_third, first]) == {new_first: _unit(1, 0, 0)}
    assert store.vectors.generation() != generation
    later = store.vectors.changes(changes.latest)
    assert later is not None and set(later.keys) == {first, second, new_first}
    assert store.vectors.change_number() == later.latest
    store.documents.delete(doc)
    assert store.vectors.count() == 0
    store.vectors.clear()
    assert not store.vectors.has_any()
    assert store.integrity_problems() == []


def test_a_vector_is_reused_only_for_the_same_embedded_input(store: Store) -> None:
    """A chunk written with the text of a stored one but another embedded input (another
    title) gets no vector; one of the same input gets that vector; a vector stored without
    an input hash (by an older vrom, or a writer that did not say) is never reused."""
    doc = store.documents.put(note_record("a.md"), _chunks("shared body"), [], [])
    (chunk,) = store.documents.chunks_of(doc)
    store.vectors.put([(chunk.chunk_id, _unit(1, 0, 0))], ["in-T-H-shared body"])
    other = store.documents.put(note_record("b.md"), _chunks("shared body", title="U"), [], [])
    assert store.vectors.of([c.chunk_id for c in store.documents.chunks_of(other)]) == {}
    same = store.documents.put(note_record("c.md"), _chunks("shared body"), [], [])
    (copy,) = store.documents.chunks_of(same)
    assert store.vectors.of([copy.chunk_id]) == {copy.chunk_id: _unit(1, 0, 0)}
    # a retitled note (rewritten in place) drops its vector; the same input again keeps it
    store.documents.put(note_record("a.md"), _chunks("shared body", title="V"), [], [], doc)
    assert store.vectors.of([c.chunk_id for c in store.documents.chunks_of(doc)]) == {}
    store.documents.put(note_record("c.md"), _chunks("shared body"), [], [], same)
    (kept,) = store.documents.chunks_of(same)
    assert store.vectors.of([kept.chunk_id]) == {kept.chunk_id: _unit(1, 0, 0)}
    unknown = store.documents.put(note_record("d.md"), _chunks("plain", title="W"), [], [])
    (plain,) = store.documents.chunks_of(unknown)
    store.vectors.put([(plain.chunk_id, _unit(0, 1, 0))])
    assert store.vectors.for_inputs(["in-W-H-plain"]) == {}
    again = store.documents.put(note_record("e.md"), _chunks("plain", title="W"), [], [])
    assert store.vectors.of([c.chunk_id for c in store.documents.chunks_of(again)]) == {}
    assert store.integrity_problems() == []


def test_a_batch_reuses_vectors_by_embedded_input(store: Store) -> None:
    """`put_many` gives each chunk the vector stored for its own input (its rewritten note's,
    or any other chunk's), and none to a chunk of another input (another title)."""
    a = store.documents.put(note_record("a.md"), _chunks("alpha"), [], [])
    b = store.documents.put(note_record("b.md"), _chunks("beta"), [], [])
    vectors = {"alpha": _unit(1, 0, 0), "beta": _unit(0, 1, 0)}
    for doc, text in ((a, "alpha"), (b, "beta")):
        (chunk,) = store.documents.chunks_of(doc)
        store.vectors.put([(chunk.chunk_id, vectors[text])], [f"in-T-H-{text}"])
    ids = store.documents.put_many(
        [
            DocumentWrite(note_record("a.md"), _chunks("alpha", "beta"), [], [], a),
            DocumentWrite(note_record("c.md"), _chunks("beta", title="U"), [], [], None),
            DocumentWrite(note_record("d.md"), _chunks("beta", "delta"), [], [], None),
        ]
    )
    got = {
        (path, c.text): store.vectors.of([c.chunk_id]).get(c.chunk_id)
        for path, doc in zip(("a.md", "c.md", "d.md"), ids, strict=True)
        for c in store.documents.chunks_of(doc)
    }
    assert got == {
        ("a.md", "alpha"): vectors["alpha"],
        ("a.md", "beta"): vectors["beta"],
        ("c.md", "beta"): None,
        ("d.md", "beta"): vectors["beta"],
        ("d.md", "delta"): None,
    }
    assert store.integrity_problems() == []


def test_putting_vectors_returns_how_many_were_written(store: Store) -> None:
    """`put` counts the vectors it wrote: not the change log's rows (SQLite's ``total_changes``
    counted those too, twice the vectors), not a chunk or memory gone meanwhile."""
    doc = store.documents.put(note_record("a.md"), _chunks("one", "two", "three"), [], [])
    ids = [c.chunk_id for c in store.documents.chunks_of(doc)]
    assert store.vectors.put([]) == 0
    assert store.vectors.put([(ids[0], _unit(1, 0, 0)), (ids[1], _unit(0, 1, 0))]) == 2
    assert store.vectors.put([(ids[1], _unit(0, 0, 1))]) == 1, "a replaced vector is one"
    assert store.vectors.put([(ids[2], _unit(1, 1, 0)), (999_999, _unit(0, 1, 1))]) == 1
    assert store.vectors.count() == 3
    changes = store.vectors.changes(0)
    assert changes is not None and set(changes.keys) == set(ids), "every write is still logged"

    memories = store.memories
    for memory_id in ("m1", "m2"):
        memories.put(MemoryRecord(memory_id, 1.0, 1.0, None, "fact", memory_id, "text"))
    assert memories.vectors.put([]) == 0
    assert memories.vectors.put([("m1", _unit(1, 0)), ("m2", _unit(0, 1))]) == 2
    assert memories.vectors.put([("m1", _unit(1, 1)), ("gone", _unit(1, 0))]) == 1
    assert memories.vectors.count() == 2
    assert store.integrity_problems() == []


def test_a_store_that_searches_itself_finds_k_filtered_neighbours(
    store_spot: StoreSpot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL answers "nearest k" in the database (HNSW or exact), with the scores an
    exact search gives; SQLite's vectors leave searching to the core's own index."""
    store = store_spot.open()
    try:
        if store_spot.backend == "sqlite":
            assert not isinstance(store.vectors, NearestVectors)
            return
        vectors = store.vectors
        assert isinstance(vectors, NearestVectors)
        assert vectors.nearest(np.ones(3, dtype=np.float32), 3) == [], "no vectors yet"
        rng = np.random.default_rng(7)
        matrix = rng.standard_normal((300, 8)).astype(np.float32)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        doc = store.documents.put(
            note_record("m.md"),
            [ChunkRecord(i, "", f"t{i}", 0, 1, f"h{i}") for i in range(300)],
            [],
            [],
        )
        ids = [c.chunk_id for c in store.documents.chunks_of(doc)]
        store.vectors.put(
            [(i, row.astype("<f4").tobytes()) for i, row in zip(ids, matrix, strict=True)]
        )
        query = matrix[0] + 0.1 * matrix[1]
        query /= np.linalg.norm(query)
        truth = sorted(zip(ids, matrix @ query, strict=True), key=lambda pair: -pair[1])
        exact = vectors.nearest(query, 5, exact=True)
        assert [i for i, _ in exact] == [i for i, _ in truth[:5]]
        assert np.allclose([s for _, s in exact], [s for _, s in truth[:5]], atol=1e-5)
        assert vectors.nearest(query, 1)[0][0] == ids[0], "the HNSW index finds the nearest"
        # a filter leaving a few rows far from the query still gives k hits
        allowed = ids[-7:]
        hits = vectors.nearest(query, 5, allowed, ef_search=10)
        assert len(hits) == 5 and {i for i, _ in hits} <= set(allowed)
        # past the exact-search cut-off of a filter, the graph is searched, iteratively
        monkeypatch.setattr("vrom.store.postgres_vectors.EXACT_FILTER_ROWS", 10)
        wide = ids[::2]
        hits = vectors.nearest(query, 20, wide, ef_search=20)
        assert len(hits) == 20 and {i for i, _ in hits} <= set(wide)
        euclid = vectors.nearest(query, 1, exact=True, metric="euclidean")
        assert euclid[0][0] == ids[0] and euclid[0][1] <= 0
        with pytest.raises(ValidationError, match="dimensions"):
            vectors.nearest(np.ones(3, dtype=np.float32), 3)
    finally:
        store.close()


def test_memories_are_written_searched_and_counted(store: Store) -> None:
    memories = store.memories
    assert memories.newest_key() == 0

    def memory(memory_id: str, title: str, content: str, **fields: object) -> MemoryRecord:
        fields.setdefault("project", None)
        return MemoryRecord(
            memory_id, 1.0, 1.0, type="fact", title=title, content=content, **fields
        )  # type: ignore[arg-type]

    memories.put(memory("m1", "Deploys", "go through CI", tags=("ops",), project="p"))
    memories.put(memory("m2", "Coffee", "espresso in the morning 東京", related=("a.md",)))
    assert memories.get("m1") == memory(
        "m1", "Deploys", "go through CI", tags=("ops",), project="p"
    )
    assert [m.id for m in memories.list(MemoryFilter(), 10)] == ["m2", "m1"]
    assert [
        m.id
        for m in memories.list(
            MemoryFilter(parse_filter({"project": "p"}, fields=MEMORY_FIELDS)), 10
        )
    ] == ["m1"]
    found = memories.keyword_search(KeywordQuery(terms=("ops",)), 10, MemoryFilter())
    assert [row.head.id for row in found] == ["m1"], "tags are searched"
    found = memories.keyword_search(KeywordQuery(terms=("東京",)), 10, MemoryFilter())
    assert [row.head.id for row in found] == ["m2"]
    keys = memories.keys_matching(MemoryFilter())
    assert sorted(memories.by_keys(keys)) == keys and len(keys) == 2
    whole = memories.by_keys(keys)
    heads = memories.heads([*keys, max(keys) + 1])  # a key no memory holds is left out
    assert heads == {
        key: MemoryHead(key, memory.id, memory.created_unix) for key, memory in whole.items()
    }
    assert found[0].head == heads[found[0].head.key], "a keyword match's head is the memory's"
    assert memories.keyword_search(KeywordQuery(terms=("ops",)), 0, MemoryFilter()) == []
    assert memories.newest_key() == max(keys), "the newest memory's key"
    assert (
        memories.keys_matching(
            MemoryFilter(
                AllOf(
                    (
                        Condition("created", "gte", Instant(1.0)),
                        Condition("created", "lte", Instant(1.0)),
                    )
                )
            )
        )
        == keys
    ), "both ends in"
    assert memories.keys_matching(MemoryFilter(Condition("created", "gte", Instant(1.5)))) == []
    assert memories.keys_matching(MemoryFilter(Condition("created", "lte", Instant(0.5)))) == []
    memories.vectors.put([("m1", _unit(1, 0)), ("gone", _unit(0, 1))])
    assert memories.vectors.count() == 1
    assert [m.id for m in memories.vectors.missing(10)] == ["m2"]
    # a changed text drops the vector; a status change keeps it
    assert memories.set_status("m1", "archived", None, 2.0)
    assert memories.vectors.count() == 1
    generation = memories.vectors.generation()
    memories.put(memory("m1", "Deploys", "go through the pipeline", status="archived"))
    assert memories.vectors.count() == 0
    assert memories.vectors.generation() != generation, "a dropped vector moves the generation"
    assert memories.newest_key() == max(keys), "a memory rewritten keeps its key"
    assert not memories.set_status("nope", "archived", None, 2.0)
    counts = memories.counts()
    assert counts.total == 2 and counts.by_status == {"active": 1, "archived": 1}
    assert counts.by_type == {"fact": 2} and counts.embedded == 0


def test_a_memory_s_preceding_turns_are_the_last_from_its_source(store: Store) -> None:
    memories = store.memories
    # ids out of order on purpose: storing order (the key) decides, not the id
    for memory_id, source in [
        ("t3", "chat"),
        ("t1", "chat"),
        ("x1", "other"),
        ("t2", "chat"),
        ("t0", None),
    ]:
        memories.put(
            MemoryRecord(memory_id, 1.0, 1.0, None, "fact", "Turn", memory_id, source=source)
        )

    def preceding(memory_id: str | None, count: int = 2) -> list[str]:
        return [m.id for m in memories.preceding("chat", memory_id, count)]

    assert preceding("t2") == ["t3", "t1"], "the last two before it, oldest first; others skipped"
    assert preceding("t1") == ["t3"] and preceding("t3") == []
    assert preceding(None) == ["t1", "t2"], "before a new memory: the source's last"
    assert preceding("not stored", 5) == ["t3", "t1", "t2"]
    assert memories.preceding("nobody", None, 2) == []
