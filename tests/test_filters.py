"""The one filter grammar (`vrom.filters`): what it refuses, and that both backends' SQL means
what the reference evaluator means, on the same hypothesis-generated filters over the same
documents and memories (fields of mixed kinds, missing fields, lists, nested members, dates)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from postgres_server import StoreSpot
from store_records import note_record

from vrom.errors import ValidationError
from vrom.filters import MAX_DEPTH, MAX_VALUES, holds, matches, parse_filter
from vrom.store import MEMORY_FIELDS, ChunkRecord, MemoryFilter, MemoryRecord, Store, Where
from vrom.store.filter_sql import memory_values

TEXTS = ["a", "A", "b", "é", "", " 2024-01-01", "2024-01-01", "2024-02-30", "2024", "x y"]
TEXTS += ["2024-01-01T10:00:00+02:00", "2023-12-31T23:59:59Z", "2024-06-01 12:00"]
NUMBERS: list[Any] = [0, 1, -1, 1.0, 1.5, 2, 10, -0.25, 2**53, 2**53 + 1, 1e20]
SCALARS: list[Any] = TEXTS + NUMBERS + [True, False]
DATES = ["2024-01-01", "2023-06-01T00:00:00Z", "2024-01-01T09:00:00+01:00", "2025-01-01"]
FIELDS = ["s", "n", "b", "l", "d", "m.x", "tags", "path", "absent"]


def _frontmatter(rng: random.Random) -> dict[str, Any]:
    """A document's frontmatter: each field missing, a scalar of any kind, or a list."""
    data: dict[str, Any] = {}
    for key in ("s", "n", "b", "l", "d", "tags", "path"):
        shape = rng.random()
        if shape < 0.2:
            continue
        if shape < 0.7:
            data[key] = rng.choice(SCALARS)
        else:
            data[key] = rng.sample(SCALARS, rng.randint(0, 3))
    if rng.random() < 0.6:
        data["m"] = {"x": rng.choice(SCALARS), "y": rng.sample(SCALARS, 2)}
    elif rng.random() < 0.5:
        data["m"] = [{"x": rng.choice(SCALARS)}, {"x": rng.choice(SCALARS)}]
    return data


DOCUMENTS = {f"n{i:02}.md": _frontmatter(random.Random(i)) for i in range(40)}
DOCUMENTS["empty.md"] = {}


def _leaf(field: st.SearchStrategy[str], scalar: st.SearchStrategy[Any]) -> Any:
    comparand = st.one_of(st.sampled_from([n for n in NUMBERS]), st.sampled_from(DATES))
    operator = st.one_of(
        st.tuples(st.sampled_from(["$eq", "$ne", "$contains"]), scalar),
        st.tuples(st.sampled_from(["$in", "$nin"]), st.lists(scalar, min_size=1, max_size=4)),
        st.tuples(st.sampled_from(["$gt", "$gte", "$lt", "$lte"]), comparand),
    )
    return st.one_of(
        st.builds(lambda f, v: {f: v}, field, scalar),
        st.builds(lambda f, o: {f: {o[0]: o[1]}}, field, operator),
    )


def _tree(leaf: Any) -> Any:
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.builds(lambda parts: {"$and": parts}, st.lists(inner, min_size=1, max_size=3)),
            st.builds(lambda parts: {"$or": parts}, st.lists(inner, min_size=1, max_size=3)),
            st.builds(lambda a, b: {**a, **b}, inner, inner),
        ),
        max_leaves=6,
    )


DOCUMENT_FILTERS = _tree(_leaf(st.sampled_from(FIELDS), st.sampled_from(SCALARS)))


@pytest.fixture
def filled(store_spot: StoreSpot) -> Iterator[tuple[Store, dict[int, str]]]:
    store = store_spot.open()
    owners: dict[int, str] = {}
    with store.transaction():
        for path, frontmatter in DOCUMENTS.items():
            chunk = ChunkRecord(0, "", path, 0, len(path), "c-" + path)
            record = dataclasses.replace(note_record(path), frontmatter=frontmatter)
            store.documents.put(record, [chunk], [], [])
    for chunk in store.documents.get_chunks(list(range(1, 10_000))):
        owners[chunk.chunk_id] = chunk.path
    assert sorted(owners.values()) == sorted(DOCUMENTS)
    yield store, owners
    store.close()


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(where=DOCUMENT_FILTERS)
def test_filters_mean_on_every_backend_what_the_reference_evaluator_means(
    filled: tuple[Store, dict[int, str]], where: dict[str, Any]
) -> None:
    store, owners = filled
    tree = parse_filter(where)
    assert tree is not None
    found = {owners[i] for i in store.documents.chunk_ids_matching(Where(conditions=(tree,)))}
    expected = {path for path, data in DOCUMENTS.items() if matches(tree, data)}
    assert found == expected, where


