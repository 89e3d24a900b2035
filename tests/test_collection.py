"""The Collection API: add/search/remove/reload/count/close, filters, limits, storage, errors."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from vrom import (
    Collection,
    Document,
    Embedder,
    Fingerprint,
    ModelError,
    StorageError,
    ValidationError,
    Vault,
    VromError,
)
from vrom.collection import MAX_ID_BYTES, MAX_METADATA_BYTES, MAX_TEXT_CHARS, storage_path
from vrom.index.hnsw import HnswIndex

HANDBOOK = [
    {"id": "leave", "text": "Annual leave is 25 days a year.", "metadata": {"section": "hr"}},
    {
        "id": "expenses",
        "text": "Submit expenses within 30 days of purchase.",
        "metadata": {"section": "finance", "year": 2024, "tags": ["money", "forms"]},
    },
    {
        "id": "laptop",
        "text": "Every employee gets a laptop on the first day.",
        "metadata": {"section": "it", "year": 2020},
    },
    {
        "id": "parking",
        "text": "Parking permits are issued by the front desk.",
        "metadata": {"section": "facilities", "year": 2022.5},
    },
]


@pytest.fixture
def docs() -> Iterator[Collection]:
    collection = Collection.open("handbook", embedder=Embedder.fake())
    collection.add(HANDBOOK)
    yield collection
    collection.close()


def _ids(hits: Sequence[Any]) -> list[str]:
    return [hit.id for hit in hits]


# -- add, search, remove, count -------------------------------------------------------------


def test_a_new_collection_is_empty_and_add_returns_the_count() -> None:
    docs = Collection.open("fresh", embedder=Embedder.fake())
    assert docs.count() == 0
    assert docs.search("anything") == []
    assert docs.add(HANDBOOK[:2]) == 2
    assert docs.add([Document("laptop", "A laptop on day one.", {"section": "it"})]) == 3
    assert docs.count() == 3
    docs.close()


def test_search_scores_are_the_cosine_similarity_best_first(docs: Collection) -> None:
    embedder = Embedder.fake()
    query = "how many days of annual leave"
    hits = docs.search(query, k=4)
    assert hits[0].id == "leave"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    texts = {d["id"]: d["text"] for d in HANDBOOK}
    vectors = embedder.embed_documents([texts[h.id] for h in hits])
    expected = vectors @ embedder.embed_query(query)
    assert [h.score for h in hits] == pytest.approx(expected.tolist(), abs=1e-5)
    assert all(-1.0 <= h.score <= 1.0 for h in hits)
    first = hits[0]
    assert first.text == texts["leave"] and first.metadata == {"section": "hr"}
    assert first.content_hash and first.chunk_id > 0 and first.modified_unix > 0


def test_an_existing_id_is_replaced_with_no_duplicate_and_no_old_vector(
    docs: Collection,
) -> None:
    assert docs.add([{"id": "leave", "text": "Sick leave needs a doctor's note."}]) == 4
    hits = docs.search("sick leave doctor note", k=10)
    assert _ids(hits).count("leave") == 1
    assert hits[0].id == "leave" and hits[0].text == "Sick leave needs a doctor's note."
    assert hits[0].metadata == {}
    store = docs._store
    counts = store.counts()
    assert counts.documents == 4 and counts.vectors == counts.chunks == 4, "old vector gone"
    assert "Annual" not in " ".join(h.text for h in docs.search("annual 25 days", k=10))


def test_add_accepts_dicts_documents_and_generators(docs: Collection) -> None:
    generated = ({"id": f"g{i}", "text": f"generated text number {i}"} for i in range(3))
    assert docs.add(generated) == 7
    assert docs.add([Document("d1", "a dataclass document")]) == 8


def test_remove_returns_whether_the_document_was_there(docs: Collection) -> None:
    assert docs.remove("leave") is True
    assert docs.remove("leave") is False
    assert docs.count() == 3
    assert "leave" not in _ids(docs.search("annual leave days", k=10))
    assert docs._store.counts().vectors == 3


def test_close_makes_later_calls_a_clear_error(docs: Collection) -> None:
    docs.close()
    docs.close()  # twice is fine
    for call in (
        lambda: docs.count(),
        lambda: docs.search("leave"),
        lambda: docs.add(HANDBOOK),
        lambda: docs.remove("leave"),
        lambda: docs.reload(),
    ):
        with pytest.raises(StorageError, match="'handbook' is closed"):
            call()


def test_a_collection_is_a_context_manager() -> None:
    with Collection.open("ctx", embedder=Embedder.fake()) as docs:
        docs.add(HANDBOOK)
    with pytest.raises(StorageError):
        docs.count()


# -- where --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ({"section": "hr"}, {"leave"}),
        ({"tags": "money"}, {"expenses"}),  # a list field holds the value
        ({"section": {"$in": ["hr", "it"]}}, {"leave", "laptop"}),
        ({"section": {"$nin": ["hr", "it"]}}, {"expenses", "parking"}),
        ({"section": {"$ne": "hr"}}, {"expenses", "laptop", "parking"}),
        ({"year": {"$ne": 2024}}, {"leave", "laptop", "parking"}),  # missing passes $ne
        ({"year": {"$gt": 2020}}, {"expenses", "parking"}),
        ({"year": {"$gte": 2020, "$lt": 2023}}, {"laptop", "parking"}),
        ({"year": {"$lte": 2020}}, {"laptop"}),
        ({"year": 2024, "section": "finance"}, {"expenses"}),
        ({"year": {"$eq": 2024}}, {"expenses"}),
        ({"section": "nowhere"}, set()),
    ],
)
def test_where_filters_metadata(
    docs: Collection, where: dict[str, Any], expected: set[str]
) -> None:
    assert set(_ids(docs.search("days", k=10, where=where))) == expected
    assert set(_ids(docs.search("days", k=10, where=where, mode="hybrid"))) <= expected
    assert set(_ids(docs.search("days", k=10, where=where, mode="keyword"))) <= expected


def test_where_on_strings_never_compares_them_as_numbers() -> None:
    docs = Collection.open("strings", embedder=Embedder.fake())
    docs.add(
        [
            {"id": "a", "text": "x", "metadata": {"n": "10"}},
            {"id": "b", "text": "x", "metadata": {"n": 3}},
        ]
    )
    assert _ids(docs.search("x", where={"n": {"$gt": 5}})) == []
    assert _ids(docs.search("x", where={"n": {"$lt": 5}})) == ["b"]
    assert _ids(docs.search("x", where={"n": "10"})) == ["a"]


def test_a_filter_is_applied_inside_the_search_so_k_hits_come_back() -> None:
    docs = Collection.open("big", embedder=Embedder.fake())
    # 500 documents right on the query, 6 matching the filter that are farther from it
    docs.add(
        [
            {"id": f"near{i}", "text": f"solar panel output {i}", "metadata": {"kind": "near"}}
            for i in range(500)
        ]
        + [
            {"id": f"far{i}", "text": f"far away text {i}", "metadata": {"kind": "far"}}
            for i in range(6)
        ]
    )
    hits = docs.search("solar panel output", k=5, where={"kind": "far"})
    assert len(hits) == 5 and all(h.id.startswith("far") for h in hits)
    assert len(docs.search("solar panel output", k=10, where={"kind": "far"})) == 6


@pytest.mark.parametrize(
    "where",
    [
        {"year": {"$gt": "2020"}},
        {"year": {"$between": [1, 2]}},
        {"section": {"$in": "hr"}},
        {"section": {"$in": []}},
        {"section": ["hr"]},
        {"section": None},
        {"year": {"$gt": True}},
        {"year": {"$gt": float("nan")}},
        "section = hr",
    ],
)
def test_bad_filters_are_validation_errors(docs: Collection, where: Any) -> None:
    with pytest.raises(ValidationError):
        docs.search("days", where=where)


# -- modes, long documents, k ---------------------------------------------------------------


def test_modes(docs: Collection) -> None:
    assert docs.search("annual leave", mode="keyword")[0].id == "leave"
    hybrid = docs.search("annual leave", mode="hybrid")
    assert hybrid[0].id == "leave" and "fused" in hybrid[0].scores
    reranked = docs.search("annual leave", mode="rerank")  # one search core: every mode
    assert reranked[0].id == "leave" and reranked[0].fts_score is not None
    with pytest.raises(ValidationError, match="mode must be one of"):
        docs.search("x", mode="fuzzy")


def test_a_keyword_only_collection_searches_by_keyword() -> None:
    docs = Collection.open("words", embedder=None)
    docs.add(HANDBOOK)
    assert docs.search("parking permits")[0].id == "parking"
    with pytest.raises(ValidationError, match="no embedder"):
        docs.search("parking", mode="vector")


def test_a_long_document_is_found_once_by_its_best_chunk() -> None:
    docs = Collection.open("long", embedder=Embedder.fake())
    filler = " ".join(f"paragraph {n} talks about gardens and trees." for n in range(400))
    docs.add(
        [
            {"id": "book", "text": filler + " The secret ingredient is cardamom. " + filler},
            {"id": "note", "text": "A short note about gardens."},
        ]
    )
    hits = docs.search("secret ingredient cardamom", k=2)
    assert _ids(hits) == ["book", "note"]
    chunk = hits[0].chunk_text
    assert chunk is not None and "cardamom" in chunk and len(chunk) < 2_000, "the best chunk"
    assert hits[0].text == filler + " The secret ingredient is cardamom. " + filler
    many = docs.search("gardens and trees", k=2)
    assert sorted(_ids(many)) == ["book", "note"], "the book's many chunks did not crowd out"


@pytest.mark.parametrize("mode", ["keyword", "vector", "hybrid"])
def test_a_document_with_more_chunks_than_the_pool_does_not_crowd_out_others(mode: str) -> None:
    # 300 chunks all about gardens: more than any first pool (50 keyword rows, 2k vectors)
    docs = Collection.open("crowd", embedder=Embedder.fake(), chunk_chars=200, chunk_overlap=0)
    book = " ".join(f"Gardens and trees, part {n}, more gardens and trees." for n in range(1200))
    docs.add([{"id": "book", "text": book}, {"id": "note", "text": "A note about gardens."}])
    assert docs._store.counts().chunks > 300
    hits = docs.search("gardens and trees", k=2, mode=mode)
    assert sorted(_ids(hits)) == ["book", "note"]
    assert len(docs.search("gardens", k=5, mode=mode)) == 2  # only two documents exist


@pytest.mark.parametrize("k", [0, -1, 1001, 2.5, "3", True])
def test_k_must_be_a_sensible_integer(docs: Collection, k: Any) -> None:
    with pytest.raises(ValidationError):
        docs.search("days", k=k)


@pytest.mark.parametrize("query", ["", "   ", None, 5])
def test_the_query_must_be_text(docs: Collection, query: Any) -> None:
    with pytest.raises(ValidationError):
        docs.search(query)


@pytest.mark.parametrize("index", ["hnsw", "auto"])
def test_every_index_kind_answers_like_exact_search(tmp_path: Path, index: str) -> None:
    rng = random.Random(3)
    batch = [
        {"id": f"d{i}", "text": " ".join(f"w{rng.randrange(400)}" for _ in range(8))}
        for i in range(300)
    ]
    exact = Collection.open("kinds", embedder=Embedder.fake(256), index="flat")
    exact.add(batch)
    docs = Collection.open("kinds", embedder=Embedder.fake(256), storage=tmp_path, index=index)
    docs.add(batch)
    docs._corpus.index.wait_for_graph()  # a graph is built beside searches: the test is of it
    for _ in range(20):
        query = " ".join(f"w{rng.randrange(400)}" for _ in range(3))
        truth = [h.score for h in exact.search(query, k=5)]
        # a beam as wide as the set visits every node: exact whatever graph the threads built
        # (at ef_search=64 a rare graph missed one of the five, as approximate search may)
        found = [h.score for h in docs.search(query, k=5, ef_search=len(batch))]
        assert found == pytest.approx(truth, abs=2e-3)  # f16 graph; tied ids may differ
    docs.close()
    graph = tmp_path / "kinds.db.hnsw.usearch"
    assert graph.exists() == (index == "hnsw"), "auto is exact below 5k vectors"


def test_index_and_ef_search_are_checked() -> None:
    with pytest.raises(ValidationError, match="index must be one of"):
        Collection.open("x", embedder=Embedder.fake(), index="ivf")
    with pytest.raises(ValidationError, match="ef_search"):
        Collection.open("x", embedder=Embedder.fake(), ef_search=0)
    docs = Collection.open("x", embedder=Embedder.fake())
    docs.add(HANDBOOK)
    with pytest.raises(ValidationError, match="ef_search"):
        docs.search("days", k=5, ef_search=2)


# -- limits ---------------------------------------------------------------------------------


def _error(docs: Collection, batch: list[Any]) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        docs.add(batch)
    return caught.value


@pytest.mark.parametrize(
    ("document", "words"),
    [
        ({"id": "x" * (MAX_ID_BYTES + 1), "text": "t"}, ["257 bytes", "256 bytes"]),
        ({"id": "é" * 129, "text": "t"}, ["258 bytes", "256 bytes"]),  # bytes, not characters
        ({"id": "big", "text": "w " * (MAX_TEXT_CHARS // 2) + "w"}, ["'big'", "100,000"]),
        (
            {"id": "meta", "text": "t", "metadata": {"k": "v" * MAX_METADATA_BYTES}},
            ["'meta'", "8,192 bytes"],
        ),
        ({"id": "", "text": "t"}, ["id must be a non-empty string"]),
        ({"id": 7, "text": "t"}, ["id must be a non-empty string"]),
        ({"id": "blank", "text": "  \n "}, ["'blank'", "text is empty"]),
        ({"id": "nt", "text": b"bytes"}, ["'nt'", "text must be a string"]),
        ({"id": "nm", "text": "t", "metadata": ["a"]}, ["'nm'", "metadata must be a mapping"]),
        ({"id": "nj", "text": "t", "metadata": {"when": object()}}, ["'nj'", "not JSON-ready"]),
        ({"id": "nan", "text": "t", "metadata": {"x": float("nan")}}, ["'nan'", "not JSON-ready"]),
        ({"id": "key", "text": "t", "metadata": {1: "a"}}, ["'key'", "keys must be strings"]),
        ({"id": "ctl", "text": "t\ud800"}, ["'ctl'", "not valid Unicode"]),
        ({"id": "a\nb", "text": "t"}, ["control characters"]),
        ({"id": "typo", "text": "t", "metadatas": {}}, ["unknown key", "'metadatas'"]),
        ({"text": "t"}, ["needs an 'id' and a 'text'"]),
        ("just a string", ["a document is a dict"]),
    ],
)
def test_a_bad_document_is_invalid_value_and_nothing_is_written(
    docs: Collection, document: Any, words: list[str]
) -> None:
    good = {"id": "good", "text": "a good document that must not be written"}
    error = _error(docs, [good, document])
    assert error.code == "invalid_value"
    message = str(error)
    assert "#2" in message
    for word in words:
        assert word in message
    assert docs.count() == len(HANDBOOK), "a batch with one bad document writes nothing"
    assert "good" not in _ids(docs.search("good document", k=10))


def test_documents_at_the_limits_are_accepted(docs: Collection) -> None:
    at_limits = {
        "id": "é" * (MAX_ID_BYTES // 2),
        "text": "w " * (MAX_TEXT_CHARS // 2),
        "metadata": {"k": "v" * (MAX_METADATA_BYTES - len('{"k": ""}'))},
    }
    assert len(json.dumps(at_limits["metadata"]).encode()) == MAX_METADATA_BYTES
    assert docs.add([at_limits]) == len(HANDBOOK) + 1


def test_duplicate_ids_in_a_batch_and_non_lists_are_refused(docs: Collection) -> None:
    error = _error(docs, [HANDBOOK[0], HANDBOOK[1], HANDBOOK[0]])
    assert "'leave' appears twice" in str(error) and "#1 and #3" in str(error)
    for not_a_list in ("text", HANDBOOK[0], Document("a", "b"), 5):
        with pytest.raises(ValidationError):
            docs.add(not_a_list)  # type: ignore[arg-type]


# -- models ---------------------------------------------------------------------------------


class _BrokenEmbedder(Embedder):
    """Fails like a model whose runtime broke, through the real interface."""

    @property
    def fingerprint(self) -> Fingerprint:
        return Fingerprint("broken", "1", 8, "mean", 0)

    def _embed(self, texts: Sequence[str], kind: str) -> npt.NDArray[np.float32]:
        raise RuntimeError("the runtime fell over")


def test_an_embedding_failure_is_a_model_error_and_writes_nothing(tmp_path: Path) -> None:
    docs = Collection.open("broken", embedder=_BrokenEmbedder(), storage=tmp_path)
    with pytest.raises(ModelError, match="fell over"):
        docs.add(HANDBOOK)
    assert docs.count() == 0
    assert isinstance(ModelError("x"), VromError)


def test_another_model_is_refused_instead_of_mixing_vectors(tmp_path: Path) -> None:
    with Collection.open("m", embedder=Embedder.fake(64), storage=tmp_path) as docs:
        docs.add(HANDBOOK)
    with pytest.raises(ModelError, match="another model"):
        Collection.open("m", embedder=Embedder.fake(32), storage=tmp_path)
    with Collection.open("m", embedder=Embedder.fake(64), storage=tmp_path) as again:
        assert again.count() == len(HANDBOOK)


def test_identical_texts_are_not_embedded_twice(docs: Collection) -> None:
    calls: list[int] = []
    real = docs._embedder
    assert real is not None
    original = real.embed_documents

    def counting(texts: Sequence[str]) -> npt.NDArray[np.float32]:
        calls.append(len(texts))
        return original(texts)

    real.embed_documents = counting  # type: ignore[method-assign]
    docs.add(HANDBOOK)  # the same texts again: their vectors are reused
    docs.add([{"id": "new", "text": "a text never seen"}])
    assert calls == [1]


# -- storage --------------------------------------------------------------------------------


def test_a_folder_holds_one_file_per_collection_and_reopening_finds_documents(
    tmp_path: Path,
) -> None:
    with Collection.open("handbook", embedder=Embedder.fake(), storage=tmp_path) as docs:
        docs.add(HANDBOOK)
    with Collection.open("faq", embedder=Embedder.fake(), storage=tmp_path) as faq:
        faq.add([{"id": "q1", "text": "Where is the canteen?"}])
    assert (tmp_path / "handbook.db").is_file() and (tmp_path / "faq.db").is_file()
    with Collection.open("handbook", embedder=Embedder.fake(), storage=str(tmp_path)) as again:
        assert again.count() == len(HANDBOOK)
        assert again.search("annual leave")[0].id == "leave"


def test_a_file_path_and_sqlite_urls_are_storage(tmp_path: Path) -> None:
    file = tmp_path / "one.sqlite"
    with Collection.open("a", embedder=Embedder.fake(), storage=file) as docs:
        docs.add(HANDBOOK)
    with Collection.open("a", embedder=Embedder.fake(), storage=f"sqlite:///{file}") as docs:
        assert docs.count() == len(HANDBOOK) and docs.location == str(file)
    with pytest.raises(StorageError, match="holds collection 'a', not 'b'"):
        Collection.open("b", embedder=Embedder.fake(), storage=file)
    assert storage_path("x", "sqlite://") is None
    assert storage_path("x", "sqlite:///:memory:") is None
    assert storage_path("x", "sqlite:///rel/x.db") == Path("rel/x.db")
    assert storage_path("x", "sqlite:////abs/x.db") == Path("/abs/x.db")
    assert storage_path("x", tmp_path / "new-folder") == tmp_path / "new-folder" / "x.db"


@pytest.mark.parametrize("storage", ["sqlite:", "sqlite:relative.db", ""])
def test_unsupported_storage_is_refused(storage: str) -> None:
    with pytest.raises(ValidationError):
        Collection.open("x", embedder=Embedder.fake(), storage=storage)


def test_a_database_that_cannot_be_reached_is_named_without_its_password() -> None:
    pytest.importorskip("psycopg")  # the test extra has it: CI runs this
    with pytest.raises(StorageError) as caught:
        Collection.open("x", embedder=Embedder.fake(), storage="postgresql://u:s3cret@db.invalid/v")
    assert "cannot reach PostgreSQL at db.invalid:5432" in str(caught.value)
    assert "s3cret" not in str(caught.value)


def test_memory_collections_are_separate() -> None:
    first = Collection.open("same", embedder=Embedder.fake())
    second = Collection.open("same", embedder=Embedder.fake())
    first.add(HANDBOOK)
    assert second.count() == 0 and first.location == ":memory:"


def test_a_vault_store_or_foreign_file_is_not_a_collection(
    tmp_path: Path, write_vault: Any
) -> None:
    root = write_vault({"a.md": "# A\n\ntext"})
    with Vault.open(root) as vault:
        vault.index()
        store_file = vault.store.location
    with pytest.raises(StorageError, match="vault's store"):
        Collection.open("x", embedder=Embedder.fake(), storage=store_file)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(StorageError, match="not a vrom store"):
        Collection.open("x", embedder=Embedder.fake(), storage=junk)


@pytest.mark.parametrize("name", ["", "a/b", "../x", ".hidden", "x" * 65, "sp ace", None])
def test_names_are_safe_file_names(name: Any) -> None:
    with pytest.raises(ValidationError, match="collection name"):
        Collection.open(name, embedder=Embedder.fake())


def test_reload_sees_what_another_handle_added(tmp_path: Path) -> None:
    mine = Collection.open("shared", embedder=Embedder.fake(), storage=tmp_path)
    theirs = Collection.open("shared", embedder=Embedder.fake(), storage=tmp_path)
    mine.add(HANDBOOK[:2])
    assert mine.search("laptop first day", k=5, where={"section": "it"}) == []
    theirs.add(HANDBOOK[2:])
    assert mine.reload() == len(HANDBOOK)
    assert mine.search("laptop first day", k=1)[0].id == "laptop"
    theirs.remove("laptop")
    assert "laptop" not in _ids(mine.search("laptop first day", k=5))
    mine.close()
    theirs.close()


def test_a_list_field_passes_when_any_item_does() -> None:
    docs = Collection.open("lists", embedder=Embedder.fake())
    docs.add(
        [
            {"id": "a", "text": "x", "metadata": {"scores": [1, 9], "tags": ["p", "q"]}},
            {"id": "b", "text": "x", "metadata": {"scores": [2, 3], "tags": ["r"]}},
        ]
    )
    assert _ids(docs.search("x", where={"scores": {"$gt": 5}})) == ["a"]
    assert _ids(docs.search("x", where={"scores": 3})) == ["b"]
    assert _ids(docs.search("x", where={"tags": {"$nin": ["p"]}})) == ["b"]
    docs.add([{"id": "a", "text": "x", "metadata": {"scores": [0]}}])  # replaced: values too
    assert sorted(_ids(docs.search("x", where={"scores": {"$lt": 5}}))) == ["a", "b"]
    assert docs._store.integrity_problems() == []


def _graph_builds(docs: Collection) -> int:
    index = docs._corpus.index.wait_for_graph()
    assert isinstance(index, HnswIndex)
    return index.build_count


def test_an_hnsw_collection_is_not_rebuilt_on_open_or_after_adds(tmp_path: Path) -> None:
    rng = random.Random(5)  # varied texts: HNSW is approximate on near-duplicate vectors
    batch = [
        {"id": f"d{i}", "text": " ".join(f"w{rng.randrange(2000)}" for _ in range(8))}
        for i in range(500)
    ]
    fake = Embedder.fake(256)
    with Collection.open("g", embedder=fake, storage=tmp_path, index="hnsw") as docs:
        docs.add(batch)
        docs.search("w4 w5")
        assert _graph_builds(docs) == 1
        docs.add([{"id": "late", "text": "a late arrival about zeppelins"}])
        assert docs.search("a late arrival about zeppelins", k=1)[0].id == "late"
        assert _graph_builds(docs) == 1, "an add is replayed into the graph, not rebuilt"
    with Collection.open("g", embedder=fake, storage=tmp_path, index="flat") as other:
        other.add([{"id": "later", "text": "written while no graph was open: airships"}])
        other.remove("d7")
    with Collection.open("g", embedder=fake, storage=tmp_path, index="hnsw") as docs:
        assert docs.search("written while no graph was open", k=1)[0].id == "later"
        assert docs.search("a late arrival about zeppelins", k=1)[0].id == "late"
        assert "d7" not in _ids(docs.search(batch[7]["text"], k=20))
        assert _graph_builds(docs) == 0, "the saved graph was opened and caught up"
