"""A vector is given to a chunk only when it was embedded from exactly what the chunk is
embedded from (its text, title, heading path, date and turns: `vrom.ingest.embedding.input_hash`),
by incremental indexing and by sync alike; and a synced store takes new vectors as the source
does (issue 26 items 1 and 2, issue 27 item 1).

Every store here is compared with a clean index of the same notes, vector by vector: the fake
model is deterministic, so a vector embedded from the same text is the same bytes.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fake_models import QueriesOnly
from postgres_server import Spot
from vrom_cli import run_vrom

from vrom import Collection, Embedder, Vault
from vrom.ingest.embedding import EMBEDDING_RECIPE, RECIPE_META_KEY
from vrom.store import Store
from vrom.store.postgres_migrations import SCHEMA_VERSION as PG_SCHEMA_VERSION
from vrom.store.schema import SCHEMA_VERSION

BODY = "The quarterly backup rotation moves tapes offsite every Friday afternoon."
SECTION = "Each tape is labelled with the week number and the server it came from."
NOTES = {
    "one.md": f"---\ntitle: Tape storage\n---\n{BODY}\n",
    "two.md": f"---\ntitle: Volcano eruptions\n---\n{BODY}\n",
    "Rename me.md": f"{SECTION}\n",  # titled by its file name
    "Retitle.md": f"---\ntitle: Old title\n---\n{BODY}\n\n## Labels\n\n{SECTION}\n",
    "Journal.md": "# Journal\n\nRepotted the basil on the windowsill.\n",
}

Place = tuple[str, int]


def write_notes(root: Path, notes: dict[str, str]) -> Path:
    for rel, text in notes.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def vectors_by_place(store: Store) -> dict[Place, bytes | None]:
    """Return each chunk's vector (None: it has none) by (note path, chunk position)."""
    found: dict[Place, bytes | None] = {}
    for path, state in store.documents.states().items():
        chunks = store.documents.chunks_of(state.document_id)
        vectors = store.vectors.of([c.chunk_id for c in chunks])
        found.update({(path, c.position): vectors.get(c.chunk_id) for c in chunks})
    return found


def clean_vectors(root: Path, state: Path) -> dict[Place, bytes | None]:
    """Return the vectors a clean index of ``root`` (a new store) gives each chunk."""
    with Vault.open(root, state, embedder=Embedder.fake(16), local=True) as clean:
        clean.index()
        return vectors_by_place(clean.store)


def chunks_of(vectors: dict[Place, bytes | None], *paths: str) -> int:
    """Return how many chunks these notes have."""
    return sum(1 for path, _ in vectors if path in paths)


def differing(ours: dict[Place, bytes | None], clean: dict[Place, bytes | None]) -> list[Place]:
    assert set(ours) == set(clean), "the stores hold other chunks"
    return sorted(place for place in clean if ours[place] != clean[place])


def test_sync_does_not_share_a_vector_between_notes_with_one_body(
    tmp_path: Path, shared: Callable[[str], Spot]
) -> None:
    """Two notes of one body and different titles keep each its own vector through a sync,
    both ways: a vector search for the second title finds it as the local store does."""
    root = write_notes(tmp_path / "a" / "notes", {k: NOTES[k] for k in ("one.md", "two.md")})
    clean = clean_vectors(root, tmp_path / "clean")
    with Vault.open(root, tmp_path / "state-a", embedder=Embedder.fake(16), local=True) as vault:
        vault.index()
        local = [(h.path, h.score) for h in vault.search("Volcano eruptions", k=2, mode="vector")]
        assert local[0][0] == "two.md" and local[0][1] > 0
        vault.sync_to(**shared("team").at())
    target = shared("team").open()
    try:
        assert differing(vectors_by_place(target), clean) == []
    finally:
        target.close()
    with Vault.open(root, embedder=Embedder.fake(16), **shared("team").at()) as there:
        theirs = [(h.path, h.score) for h in there.search("Volcano eruptions", k=2, mode="vector")]
    assert theirs == local
    here = shutil.copytree(root, tmp_path / "b" / "notes")
    with Vault.open(here, tmp_path / "state-b", embedder=Embedder.fake(16), local=True) as copy:
        copy.sync_from(**shared("team").at())
        assert differing(vectors_by_place(copy.store), clean) == []
        back = [(h.path, h.score) for h in copy.search("Volcano eruptions", k=2, mode="vector")]
    assert back == local


