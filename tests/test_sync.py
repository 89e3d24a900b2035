"""Syncing a vault's store with another store (`Vault.sync_to`, `Vault.sync_from`, the engine
`vrom.ingest.sync`): everything copied, nothing re-embedded, only what changed, and a sync
interrupted half way converges when run again.

The other store is a SQLite file, or a namespace of a real PostgreSQL server (the ``shared``
fixture): the engine speaks only the store roles, so every test runs on both.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_models import QueriesOnly
from postgres_server import Spot

from vrom import (
    Embedder,
    ModelError,
    NotFoundError,
    StorageError,
    ValidationError,
    Vault,
)
from vrom.collection import Collection
from vrom.ingest import sync as sync_engine
from vrom.store import MemoryFilter, Store

NOTES = {
    "Projects/Atlas.md": "---\nstatus: active\ntags: [project]\n---\n# Atlas\n\n"
    "Atlas maps every office network switch. See [[Beacon]].\n\n## Plan\n\n"
    + "Survey the racks floor by floor. " * 40
    + "\n",
    "Projects/Beacon.md": "# Beacon\n\nBeacon sends alerts when a switch fails. #project/alerts\n",
    "Journal/2024-05-01.md": "# Monday\n\nTalked about [[Atlas]] and gardening.\n",
    "Journal/2024-05-02.md": "# Tuesday\n\nRepotted the basil. #garden\n",
    "Journal/2024-05-03.md": "# Wednesday\n\nBeacon paged twice overnight. [[Beacon]]\n",
    "Reference/Switches.md": "# Switches\n\n| model | ports |\n|---|---|\n| A | 24 |\n",
    "Reference/Glossary.md": "# Glossary\n\nRack: a frame for servers.\n",
    "README.md": "# Readme\n\nThe vault's front page links [[Missing Note]].\n",
}
META_KEYS = (
    "chunk_strategy",
    "embedding_fingerprint",
    "memory_embedding_fingerprint",
    "vector_encoding",
    "last_indexed_unix",
)


def write_notes(root: Path, notes: dict[str, str]) -> Path:
    for rel, text in notes.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def contents(store: Store) -> dict[str, Any]:
    """Return everything a store holds that a sync must carry, without its row ids: two stores
    that hold the same are equal, and a duplicate row shows up as a difference."""
    docs = store.documents
    notes: dict[str, Any] = {}
    for path, state in docs.states().items():
        doc = docs.get(state.document_id)
        assert doc is not None
        chunks = docs.chunks_of(state.document_id)
        vectors = store.vectors.of([c.chunk_id for c in chunks])
        notes[path] = {
            "row": (doc.path_key, doc.name_key, doc.title, dict(doc.frontmatter)),
            "state": (state.content_hash, state.mtime, state.size, state.chunk_strategy),
            "relevance": doc.human_relevance_score,
            "chunks": [
                (c.position, c.heading_path, c.text, c.char_start, c.char_end, c.content_hash)
                for c in chunks
            ],
            "chained": [(c.prev_id is None, c.next_id is None) for c in chunks],
            "vectors": [vectors.get(c.chunk_id) for c in chunks],
            "links": [link for _, link in docs.links(sources=[state.document_id])],
            "tags": sorted(docs.tags_of(state.document_id)),
            "text": docs.texts([state.document_id]).get(state.document_id),
        }
    keys = store.memories.keys_matching(MemoryFilter())
    memories = store.memories.by_keys(keys)
    memory_vectors = store.memories.vectors.of(keys)
    counts = store.counts()
    return {
        "notes": notes,
        "memories": {m.id: (m, memory_vectors.get(key)) for key, m in memories.items()},
        "meta": {key: store.get_meta(key) for key in META_KEYS},
        "rows": (counts.documents, counts.chunks, counts.links, counts.vectors, counts.tags),
    }


@pytest.fixture
def indexed(tmp_path: Path) -> Iterator[Vault]:
    """A vault indexed and embedded (fake model), with two memories, its store local."""
    root = write_notes(tmp_path / "machine-a" / "notes", NOTES)
    with Vault.open(root, tmp_path / "state-a", embedder=Embedder.fake(16), local=True) as vault:
        vault.index()
        vault.memories.remember("Pager rota", "Beacon pages the on-call engineer.", tags=["ops"])
        vault.memories.remember("Basil", "Water the basil on Tuesdays.", type="preference")
        yield vault


def test_sync_to_copies_notes_chunks_vectors_and_memories(
    indexed: Vault, shared: Callable[[str], Spot]
) -> None:
    summary = indexed.sync_to(**shared("team").at())
    assert (summary.added, summary.changed, summary.removed, summary.unchanged) == (8, 0, 0, 0)
    assert summary.notes == 8 and summary.memories == 2 and summary.memory_vectors == 2
    counts = indexed.store.counts()
    assert summary.vectors == counts.vectors == counts.chunks > 8  # Atlas is several chunks
    assert summary.source == indexed.store.location
    assert summary.namespace == shared("team").namespace  # None for a file: it has none
    target = shared("team").open()
    try:
        assert contents(target) == contents(indexed.store)
        assert target.get_meta("vault_root") == str(indexed.root)
    finally:
        target.close()


def test_a_synced_store_is_searched_by_meaning_with_the_vectors_it_was_given(
    indexed: Vault, shared: Callable[[str], Spot], tmp_path: Path
) -> None:
    """The copy answers a vector search as the original does, though no model embedded it:
    the embedder given refuses to embed anything but the query."""
    indexed.sync_to(**shared("team").at())
    elsewhere = write_notes(tmp_path / "machine-b" / "notes", NOTES)
    with Vault.open(elsewhere, **shared("team").at(), embedder=QueriesOnly()) as copy:
        ours = indexed.search("switch alerts", k=3, mode="vector")
        theirs = copy.search("switch alerts", k=3, mode="vector")
    assert [(h.path, h.chunk_id is not None, h.score) for h in theirs] == [
        (h.path, True, h.score) for h in ours
    ]


def test_a_second_sync_writes_only_what_changed(
    indexed: Vault, shared: Callable[[str], Spot]
) -> None:
    indexed.sync_to(**shared("team").at())
    root = indexed.root
    (root / "Projects" / "Beacon.md").write_text("# Beacon\n\nBeacon now also sends SMS.\n")
    (root / "Journal" / "2024-05-04.md").write_text("# Thursday\n\nNew rack arrived.\n")
    (root / "Reference" / "Glossary.md").unlink()
    indexed.index()
    summary = indexed.sync_to(**shared("team").at())
    assert (summary.added, summary.changed, summary.removed, summary.unchanged) == (1, 1, 1, 6)
    assert (summary.vectors, summary.memories) == (2, 0)  # one chunk each; memories as they were
    target = shared("team").open()
    try:
        assert contents(target) == contents(indexed.store)
    finally:
        target.close()
    again = indexed.sync_to(**shared("team").at())
    assert (again.added, again.changed, again.removed, again.unchanged, again.vectors) == (
        0,
        0,
        0,
        8,
        0,
    )


def test_batches_read_while_the_one_before_is_written_arrive_whole_once_and_in_order(
    indexed: Vault, shared: Callable[[str], Spot], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The next batch is read from the source while the target writes this one: each read
    here waits until the batch before it is inside its transaction (its progress calls), and
    the target still ends holding the source's notes, row by row, written in path order."""
    monkeypatch.setattr(sync_engine, "BATCH_NOTES", 2)  # four batches for eight notes
    writing = threading.Event()
    read_batch = sync_engine._read_batch

    def read_once_writing(*args: Any) -> Any:
        if args[-1] != sorted(NOTES)[:2]:  # the first is read before anything is written
            assert writing.wait(30), "the batch before was never written"
            writing.clear()
        return read_batch(*args)

    seen: list[tuple[int, str]] = []

    def progress(done: int, total: int, path: str) -> None:
        seen.append((done, path))
        if done % 2 == 0:  # the batch's last note: its transaction is still open
            writing.set()

    monkeypatch.setattr(sync_engine, "_read_batch", read_once_writing)
    first = indexed.sync_to(**shared("team").at(), progress=progress)
    for rel in ("Journal/2024-05-01.md", "Journal/2024-05-03.md", "README.md"):  # 3 batches
        path = indexed.root / rel
        path.write_text(path.read_text() + "\nEdited.\n")
    indexed.index()
    first_seen = list(seen)
    seen.clear()
    writing.clear()  # set by the first sync's last batch, which no read waited for
    second = indexed.sync_to(**shared("team").at(), progress=progress)
    assert first_seen == seen == list(enumerate(sorted(NOTES), start=1))
    assert (first.added, second.changed, second.unchanged) == (8, 3, 5)
    target = shared("team").open()
    try:
        assert contents(target) == contents(indexed.store)
        states = target.documents.states()
        ids = [states[path].document_id for path in sorted(NOTES)]
        assert ids == sorted(ids)  # written in path order (a changed note keeps its id)
    finally:
        target.close()