MEMORY_TEXTS = ["p1", "P1", "fact", "decision", "active", "archived", "web", "a", "b", "é"]


def _memories() -> list[MemoryRecord]:
    rng = random.Random(28)
    base = 1704067200.0  # 2024-01-01T00:00:00Z
    records = []
    for i in range(30):
        created = base + rng.choice([-86400.0, -1.0, 0.0, 1.0, 3600.0, 86400.0 * 200])
        records.append(
            MemoryRecord(
                id=f"m{i:02}",
                created_unix=created,
                updated_unix=created + rng.choice([0.0, 86400.0 * 400]),
                project=rng.choice([None, "p1", "P1", "p2"]),
                type=rng.choice(["fact", "decision"]),
                title=f"memory {i}",
                content=f"content {i}",
                tags=tuple(rng.sample(["a", "b", "é"], rng.randint(0, 2))),
                source=rng.choice([None, "web"]),
                status=rng.choice(["active", "archived"]),
            )
        )
    return records


MEMORIES = _memories()
_MEMORY_SCALARS = st.sampled_from([*MEMORY_TEXTS, 1, True])
_TEXT_FIELDS = st.sampled_from([k for k, kind in MEMORY_FIELDS.items() if kind != "date"])
_DATE_LEAF = st.builds(
    lambda f, op, d: {f: {op: d}},
    st.sampled_from(["created", "updated"]),
    st.sampled_from(["$gt", "$gte", "$lt", "$lte"]),
    st.sampled_from([*DATES, "2023-12-31T23:59:59Z", "2024-01-01T00:00:01Z"]),
)


def _memory_leaf() -> Any:
    operator = st.one_of(
        st.tuples(st.sampled_from(["$eq", "$ne", "$contains"]), _MEMORY_SCALARS),
        st.tuples(st.sampled_from(["$in", "$nin"]), st.lists(_MEMORY_SCALARS, min_size=1)),
    )
    return st.one_of(
        st.builds(lambda f, v: {f: v}, _TEXT_FIELDS, _MEMORY_SCALARS),
        st.builds(lambda f, o: {f: {o[0]: o[1]}}, _TEXT_FIELDS, operator),
        _DATE_LEAF,
    )