def test_incremental_index_does_not_reuse_a_vector_embedded_with_another_title(
    open_backend_vault: Callable[..., Vault], tmp_path: Path
) -> None:
    """An added note with another note's body, a renamed note (titled by its file name) and a
    retitled one are embedded again: each ends with the vector a clean index gives it."""
    root = write_notes(tmp_path / "notes", NOTES)
    vault = open_backend_vault(root, Embedder.fake(16))
    vault.index()
    (root / "three.md").write_text(f"---\ntitle: Garden pests\n---\n{BODY}\n", encoding="utf-8")
    (root / "Rename me.md").rename(root / "Renamed.md")
    (root / "Retitle.md").write_text(NOTES["Retitle.md"].replace("Old title", "New title"))
    summary = vault.index()
    assert (summary.added, summary.renamed, summary.changed) == (1, 1, 1)
    clean = clean_vectors(root, tmp_path / "c")
    assert summary.embedded == chunks_of(clean, "three.md", "Renamed.md", "Retitle.md")
    assert differing(vectors_by_place(vault.store), clean) == []
    hits = vault.search("Garden pests", k=1, mode="vector")
    assert hits[0].path == "three.md" and hits[0].score > 0


def test_synced_and_incrementally_indexed_vectors_equal_a_clean_index(
    tmp_path: Path, shared: Callable[[str], Spot]
) -> None:
    """The issue's check: a vault built to have shared bodies (under other titles and under the
    same one), renames and retitles, indexed incrementally, synced to another store and back
    to a new machine: every store's vectors are a clean index's, chunk by chunk, and the
    chunks whose whole embedded input another holds reuse its vector (nothing re-embedded)."""
    root = write_notes(tmp_path / "a" / "notes", NOTES)
    with Vault.open(root, tmp_path / "state-a", embedder=Embedder.fake(16), local=True) as vault:
        vault.index()
        vault.sync_to(**shared("team").at())
        write_notes(
            root,
            {
                "three.md": f"---\ntitle: Garden pests\n---\n{BODY}\n",  # another title
                "four.md": NOTES["one.md"],  # the same title and body: the same vector
                "Sub/two.md": NOTES["two.md"],  # the same, in another folder
            },
        )
        (root / "Rename me.md").rename(root / "Renamed.md")
        (root / "Retitle.md").write_text(NOTES["Retitle.md"].replace("Old title", "New title"))
        summary = vault.index()
        clean = clean_vectors(root, tmp_path / "clean")
        assert summary.embedded == chunks_of(clean, "three.md", "Renamed.md", "Retitle.md")
        assert differing(vectors_by_place(vault.store), clean) == []
        sent = vault.sync_to(**shared("team").at())
        changed = ("three.md", "four.md", "Sub/two.md", "Renamed.md", "Retitle.md")
        assert sent.vectors == chunks_of(clean, *changed)
    target = shared("team").open()
    try:
        assert differing(vectors_by_place(target), clean) == []
    finally:
        target.close()
    here = shutil.copytree(root, tmp_path / "b" / "notes")
    with Vault.open(here, tmp_path / "state-b", embedder=Embedder.fake(16), local=True) as copy:
        got = copy.sync_from(**shared("team").at())
        assert got.vectors == len(clean)
        assert differing(vectors_by_place(copy.store), clean) == []
        assert copy.index().embedded == 0


