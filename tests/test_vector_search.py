"""Vector and hybrid search, embedding during indexing, and model fingerprints (fake model); the
``vault`` fixture's tests run on both store backends (on PostgreSQL, pgvector searches)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from vrom import Embedder, ModelError, NotFoundError, ValidationError, Vault, to_jsonable
from vrom.index.codec import decode, encode
from vrom.search.rerank import text_quality
from vrom.store import StoredChunk

NOTES = {
    "Cats.md": "# Cats\nThe cat sleeps on the warm windowsill all afternoon.\n",
    "Dogs.md": "# Dogs\nThe dog fetches the ball in the park every morning.\n",
    "Taxes.md": "---\ntags: [finance]\n---\n# Taxes\nFile the quarterly tax return before the deadline.\n",
    "Budget.md": "---\ntags: [finance]\n---\n# Budget\nThe yearly budget plan lists every expense.\n",
    "work/Standup.md": "# Standup\nThe standup meeting is at nine every morning.\n",
}


@pytest.fixture
def vault(write_vault, open_backend_vault) -> Vault:
    v = open_backend_vault(write_vault(NOTES), Embedder.fake())
    summary = v.index()
    assert summary.embedded == summary.chunks == 5
    return v


@pytest.fixture
def sqlite_vault(write_vault, tmp_path: Path) -> Vault:
    v = Vault.open(write_vault(NOTES), tmp_path / "state", embedder=Embedder.fake())
    v.index()
    yield v
    v.close()


def test_every_hit_says_what_its_score_is(vault: Vault) -> None:
    """Scores of different modes live on different scales: each hit names its kind."""
    kinds = {
        mode: {h.score_kind for h in vault.search("the morning ball", mode=mode, k=5)}
        for mode in ("keyword", "vector", "hybrid", "rerank")
    }
    assert kinds == {
        "keyword": {"bm25"},
        "vector": {"cosine"},
        "hybrid": {"fused"},
        "rerank": {"rerank"},
    }
    assert {h.score_kind for h in vault.search("the morning ball")} == {"fused"}  # the default
    (hit,) = vault.search("the morning ball", mode="keyword", k=1, expand_context=True)
    assert hit.score_kind == "bm25", "context expansion keeps the kind"
    assert to_jsonable(hit)["score_kind"] == "bm25"
    memory = vault.memories
    memory.remember("Ball games", "The dog fetches the ball.")
    assert [h.score_kind for h in memory.recall("ball")] == ["fused"]


def test_fake_embedder_is_deterministic_and_normalised() -> None:
    fake = Embedder.fake(32)
    first = fake.embed_documents(["alpha beta", "gamma", ""])
    assert first.dtype == np.float32 and first.shape == (3, 32)
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0)
    assert np.array_equal(first, Embedder.fake(32).embed_documents(["alpha beta", "gamma", ""]))
    assert fake.embed_query("alpha beta").shape == (32,)
    with pytest.raises(ValidationError):
        fake.embed_documents("not a list")  # type: ignore[arg-type]


def test_vector_search_ranks_by_similarity(vault: Vault) -> None:
    hits = vault.search("warm windowsill cat", mode="vector", k=5)
    assert hits[0].path == "Cats.md"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert -1.0 <= hits[-1].score <= hits[0].score <= 1.0
    assert set(hits[0].scores) == {"vector"}
    assert len(hits) == 5, "vector search returns k hits even without shared words"


def test_default_mode_is_hybrid_once_vectors_exist(vault: Vault) -> None:
    hits = vault.search("quarterly tax deadline")
    assert hits[0].path == "Taxes.md"
    assert {"fused", "rrf", "prior", "bm25", "vector"} <= set(hits[0].scores)
    assert vault.search("quarterly tax deadline", mode="keyword")[0].scores.keys() == {
        "bm25",
        "prior",
    }


def test_hybrid_fuses_both_rankings(vault: Vault) -> None:
    # "morning" is in two notes; the vector side breaks the tie towards the dog walk
    hybrid = vault.search("dog ball park morning", mode="hybrid", k=5)
    assert hybrid[0].path == "Dogs.md"
    both = [h for h in hybrid if "bm25" in h.scores and "vector" in h.scores]
    assert both, "chunks found by both retrievers carry both scores"
    for hit in hybrid:
        assert hit.score == pytest.approx(hit.scores["fused"] * hit.scores["prior"], rel=1e-5)


def test_filters_apply_inside_vector_and_hybrid_search(vault: Vault) -> None:
    for mode in ("vector", "hybrid"):
        hits = vault.search("cat windowsill", mode=mode, k=5, tags="finance")
        assert {h.path for h in hits} == {"Taxes.md", "Budget.md"}, mode
        hits = vault.search("cat", mode=mode, k=5, path="work/")
        assert [h.path for h in hits] == ["work/Standup.md"], mode


@pytest.mark.parametrize("per_note", [False, True])
@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_whole_chunks_are_read_once_and_only_for_the_hits(
    vault: Vault, mode: str, per_note: bool
) -> None:
    asked: list[list[int]] = []
    get_chunks = vault.store.documents.get_chunks

    def counting(ids: Sequence[int]) -> list[StoredChunk]:
        asked.append(list(ids))
        return get_chunks(ids)

    vault.store.documents.get_chunks = counting  # type: ignore[method-assign]
    hits = vault.search("the morning meeting", k=2, mode=mode, per_note=per_note)
    assert len(hits) == 2 and len(asked) == 1
    assert sorted(asked[0]) == sorted(h.chunk_id for h in hits)


def test_deleted_and_updated_chunks_never_come_back(vault: Vault) -> None:
    assert vault.search("warm windowsill", mode="vector", k=1)[0].path == "Cats.md"
    (vault.root / "Cats.md").write_text("# Cats\nNow about submarines and sonar.\n")
    (vault.root / "Dogs.md").unlink()
    summary = vault.index()
    assert (summary.changed, summary.removed, summary.embedded) == (1, 1, 1)
    hits = vault.search("warm windowsill", mode="vector", k=10)
    assert "Dogs.md" not in {h.path for h in hits}
    texts = {h.text for h in hits}
    assert not any("windowsill" in t for t in texts)
    assert vault.store.counts().vectors == vault.store.counts().chunks == 4


def test_unchanged_text_keeps_its_vector(vault: Vault) -> None:
    assert vault.index(force=True).embedded == 0, "rewritten notes reuse vectors by text hash"
    (vault.root / "Copy.md").write_text(NOTES["Cats.md"])
    assert vault.index().embedded == 0, "identical text in another note reuses the vector"


def test_reindex_paths_embeds_the_new_chunks(vault: Vault) -> None:
    (vault.root / "New.md").write_text("# New\nA brand new note about volcanoes.\n")
    summary = vault.reindex_paths(["New.md"])
    assert (summary.added, summary.embedded) == (1, 1)
    assert vault.search("volcanoes", mode="vector", k=1)[0].path == "New.md"


def test_another_model_is_refused_until_rebuilt(sqlite_vault: Vault, tmp_path: Path) -> None:
    root = sqlite_vault.root
    sqlite_vault.close()
    with Vault.open(root, tmp_path / "state", embedder=Embedder.fake(32)) as other:
        with pytest.raises(ModelError, match=r"fake-hashed-words \(64 d\).*\(32 d\).*--rebuild"):
            other.index()
        with pytest.raises(ModelError, match="vrom embed --rebuild"):
            other.search("cat", mode="vector")
        assert other.embed(rebuild=True) == 5
        assert other.search("cat windowsill", mode="vector")[0].path == "Cats.md"
        assert other.stats().embedding_model == "fake-hashed-words (32 d)"


def test_keyword_only_vaults_and_missing_vectors(write_vault, tmp_path: Path) -> None:
    root = write_vault(NOTES)
    with Vault.open(root, tmp_path / "state", embedder=None) as plain:
        plain.index()
        assert plain.search("cat")[0].scores.keys() == {"bm25", "prior"}
        with pytest.raises(ValidationError, match="needs an embedder"):
            plain.search("cat", mode="vector")
    with Vault.open(root, tmp_path / "state", embedder=Embedder.fake()) as late:
        assert late.search("cat")[0].scores.keys() == {"bm25", "prior"}, "keyword until embedded"
        with pytest.raises(NotFoundError, match="vrom embed"):
            late.search("cat", mode="hybrid")
        assert late.embed() == 5
        assert "fused" in late.search("cat")[0].scores
    with (
        Vault.open(root, tmp_path / "state", embedder=None) as plain,
        pytest.raises(ValidationError, match="mode must be"),
    ):
        plain.search("cat", mode="semantic")


def test_embedder_specs() -> None:
    assert Embedder.from_spec("none") is None
    assert Embedder.from_spec("fake:16").dim == 16  # type: ignore[union-attr]
    for bad in ("nope", "fake:x", "onnx:", "default:extra"):
        with pytest.raises(ValidationError, match="unknown embedder"):
            Embedder.from_spec(bad)


def test_expand_context_joins_neighbours_without_repeating_overlaps(
    write_vault, tmp_path: Path
) -> None:
    paragraphs = [f"Paragraph {i} talks about topic{i} at some length." * 3 for i in range(12)]
    root = write_vault({"Long.md": "# Long\n" + "\n\n".join(paragraphs) + "\n"})
    with Vault.open(
        root, tmp_path / "state", embedder=None, chunk_chars=300, chunk_overlap=60
    ) as vault:
        vault.index()
        chunks = vault.store.documents.chunks_of(vault.get_note("Long").note_id)
        assert len(chunks) > 4
        hit = vault.search("topic5", k=1, expand_context=True, context_window=1)[0]
        middle = next(c for c in chunks if c.chunk_id == hit.chunk_id)
        assert list(hit.context_chunk_ids) == [
            c.chunk_id for c in chunks if abs(c.position - middle.position) <= 1
        ]
        text = (root / "Long.md").read_text()
        first, last = (
            next(c for c in chunks if c.chunk_id == i) for i in hit.context_chunk_ids[::2]
        )
        assert hit.context_text == text[first.char_start : last.char_end]
        plain = vault.search("topic5", k=1)[0]
        assert plain.context_text is None and plain.text == hit.text
        context = vault.context("topic5", k=1, expand_context=True, max_tokens=2000)
        assert hit.context_text in context.text
        bare = vault.context("topic5", k=1, include_sources=False)
        assert "Sources:" not in bare.text and plain.text in bare.text
        with pytest.raises(ValidationError, match="context_window"):
            vault.search("topic5", expand_context=True, context_window=-1)


def test_related_notes_by_meaning(vault: Vault) -> None:
    (vault.root / "Kitten.md").write_text("# Kitten\nA cat sleeps on the warm windowsill.\n")
    vault.index()
    related = vault.related("Cats")
    assert related.similar[0].note.path == "Kitten.md"
    assert all(s.note.path != "Cats.md" for s in related.similar)
    assert [s.score for s in related.similar] == sorted(
        (s.score for s in related.similar), reverse=True
    )


def test_rerank_mode_follows_the_hybrid_search_contract(vault: Vault) -> None:
    hits = vault.search("the morning", mode="rerank", k=5)
    keyword = {h.chunk_id for h in vault.search("the morning", mode="keyword", k=50)}
    assert hits and {h.chunk_id for h in hits} <= keyword, "only keyword candidates"
    for hit in hits:
        assert 0.0 <= hit.fts_score <= 1.0 and 0.0 <= hit.text_quality_score <= 1.0
        assert -1.0 <= hit.vector_score <= 1.0 and hit.ranking_runtime >= 0.0
        expected = (
            0.45 * hit.fts_score
            + 0.35 * hit.vector_score
            + 0.10 * hit.human_relevance_score
            + 0.10 * hit.text_quality_score
        )
        assert hit.score == pytest.approx(expected, abs=1e-4)
    assert max(h.fts_score for h in hits) == 1.0
    assert vault.search("the morning", mode="hybrid")[0].fts_score is None


def test_text_quality_prefers_prose() -> None:

    prose = "The team decided to keep the first version on one machine, because it fits. " * 2
    links = "[[A]] [[B]] [[C]] https://example.org/x https://example.org/y [[D]]"
    code = "```\nx = 1\n```"
    assert text_quality(prose) > text_quality(links) and text_quality(prose) > text_quality(code)
    assert text_quality("") == 0.0 and 0.0 <= text_quality(prose) <= 1.0


def test_default_mode_falls_back_to_keyword_when_vectors_are_gone(vault: Vault) -> None:
    assert "fused" in vault.search("cat")[0].scores
    vault.store.vectors.clear()
    assert vault.search("cat")[0].scores.keys() == {"bm25", "prior"}


def test_vector_options_reach_the_index(write_vault, tmp_path: Path) -> None:
    root = write_vault(NOTES)
    with Vault.open(
        root, tmp_path / "state", embedder=Embedder.fake(), metric="euclidean", hnsw_threshold=1
    ) as vault:
        vault.index()
        hits = vault.search("warm windowsill cat", mode="vector", k=3, ef_search=16)
        assert hits[0].path == "Cats.md"
        assert all(h.score <= 0 for h in hits), "euclidean scores are negated distances"
        assert {h.score_kind for h in hits} == {"euclidean"}
        assert type(vault.corpus.index.wait_for_graph()).__name__ == "HnswIndex"
        with pytest.raises(ValidationError, match="ef_search"):
            vault.search("cat", mode="vector", k=5, ef_search=2)
    with pytest.raises(ValidationError, match="metric"):
        Vault.open(root, tmp_path / "fresh-state", metric="manhattan")
    assert not (tmp_path / "fresh-state").exists(), "a bad argument creates no store"


def test_int8_vectors_take_a_quarter_of_the_space_and_rank_alike(
    write_vault, tmp_path: Path
) -> None:
    root = write_vault(NOTES)
    rankings = {}
    for encoding in ("float32", "int8"):
        state = tmp_path / encoding
        with Vault.open(root, state, embedder=Embedder.fake(), vector_encoding=encoding) as vault:
            vault.index()
            blob = vault.store.vectors.rows()[0][1]
            assert len(blob) == (64 * 4 if encoding == "float32" else 64 + 4)
            hits = vault.search("warm windowsill cat", mode="vector", k=5)
            rankings[encoding] = [h.path for h in hits]
            assert hits[0].score == pytest.approx(
                vault.search("warm windowsill cat", mode="vector", k=1)[0].score
            )
    assert rankings["int8"] == rankings["float32"]
    with Vault.open(root, tmp_path / "int8", embedder=Embedder.fake()) as kept:
        assert kept.index().embedded == 0, "None keeps the store's encoding"
    with Vault.open(
        root, tmp_path / "int8", embedder=Embedder.fake(), vector_encoding="float32"
    ) as switched:
        with pytest.raises(ModelError, match=r"int8 vectors but float32.*--rebuild"):
            switched.index()
        assert switched.embed(rebuild=True) == 5
        assert len(switched.store.vectors.rows()[0][1]) == 64 * 4


def test_codec_round_trip() -> None:

    rng = np.random.default_rng(7)
    matrix = rng.normal(size=(20, 48)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    assert np.array_equal(decode(encode(matrix, "float32"), "float32"), matrix)
    approx = decode(encode(matrix, "int8"), "int8")
    assert np.min(np.sum(approx * matrix, axis=1)) > 0.999
    with pytest.raises(ValidationError):
        encode(matrix, "int4")