def test_vectors_embedded_after_a_sync_follow_at_the_next(
    tmp_path: Path, shared: Callable[[str], Spot]
) -> None:
    """A vault synced before it was embedded (keyword index only) sends its vectors next time,
    though no note changed."""
    root = write_notes(tmp_path / "notes", NOTES)
    with Vault.open(root, embedder=Embedder.fake(16), local=True) as vault:
        vault.index(embed=False)
        first = vault.sync_to(**shared("team").at())
        assert first.vectors == 0 and first.added == 8
        embedded = vault.embed()
        second = vault.sync_to(**shared("team").at())
        assert (second.unchanged, second.vectors) == (8, embedded)
        target = shared("team").open()
        try:
            assert contents(target) == contents(vault.store)
        finally:
            target.close()


def test_sync_from_gives_a_new_machine_a_local_copy_that_indexes_as_unchanged(
    indexed: Vault, shared: Callable[[str], Spot], tmp_path: Path
) -> None:
    indexed.sync_to(**shared("team").at())
    here = tmp_path / "machine-b" / "notes"
    shutil.copytree(indexed.root, here)
    with Vault.open(here, tmp_path / "state-b", embedder=Embedder.fake(16), local=True) as copy:
        summary = copy.sync_from(**shared("team").at())
        assert (summary.added, summary.vectors, summary.memories) == (8, indexed.stats().vectors, 2)
        assert summary.target == copy.store.location
        assert copy.store.get_meta("vault_root") == str(here)  # this machine's folder
        ours, theirs = contents(copy.store), contents(indexed.store)
        assert ours == theirs
        again = copy.index()
        assert (again.added, again.changed, again.removed, again.embedded) == (0, 0, 0, 0)
        assert [m.title for m in copy.memories.list()] == [m.title for m in indexed.memories.list()]