def test_sync_copies_the_embedding_recipe_so_a_copy_takes_new_vectors(
    tmp_path: Path, shared: Callable[[str], Spot]
) -> None:
    """Index, sync to another store, edit a note and index into that copy; sync it back to a
    new machine, edit again and index there: both take the new vectors and find the edit by
    meaning (before, the copy read as recipe 'text/0' and refused new vectors)."""
    root = write_notes(tmp_path / "a" / "notes", NOTES)
    with Vault.open(root, tmp_path / "state-a", embedder=Embedder.fake(16), local=True) as vault:
        vault.index()
        vault.sync_to(**shared("team").at())
    target = shared("team").open()
    try:
        assert target.get_meta(RECIPE_META_KEY) == EMBEDDING_RECIPE
    finally:
        target.close()
    (root / "Journal.md").write_text("# Journal\n\nA narwhal surfaced by the pier.\n")
    with Vault.open(root, embedder=Embedder.fake(16), **shared("team").at()) as there:
        summary = there.index()
        assert (summary.changed, summary.embedded) == (1, 1)
        assert there.search("narwhal pier", k=1, mode="vector")[0].path == "Journal.md"
    here = shutil.copytree(root, tmp_path / "b" / "notes")
    with Vault.open(here, tmp_path / "state-b", embedder=Embedder.fake(16), local=True) as copy:
        copy.sync_from(**shared("team").at())
        assert copy.store.get_meta(RECIPE_META_KEY) == EMBEDDING_RECIPE
        (here / "Journal.md").write_text("# Journal\n\nAn otter slept on the kelp.\n")
        summary = copy.index()
        assert (summary.changed, summary.embedded) == (1, 1)
        assert copy.search("otter kelp", k=1, mode="vector")[0].path == "Journal.md"
        assert differing(vectors_by_place(copy.store), clean_vectors(here, tmp_path / "c")) == []


def _forget_input_hashes_sqlite(path: Path) -> None:
    """Make a store as vrom before migration 9 left it: vectors without an input hash."""
    raw = sqlite3.connect(path)
    raw.executescript(
        "DROP INDEX vectors_input_hash; ALTER TABLE vectors DROP COLUMN input_hash;"
        " UPDATE meta SET value = '8' WHERE key = 'schema_version';"
    )
    raw.close()


def _forget_input_hashes_postgres(url: str, namespace: str) -> None:
    """Make a namespace as vrom before its schema 2 left it: vectors without an input hash."""
    with psycopg.connect(url, autocommit=True) as raw:
        row = raw.execute("SELECT id FROM vrom.namespaces WHERE name = %s", (namespace,))
        number = row.fetchone()
        assert number is not None
        schema = f"vrom_ns_{number[0]}"
        raw.execute(f'SET search_path TO "{schema}", public')
        raw.execute("DROP INDEX vectors_input_hash")
        raw.execute("ALTER TABLE vectors DROP COLUMN input_hash")
        raw.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")


def test_an_old_store_never_hands_out_a_vector_of_unknown_input(
    tmp_path: Path, shared: Callable[[str], Spot], request: pytest.FixtureRequest
) -> None:
    """A store written before vectors carried their input's hash is migrated; its vectors
    still serve their own chunks, but none is reused for another chunk or synced: a note of
    the same title and body is embedded, and a sync leaves those chunks to the target to
    embed, which then equals a clean index."""
    spot = shared("old")
    root = write_notes(tmp_path / "notes", {k: NOTES[k] for k in ("one.md", "Journal.md")})
    with Vault.open(root, embedder=Embedder.fake(16), **spot.at()) as vault:
        vault.index()
    if spot.namespace is None:
        _forget_input_hashes_sqlite(Path(spot.location.removeprefix("sqlite:///")))
    else:
        _forget_input_hashes_postgres(spot.location, spot.namespace)
    (root / "four.md").write_text(NOTES["one.md"], encoding="utf-8")
    with Vault.open(root, embedder=Embedder.fake(16), **spot.at()) as vault:
        expected = SCHEMA_VERSION if spot.namespace is None else PG_SCHEMA_VERSION
        assert vault.store.describe()["schema_version"] == expected
        summary = vault.index()
        assert (summary.added, summary.embedded) == (1, 1), "four.md: not another's vector"
        sent = vault.sync_to(**shared("copy").at())
        assert sent.vectors == 2, "four.md's, for it and one.md (the same input); no other"
    with Vault.open(root, embedder=Embedder.fake(16), **shared("copy").at()) as copy:
        assert copy.embed() == 1, "Journal.md"
        assert differing(vectors_by_place(copy.store), clean_vectors(root, tmp_path / "c")) == []


