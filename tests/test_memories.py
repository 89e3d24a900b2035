"""Agent memories: remember, recall (keyword and hybrid), list, archive, validation, persistence;
on both store backends (the ``store`` fixture: SQLite and PostgreSQL) but for the SQLite
schema's own tests."""

from __future__ import annotations

import datetime as dt
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from postgres_server import StoreSpot

from vrom import Embedder, Vault
from vrom.errors import ModelError, NotFoundError, StorageError, ValidationError
from vrom.index.codec import encode
from vrom.ingest.embedding import (
    MEMORY_RECIPE,
    MEMORY_RECIPE_META_KEY,
    TURN_CHARS,
    memory_text,
)
from vrom.memories import FINGERPRINT_META_KEY, Memories, Memory
from vrom.store import MemoryFilter, Store
from vrom.store.schema import MIGRATIONS, SCHEMA_VERSION
from vrom.store.sqlite import SQLiteStore

FACTS = {
    "deploy": (
        "Deploys go through CI",
        "Never push to production by hand: the pipeline builds, tests and deploys.",
    ),
    "coffee": ("Coffee preference", "The user drinks espresso without sugar in the morning."),
    "python": ("Python version", "The service runs on Python 3.11 with strict typing."),
}


@pytest.fixture
def store(store_spot: StoreSpot) -> Iterator[Store]:
    s = store_spot.open()
    yield s
    s.close()


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "store.db")
    yield s
    s.close()


@pytest.fixture
def memories(store: Store) -> Memories:
    return Memories(store, Embedder.fake())


def _remember_facts(memories: Memories, **options: Any) -> dict[str, Memory]:
    return {key: memories.remember(*FACTS[key], **options) for key in FACTS}


def test_remember_returns_the_memory_and_get_reads_it_back(memories: Memories) -> None:
    memory = memories.remember(
        "  Deploys go through CI ",
        "Never push to production by hand.",
        type="Decision",
        project="web",
        tags=["#Ops", "ci", "ops"],
        related=["notes/deploy.md"],
        source="session 42",
    )
    assert re.fullmatch(r"mem_[0-9a-f]{20}", memory.id)
    assert memory.title == "Deploys go through CI" and memory.type == "decision"
    assert memory.tags == ("ops", "ci") and memory.related == ("notes/deploy.md",)
    assert memory.status == "active" and memory.superseded_by is None
    stamp = dt.datetime.fromisoformat(memory.timestamp)
    assert stamp.utcoffset() == dt.timedelta(0)
    assert abs(stamp.timestamp() - memory.created_unix) < 1
    assert memories.get(memory.id) == memory


def test_ids_sort_by_creation_and_list_is_newest_first(memories: Memories) -> None:
    made = list(_remember_facts(memories).values())
    assert sorted(m.id for m in made) == [m.id for m in made]
    assert [m.id for m in memories.list()] == [m.id for m in reversed(made)]
    assert [m.id for m in memories.list(limit=2)] == [made[2].id, made[1].id]


def test_list_filters_by_project_type_and_status(memories: Memories) -> None:
    a = memories.remember("A", "alpha", project="web", type="fact")
    b = memories.remember("B", "beta", project="web", type="todo")
    c = memories.remember("C", "gamma", project="cli", type="fact")
    memories.archive(c.id)
    assert {m.id for m in memories.list(project="web")} == {a.id, b.id}
    assert {m.id for m in memories.list(type="fact")} == {a.id}
    assert {m.id for m in memories.list(type="fact", status="any")} == {a.id, c.id}
    assert [m.id for m in memories.list(status="archived")] == [c.id]
    assert memories.list(project="nowhere") == []


def test_keyword_recall_without_an_embedder(store: Store) -> None:
    memories = Memories(store)
    made = _remember_facts(memories)
    hits = memories.recall("how do we deploy to production?")
    assert hits[0].memory == made["deploy"]
    assert set(hits[0].scores) == {"bm25"} and hits[0].score == hits[0].scores["bm25"] > 0
    assert hits[0].score_kind == "bm25"
    assert {h.memory.id for h in hits} == {made["deploy"].id}, "only keyword matches"
    assert memories.recall("espresso")[0].memory.id == made["coffee"].id
    assert memories.recall("tea") == []


