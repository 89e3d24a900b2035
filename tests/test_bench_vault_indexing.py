"""The vault indexing benchmark runs end to end on a tiny vault with the fake model."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "vault_indexing.py"


def _write_vault(root: Path, notes: int = 10) -> None:
    for i in range(notes):
        folder = root / ("Projects" if i % 2 else "Journal")
        folder.mkdir(parents=True, exist_ok=True)
        sections = "\n\n".join(
            f"## Section {s}\n\n" + f"Paragraph {s} of note {i} about gardens and budgets. " * 12
            for s in range(3)
        )
        (folder / f"Note {i:02d}.md").write_text(f"# Note {i}\n\n{sections}\n", encoding="utf-8")
    (root / ".obsidian").mkdir()
    (root / ".obsidian" / "hidden.md").write_text("# Not a note\n", encoding="utf-8")


def _digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file():
            digest.update(path.relative_to(root).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()


def _run(vault: Path, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(SCRIPT), "--vault", str(vault), "--embedder", "fake"]
    return subprocess.run(
        [*command, "--out", str(out), *args], capture_output=True, text=True, timeout=120
    )


def test_vault_indexing_benchmark_runs_with_the_fake_model(tmp_path: Path) -> None:
    vault, out = tmp_path / "vault", tmp_path / "indexing.json"
    _write_vault(vault)
    before = _digest(vault)
    result = _run(vault, out)
    assert result.returncode == 0, result.stdout + result.stderr
    numbers = json.loads(out.read_text())
    full, raw, noop, edit = (numbers[p] for p in ("full", "raw", "noop", "edit"))
    assert numbers["default_model"] is False
    assert numbers["fingerprint"]["model"] == "fake-hashed-words"
    assert full["notes"] == 10 and full["added"] == 10
    assert full["chunks"] > 10 and full["embedded_by_model"] == full["chunks"]
    assert full["index_s"] > 0 and full["chunks_per_s"] > 0
    assert raw["texts"] == full["chunks"] and raw["chunks_per_s"] > 0
    assert numbers["vrom_over_raw_chunks_per_s"] > 0
    assert noop["unchanged"] == 10 and noop["embedded"] == noop["embedded_by_model"] == 0
    assert full["model_loaded"] and edit["model_loaded"]
    assert edit["changed"] == 1
    assert 1 <= edit["embedded_by_model"] <= edit["edit_target_chunks"]
    for phase in (full, raw, noop, edit):
        assert phase["peak_rss_mb"] > 0
    assert numbers["store_mb"] > 0 and numbers["problems"] == []
    assert "vrom / raw chunks/s" in result.stdout
    assert _digest(vault) == before  # the benchmark edits its copy, never the source


def test_vault_indexing_benchmark_samples_notes_and_texts(tmp_path: Path) -> None:
    vault, out = tmp_path / "vault", tmp_path / "indexing.json"
    _write_vault(vault)
    result = _run(vault, out, "--sample", "4", "--raw-sample", "5")
    assert result.returncode == 0, result.stdout + result.stderr
    numbers = json.loads(out.read_text())
    assert numbers["notes_copied"] == numbers["full"]["notes"] == 4
    assert numbers["raw"]["texts"] == 5
