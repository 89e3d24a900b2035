"""`backend-info`, `vector-info` and `sqlite-vec-info` tell what vrom really does with a store:
where writes land, how a search by meaning runs (exact below the HNSW threshold, the graph
from there on, none without vectors), the model and its fingerprint, and the graph file's state.

The Python API is checked on stores built here with the fake embedder; the CLI runs in a
subprocess and must print the same facts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vrom import Embedder, Vault, to_jsonable
from vrom.corpus import Corpus
from vrom.embed import EmbedderBinding
from vrom.store import open_store

NOTES = {
    "Alpha.md": "# Alpha\n\nApples and orchards in the valley.\n",
    "Beta.md": "# Beta\n\nBees keep the orchard alive.\n",
    "Gamma.md": "# Gamma\n\nGrapes ripen late in the season.\n",
}
TIMEOUT = 60


def write_notes(root: Path, notes: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in notes.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def open_vault(root: Path, state: Path, **options: object) -> Vault:
    return Vault.open(root, state, embedder=Embedder.fake(16), **options)  # type: ignore[arg-type]


def test_a_keyword_only_store_has_no_vector_mode_and_no_model(tmp_path: Path) -> None:
    root = write_notes(tmp_path / "vault", NOTES)
    with Vault.open(root, tmp_path / "state", embedder=None) as vault:
        vault.index()
        info = vault.vector_info()
        backend = vault.backend_info()
    assert (info.vector_mode, info.vectors, info.chunks) == ("none", 0, 3)
    assert (info.dims, info.bytes_per_vector, info.embedding_model) == (None, None, None)
    assert info.embedding_fingerprint is None and info.dtype == "float32"
    assert info.graph["state"] == "missing" and info.graph["path"].endswith(".hnsw.usearch")
    assert backend.index_write_mode == "sqlite-fts5-primary"
    assert (backend.vector_mode, backend.embedding_model) == ("none", None)
    assert backend.vector_index == info.index_settings
    assert backend.vector_index["index"] == "auto"


def test_below_the_threshold_search_is_exact_and_the_fingerprint_is_the_models(
    tmp_path: Path,
) -> None:
    root = write_notes(tmp_path / "vault", NOTES)
    model = Embedder.fake(16)
    with open_vault(root, tmp_path / "state") as vault:
        vault.index()
        info = vault.vector_info()
        backend = vault.backend_info()
    assert (info.vector_mode, info.vectors, info.chunks, info.dims) == ("exact-float32", 3, 3, 16)
    assert (info.dtype, info.bytes_per_vector) == ("float32", 64)
    assert info.embedding_model == model.fingerprint.describe()
    fingerprint = info.embedding_fingerprint
    assert fingerprint is not None
    assert fingerprint["id"] == model.fingerprint.digest()
    assert {k: v for k, v in fingerprint.items() if k != "id"} == json.loads(
        model.fingerprint.to_json()
    )
    settings = info.index_settings
    assert (settings["metric"], settings["hnsw_threshold"]) == ("cosine", 5_000)
    assert (settings["connectivity"], settings["ef_construction"], settings["ef_search"]) == (
        16,
        128,
        128,
    )
    assert backend.vector_mode == "exact-float32"
    assert backend.embedding_fingerprint == fingerprint
    assert backend.vector_index == settings


def test_int8_vectors_are_reported_as_stored_and_searched_as_float32(tmp_path: Path) -> None:
    root = write_notes(tmp_path / "vault", NOTES)
    with open_vault(root, tmp_path / "state", vector_encoding="int8") as vault:
        vault.index()
        info = vault.vector_info()
    assert (info.dtype, info.bytes_per_vector, info.vector_mode) == ("int8", 20, "exact-float32")


def test_vector_info_says_int8_vectors_are_decoded_beside_an_exact_float32_mode(
    tmp_path: Path,
) -> None:
    from io import StringIO

    from vrom.cli.vault_format import format_vector_info

    root = write_notes(tmp_path / "vault", NOTES)
    with open_vault(root, tmp_path / "state", vector_encoding="int8") as vault:
        vault.index()
        info = vault.vector_info()
    shown = StringIO()
    format_vector_info(info, shown)
    mode, *_ = shown.getvalue().splitlines()
    assert mode.split(":", 1)[1].strip() == (
        "exact-float32 (int8 vectors decoded to float32 to score)"
    )


def test_the_mode_switches_to_hnsw_at_the_threshold(tmp_path: Path) -> None:
    root = write_notes(tmp_path / "vault", NOTES)
    state = tmp_path / "state"
    with open_vault(root, state) as vault:
        vault.index()
    with open_vault(root, state, hnsw_threshold=4) as vault:  # 3 vectors: one short
        assert vault.vector_info().vector_mode == "exact-float32"
    with open_vault(root, state, hnsw_threshold=3) as vault:
        info = vault.vector_info()
        assert info.vector_mode == "usearch-hnsw"
        assert vault.backend_info().vector_mode == "usearch-hnsw"
        assert info.index_settings["hnsw_threshold"] == 3


def test_the_graph_file_state_follows_the_store(tmp_path: Path) -> None:
    root = write_notes(tmp_path / "vault", NOTES)
    with open_vault(root, tmp_path / "state", hnsw_threshold=2) as vault:
        vault.index()
        graph = vault.vector_info().graph
        assert (graph["state"], graph["bytes"], graph["vectors"]) == ("missing", None, None)

        vault.search("orchard", mode="vector")  # has the graph built and saved beside it
        vault.corpus.index.wait_for_graph()
        graph = vault.vector_info().graph
        path = Path(graph["path"])
        assert graph["state"] == "current" and graph["changes_behind"] == 0
        assert (graph["vectors"], graph["bytes"]) == (3, path.stat().st_size)

        write_notes(root, {"Delta.md": "# Delta\n\nDates dry in the sun.\n"})
        vault.index()
        graph = vault.vector_info().graph
        assert (graph["state"], graph["changes_behind"], graph["vectors"]) == ("behind", 1, 3)

        vault.search("orchard", mode="vector")
        vault.close()  # saves what the search replayed into the graph
    with open_vault(root, tmp_path / "state", hnsw_threshold=2) as vault:
        graph = vault.vector_info().graph
        assert (graph["state"], graph["changes_behind"], graph["vectors"]) == ("current", 0, 4)
        sidecar = path.with_suffix(".json")
        sidecar.write_text(sidecar.read_text().replace('"store"', '"other"'), encoding="utf-8")
        assert vault.vector_info().graph["state"] == "rebuild"


def test_a_store_in_memory_keeps_no_graph_file() -> None:
    corpus = Corpus(open_store(None), EmbedderBinding.of(Embedder.fake(16)))
    try:
        info = corpus.vector_info()
    finally:
        corpus.close()
    assert info.graph == {
        "path": None,
        "state": "none",
        "bytes": None,
        "vectors": None,
        "changes_behind": None,
    }
    assert info.vector_mode == "none"


# -- the CLI, in a subprocess ------------------------------------------------------------------


def vrom(state: Path, embedder: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VROM_VAULT", "VROM_STATE_DIR")}
    env.update(VROM_STATE_DIR=str(state), VROM_EMBEDDER=embedder, PYTHONIOENCODING="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "vrom", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=state.parent,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return done


@pytest.mark.parametrize(("embedder", "mode"), [("fake:16", "exact-float32"), ("none", "none")])
def test_the_cli_prints_what_the_python_api_returns(
    tmp_path: Path, embedder: str, mode: str
) -> None:
    root = write_notes(tmp_path / "vault", NOTES)
    state = tmp_path / "state"
    vrom(state, embedder, "index", str(root), "--quiet")
    printed = json.loads(
        vrom(state, embedder, "vector-info", "--vault", str(root), "--json").stdout
    )
    model = None if embedder == "none" else Embedder.fake(16)
    with Vault.open(root, state, embedder=model, create=False) as vault:
        expected = to_jsonable(vault.vector_info())
        store = vault.store.location
    assert printed == {**expected, "vault": str(root.resolve()), "store": store}
    assert printed["vector_mode"] == mode

    alias = json.loads(
        vrom(state, embedder, "--json", "sqlite-vec-info", "--vault", str(root)).stdout
    )
    note = alias.pop("note")
    assert alias == printed and "does not use sqlite-vec" in note

    backend = json.loads(
        vrom(state, embedder, "backend-info", "--vault", str(root), "--json").stdout
    )
    assert (backend["index_write_mode"], backend["vector_mode"]) == ("sqlite-fts5-primary", mode)
    assert backend["embedding_fingerprint"] == printed["embedding_fingerprint"]
    assert backend["vector_index"] == printed["index_settings"]

    text = vrom(state, embedder, "vector-info", "--vault", str(root)).stdout
    rows = dict(line.split(":", 1) for line in text.splitlines())
    assert rows["vector mode"].strip() == mode
    assert rows["vectors"].strip().startswith(f"{printed['vectors']} / 3")
    assert rows["graph file"].strip() == (
        f"{printed['graph']['path']} (not built: searches are exact below the HNSW threshold)"
    )
    alias_text = vrom(state, embedder, "sqlite-vec-info", "--vault", str(root)).stdout
    first, rest = alias_text.split("\n", 1)
    assert first == f"note: {note}" and rest == text
    backend_text = vrom(state, embedder, "backend-info", "--vault", str(root)).stdout
    rows = dict(line.split(":", 1) for line in backend_text.splitlines())
    assert rows["index write mode"].strip() == "sqlite-fts5-primary"
    assert rows["vector mode"].strip() == mode