def test_hybrid_recall_fuses_keyword_and_vector_ranks(memories: Memories) -> None:
    made = _remember_facts(memories)
    hits = memories.recall("deploys production pipeline", k=3)
    assert hits[0].memory.id == made["deploy"].id
    assert {"bm25", "vector", "fused", "rrf"} <= set(hits[0].scores)
    assert hits[0].score == hits[0].scores["fused"] and hits[0].score_kind == "fused"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert len(memories.recall("deploys", k=1)) == 1


def test_recall_filters_by_project_type_and_status(memories: Memories) -> None:
    web = memories.remember("Deploy web", "Deploy the web app with CI.", project="web")
    cli = memories.remember("Deploy cli", "Deploy the cli with CI.", project="cli", type="todo")
    old = memories.remember("Deploy by hand", "Deploy by hand with scp.", project="web")
    memories.archive(old.id, "superseded", superseded_by=web.id)
    assert {h.memory.id for h in memories.recall("deploy", project="web")} == {web.id}
    assert {h.memory.id for h in memories.recall("deploy", type="todo")} == {cli.id}
    assert {h.memory.id for h in memories.recall("deploy", status="superseded")} == {old.id}
    assert {h.memory.id for h in memories.recall("deploy", status="any")} == {
        web.id,
        cli.id,
        old.id,
    }
    assert old.id not in {h.memory.id for h in memories.recall("scp hand")}


def test_a_memory_keeps_when_it_happened_and_recall_filters_by_time(memories: Memories) -> None:
    may = memories.remember("Support group", "Went to a support group.", timestamp="8 May, 2023")
    june = memories.remember(
        "Support group again", "Went to the support group again.", timestamp="2023-06-27T10:37Z"
    )
    now = memories.remember("Support group plans", "Will go to the support group.")
    assert may.timestamp.startswith("2023-05-08T00:00:00") and may.created_unix == pytest.approx(
        dt.datetime(2023, 5, 8, tzinfo=dt.timezone.utc).timestamp()
    )
    assert june.created_unix == dt.datetime(2023, 6, 27, 10, 37, tzinfo=dt.timezone.utc).timestamp()
    assert may.id < june.id < now.id, "ids still sort by when they were stored"

    def found(**options: Any) -> set[str]:
        return {h.memory.id for h in memories.recall("support group", k=10, **options)}

    assert found() == {may.id, june.id, now.id}
    assert found(since="2023-06-01") == {june.id, now.id}
    assert found(until="2023-06-01") == {may.id}
    assert found(since="2023-05-08", until="2023-06-27T10:37:00Z") == {may.id, june.id}, "inclusive"
    assert found(since=june.created_unix + 1, until=time.time() + 60) == {now.id}
    assert found(since="2024-01-01", until="2023-01-01") == set()
    assert found(mode="keyword", until="2023-06-01") == {may.id}
    assert found(mode="vector", since="2023-06-01") == {june.id, now.id}
    assert memories.list(status="any", limit=3)[0].id == now.id


def test_recency_decay_favours_recent_memories_when_asked(memories: Memories) -> None:
    now = time.time()
    old = memories.remember(
        "Deploy checklist",
        "Deploy checklist: deploy the web app on Tuesday.",
        timestamp=now - 90 * 86_400,
    )
    new = memories.remember("Deploy note", "Deploy moved to Thursday.", timestamp=now - 86_400)
    plain = memories.recall("deploy checklist tuesday", k=2)
    assert [h.memory.id for h in plain] == [old.id, new.id] and "recency" not in plain[0].scores
    recent = memories.recall("deploy checklist tuesday", k=2, half_life_days=7)
    assert [h.memory.id for h in recent] == [new.id, old.id]
    by_id = {h.memory.id: h for h in recent}
    assert by_id[new.id].scores["recency"] == pytest.approx(0.5 ** (1 / 7), rel=1e-3)
    assert by_id[old.id].scores["recency"] == pytest.approx(0.5 ** (90 / 7), abs=1e-6)  # 6 places
    assert by_id[old.id].score == pytest.approx(
        by_id[old.id].scores["fused"] * by_id[old.id].scores["recency"], rel=1e-5
    )
    for bad in (0, -1, True, float("inf"), "7"):
        with pytest.raises(ValidationError, match="half_life_days must be a positive number"):
            memories.recall("deploy", half_life_days=bad)


