"""Every vector is made through one function (`vrom.ingest.embedding.embed_missing`), from the
text of one recipe per kind: a note's chunk, a collection's document (a turn with the turns
before it), a memory (issue 28 item 4)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from vrom import Collection, Embedder, Vault
from vrom.ingest import embedding
from vrom.ingest.embedding import collection_chunk_text, memory_text, note_chunk_text


def _spied(monkeypatch: pytest.MonkeyPatch) -> tuple[Embedder, list[list[str]]]:
    """Return a fake embedder and the texts of each of its embed_documents calls, which fail
    the test when not made from inside `embed_missing`."""
    embedder = Embedder.fake(32)
    real = embedder.embed_documents
    calls: list[list[str]] = []

    def embed_documents(texts: Sequence[str]) -> Any:
        caller = sys._getframe(1).f_code
        assert caller is embedding.embed_missing.__code__, f"embedded by {caller.co_name}"
        calls.append(list(texts))
        return real(texts)

    monkeypatch.setattr(embedder, "embed_documents", embed_documents)
    return embedder, calls


def test_collection_add_memories_and_vault_indexing_embed_through_one_embed_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    embedder, calls = _spied(monkeypatch)
    with Collection.open("chat", embedder=embedder) as chat:
        metadata: dict[str, Any] = {"source": "s1", "title": "Trip"}
        chat.add([{"id": "a", "text": "Where did you go?", "metadata": metadata}])
        chat.add([{"id": "b", "text": "To the coast, last May.", "metadata": metadata}])
        chat.add([{"id": "a", "text": "Where did you travel?", "metadata": metadata}])
    assert calls == [
        [collection_chunk_text("Where did you go?", "", metadata)],
        [collection_chunk_text("To the coast, last May.", "", metadata, ["Where did you go?"])],
        [collection_chunk_text("Where did you travel?", "", metadata)],
        # the turn after it, embedded again in the same transaction with the new text before it
        [collection_chunk_text("To the coast, last May.", "", metadata, ["Where did you travel?"])],
    ]
    calls.clear()
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "switch.md").write_text("# Switch\n\nThe network switch is in rack 3.\n")
    with Vault.open(notes, embedder=embedder, state_dir=tmp_path / "state") as vault:
        vault.index()
        chunk = vault.search("network switch", k=1, mode="keyword")[0]
        assert calls == [[note_chunk_text(chunk.text, "Switch", chunk.heading_path, {})]]
        calls.clear()
        memory = vault.memories.remember("Rack", "The switch is in rack 3.", source="ops")
        assert calls == [[f"{memory.title}\n\n{memory.content}"]]
        store = vault.store
        record = store.memories.get(memory.id)
        assert record is not None and calls[0] == [memory_text(record)]


def test_vault_embedding_makes_one_vector_for_chunks_of_one_embedded_input(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    embedder, calls = _spied(monkeypatch)
    notes = tmp_path / "notes"
    notes.mkdir()
    for name in ("one", "two"):  # one title and body: one embedded input
        (notes / name).mkdir()
        (notes / name / "Switch.md").write_text("# Switch\n\nThe network switch is in rack 3.\n")
    with Vault.open(notes, embedder=embedder, state_dir=tmp_path / "state") as vault:
        vault.index()
        assert [len(texts) for texts in calls] == [1]
        assert vault.store.counts().vectors == 2
