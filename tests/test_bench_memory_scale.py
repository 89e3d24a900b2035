"""The memories-at-scale benchmark runs end to end on a tiny LoCoMo-like folder, both sides."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "memory_scale.py"
TOPICS = ["solar panels", "river fish", "mountain snow", "bread yeast", "chess openings"]


def _tiny_locomo(folder: Path) -> Path:
    folder.mkdir()
    turns = [
        {"_id": f"t{n}", "text": f"Ann: I read about {topic} today, part {n}."}
        for n, topic in enumerate(TOPICS * 4)
    ]
    questions = [
        {"_id": f"q{n}", "text": f"What did Ann read about {t}?"} for n, t in enumerate(TOPICS)
    ]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(t) for t in turns) + "\n")
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in questions) + "\n")
    return folder


def test_memory_scale_prints_both_sides_writes_json_and_plots(tmp_path: Path) -> None:
    data = _tiny_locomo(tmp_path / "locomo")
    out, plot = tmp_path / "scale.json", tmp_path / "scale.png"
    command = [sys.executable, str(SCRIPT), "--sizes", "60", "150", "--queries", "4"]
    command += [
        "--data",
        str(data),
        "--cache",
        str(tmp_path / "cache"),
        "--base",
        str(REPO / "src"),
    ]
    command += ["--out", str(out), "--plot", str(plot)]
    for _ in range(2):  # the second run reuses the stores built by the first
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
    assert "recall / collection" in done.stdout
    results = json.loads(out.read_text())
    assert set(results) == {"before", "after"}
    for side in results.values():
        assert set(side["sizes"]) == {"60", "150"}
        for size in side["sizes"].values():
            for mode in ("keyword", "vector", "hybrid"):
                assert size[mode]["memories"] > 0 and size[mode]["collection"] > 0
    assert sorted(p.name for p in (tmp_path / "cache").glob("built-*")) == ["built-150", "built-60"]
    if importlib.util.find_spec("matplotlib") is not None:
        assert plot.stat().st_size > 0