def test_recall_looks_for_memories_to_embed_only_after_one_was_added(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import vrom.corpus

    calls: list[int] = []
    real = vrom.corpus.embed_missing_memories
    monkeypatch.setattr(
        vrom.corpus, "embed_missing_memories", lambda *a: calls.append(1) or real(*a)
    )
    with_model, plain = Memories(store, Embedder.fake()), Memories(store)
    with_model.remember("Coffee", "Espresso without sugar.")
    with_model.recall("espresso", mode="vector")
    with_model.recall("espresso", mode="vector")
    assert calls == [1], "nothing added since: no look"
    tea = plain.remember("Tea", "Green tea in the afternoon.")  # no vector yet
    hits = with_model.recall("green tea afternoon", mode="vector", k=1)
    assert calls == [1, 1] and hits[0].memory.id == tea.id, "embedded, then found by meaning"
    with_model.embed(rebuild=True)  # every vector dropped and made again: the look is redone
    with_model.recall("tea", mode="vector")
    assert calls == [1, 1, 1]


def test_recall_runs_each_mode(memories: Memories) -> None:
    made = _remember_facts(memories)
    keyword = memories.recall("espresso sugar", mode="keyword")
    vector = memories.recall("espresso sugar", mode="vector")
    hybrid = memories.recall("espresso sugar", mode="hybrid")
    assert keyword[0].memory.id == vector[0].memory.id == hybrid[0].memory.id == made["coffee"].id
    assert (keyword[0].score_kind, vector[0].score_kind, hybrid[0].score_kind) == (
        "bm25",
        "cosine",
        "fused",
    )
    assert set(vector[0].scores) == {"vector"} and set(keyword[0].scores) == {"bm25"}
    assert len(vector) == 3, "vector recall returns the nearest even without a shared word"
    with pytest.raises(ValidationError, match="mode must be one of"):
        memories.recall("espresso", mode="rerank")


def test_recall_by_meaning_needs_an_embedder(store: Store) -> None:
    plain = Memories(store)
    plain.remember("Coffee", "Espresso.")
    assert plain.recall("espresso")[0].score_kind == "bm25"
    with pytest.raises(ValidationError, match="vector recall needs an embedder"):
        plain.recall("espresso", mode="vector")


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"since": "yesterday"}, "since must be a date or time"),
        ({"until": "31 June, 2023"}, "until must be a date or time"),
        ({"since": True}, "since must be a date or time"),
        ({"until": float("nan")}, "until must be a date or time"),
    ],
)
def test_time_bounds_must_name_an_instant(
    memories: Memories, options: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(ValidationError, match=fragment):
        memories.recall("anything", **options)


def test_a_timestamp_that_names_no_instant_is_refused(memories: Memories) -> None:
    with pytest.raises(ValidationError, match="timestamp must be a date or time"):
        memories.remember("T", "C", timestamp="the day after")
    assert memories.stats().total == 0


def test_archive_and_supersede(memories: Memories) -> None:
    old = memories.remember("Old rule", "Tabs.")
    new = memories.remember("New rule", "Spaces.")
    archived = memories.archive(new.id)
    assert archived.status == "archived" and archived.superseded_by is None
    assert archived.updated_unix >= archived.created_unix
    superseded = memories.archive(old.id, "superseded", superseded_by=new.id)
    assert superseded.status == "superseded" and superseded.superseded_by == new.id
    assert memories.get(old.id) == superseded
    assert memories.list() == []


@pytest.mark.parametrize(
    ("status", "superseded_by", "error"),
    [
        ("superseded", None, ValidationError),
        ("superseded", "self", ValidationError),
        ("archived", "other", ValidationError),
        ("superseded", "mem_missing", NotFoundError),
        ("active", None, ValidationError),
        ("deleted", None, ValidationError),
    ],
)
def test_archive_refuses_what_makes_no_sense(
    memories: Memories, status: str, superseded_by: str | None, error: type[Exception]
) -> None:
    memory = memories.remember("Rule", "Text.")
    other = memories.remember("Other", "Text.")
    successor = {"self": memory.id, "other": other.id}.get(superseded_by or "", superseded_by)
    with pytest.raises(error):
        memories.archive(memory.id, status, superseded_by=successor)
    assert memories.get(memory.id).status == "active"


def test_unknown_ids_are_not_found(memories: Memories) -> None:
    with pytest.raises(NotFoundError, match="mem_nope"):
        memories.get("mem_nope")
    with pytest.raises(NotFoundError, match="mem_nope"):
        memories.archive("mem_nope")


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"title": "  "}, "title must not be blank"),
        ({"title": "x" * 201}, "title is 201 characters"),
        ({"title": "two\nlines"}, "title must not hold line breaks"),
        ({"title": 5}, "title must be a string"),
        ({"content": ""}, "content must not be blank"),
        ({"content": "x" * 20_001}, "content is 20,001 characters"),
        ({"content": "nul \x00 inside"}, "NUL"),
        ({"type": "Not a type!"}, "type 'Not a type!'"),
        ({"type": "x" * 41}, "type"),
        ({"type": ""}, "type"),
        ({"tags": "ops"}, "tags must be a list of strings"),
        ({"tags": ["ok", 3]}, "each of tags must be a string"),
        ({"tags": ["#"]}, "each of tags must not be blank"),
        ({"tags": [f"t{i}" for i in range(51)]}, "tags holds 51 items"),
        ({"related": [""]}, "each of related must not be blank"),
        ({"project": " "}, "project must not be blank"),
        ({"source": 1}, "source must be a string"),
    ],
)
def test_remember_validates_its_input(
    memories: Memories, options: dict[str, Any], fragment: str
) -> None:
    arguments: dict[str, Any] = {"title": "Title", "content": "Content", **options}
    with pytest.raises(ValidationError, match=re.escape(fragment)) as caught:
        memories.remember(arguments.pop("title"), arguments.pop("content"), **arguments)
    assert caught.value.code == "invalid_value"
    assert memories.stats().total == 0


