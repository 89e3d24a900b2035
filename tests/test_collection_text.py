"""A collection hit's text is its document as added, stored once (issue 16, item 9).

`Hit.text` is the whole document as it was added, `Hit.chunk_text` the best chunk, and
``text[char_start:char_end] == chunk_text``. The store keeps a document's text once: its chunks
are read back as slices of it. Real SQLite files, the fake embedder, a hypothesis property over
texts that stress character offsets (astral characters, CJK, CRLF, NUL, blank runs), and
`close()`'s answer.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vrom import (
    AgentMemory,
    AsyncCollection,
    Collection,
    Document,
    Embedder,
    StorageError,
    ValidationError,
)
from vrom.ingest.chunk import ChunkStrategy, chunk_note
from vrom.ingest.collection_write import document_chunks
from vrom.ingest.parse import ParsedNote, find_headings, mask_code
from vrom.pack_builder import build_pack, publish_pack
from vrom.store import DocumentRecord, open_store, unstorable
from vrom.store.schema import MIGRATIONS
from vrom.tools import SearchTool

MODES = ("keyword", "vector", "hybrid", "rerank")
# three sections, each with a word no other has, far enough apart to land in different chunks
SECTIONS = {
    "aardvark": "# Burrows\n\n" + "Aardvark burrows are deep. " * 30,
    "zeppelin": "## Airships 🚀\r\n\r\n" + "Zeppelin hangars were huge, 飛行船. " * 30,
    "quokka": "## Islands\n\n" + "Quokka smiles on Rottnest 𝄞 island. " * 30,
}
LONG = "  \n" + "\n\n\n".join(SECTIONS.values()) + "\n\n   \t"


def expected_chunks(text: str, chunk_chars: int = 1000, overlap: int = 150) -> list[str]:
    """Return the chunk texts the collection's chunker makes of ``text``."""
    note = ParsedNote(text, "", {}, 0, find_headings(mask_code(text), 0), [], [])
    return [span.text for span in chunk_note(note, ChunkStrategy(chunk_chars, overlap))]


def raw_rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    """Return the rows of ``sql`` over the store file (to look at how the text is kept)."""
    with sqlite3.connect(path) as conn:
        return list(conn.execute(sql))


# -- hits ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_a_hit_is_the_whole_document_with_its_best_chunk_and_offsets(
    tmp_path: Path, mode: str
) -> None:
    assert len(expected_chunks(LONG)) >= 3
    with Collection.open("zoo", embedder=Embedder.fake(), storage=tmp_path) as docs:
        docs.add([{"id": "long", "text": LONG}, {"id": "short", "text": "  Bikes go on racks. "}])
        starts = set()
        for word in SECTIONS:
            hit = docs.search(word, k=1, mode=mode)[0]
            assert hit.id == "long" and hit.text == LONG, "the document as added, whitespace too"
            assert hit.chunk_text == LONG[hit.char_start : hit.char_end]
            assert hit.chunk_text in expected_chunks(LONG)
            assert word in hit.chunk_text.lower()
            starts.add(hit.char_start)
        assert len(starts) == 3, "each word is found in its own chunk"
        short = docs.search("bikes racks", k=2, mode=mode)
        assert [(h.id, h.text, h.chunk_text) for h in short[:1]] == [
            ("short", "  Bikes go on racks. ", "Bikes go on racks.")
        ]


def test_every_chunk_read_back_is_its_slice_of_the_document(tmp_path: Path) -> None:
    options = {"chunk_chars": 300, "chunk_overlap": 60}
    with Collection.open("zoo", embedder=None, storage=tmp_path, **options) as docs:
        docs.add([{"id": "long", "text": LONG}])
    store = open_store(tmp_path / "zoo.db", create=False)
    try:
        state = store.documents.state("long")
        assert state is not None
        chunks = store.documents.chunks_of(state.document_id)
        assert [c.text for c in chunks] == expected_chunks(LONG, 300, 60)
        assert all(c.text == LONG[c.char_start : c.char_end] for c in chunks)
        assert store.documents.texts([state.document_id, 999]) == {state.document_id: LONG}
        assert store.integrity_problems() == []
    finally:
        store.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(
            st.text(min_size=1, max_size=60),
            st.sampled_from(["\n\n", "\r\n", "# Head\n", "   ", "\x00", "🚀𝄞", "飛行船", ". "]),
        ),
        min_size=1,
        max_size=80,
    ).map("".join)
)
def test_chunks_and_hits_keep_their_offsets_for_any_text(text: str) -> None:
    if not text.strip() or unstorable(text) is not None:
        return  # refused by add(): blank, or a NUL or lone surrogate no store holds
    with Collection.open("any", embedder=None, chunk_chars=100, chunk_overlap=20) as docs:
        docs.add([{"id": "doc", "text": text}])
        store = docs._store
        state = store.documents.state("doc")
        assert state is not None
        chunks = store.documents.chunks_of(state.document_id)
        assert [c.text for c in chunks] == expected_chunks(text, 100, 20)
        assert all(c.text == text[c.char_start : c.char_end] for c in chunks)
        words = [w for w in text.split() if w.isalnum()]
        for hit in docs.search(words[0], k=1) if words else []:
            assert hit.text == text and hit.chunk_text == text[hit.char_start : hit.char_end]