@pytest.fixture
def remembered(store_spot: StoreSpot) -> Iterator[Store]:
    store = store_spot.open()
    for memory in MEMORIES:
        store.memories.put(memory)
    yield store
    store.close()


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(where=_tree(_memory_leaf()))
def test_memory_filters_mean_on_every_backend_what_the_reference_evaluator_means(
    remembered: Store, where: dict[str, Any]
) -> None:
    tree = parse_filter(where, fields=MEMORY_FIELDS)
    assert tree is not None
    found = {m.id for m in remembered.memories.list(MemoryFilter(tree), 1000)}
    expected = {m.id for m in MEMORIES if holds(tree, memory_values(m))}
    assert found == expected, where


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ({"n": {"$regex": "x"}}, "unknown operator '$regex' for 'n'"),
        ({"$not": [{"n": 1}]}, "unknown operator '$not'"),
        ({"n": {"$gt": "soon"}}, "$gt for 'n' takes a number or an ISO 8601 date"),
        ({"n": {"$gt": True}}, "$gt for 'n' takes a number"),
        ({"n": {"$in": []}}, "$in for 'n' needs at least one value"),
        ({"n": {"$in": "a"}}, "$in for 'n' takes a list of scalars"),
        ({"n": {"$nin": [[1]]}}, "$nin for 'n' takes a list of scalars"),
        ({"n": {"$in": list(range(MAX_VALUES + 1))}}, "$in for 'n' holds 1,001 values"),
        ({"n": {"$eq": [1]}}, "$eq for 'n' takes a string, number or boolean, not list"),
        ({"n": {"$contains": None}}, "$contains for 'n' takes a string, number or boolean"),
        ({"n": None}, "value for 'n' must be a string, number, boolean or an object"),
        ({"n": {}}, "value for 'n' must be"),
        ({"n": 2**64}, "the value for 'n' is 18446744073709551616, beyond the 64-bit"),
        ({"n": float("nan")}, "the value for 'n' must be a finite number"),
        ({"n": "\ud800"}, "the value for 'n' is not valid Unicode"),
        ({"n": "a\x00"}, "the value for 'n' holds a NUL character"),
        ({"$and": []}, "$and takes a non-empty list of filter objects"),
        ({"$or": {"n": 1}}, "$or takes a non-empty list of filter objects"),
        ({"$and": [{}]}, "an empty object inside $and/$or tests nothing"),
        ({"$and": ["n"]}, "where must be an object of field to value, not str"),
        ({"": 1}, "field name '' is not valid"),
        ({"a\x00": 1}, "field name"),
        ("n=1", "where must be an object of field to value, not str"),
    ],
)
def test_a_bad_filter_is_one_validation_error_naming_its_key(where: Any, message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_filter(where)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_filters_nest_only_so_deep() -> None:
    where: dict[str, Any] = {"n": 1}
    for _ in range(MAX_DEPTH):
        where = {"$or": [where]}
    assert parse_filter(where) is not None
    with pytest.raises(ValidationError, match="nest deeper than 8 levels"):
        parse_filter({"$and": [where]})


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ({"title": "x"}, "unknown field 'title': filter on project, type, status"),
        ({"created": "2024-01-01"}, "'created' is a date: compare it with $gt"),
        ({"created": {"$gt": 5}}, "$gt for 'created' takes an ISO 8601 date, not 5"),
        ({"project": {"$gt": "2024-01-01"}}, "$gt does not apply to 'project' (a text)"),
        ({"tags": {"$lt": 3}}, "$lt does not apply to 'tags' (a list)"),
    ],
)
def test_a_bad_memory_filter_names_the_field(where: Any, message: str) -> None:
    with pytest.raises(
        ValidationError, match=message.replace("$", r"\$").replace("(", r"\(").replace(")", r"\)")
    ):
        parse_filter(where, fields=MEMORY_FIELDS)


# -- the faces -----------------------------------------------------------------------------

FACE_NOTES = {
    "a.md": "---\nyear: 2021\nstatus: done\npath: archive\ntags: [fm]\n---\n# A\nmaps #inline\n",
    "b.md": "---\nyear: 2019\n---\n# B\nmaps of the hills\n",
    "notes/c.md": "---\nyear: 2024\nreviewed: 2026-03-01\n---\n# C\nmaps of the city #inline\n",
}


def test_a_frontmatter_field_named_path_or_tags_is_filterable_like_any_other(
    write_vault: Any, open_vault: Any
) -> None:
    vault = open_vault(write_vault(FACE_NOTES))
    vault.index()

    def paths(**filters: Any) -> list[str]:
        return sorted(hit.path for hit in vault.search("maps", mode="keyword", **filters))

    assert paths(where={"path": "archive"}) == ["a.md"]  # the frontmatter field, not a folder
    assert paths(where={"tags": "fm"}) == ["a.md"]  # frontmatter only: no inline tag
    assert paths(where={"tags": "inline"}) == []
    assert paths(tags=["inline"]) == ["a.md", "notes/c.md"]  # the note's tags, inline too
    assert paths(path="notes/") == ["notes/c.md"]
    assert paths(path="notes/", where={"year": {"$gte": 2020}}, tags="inline") == ["notes/c.md"]
    assert paths(where={"$or": [{"year": {"$lt": 2020}}, {"reviewed": {"$gt": "2026-01-01"}}]}) == [
        "b.md",
        "notes/c.md",
    ]


def test_memories_keyword_arguments_are_sugar_for_the_filter(tmp_path: Any) -> None:
    from vrom.memories import Memories
    from vrom.store import open_store

    memories = Memories(open_store(str(tmp_path / "m.db")))
    memories.remember("Chose SQLite", "we chose SQLite", type="decision", project="p1")
    memories.remember("SQLite is fast", "SQLite is fast", type="fact", project="p2")
    memories.remember(
        "Old SQLite", "SQLite notes", type="fact", project="p1", timestamp="2020-05-01"
    )

    def titles(**options: Any) -> list[str]:
        return sorted(hit.memory.title for hit in memories.recall("sqlite", k=10, **options))

    assert titles(project="p1") == titles(where={"project": "p1"}) == ["Chose SQLite", "Old SQLite"]
    assert titles(until="2020") == titles(where={"created": {"$lte": "2020-12-31T23:59:59Z"}})
    assert titles(type="fact", where={"project": {"$ne": "p2"}}) == ["Old SQLite"]
    assert [m.title for m in memories.list(where={"type": {"$in": ["decision"]}})] == [
        "Chose SQLite"
    ]
    with pytest.raises(ValidationError, match="unknown field 'title'"):
        memories.recall("sqlite", where={"title": "x"})