def test_free_text_types_are_allowed(memories: Memories) -> None:
    assert memories.remember("T", "C", type="meeting-notes").type == "meeting-notes"


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.recall("   "),
        lambda m: m.recall("x", k=0),
        lambda m: m.recall("x", status="deleted"),
        lambda m: m.recall("x", type="Not a type!"),
        lambda m: m.list(limit=0),
        lambda m: m.list(limit=True),
        lambda m: m.list(status="gone"),
        lambda m: m.get(""),
    ],
)
def test_reads_validate_their_arguments(memories: Memories, call: Any) -> None:
    with pytest.raises(ValidationError):
        call(memories)


def test_memories_persist_across_reopening(store_spot: StoreSpot) -> None:
    first = store_spot.open()
    made = _remember_facts(Memories(first, Embedder.fake()), project="p")
    first.close()
    second = store_spot.open(create=False)
    try:
        memories = Memories(second, Embedder.fake())
        assert memories.get(made["python"].id) == made["python"]
        assert memories.stats().embedded == len(FACTS)
        assert memories.recall("python typing")[0].memory.id == made["python"].id
        assert second.integrity_problems() == []
    finally:
        second.close()


def test_memories_remembered_without_a_model_are_embedded_when_recalled(
    store: Store,
) -> None:
    made = _remember_facts(Memories(store))
    assert Memories(store).stats().embedded == 0
    memories = Memories(store, Embedder.fake())
    hits = memories.recall("espresso sugar", k=3)
    assert hits[0].memory.id == made["coffee"].id and "vector" in hits[0].scores
    assert memories.stats().embedded == len(FACTS)


def test_another_model_is_refused_until_an_explicit_rebuild(store: Store) -> None:
    made = _remember_facts(Memories(store, Embedder.fake(64)))
    other = Memories(store, Embedder.fake(32))
    for call in (lambda: other.recall("espresso"), lambda: other.remember("New", "Text.")):
        with pytest.raises(ModelError, match=r"fake-hashed-words \(64 d\).*\(32 d\)"):
            call()
    assert other.stats().embedded == len(FACTS), "no memory vector was dropped"
    assert other.stats().total == len(FACTS), "nothing was written"
    assert other.embed(rebuild=True) == len(FACTS)
    assert store.get_meta(FINGERPRINT_META_KEY) == Embedder.fake(32).fingerprint.to_json()
    assert other.recall("espresso")[0].memory.id == made["coffee"].id
    other.remember("New", "Remembered with the 32-dimension model.")
    assert other.stats().embedded == len(FACTS) + 1


def test_the_model_loads_only_when_needed(store: Store) -> None:
    loads: list[int] = []

    def load() -> Embedder:
        loads.append(1)
        return Embedder.fake()

    memories = Memories(store, load)
    memory = memories.remember("T", "C")
    assert loads == [1]
    lazy = Memories(store, load)
    lazy.list()
    lazy.get(memory.id)
    lazy.archive(memory.id)
    lazy.stats()
    assert loads == [1], "no model for reads and archiving"
    lazy.recall("C", status="any")
    lazy.recall("T", status="any")
    assert loads == [1, 1]


