"""Issue 26 item 5: text PostgreSQL cannot hold (a NUL character, a lone surrogate) is handled by
one rule on every backend (`vrom.store.storable`), and a sync names the note it skips.

Every test runs on SQLite and on PostgreSQL and expects the same answers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from postgres_server import StoreSpot
from store_records import note_record

import vrom.store
from vrom import Embedder, ValidationError, Vault
from vrom.documents import Document, validated_batch
from vrom.store import (
    ChunkRecord,
    DocumentRecord,
    LinkRecord,
    MemoryRecord,
    Store,
    open_store,
    sql_document_writes,
)

OpenBackendVault = Callable[..., Vault]
GOOD = {f"n{i}.md": f"# Note {i}\n\nBananas and apples, note {i}.\n" for i in range(5)}
NUL_NOTE = "# Bad\n\n" + "Pears are nice. " * 600 + "\x00 and a tail.\n"
"""A note whose only NUL byte comes after its first 8 KB (the reader used to look no further)."""


@pytest.fixture
def store(store_spot: StoreSpot) -> Iterator[Store]:
    s = store_spot.open()
    yield s
    s.close()


def _chunk(text: str, heading: str = "H") -> ChunkRecord:
    return ChunkRecord(0, heading, text, 0, len(text), "c-" + text.encode("utf-8", "replace").hex())


def _link(alias: str) -> LinkRecord:
    return LinkRecord("wikilink", "Other", "other", None, alias, 0)


NUL = "a\x00b"
SURROGATE = "a\udcffb"
Write = tuple[DocumentRecord, list[ChunkRecord], list[LinkRecord], list[str]]
UNSTORABLE_WRITES: dict[str, Callable[[], Write]] = {
    "chunk text": lambda: (note_record("x.md"), [_chunk(NUL)], [], []),
    "a lone surrogate": lambda: (note_record("x.md"), [_chunk(SURROGATE)], [], []),
    "title": lambda: (note_record("x.md", title=NUL), [_chunk("ok")], [], []),
    "heading": lambda: (note_record("x.md"), [_chunk("ok", heading=NUL)], [], []),
    "frontmatter": lambda: (note_record("x.md", status={"deep": [NUL]}), [_chunk("ok")], [], []),
    "tag": lambda: (note_record("x.md"), [_chunk("ok")], [], [NUL]),
    "link": lambda: (note_record("x.md"), [_chunk("ok")], [_link(NUL)], []),
    "document text": lambda: (note_record("x.md", text=NUL), [_chunk(NUL)], [], []),
}


@pytest.mark.parametrize("part", sorted(UNSTORABLE_WRITES))
def test_text_no_store_can_hold_is_refused_the_same_way_on_every_backend(
    store: Store, part: str
) -> None:
    write = UNSTORABLE_WRITES[part]()
    with pytest.raises(ValidationError, match=r"'x\.md'.*no vrom store can hold"):
        store.documents.put(*write)
    assert store.documents.count() == 0
    good = vrom.store.DocumentWrite(note_record("good.md"), [_chunk("fine words")], [], [])
    with pytest.raises(ValidationError, match=r"'x\.md'"):
        store.documents.put_many([good, vrom.store.DocumentWrite(*write)])
    assert store.documents.count() == 0, "nothing of the batch was written"


def test_a_memory_no_store_can_hold_is_refused_on_every_backend(store: Store) -> None:
    memory = MemoryRecord("m1", 1.0, 1.0, None, "note", "Title", "content")
    for bad in (
        dataclasses.replace(memory, content=NUL),
        dataclasses.replace(memory, title=SURROGATE),
        dataclasses.replace(memory, tags=(NUL,)),
    ):
        with pytest.raises(ValidationError, match=r"memory 'm1'.*no vrom store can hold"):
            store.memories.put(bad)
    store.memories.put(memory)
    assert store.memories.get("m1") == memory


@pytest.mark.parametrize(
    "document",
    [
        Document("a", "text with a NUL\x00 inside"),
        Document("a", "text", {"k": ["a NUL\x00 in metadata"]}),
        Document("a", "a lone surrogate \udcff"),
    ],
)
def test_a_collection_refuses_text_no_store_can_hold_before_anything_is_written(
    document: Document,
) -> None:
    with pytest.raises(ValidationError, match=r"document 'a' \(#1\).*no vrom store can hold"):
        validated_batch([document])


def test_a_note_with_a_nul_byte_after_its_first_8_kb_is_skipped_on_every_backend(
    write_vault: Callable[[dict[str, str]], Path], open_backend_vault: OpenBackendVault
) -> None:
    root = write_vault({**GOOD, "bad.md": NUL_NOTE})
    vault = open_backend_vault(root)
    summary = vault.index()
    assert summary.skipped == 1 and summary.added == len(GOOD)
    assert [(w.path, w.reason) for w in summary.warnings] == [
        ("bad.md", "skipped: binary content (NUL bytes)")
    ]
    assert "bad.md" not in vault.store.documents.states()


@pytest.fixture
def older_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Vault]:
    """A vault whose local store an older vrom wrote: it holds a note with a NUL character
    (SQLite held one, and the reader looked at a file's first 8 KB only)."""
    root = tmp_path / "notes"
    root.mkdir()
    for name, text in GOOD.items():
        (root / name).write_text(text, encoding="utf-8")
    vault = Vault.open(root, tmp_path / "state", embedder=Embedder.fake(16), local=True)
    vault.index()
    with monkeypatch.context() as older:
        older.setattr(sql_document_writes, "check_document", lambda *_: None)
        vault.store.documents.put(
            note_record("bad.md", title="Bad"), [_chunk("Pears\x00 are nice.")], [], []
        )
    yield vault
    vault.close()


def test_sync_names_the_note_it_skips_and_leaves_the_namespace_usable(
    older_store: Vault, store_spot: StoreSpot
) -> None:
    where: dict[str, Any] = {"database_url": store_spot.location}
    if store_spot.namespace is not None:
        where["namespace"] = store_spot.namespace
    summary = older_store.sync_to(**where)
    assert (summary.added, summary.skipped) == (len(GOOD), 1)
    assert [w.path for w in summary.warnings] == ["bad.md"]
    assert "'bad.md' holds a NUL character" in summary.warnings[0].reason
    again = older_store.sync_to(**where)
    assert (again.added, again.unchanged, again.skipped) == (0, len(GOOD), 1)
    target = open_store(store_spot.location, namespace=store_spot.namespace, create=False)
    try:
        assert sorted(target.documents.states()) == sorted(GOOD)
        assert target.get_meta("vault_root") == str(older_store.root), "a finished sync"
        assert target.vectors.count() == target.documents.chunk_count()
    finally:
        target.close()
    with Vault.open(older_store.root, embedder=Embedder.fake(16), **where) as synced:
        assert [h.path for h in synced.search("bananas", k=10, mode="keyword")]
