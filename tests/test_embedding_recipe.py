"""What a chunk's vector is made from (`vrom.ingest.embedding.context_text`), and stores that
hold vectors of another recipe: searched as they are, refused more vectors until re-embedded.

Every test embeds through `Recorder`, the fake model behind the `Embedder` interface that also
keeps the texts it was given, so the tests see exactly what was embedded.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from vrom import Collection, Embedder, ModelError, Vault
from vrom.embed import Fingerprint
from vrom.index.codec import decode
from vrom.ingest.embedding import (
    EMBEDDING_RECIPE,
    LEGACY_RECIPE,
    PREVIOUS_RECIPE,
    RECIPE_META_KEY,
    context_text,
    stored_recipe,
)


class Recorder(Embedder):
    """The fake model, keeping every document text it embeds."""

    def __init__(self) -> None:
        self.inner = Embedder.fake()
        self.texts: list[str] = []

    @property
    def fingerprint(self) -> Fingerprint:
        return self.inner.fingerprint

    def _embed(self, texts: Sequence[str], kind: str) -> Any:
        if kind == "document":
            self.texts += texts
        return self.inner._embed(texts, kind)


@pytest.mark.parametrize(
    ("text", "title", "headings", "metadata", "expected"),
    [
        ("# Cats\n\nCats purr.", "Cats", "Cats", {}, "# Cats\n\nCats purr."),
        ("They sleep a lot.", "Cats", "Cats", {}, "Cats\n\nThey sleep a lot."),
        ("## Food\nFish.", "Cats", "Cats > Food", {}, "Cats\n\n## Food\nFish."),
        ("Fish.", "Cats", "Cats > Care > Food", {}, "Cats\nCare > Food\n\nFish."),
        ("Fish.", "", "", {"title": "Cat care"}, "Cat care\n\nFish."),
        ("Fish.", "", "", {"title": 3}, "Fish."),
        (
            "Caroline: I went yesterday.",
            "",
            "",
            {"title": "session 1", "date_time": "8 May, 2023"},
            "session 1\n8 May, 2023\n\nCaroline: I went yesterday.",
        ),
        (
            "session 1 (8 May, 2023)\n\nCaroline: hi",
            "",
            "",
            {"title": "session 1 (8 May, 2023)", "date_time": "8 May, 2023"},
            "session 1 (8 May, 2023)\n\nCaroline: hi",
        ),
        (
            "Meet at nine.",
            "Standup",
            "",
            {"date": "2024-02-01"},
            "Standup\n2024-02-01\n\nMeet at nine.",
        ),
        ("Standup at nine.", "Standup", "", {}, "Standup at nine."),
        ("Plain.", "", "", {"date": True}, "Plain."),
        ("Plain.", "", "", {}, "Plain."),
    ],
)
def test_the_context_goes_before_the_chunk_once(
    text: str, title: str, headings: str, metadata: dict[str, object], expected: str
) -> None:
    assert context_text(text, title, headings, metadata) == expected


def test_a_collection_embeds_each_chunk_with_its_documents_title_and_date(tmp_path: Path) -> None:
    long_text = "\n\n".join(f"Paragraph {i} about feeding cats fish and rice." for i in range(60))
    recorder = Recorder()
    with Collection.open("c", embedder=recorder, storage=tmp_path) as docs:
        docs.add(
            [
                {"id": "care", "text": long_text, "metadata": {"title": "Cat care"}},
                {"id": "plain", "text": "No title here."},
                {"id": "dated", "text": "Met Ana.", "metadata": {"date": "2024-02-01"}},
            ]
        )
        care = [t for t in recorder.texts if "Paragraph" in t]
        assert len(care) > 1 and all(t.startswith("Cat care\n\n") for t in care)
        assert "No title here." in recorder.texts and "2024-02-01\n\nMet Ana." in recorder.texts
        hit = docs.search("feeding cats", k=1, mode="vector")[0]
        assert hit.id == "care" and not hit.chunk_text.startswith("Cat care"), "cited as written"

        # the same texts embedded again by a full re-embed: the same vectors, in the same rows
        before = _vectors(docs)
        recorder.texts.clear()
        assert docs.reembed() == len(before)
        assert sorted(recorder.texts) == sorted([*care, "No title here.", "2024-02-01\n\nMet Ana."])
        after = _vectors(docs)
        assert before.keys() == after.keys()
        for chunk_id, vector in before.items():
            np.testing.assert_array_equal(vector, after[chunk_id])


def test_a_document_added_again_keeps_the_vectors_of_what_it_embeds_unchanged(
    tmp_path: Path,
) -> None:
    recorder = Recorder()
    long_text = "\n\n".join(f"Part {i} of the guide to cat food and water." for i in range(40))
    with Collection.open("c", embedder=recorder, storage=tmp_path) as docs:
        docs.add([{"id": "a", "text": long_text, "metadata": {"title": "Cats"}}])
        first = len(recorder.texts)
        assert first > 1
        docs.add([{"id": "a", "text": long_text, "metadata": {"title": "Cats"}}])
        assert len(recorder.texts) == first, "the same texts in the same context: kept"
        edited = long_text.replace("Part 39", "Part thirty-nine")
        docs.add([{"id": "a", "text": edited, "metadata": {"title": "Cats"}}])
        assert recorder.texts[first:] == [t for t in recorder.texts[first:] if "thirty-nine" in t]
        assert len(recorder.texts) > first, "only the changed chunk is embedded again"
        changed = len(recorder.texts)
        docs.add([{"id": "a", "text": edited, "metadata": {"title": "Dogs"}}])
        assert len(recorder.texts) - changed == first, "a new title is a new context: all again"
        assert all(t.startswith("Dogs\n\n") for t in recorder.texts[changed:])
        # another document with the same text but its own context never takes a's vectors
        docs.add([{"id": "b", "text": "Shared words.", "metadata": {"title": "One"}}])
        docs.add([{"id": "c", "text": "Shared words."}])
        assert recorder.texts[-2:] == ["One\n\nShared words.", "Shared words."]


def test_a_collection_of_another_recipe_is_searched_but_refuses_new_vectors(
    tmp_path: Path,
) -> None:
    with Collection.open("c", embedder=Embedder.fake(), storage=tmp_path) as docs:
        docs.add([{"id": "a", "text": "Cats purr.", "metadata": {"title": "Cats"}}])
        assert stored_recipe(docs._store) == EMBEDDING_RECIPE
        docs._store.set_meta(RECIPE_META_KEY, LEGACY_RECIPE)
    with Collection.open("c", embedder=Embedder.fake(), storage=tmp_path) as docs:
        assert docs.search("cats purr", k=1, mode="hybrid")[0].id == "a", "searching is fine"
        with pytest.raises(ModelError, match=r"recipe 'text/0'.*'context/2'.*reembed\(\)"):
            docs.add([{"id": "b", "text": "Dogs bark."}])
        assert docs.count() == 1, "nothing was written"
        docs.add([{"id": "a", "text": "Cats purr."}])  # its vector is stored: nothing to embed
        assert docs.reembed() == 1
        assert stored_recipe(docs._store) == EMBEDDING_RECIPE
        docs.add([{"id": "b", "text": "Dogs bark."}])
        assert docs.search("dogs bark", k=1, mode="vector")[0].id == "b"


def test_a_vault_from_before_recipes_is_told_to_rebuild_when_it_must_embed(
    write_vault, tmp_path: Path
) -> None:
    root = write_vault({"Cats.md": "# Cats\n\n## Food\n\nFish and rice.\n"})
    with Vault.open(root, tmp_path / "state", embedder=Embedder.fake()) as vault:
        vault.index()
        location = Path(vault.corpus.store.location)
    with sqlite3.connect(location) as db:  # as every store written before recipes were kept
        db.execute("DELETE FROM meta WHERE key = ?", (RECIPE_META_KEY,))
    recorder = Recorder()
    with Vault.open(root, tmp_path / "state", embedder=recorder) as vault:
        assert stored_recipe(vault.corpus.store) == LEGACY_RECIPE
        assert vault.index().embedded == 0, "nothing to embed: nothing refused"
        assert vault.search("fish rice", mode="vector")[0].path == "Cats.md"
        (root / "Dogs.md").write_text("# Dogs\n\nThey bark.\n", encoding="utf-8")
        with pytest.raises(ModelError, match="vrom embed --rebuild"):
            vault.index()
        assert recorder.texts == []
        assert vault.embed(rebuild=True) == 3  # Cats: its title, then its Food section
        assert "Cats\n\n## Food\n\nFish and rice." in recorder.texts
        assert stored_recipe(vault.corpus.store) == EMBEDDING_RECIPE


def _vectors(docs: Collection) -> dict[int, np.ndarray]:
    rows = docs._store.vectors.rows()
    matrix = decode([blob for _, blob in rows], docs._store.vectors.encoding())
    return {chunk_id: matrix[i] for i, (chunk_id, _) in enumerate(rows)}


@pytest.mark.parametrize(
    ("text", "metadata", "turns", "expected"),
    [
        (  # the turns' ends between the title and the text (its own title moves up)
            "session 1\n\nMel: Yeah, I painted that last year!",
            {"title": "session 1"},
            ["session 1\n\nAna: Did you paint the lake?", "Ana: At sunrise?"],
            "session 1\n\nAna: Did you paint the lake?\nAna: At sunrise?\n"
            "Mel: Yeah, I painted that last year!",
        ),
        # a long turn: its last TURN_CHARS (300) characters, from a word's start
        ("Agreed.", {}, ["x " * 200 + "the end"], "x " * 146 + "the end\nAgreed."),
        ("Agreed.", {}, [], "Agreed."),
    ],
)
def test_a_document_s_turns_go_between_its_context_and_its_text(
    text: str, metadata: dict[str, object], turns: list[str], expected: str
) -> None:
    assert context_text(text, "", "", metadata, turns) == expected


def _turn(doc_id: str, text: str, source: str | None = "chat") -> dict[str, Any]:
    metadata: dict[str, Any] = {"title": "Chat"} | ({"source": source} if source else {})
    return {"id": doc_id, "text": f"Chat\n\n{text}", "metadata": metadata}


def test_a_collection_document_is_embedded_after_the_turns_before_it_from_its_source(
    tmp_path: Path,
) -> None:
    recorder = Recorder()
    with Collection.open("c", embedder=recorder, storage=tmp_path) as docs:
        docs.add(
            [
                _turn("1", "Ana: Did you paint the sunrise?"),
                _turn("x", "Bo: The build is green.", source="standup"),
                _turn("2", "Mel: Yeah, I painted that last year!"),
                _turn("n", "Ana: No source, no turns.", source=None),
            ]
        )
        docs.add([_turn("3", "Mel: It hangs in my kitchen.")])  # a later add: turns from the store
        assert recorder.texts == [
            "Chat\n\nAna: Did you paint the sunrise?",
            "Chat\n\nBo: The build is green.",
            "Chat\n\nAna: Did you paint the sunrise?\nMel: Yeah, I painted that last year!",
            "Chat\n\nAna: No source, no turns.",
            "Chat\n\nAna: Did you paint the sunrise?\nMel: Yeah, I painted that last year!\n"
            "Mel: It hangs in my kitchen.",
        ]
        hits = docs.search("sunrise painting", k=2, mode="vector")
        assert "2" in [hit.id for hit in hits], "the vague turn is found by what it answers"
        assert next(h for h in hits if h.id == "2").text == (
            "Chat\n\nMel: Yeah, I painted that last year!"
        ), "and shown as written"
        # added again unchanged, a turn keeps its place and its vector
        count = len(recorder.texts)
        docs.add([_turn("2", "Mel: Yeah, I painted that last year!")])
        assert len(recorder.texts) == count
        # a full re-embed reads the turns from the store: the same texts, the same vectors
        before = _vectors(docs)
        embedded = sorted(recorder.texts)
        recorder.texts.clear()
        assert docs.reembed() == len(before)
        assert sorted(recorder.texts) == embedded
        after = _vectors(docs)
        for chunk_id, vector in before.items():
            np.testing.assert_array_equal(vector, after[chunk_id])


def test_the_previous_recipe_is_brought_up_to_date_where_the_turns_change_nothing(
    tmp_path: Path,
) -> None:
    with Collection.open("alone", embedder=Embedder.fake(), storage=tmp_path) as docs:
        docs.add([_turn("1", "Ana: hi"), _turn("2", "Bo: hi", source="other")])
        docs._store.set_meta(RECIPE_META_KEY, PREVIOUS_RECIPE)
    with Collection.open("alone", embedder=Embedder.fake(), storage=tmp_path) as docs:
        docs.add([_turn("3", "Cy: hi", source="third")])  # one document a source: no change
        assert stored_recipe(docs._store) == EMBEDDING_RECIPE
    with Collection.open("chat", embedder=Embedder.fake(), storage=tmp_path) as docs:
        docs.add([_turn("1", "Ana: hi"), _turn("2", "Bo: hi")])
        docs._store.set_meta(RECIPE_META_KEY, PREVIOUS_RECIPE)
    with Collection.open("chat", embedder=Embedder.fake(), storage=tmp_path) as docs:
        with pytest.raises(ModelError, match=r"recipe 'context/1'.*reembed\(\)"):
            docs.add([_turn("3", "Cy: hi", source="new")])
        docs.reembed()
        docs.add([_turn("3", "Cy: hi", source="new")])
        assert stored_recipe(docs._store) == EMBEDDING_RECIPE


def test_a_document_longer_than_a_turn_is_embedded_alone_but_is_a_turn_before_the_next(
    tmp_path: Path,
) -> None:
    recorder = Recorder()
    page = ("Chapter one. " + "The lake at dawn was still. " * 30).strip()  # one chunk, > 600
    assert 600 < len(page) < 1000
    with Collection.open("c", embedder=recorder, storage=tmp_path) as docs:
        docs.add([_turn("1", "Ana: hello")])
        docs.add([_turn("p", page), _turn("2", "Mel: lovely")])
        assert recorder.texts[1] == f"Chat\n\n{page}", "long: alone, its own words kept whole"
        context, turn, own = recorder.texts[2].removeprefix("Chat\n\n").split("\n")
        assert (context, own) == ("Ana: hello", "Mel: lovely")
        assert len(turn) <= 300 and page.endswith(turn), "the page's end: a turn before the next"
        embedded = sorted(recorder.texts)
        recorder.texts.clear()
        docs.reembed()
        assert sorted(recorder.texts) == embedded, "the store's turns are the ones added with"


def test_the_turns_after_a_changed_moved_or_removed_turn_are_embedded_again(
    tmp_path: Path,
) -> None:
    recorder = Recorder()

    def embedded_again(docs: Collection) -> list[str]:
        """The turns embedded since the last call, by their own words; and the stored vectors
        must be the ones a full re-embed makes from the store."""
        texts = [text.rsplit("\n", 1)[-1] for text in recorder.texts]
        recorder.texts.clear()
        before = _vectors(docs)
        docs.reembed()
        recorder.texts.clear()
        after = _vectors(docs)
        assert before.keys() == after.keys()
        for chunk_id, vector in after.items():
            np.testing.assert_array_equal(before[chunk_id], vector)
        return texts

    with Collection.open("c", embedder=recorder, storage=tmp_path) as docs:
        docs.add([_turn(str(i), f"T{i}: line {i}") for i in range(1, 6)])
        docs.add([_turn("o", "O: elsewhere", source="other")])
        recorder.texts.clear()
        docs.add([_turn("2", "T2: line 2, edited")])
        assert embedded_again(docs) == ["T2: line 2, edited", "T3: line 3", "T4: line 4"]
        docs.add([_turn("2", "T2: line 2, edited")])
        assert embedded_again(docs) == [], "added again unchanged: nothing to embed"
        docs.add([_turn("1", "T1: line 1, edited"), _turn("2", "T2: line 2, again")])
        assert set(embedded_again(docs)) == {
            "T1: line 1, edited",
            "T2: line 2, again",  # after the new T1, not the stored one
            "T3: line 3",
            "T4: line 4",
        }
        assert docs.remove("3")
        assert embedded_again(docs) == ["T4: line 4", "T5: line 5"]
        docs.add([_turn("4", "T4: line 4", source="other")])  # moved: both conversations
        assert embedded_again(docs) == ["T4: line 4", "T5: line 5", "O: elsewhere"]
        assert docs.remove("5")
        assert embedded_again(docs) == [], "the last turn: none after it"


def test_a_turn_that_cannot_be_embedded_again_fails_the_change_and_writes_nothing(
    tmp_path: Path,
) -> None:
    class FailsOnThree(Recorder):
        failing = False

        def _embed(self, texts: Sequence[str], kind: str) -> Any:
            if self.failing and any(text.endswith("T3: line 3") for text in texts):
                raise RuntimeError("the model went away")
            return super()._embed(texts, kind)

    recorder = FailsOnThree()
    with Collection.open("c", embedder=recorder, storage=tmp_path) as docs:
        docs.add([_turn(str(i), f"T{i}: line {i}") for i in range(1, 4)])
        before = _vectors(docs)
        recorder.failing = True
        with pytest.raises(ModelError, match="the model went away"):
            docs.add([_turn("2", "T2: edited")])
        with pytest.raises(ModelError, match="the model went away"):
            docs.remove("2")
        after = _vectors(docs)
        assert after.keys() == before.keys()
        for chunk_id, vector in after.items():
            np.testing.assert_array_equal(vector, before[chunk_id])
        assert docs.count() == 3
        assert docs.search("edited", k=1, mode="keyword") == [], "the edit was not kept"