def test_cjk_memories_are_found_by_a_word_inside_a_sentence(store: Store) -> None:
    memories = Memories(store)
    tokyo = memories.remember("会議の予定", "来週、東京都で会議があります。", project="日本")
    memories.remember("Other", "Nothing in Japanese here.")
    assert [h.memory.id for h in memories.recall("東京")] == [tokyo.id]
    assert [h.memory.id for h in memories.recall("会議", project="日本")] == [tokyo.id]


def test_tags_are_searched(store: Store) -> None:
    memories = Memories(store)
    tagged = memories.remember("Rule", "Keep it short.", tags=["style-guide"])
    assert [h.memory.id for h in memories.recall("style")] == [tagged.id]


def test_stats_count_by_status_type_and_project(memories: Memories) -> None:
    a = memories.remember("A", "a", project="web", type="fact")
    memories.remember("B", "b", project="web")
    memories.remember("C", "c")
    memories.archive(a.id)
    stats = memories.stats()
    assert stats.total == 3 and stats.embedded == 3
    assert stats.by_status == {"active": 2, "archived": 1}
    assert stats.by_type == {"note": 2, "fact": 1}
    assert stats.by_project == {"web": 2}, "memories without a project are not counted there"


def test_integrity_checks_cover_memories(sqlite_store: SQLiteStore) -> None:
    store = sqlite_store
    memories = Memories(store, Embedder.fake())
    made = _remember_facts(memories)
    memories.archive(made["coffee"].id, "superseded", superseded_by=made["python"].id)
    assert store.integrity_problems() == []
    raw = sqlite3.connect(store.location, isolation_level=None)
    try:
        raw.execute("DELETE FROM memories_fts WHERE memory_id = ?", (made["deploy"].id,))
        raw.execute(
            "INSERT INTO memories_fts(memory_id, title, content, tags) VALUES ('ghost', 'g', 'g', '')"
        )
    finally:
        raw.close()
    problems = store.integrity_problems()
    assert "1 memories missing from the memory keyword index" in problems
    assert "1 memory keyword index rows without a memory" in problems


def test_the_schema_refuses_inconsistent_rows(sqlite_store: SQLiteStore) -> None:
    store = sqlite_store
    memory = Memories(store, Embedder.fake()).remember("T", "C")
    raw = sqlite3.connect(store.location, isolation_level=None)
    try:
        with pytest.raises(sqlite3.IntegrityError):
            raw.execute("UPDATE memories SET status = 'superseded' WHERE id = ?", (memory.id,))
        with pytest.raises(sqlite3.IntegrityError):
            raw.execute("UPDATE memories SET status = 'deleted' WHERE id = ?", (memory.id,))
        raw.execute("PRAGMA foreign_keys = ON")
        raw.execute("DELETE FROM memories WHERE id = ?", (memory.id,))
        left = raw.execute(
            "SELECT (SELECT count(*) FROM memories_fts) + (SELECT count(*) FROM memory_vectors)"
        ).fetchone()[0]
        assert left == 0, "the keyword entry and the vector go with the memory"
    finally:
        raw.close()
    assert store.integrity_problems() == []


