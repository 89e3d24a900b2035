"""The faster write paths write what the slower ones wrote: a document's fields as the old
triggers made them from the ``field_values`` view (schema 10 writes them in Python), and
frontmatter read past the graph walk where its text shows the bounds hold, and notes parsed by
the faster patterns."""

from __future__ import annotations

import enum
import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from store_records import note_record

from vrom import Collection, Document, Embedder, Vault
from vrom.errors import ValidationError
from vrom.ingest import frontmatter, indexer
from vrom.ingest.frontmatter import MAX_DEPTH, split_frontmatter
from vrom.ingest.parse import mask_code, parse_note
from vrom.store import ChunkRecord
from vrom.store.sqlite import SQLiteStore
from vrom.store.storable import as_json_reads_it

HOSTILE_FRONTMATTER: dict[str, Any] = {
    "title": "T",
    "n": 3,
    "f": 2.5,
    "zero": -0.0,
    "one_float": 1.0,
    "yes": True,
    "no": False,
    "none": None,
    "big": 2**63 - 1,
    "small": -(2**63),
    "tags": ["a", "b", "a", 1, 1.0, True, None, ["nested"], {"k": "v", "deep": {"x": 1}}],
    "meta": {"by": "me", "at": 2, "list": ["x", 2, None, ["y"]], "none": None, "obj": {"z": 1}},
    "meta.by": "me",  # a key with a dot, equal to a nested one
    "meta.at": 2.0,  # the same number as the nested one, as a float
    'quote"key': 'é"x',
    "back\\slash": "\\",
    "ünï\tcödé": "ok",
    "empty": "",
    "empty_list": [],
    "empty_map": {},
    "list_of_maps": [{"a": 1}, {"a": 1}, {"a": 2, "b": [1]}],
}


def _chunk(text: str) -> list[ChunkRecord]:
    return [ChunkRecord(0, "", text, 0, len(text), "c-" + text, "in-" + text)]


def _field_rows(conn: sqlite3.Connection, source: str) -> list[tuple[Any, ...]]:
    return conn.execute(
        f"SELECT document_id, key, kind, value, typeof(value) FROM {source}"
        " ORDER BY document_id, key, kind, value, typeof(value)"
    ).fetchall()