# -- stored once -----------------------------------------------------------------------------


def _long_documents() -> list[dict[str, str]]:
    return [
        {
            "id": f"d{n}",
            "text": "\n\n".join(
                f"Section {n}.{p}: " + " ".join(f"term{n}x{p}x{w}" for w in range(60))
                for p in range(40)
            ),
        }
        for n in range(6)
    ]


def test_a_long_document_is_stored_once(tmp_path: Path) -> None:
    documents = [Document(d["id"], d["text"]) for d in _long_documents()]
    characters = sum(len(d.text) for d in documents)
    with Collection.open("long", embedder=None, storage=tmp_path / "new") as docs:
        docs.add(documents)
        chunked = [document_chunks(document, docs._strategy) for document in documents]
    path = tmp_path / "new" / "long.db"
    (chunk_chars,) = raw_rows(path, "SELECT coalesce(sum(length(text)), 0) FROM chunks")[0]
    (whole_chars,) = raw_rows(path, "SELECT sum(length(text)) FROM document_texts")[0]
    (chunks,) = raw_rows(path, "SELECT count(*) FROM chunks")[0]
    assert chunks > 6 * 20, "every document is cut into many chunks"
    assert chunk_chars == 0, "chunks keep no copy of the text"
    assert whole_chars == characters, "each document's text, once"

    # the same chunks as a store before schema 8 kept them: each chunk with its own text
    old = open_store(tmp_path / "old.db")
    try:
        for document, chunk_records in zip(documents, chunked, strict=True):
            old.documents.put(_record(document, None), chunk_records, [], [])
        old.compact_copy(tmp_path / "old-compact.db")
    finally:
        old.close()
    new = open_store(path, create=False)
    try:
        new.compact_copy(tmp_path / "new-compact.db")
    finally:
        new.close()
    (old_chars,) = raw_rows(tmp_path / "old-compact.db", "SELECT sum(length(text)) FROM chunks")[0]
    assert isinstance(old_chars, int) and old_chars > characters, "overlapping chunks held more"
    old_size = (tmp_path / "old-compact.db").stat().st_size
    assert (tmp_path / "new-compact.db").stat().st_size < old_size


def _record(document: Document, text: str | None) -> DocumentRecord:
    """Return the store record of ``document``, with or without its whole text."""
    return DocumentRecord(
        path=document.id,
        path_key=document.id,
        name_key=document.id,
        title="",
        frontmatter={},
        content_hash="0" * 64,
        mtime=1.0,
        size=len(document.text),
        human_relevance_score=0.5,
        chunk_strategy="test",
        text=text,
    )


def test_a_text_holding_nul_is_refused_as_on_postgresql(tmp_path: Path) -> None:
    """One rule on every backend (`vrom.store.storable`): PostgreSQL cannot hold a NUL."""
    text = "First part about otters.\x00 " + "Otters hold hands while they sleep. " * 60
    with Collection.open("nul", embedder=Embedder.fake(), storage=tmp_path) as docs:
        with pytest.raises(ValidationError, match="NUL character"):
            docs.add([{"id": "nul", "text": text}])
        assert docs._store.documents.count() == 0


def test_replacing_or_removing_a_document_replaces_or_removes_its_text(tmp_path: Path) -> None:
    with Collection.open("swap", embedder=Embedder.fake(), storage=tmp_path) as docs:
        docs.add([{"id": "a", "text": "Walruses like cold water. " * 80}])
        docs.add([{"id": "a", "text": "Penguins like cold water. " * 80}])
        hit = docs.search("penguins", k=1)[0]
        assert hit.text == "Penguins like cold water. " * 80
        assert docs.remove("a") is True
        assert docs.search("penguins", k=1) == []
    assert raw_rows(tmp_path / "swap.db", "SELECT count(*) FROM document_texts") == [(0,)]
    store = open_store(tmp_path / "swap.db", create=False)
    try:
        assert store.integrity_problems() == []
    finally:
        store.close()