@pytest.mark.parametrize("stop_after", [1, 4, 7])
def test_an_interrupted_sync_run_again_ends_as_an_uninterrupted_one(
    indexed: Vault,
    shared: Callable[[str], Spot],
    monkeypatch: pytest.MonkeyPatch,
    stop_after: int,
) -> None:
    monkeypatch.setattr(sync_engine, "BATCH_NOTES", 3)  # several transactions for 8 notes
    indexed.sync_to(**shared("whole").at())

    class Interrupted(Exception):
        pass

    def stop(done: int, total: int, path: str) -> None:
        if done == stop_after:
            raise Interrupted(path)

    with pytest.raises(Interrupted):
        indexed.sync_to(**shared("halves").at(), progress=stop)
    target = shared("halves").open()
    try:
        committed = len(target.documents.states())
    finally:
        target.close()
    assert committed == stop_after // 3 * 3  # whole batches only: each is one transaction
    resumed = indexed.sync_to(**shared("halves").at())
    assert (resumed.added, resumed.unchanged) == (8 - committed, committed)
    whole, halves = shared("whole").open(), shared("halves").open()
    try:
        assert contents(halves) == contents(whole)
        assert halves.integrity_problems() == []
    finally:
        whole.close()
        halves.close()


def test_stores_of_different_models_are_refused_before_anything_is_written(
    indexed: Vault, shared: Callable[[str], Spot], tmp_path: Path
) -> None:
    other = write_notes(tmp_path / "other" / "notes", {"x.md": "# X\n\nsomething else\n"})
    with Vault.open(other, **shared("team").at(), embedder=Embedder.fake(8)) as vault:
        vault.index()
        before = contents(vault.store)
    with pytest.raises(ModelError) as refused:
        indexed.sync_to(**shared("team").at())
    message = str(refused.value)
    assert "fake-hashed-words (16 d)" in message and "fake-hashed-words (8 d)" in message
    assert "\n" not in message
    target = shared("team").open()
    try:
        assert contents(target) == before
    finally:
        target.close()