def test_cli_where_takes_a_json_filter_with_operators(write_vault: Any, tmp_path: Any) -> None:
    from vrom_cli import run_vrom

    root = write_vault(FACE_NOTES)
    state = tmp_path / "cli-state"
    assert run_vrom(state, "index", str(root), "--quiet").returncode == 0
    done = run_vrom(
        state,
        "search",
        "maps",
        "--json",
        "--vault",
        str(root),
        "--where",
        '{"$or": [{"year": {"$lt": 2020}}, {"status": {"$in": ["done"]}}]}',
        "--where",
        "year=2019",
    )
    assert done.returncode == 0, done.stderr
    assert [hit["path"] for hit in json.loads(done.stdout)["results"]] == ["b.md"]
    bad = run_vrom(
        state, "search", "maps", "--vault", str(root), "--where", '{"year": {"$near": 1}}'
    )
    assert bad.returncode == 1
    assert bad.stderr.strip() == (
        "vrom: error: where: unknown operator '$near' for 'year': use one of $eq, $ne, $gt, $gte,"
        " $lt, $lte, $in, $nin, $contains"
    )


def test_mcp_tools_take_the_filter_object_with_operators(write_vault: Any) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from vrom.server.app import build_server
    from vrom.server.state import ServerState

    state = ServerState(write_vault(FACE_NOTES), embedder="fake:16", watch=False)
    state.open_explicit()

    async def main() -> None:
        async with Client(build_server(state), mode="legacy") as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            for name in ("vault_search", "vault_recall"):
                described = tools[name].input_schema["properties"]["where"]["description"]
                assert "$gte" in described and "$or" in described, name
            found = await client.call_tool(
                "vault_search",
                {"query": "maps", "where": {"year": {"$gte": 2020}}, "path": "notes/"},
            )
            assert not found.is_error, found.content[0].text
            assert [h["path"] for h in found.structured_content["results"]] == ["notes/c.md"]
            refused = await client.call_tool(
                "vault_search", {"query": "maps", "where": {"year": {"$in": []}}}
            )
            assert refused.is_error
            assert "$in for 'year' needs at least one value" in refused.content[0].text
            await client.call_tool(
                "vault_remember", {"title": "Chose SQLite", "content": "x", "type": "decision"}
            )
            recalled = await client.call_tool(
                "vault_recall", {"query": "sqlite", "where": {"type": {"$nin": ["fact"]}}}
            )
            assert not recalled.is_error, recalled.content[0].text
            assert "Chose SQLite" in json.dumps(recalled.structured_content)

    try:
        asyncio.run(main())
    finally:
        state.close()


def _ids_passing(store_spot: StoreSpot, metadata: dict[str, Any], where: dict[str, Any]) -> bool:
    """Return whether a document with ``metadata`` passes ``where`` in this backend's SQL."""
    store = store_spot.open()
    try:
        record = dataclasses.replace(note_record("a.md"), frontmatter=metadata)
        store.documents.put(record, [ChunkRecord(0, "", "a", 0, 1, "c-a")], [], [])
        tree = parse_filter(where)
        assert tree is not None
        return bool(store.documents.chunk_ids_matching(Where(conditions=(tree,))))
    finally:
        store.close()


def test_an_in_list_of_ints_and_floats_filters_on_every_backend(store_spot: StoreSpot) -> None:
    # PostgreSQL refused it: psycopg dumps no list of ints and Decimals mixed
    assert _ids_passing(store_spot, {"s": 1}, {"s": {"$in": [0, 1.0]}})


def test_a_date_no_calendar_holds_is_no_date_on_any_backend(store_spot: StoreSpot) -> None:
    # SQLite's julianday read 2024-02-30 as 2024-03-01; PostgreSQL's stored instant said no date
    assert not _ids_passing(store_spot, {"d": "2024-02-30"}, {"d": {"$gte": "2024-03-01"}})
    assert not matches(parse_filter({"d": {"$gte": "2024-03-01"}}), {"d": "2024-02-30"})
    assert _ids_passing(store_spot, {"d": "2024-03-01"}, {"d": {"$gte": "2024-03-01"}})