def test_a_version_4_store_gains_memories(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    raw = sqlite3.connect(path)
    for migration in MIGRATIONS[:4]:
        raw.executescript(migration.script)
    raw.execute("INSERT INTO meta(key, value) VALUES ('schema_version', '4')")
    raw.commit()
    raw.close()
    store = SQLiteStore(path, create=False)
    try:
        assert store.describe()["schema_version"] == SCHEMA_VERSION == 10
        memory = Memories(store).remember("Upgraded", "The store was migrated.")
        assert Memories(store).recall("migrated")[0].memory == memory
        assert store.integrity_problems() == []
    finally:
        store.close()


def test_ids_made_in_the_same_millisecond_still_sort_in_order() -> None:
    from vrom.memories import _new_id

    ids = [_new_id(1_700_000_000.0) for _ in range(200)]
    assert ids == sorted(ids) and len(set(ids)) == 200
    assert _new_id(1_600_000_000.0) > ids[-1], "a clock that steps back does not reorder ids"


def test_a_vault_rebuild_re_embeds_its_memories_with_the_new_model(tmp_path: Path) -> None:
    vault_dir = tmp_path / "vault"
    vault_dir.mkdir()
    (vault_dir / "Coffee.md").write_text("# Coffee\n\nEspresso without sugar.\n", encoding="utf-8")
    with Vault.open(vault_dir, tmp_path / "state", embedder=Embedder.fake(64)) as vault:
        vault.index()
        made = _remember_facts(vault.memories)
    with Vault.open(vault_dir, tmp_path / "state", embedder=Embedder.fake(32)) as vault:
        with pytest.raises(ModelError, match=r"\(64 d\)"):
            vault.memories.recall("espresso")
        assert vault.embed(rebuild=True) == 1, "one chunk re-embedded"
        assert vault.memories.stats().embedded == len(FACTS), "and every memory"
        assert vault.memories.recall("espresso")[0].memory.id == made["coffee"].id
        assert vault.search("espresso", mode="vector")[0].path == "Coffee.md"


def test_memories_past_the_threshold_are_recalled_through_an_hnsw_graph(
    tmp_path: Path,
) -> None:
    vault_dir = tmp_path / "vault"
    vault_dir.mkdir()
    with Vault.open(vault_dir, tmp_path / "state", embedder=Embedder.fake(), hnsw_threshold=2) as v:
        made = _remember_facts(v.memories)
        assert v.memories.recall("espresso sugar", k=1)[0].memory.id == made["coffee"].id
        assert type(v.corpus._memory_index.wait_for_graph()).__name__ == "HnswIndex"
        assert list((tmp_path / "state").rglob("store.db.memories.hnsw.usearch")), "cached"
        v.memories.archive(made["coffee"].id)  # the filter keeps it out, graph or not
        assert all(h.memory.id != made["coffee"].id for h in v.memories.recall("espresso"))


def _vector_of(store: Store, memory_id: str) -> bytes:
    keys = store.memories.keys_matching(MemoryFilter())
    key = next(key for key, m in store.memories.by_keys(keys).items() if m.id == memory_id)
    return store.memories.vectors.of([key])[key]


def _embedded(text: str) -> bytes:
    return encode(Embedder.fake().embed_documents([text]), "float32")[0]


def test_a_memory_from_a_source_is_embedded_after_the_turns_before_it(store: Store) -> None:
    memories = Memories(store, Embedder.fake())
    turns = [
        memories.remember("Chat", "Did you paint the sunrise over the lake?", source="chat 1"),
        memories.remember("Chat", "Yeah, I painted that last year!", source="chat 1"),
        memories.remember("Other", "The build is green", source="standup"),
        memories.remember("Chat", "It hangs in my kitchen now.", source="chat 1"),
    ]
    alone = memories.remember("Coffee", "Espresso, no sugar")
    first, second, other, third = (_vector_of(store, m.id) for m in turns)
    assert first == _embedded("Chat\n\nDid you paint the sunrise over the lake?"), "no turn before"
    assert second == _embedded(
        "Chat\n\nDid you paint the sunrise over the lake?\nYeah, I painted that last year!"
    )
    assert other == _embedded("Other\n\nThe build is green"), "another source's turns are not its"
    assert third == _embedded(
        "Chat\n\nDid you paint the sunrise over the lake?\nYeah, I painted that last year!\n"
        "It hangs in my kitchen now."
    ), "the two before it, oldest first"
    assert _vector_of(store, alone.id) == _embedded("Coffee\n\nEspresso, no sugar")
    # what the vague turn answers is found by meaning; what is shown is the turn alone
    hits = memories.recall("sunrise painting", k=3, mode="vector")
    assert turns[1].id in [hit.memory.id for hit in hits]
    assert next(h for h in hits if h.memory.id == turns[1].id).memory.content == (
        "Yeah, I painted that last year!"
    )
    # memories stored without a model are embedded the same way by the next recall
    plain = Memories(store)
    late = plain.remember("Chat", "And one of the sea.", source="chat 1")
    memories.recall("sea", k=1)
    assert _vector_of(store, late.id) == _embedded(
        "Chat\n\nYeah, I painted that last year!\nIt hangs in my kitchen now.\nAnd one of the sea."
    )


def test_only_the_end_of_a_long_turn_before_is_embedded(store: Store) -> None:
    memories = Memories(store, Embedder.fake())
    long_turn = " ".join(f"word{n}" for n in range(200))
    memories.remember("Chat", long_turn, source="chat")
    reply = memories.remember("Chat", "Agreed.", source="chat")
    end = memory_text(store.memories.get(reply.id), store.memories.preceding("chat", reply.id, 2))
    context = end.split("\n\n", 1)[1].split("\n")[0]
    assert len(context) <= TURN_CHARS and long_turn.endswith(context), "its end, whole words"
    assert context.startswith("word") and "word199" in context and "word0 " not in context
    assert _vector_of(store, reply.id) == _embedded(end)


def test_memory_vectors_from_before_the_recipe_are_made_again_only_when_it_changes_them(
    store: Store,
) -> None:
    fake = Embedder.fake()
    plain = Memories(store)
    chat = [plain.remember("Chat", text, source="chat") for text in ("Hello there", "Hi!")]
    lone = plain.remember("Coffee", "Espresso", source="kitchen")
    # vectors as a store written before recipes holds them: title and content alone
    store.memories.vectors.put(
        [(m.id, _embedded(f"{m.title}\n\n{m.content}")) for m in (*chat, lone)]
    )
    store.set_meta(FINGERPRINT_META_KEY, fake.fingerprint.to_json())
    assert store.get_meta(MEMORY_RECIPE_META_KEY) is None
    Memories(store, fake).recall("hello", k=2)
    assert store.get_meta(MEMORY_RECIPE_META_KEY) == MEMORY_RECIPE
    assert _vector_of(store, chat[1].id) == _embedded("Chat\n\nHello there\nHi!"), "made again"
    assert store.memories.vectors.count() == 3


def test_memory_vectors_from_before_the_recipe_are_kept_when_it_does_not_change_them(
    store: Store,
) -> None:
    fake = Embedder.fake()
    plain = Memories(store)
    made = [plain.remember(*FACTS[key], source=key) for key in FACTS]  # one memory a source
    store.memories.vectors.put([(m.id, _embedded(f"{m.title}\n\n{m.content}")) for m in made])
    store.set_meta(FINGERPRINT_META_KEY, fake.fingerprint.to_json())
    generation = store.memories.vectors.generation()
    Memories(store, fake).recall("espresso", k=1)
    assert store.get_meta(MEMORY_RECIPE_META_KEY) == MEMORY_RECIPE
    assert store.memories.vectors.generation() == generation, "nothing dropped or re-embedded"


def test_a_memory_longer_than_a_turn_is_embedded_alone(store: Store) -> None:
    memories = Memories(store, Embedder.fake())
    memories.remember("Page", "First part.", source="book")
    long_content = "The lake at dawn was still. " * 30
    page = memories.remember("Page", long_content, source="book")
    assert _vector_of(store, page.id) == _embedded(f"Page\n\n{long_content.strip()}")


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_a_question_that_names_a_person_recalls_that_person_s_turns(
    memories: Memories, mode: str
) -> None:
    """A turn names its speaker ("Bo: ..."), and a question's own words ("what", "did") are
    not searched for, so a question naming one finds that person's turn before another's on
    the same subject, though the turns before a turn (embedded with it) name the other
    speaker. (The fake model matches words, not meaning: vector mode alone is measured with
    the real one, on LoCoMo.)"""
    conversation = [
        "Ana: I painted a sunrise over the lake last summer.",
        "Bo: Nice! I went hiking in the mountains.",
        "Ana: Did you take photos up there?",
        "Bo: I painted the mountains at dawn afterwards.",
    ]
    turns = [memories.remember("Chat", text, source="chat") for text in conversation]
    for question, speaker in [("What did Bo paint?", turns[3]), ("What did Ana paint?", turns[0])]:
        hits = memories.recall(question, k=2, mode=mode)
        assert hits[0].memory.id == speaker.id, (question, [h.memory.content for h in hits])


def test_closing_a_vaults_memories_leaves_the_vault_open(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("# A\n\nThe heron waits.\n", encoding="utf-8")
    with Vault.open(tmp_path / "notes", state_dir=tmp_path / "state") as vault:
        vault.index()
        with vault.memories as memories:
            memories.remember("heron", "the heron waits by the pond")
        assert vault.search("heron", k=1)[0].path == "a.md", "the vault is still open"
        assert [m.title for m in vault.memories.list()] == ["heron"]


def test_closing_memories_opened_from_a_store_closes_their_core(tmp_path: Path) -> None:
    memories = Memories(SQLiteStore(tmp_path / "store.db"))
    memories.remember("heron", "the heron waits by the pond")
    memories.close()
    with pytest.raises(StorageError):
        memories.list()