def test_a_vault_and_a_collection_never_share_a_store(
    indexed: Vault, shared: Callable[[str], Spot]
) -> None:
    spot = shared("handbook")
    name = spot.namespace or "handbook"  # a collection's namespace is its name
    storage = spot.location if spot.namespace else spot.location.removeprefix("sqlite:///")
    with Collection.open(name, embedder=None, storage=storage) as docs:
        docs.add([{"id": "leave", "text": "Annual leave is 25 days."}])
    with pytest.raises(StorageError, match=f"collection '{name}'"):
        indexed.sync_to(**spot.at())


def test_a_vault_never_syncs_onto_its_own_store(indexed: Vault) -> None:
    with pytest.raises(ValidationError, match="this vault's own store"):
        indexed.sync_to(indexed.store.location)
    with pytest.raises(ValidationError, match="this vault's own store"):
        indexed.sync_from(f"sqlite:///{indexed.store.location}")


def test_sync_from_a_store_without_a_vault_is_not_found(
    indexed: Vault, shared: Callable[[str], Spot]
) -> None:
    shared("empty").open(create=True).close()
    with pytest.raises(NotFoundError, match="holds no indexed vault"):
        indexed.sync_from(**shared("empty").at())
    with pytest.raises(NotFoundError):
        indexed.sync_from(**shared("missing").at())


def test_memories_merge_the_newer_version_wins_and_none_is_removed(
    indexed: Vault, shared: Callable[[str], Spot], tmp_path: Path
) -> None:
    indexed.sync_to(**shared("team").at())
    rota = next(m for m in indexed.memories.list() if m.title == "Pager rota")
    basil = next(m for m in indexed.memories.list() if m.title == "Basil")
    here = write_notes(tmp_path / "machine-b" / "notes", NOTES)
    with Vault.open(here, **shared("team").at(), embedder=Embedder.fake(16)) as remote:
        remote.memories.archive(basil.id)  # the shared copy moves on
        theirs = remote.memories.remember("Rack labels", "Label racks by floor.")
    indexed.memories.archive(rota.id)  # and so does the local one, another memory
    summary = indexed.sync_to(**shared("team").at())
    assert summary.memories == 1  # the rota's archiving; the basil's newer archiving stays
    with Vault.open(here, **shared("team").at(), embedder=Embedder.fake(16)) as remote:
        statuses = {m.title: m.status for m in remote.memories.list(status="any")}
    assert statuses == {"Pager rota": "archived", "Basil": "archived", "Rack labels": "active"}
    assert theirs.title == "Rack labels"