def _trigger_rows(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
    """Return the fields the dropped trigger made: the view's rows, INSERT OR IGNORE'd in its
    order into a table with the fields table's primary key."""
    conn.execute(
        "CREATE TEMP TABLE old_fields (key TEXT NOT NULL, kind TEXT NOT NULL, value NOT NULL,"
        " document_id INTEGER NOT NULL, PRIMARY KEY (key, kind, value, document_id))"
        " WITHOUT ROWID"
    )
    for (document_id,) in conn.execute("SELECT id FROM documents ORDER BY id").fetchall():
        conn.execute(
            "INSERT OR IGNORE INTO old_fields(key, kind, value, document_id) SELECT key, kind,"
            " value, document_id FROM field_values WHERE document_id = ?",
            (document_id,),
        )
    return _field_rows(conn, "temp.old_fields")


def test_fields_written_by_the_store_equal_the_views_rows(tmp_path: Path) -> None:
    """Every kind of frontmatter value (nested, listed, equal numbers of two types, keys with
    dots, quotes and escapes), added, then rewritten with other frontmatter, then with none:
    the fields table holds exactly the rows the trigger inserted from the view, types and all."""
    path = tmp_path / "store.db"
    with closing(SQLiteStore(path)) as store:
        first = store.documents.put(note_record("a.md", **HOSTILE_FRONTMATTER), _chunk("a"), [], [])
        store.documents.put(note_record("b.md", **HOSTILE_FRONTMATTER), _chunk("b"), [], [])
        store.documents.put(note_record("c.md", kind="x", n=[1, 2]), _chunk("c"), [], [])
        conn = sqlite3.connect(path)
        try:
            written = _field_rows(conn, "fields")
            assert written == _trigger_rows(conn)
            assert len({row[0] for row in written}) == 3 and len(written) > 40
        finally:
            conn.close()
        store.documents.put(note_record("a.md", kind="y", n=2.5), _chunk("a2"), [], [], first)
        store.documents.put(note_record("c.md"), _chunk("c2"), [], [])
        conn = sqlite3.connect(path)
        try:
            assert _field_rows(conn, "fields") == _trigger_rows(conn)
            kinds = conn.execute("SELECT key, value FROM fields WHERE document_id = ?", (first,))
            assert sorted(kinds.fetchall()) == [("kind", "y"), ("n", 2.5)]
        finally:
            conn.close()
        assert store.integrity_problems() == []


def test_a_field_json_cannot_hold_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    """A non-finite number (the view's JSON could not read it, so the trigger failed the
    write) is refused, and the store holds nothing of the document."""
    with closing(SQLiteStore(tmp_path / "store.db")) as store:
        with pytest.raises(ValidationError, match="finite"), store.transaction():
            store.documents.put(note_record("a.md", x=float("inf")), _chunk("a"), [], [])
        assert store.documents.count() == 0


def _nested(levels: int, style: str) -> str:
    """Return a YAML mapping whose ``x`` nests collections (block mappings, block sequences on
    one line, or flow sequences) ``levels`` deep in all, around one scalar."""
    if levels == 1:
        return "x: v\n"
    if style == "block":
        inner = "".join(f"{' ' * (i + 1)}k{i}:\n" for i in range(levels - 2))
        return "x:\n" + inner + f"{' ' * (levels - 1)}k: v\n"
    if style == "dashes":
        return "x:\n" + "- " * (levels - 1) + "v\n"
    return "x: " + "[" * (levels - 1) + "v" + "]" * (levels - 1) + "\n"


@pytest.mark.parametrize("style", ["block", "dashes", "flow"])
def test_frontmatter_the_text_shows_within_bounds_needs_no_graph_walk(style: str) -> None:
    """The shortcut past the graph walk (`_within_bounds`) is taken only where the walk finds
    nothing: around the nesting limit, with and without aliases."""
    for levels in (1, 2, MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, MAX_DEPTH + 5):
        for raw in (_nested(levels, style), "base: &b [1, 2]\nuse: *b\n" + _nested(levels, style)):
            node = frontmatter._Loader(raw).get_single_node()
            problem = frontmatter._cost_problem(node)
            if frontmatter._within_bounds(raw):
                assert problem is None, (levels, raw)
            assert (levels + 1 > MAX_DEPTH) == (problem is not None and "deeper" in problem)


def test_flat_frontmatter_reads_as_before() -> None:
    """Frontmatter the shortcut takes reads as the walked path reads it."""
    raw = "aliases:\n- \ntags: \n- seedling \npublish: true\ndate: 2024-01-02\nn: 0x1F\n"
    assert frontmatter._within_bounds(raw)
    text = f"---\n{raw}---\nbody"
    assert split_frontmatter(text) == (
        {"aliases": [None], "tags": ["seedling"], "publish": True, "date": "2024-01-02", "n": 31},
        len(text) - 4,
        [],
    )


TRICKY_NOTE = (
    "---\ntags: [fm]\n---\n#start (#paren,#comma) x#no [l](#css) #after-link ![i](p.png)#glued\n"
    "[[Wiki|alias]] ![[Embed]] `#code` [t](n.md) ![img](n2.md)[x](y.md) [[x]]#f [a\n](b.md)\n"
    "```\n#fenced [[NotALink]]\n```\n<!-- #comment [[Hidden]] -->\n#end/sub-tag ,#c2 [[a]][[b]]"
)


def test_the_faster_patterns_find_the_tags_and_links_the_slower_ones_found() -> None:
    """Tags at the body's start, after "(" and ",", not inside or glued to a link; links and
    embeds side by side, one after "!"; nothing inside code, fences or comments. The expected
    values are what the parser before the pattern rewrites gave."""
    note = parse_note(TRICKY_NOTE, "dir/note.md")
    assert note.tags == ["fm", "start", "paren", "comma", "after-link", "end/sub-tag", "c2"]
    assert [(link.kind, link.target, link.position) for link in note.links] == [
        ("wikilink", "Wiki", 87),
        ("embed", "Embed", 102),
        ("markdown", "n.md", 121),
        ("markdown", "y.md", 144),
        ("wikilink", "x", 154),
        ("wikilink", "a", 249),
        ("wikilink", "b", 254),
    ]
    masked = mask_code(TRICKY_NOTE)
    assert len(masked) == len(TRICKY_NOTE)
    assert [i for i, c in enumerate(masked) if c == "\n"] == [
        i for i, c in enumerate(TRICKY_NOTE) if c == "\n"
    ]
    assert "#code" not in masked and "NotALink" not in masked and "Hidden" not in masked
    assert mask_code("plain text, no code") == "plain text, no code"


TABLES = {
    "documents": "SELECT id, path, path_key, name_key, title, frontmatter, content_hash, size,"
    " human_relevance_score, chunk_count, chunk_strategy FROM documents ORDER BY id",
    "chunks": "SELECT * FROM chunks ORDER BY id",
    "keyword index": "SELECT rowid, title, heading_path, body FROM chunks_fts ORDER BY rowid",
    "fields": "SELECT key, kind, value, typeof(value), document_id FROM fields"
    " ORDER BY document_id, key, kind, value",
    "links": "SELECT * FROM links ORDER BY document_id, position, target",
    "tags": "SELECT * FROM tags ORDER BY document_id, tag",
    "texts": "SELECT * FROM document_texts ORDER BY document_id",
    "vectors": "SELECT chunk_id, data, input_hash FROM vectors ORDER BY chunk_id",
}


def _rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    with closing(sqlite3.connect(path)) as conn:
        return {name: conn.execute(sql).fetchall() for name, sql in TABLES.items()}


def _vault(root: Path) -> Path:
    notes = {
        "tricky.md": TRICKY_NOTE,
        "flat.md": "---\naliases:\n- \ntags: \n- seedling \npublish: true\n---\n# Flat\n\nkelp",
        "nested.md": "---\nmeta: {by: me, at: [1, 2.5]}\nlist: [{a: 1}, x]\n---\nbody #t",
        "alias.md": "---\nbase: &b [1, 2]\nuse: *b\n---\n## H ##\n\n" + "long text. " * 300,
        "dir/plain.md": "no frontmatter, [[tricky]] and [x](../flat.md)",
    }
    for name, text in notes.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_a_vault_indexed_in_batches_equals_one_indexed_note_by_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batched index writes row for row what one transaction per note writes."""
    root = _vault(tmp_path / "vault")
    with closing(Vault.open(root, state_dir=tmp_path / "batched", embedder=None)) as vault:
        vault.index()
        batched = _rows(vault.store.path)
    monkeypatch.setattr(indexer, "BATCH_NOTES", 1)
    with closing(Vault.open(root, state_dir=tmp_path / "single", embedder=None)) as vault:
        vault.index()
        single = _rows(vault.store.path)
    assert batched == single
    assert all(batched[name] for name in ("documents", "chunks", "fields", "links", "tags"))


def test_a_collection_added_at_once_equals_one_added_document_by_document(
    tmp_path: Path,
) -> None:
    """One add of every document writes what an add per document writes: documents, chunks,
    their keyword rows, fields, texts, and the vectors given to the chunks."""
    documents = [
        Document(f"d{i}", f"# Part {i}\n\n" + f"words of document {i}. " * (30 + 40 * i), meta)
        for i, meta in enumerate(
            [{"source": "s", "n": 1}, {"source": "s", "tags": ["a", "b"]}, {"x": {"y": True}}, {}]
        )
    ]
    paths = {}
    for name, batches in (("once", [documents]), ("each", [[d] for d in documents])):
        collection = Collection.open(name, embedder=Embedder.fake(), storage=tmp_path)
        for batch in batches:
            collection.add(batch)
        collection.close()
        paths[name] = tmp_path / f"{name}.db"
    once, each = _rows(paths["once"]), _rows(paths["each"])
    assert once == each
    assert len(once["vectors"]) == len(once["chunks"]) > len(documents)


class _Colour(str, enum.Enum):
    RED = "red"


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
    st.just(_Colour.RED),  # a str subclass: JSON reads back its value, a str
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),  # JSON reads a tuple back as a list
        st.dictionaries(st.text(max_size=3), inner, max_size=3),
    ),
    max_leaves=8,
)


def _typed(value: Any) -> Any:
    """The value with each part's exact type, so True, 1 and 1.0 are told apart."""
    if isinstance(value, dict):
        return ("dict", [(type(k).__name__, k, _typed(v)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_typed(v) for v in value])
    return (type(value).__name__, value)


@given(st.dictionaries(st.text(max_size=4), _VALUES, max_size=5))
def test_metadata_is_copied_as_its_json_reads_back_with_or_without_the_round_trip(
    mapping: dict[str, Any],
) -> None:
    """The copy made without JSON (text keys, scalar or list-of-scalar values) is the one JSON
    would make, types and order included, and shares no list with the original."""
    copied = as_json_reads_it(mapping)
    assert _typed(copied) == _typed(json.loads(json.dumps(mapping, ensure_ascii=False)))
    for key, value in copied.items():
        if isinstance(value, list):
            assert value is not mapping[key]