def test_a_collection_reuses_a_stored_vector_only_for_the_same_embedded_input() -> None:
    """A document added again keeps only vectors made from what it is embedded from now: one
    whose input is unknown or stale (left by an older vrom, or made before the turns before
    it changed) is made again, so adding the document again repairs it."""
    turns = [
        {"id": f"t{i}", "text": text, "metadata": {"source": "chat-1"}}
        for i, text in enumerate(
            ["Did you paint anything?", "Yeah, I painted that last year!", "It is lovely."]
        )
    ]
    with Collection.open("clean", embedder=Embedder.fake(16)) as clean:
        clean.add(turns)
        expected = vectors_by_place(clean._store)
    with Collection.open("chat", embedder=Embedder.fake(16)) as docs:
        docs.add(turns)
        assert differing(vectors_by_place(docs._store), expected) == []
        store = docs._store
        (stale,) = store.documents.chunks_of(store.documents.states(["t1"])["t1"].document_id)
        store.vectors.put([(stale.chunk_id, expected["t0", 0] or b"")])  # input unknown
        assert differing(vectors_by_place(store), expected) == [("t1", 0)]
        docs.add(turns[1:2])
        assert differing(vectors_by_place(store), expected) == []


def test_the_cli_syncs_both_ways_and_each_side_takes_new_vectors(tmp_path: Path) -> None:
    """As a user: `vrom index --remote-sync`, an edit indexed into the copy, `vrom sync --from`
    on a new machine, an edit indexed there, `vrom sync --to` back: every index exits 0 having
    embedded the edited chunk, and a vector search on each side finds the edit."""
    root = write_notes(tmp_path / "notes", NOTES)
    shared = f"sqlite:///{tmp_path / 'shared.db'}"
    a, b = tmp_path / "state-a", tmp_path / "state-b"

    def vrom(state: Path, *args: str) -> Any:
        done = run_vrom(state, "--json", *args, embedder="fake:16")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def top(state: Path, *where: str, query: str) -> str:
        found = vrom(state, *where, "--vault", str(root), "vector-search", query, "-k", "1")
        return str(found["results"][0]["path"])

    assert vrom(a, "index", str(root), "--remote-sync", shared)["sync"]["vectors"] == 6
    (root / "Journal.md").write_text("# Journal\n\nA narwhal surfaced by the pier.\n")
    assert vrom(a, "--db", shared, "index", str(root))["embedded"] == 1
    assert top(a, "--db", shared, query="narwhal pier") == "Journal.md"
    assert vrom(b, "--vault", str(root), "sync", "--from", shared)["vectors"] == 6
    (root / "Journal.md").write_text("# Journal\n\nAn otter slept on the kelp.\n")
    assert vrom(b, "index", str(root))["embedded"] == 1
    assert top(b, query="otter kelp") == "Journal.md"
    assert vrom(b, "--vault", str(root), "sync", "--to", shared)["vectors"] == 1
    assert top(a, "--db", shared, query="otter kelp") == "Journal.md"


def test_sync_copies_the_memory_recipe_so_a_copy_keeps_its_memory_vectors(
    tmp_path: Path, shared: Callable[[str], Spot]
) -> None:
    """Memories of one conversation keep the vectors they were synced with: before, the copy
    had no memory recipe, read as the one before turns, and dropped them at its first recall
    to embed them all again."""
    root = write_notes(tmp_path / "notes", {"Journal.md": NOTES["Journal.md"]})
    with Vault.open(root, tmp_path / "state", embedder=Embedder.fake(16), local=True) as vault:
        vault.index()
        for said in ("Did you paint anything?", "Yeah, I painted that last year!"):
            vault.memories.remember("Chat", said, source="chat-1")
        vault.sync_to(**shared("team").at())
        expected = vault.store.memories.vectors.rows()
    with Vault.open(root, embedder=QueriesOnly(), **shared("team").at()) as copy:
        assert copy.memories.recall("painted", k=1)[0].memory.content.startswith("Yeah")
        assert copy.store.memories.vectors.rows() == expected