def test_a_document_added_before_texts_were_kept_hits_with_its_chunk(tmp_path: Path) -> None:
    text = "Capybaras are calm. " * 100
    with Collection.open("old", embedder=Embedder.fake(), storage=tmp_path) as docs:
        docs.add([{"id": "keep", "text": "Llamas hum. " * 10}])
        # written the way a store before schema 8 was: no whole text, each chunk with its own
        capybara = Document("cap", text)
        docs._store.documents.put(
            _record(capybara, None), document_chunks(capybara, docs._strategy), [], []
        )
        docs._corpus.embed_missing()
        hit = docs.search("capybaras calm", k=1, mode="keyword")[0]
        assert hit.id == "cap" and hit.text == hit.chunk_text == text[hit.char_start : hit.char_end]
        assert len(hit.text) < len(text)
        docs.add([{"id": "cap", "text": text}])  # added again: the whole text is kept
        assert docs.search("capybaras calm", k=1, mode="keyword")[0].text == text


def test_a_pack_store_before_schema_8_reads_its_chunk_texts(tmp_path: Path) -> None:
    path = tmp_path / "pack.db"
    raw = sqlite3.connect(path)
    for migration in MIGRATIONS[:6]:
        raw.executescript(migration.script)
    raw.execute("INSERT INTO meta(key, value) VALUES ('schema_version', '6')")
    raw.execute(
        "INSERT INTO documents(id, path, path_key, name_key, title, content_hash, mtime, size,"
        " human_relevance_score, chunk_count, chunk_strategy, indexed_at)"
        " VALUES (1, 'a.md', 'a.md', 'a', 'A', 'h', 1, 5, 0.5, 1, 's', 1)"
    )
    raw.execute(
        "INSERT INTO chunks(id, document_id, position, heading_path, text, char_start, char_end,"
        " content_hash) VALUES (1, 1, 0, '', 'Hello pack.', 0, 11, 'h1')"
    )
    raw.execute(
        "INSERT INTO chunks_fts(rowid, title, heading_path, body) VALUES (1, 'A', '', ?)",
        ("Hello pack.",),
    )
    raw.commit()
    raw.close()
    store = open_store(path, read_only=True)
    try:
        assert [c.text for c in store.documents.get_chunks([1])] == ["Hello pack."]
        assert store.documents.texts([1]) == {}
    finally:
        store.close()


# -- faces: packs and tools keep the chunk ----------------------------------------------------


@pytest.mark.filterwarnings("ignore::vrom.packs.signing.UnverifiedPackWarning")
def test_a_pack_built_from_documents_still_gives_chunks(tmp_path: Path) -> None:
    text = "Narwhal tusks are teeth. " * 200
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"_id": "narwhal", "text": text}) + "\n", encoding="utf-8")
    build_pack(corpus, tmp_path / "pack", pack_id="sea", version="1.0.0", embedder=Embedder.fake())
    publish_pack(tmp_path / "pack", tmp_path / "registry")
    with AgentMemory(registry_url=str(tmp_path / "registry"), cache_dir=tmp_path / "c") as memory:
        memory.init()
        memory.mount("sea")
        for mode in MODES:
            result = memory.search("narwhal tusks", top_k=1, mode=mode)[0]
            assert result.text in text and 0 < len(result.text) < 1100, "a pack hit is a chunk"


def test_the_agent_tool_gives_the_passage_that_matched() -> None:
    text = "Intro about oceans. " * 100 + "The kraken sleeps at noon. " + "Outro. " * 200
    with Collection.open("sea", embedder=Embedder.fake()) as docs:
        docs.add([{"id": "sea", "text": text}])
        hit = docs.search("kraken sleeps", k=1)[0]
        result = SearchTool(docs, "search_sea", "Search.").call({"query": "kraken sleeps"})
    (shown,) = result.hits
    assert shown["text"] == hit.chunk_text and "kraken" in shown["text"]
    assert "truncated" not in shown


# -- close -----------------------------------------------------------------------------------


def test_close_says_whether_it_closed_the_collection(tmp_path: Path) -> None:
    docs = Collection.open("shut", embedder=None, storage=tmp_path)
    docs.add([{"id": "a", "text": "Open and shut."}])
    assert docs.close() is True
    assert docs.close() is False
    with pytest.raises(StorageError, match="is closed"):
        docs.count()
    with Collection.open("shut", embedder=None, storage=tmp_path) as again:
        assert again.count() == 1
    assert again.close() is False, "the with block closed it"


def test_async_close_says_whether_it_closed_the_collection() -> None:
    async def run() -> tuple[bool, bool]:
        docs = await AsyncCollection.open("shut", embedder=None)
        return await docs.close(), await docs.close()

    assert asyncio.run(run()) == (True, False)
