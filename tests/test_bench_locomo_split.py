"""The LoCoMo split: every question in exactly one half, by its conversation, the corpus whole."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "locomo_split.py"


def test_the_split_keeps_the_corpus_and_puts_each_conversation_in_one_half(tmp_path: Path) -> None:
    source = tmp_path / "locomo-dev"
    (source / "qrels").mkdir(parents=True)
    conversations = ["conv-26", "conv-30", "conv-41", "conv-42", "conv-43"]
    turns = [{"_id": f"{c}:D1:1", "text": f"A: turn of {c}"} for c in conversations]
    (source / "corpus.jsonl").write_text("\n".join(map(json.dumps, turns)) + "\n")
    (source / "queries.jsonl").write_text(
        "\n".join(json.dumps({"_id": f"{c}:q0", "text": "what?"}) for c in conversations) + "\n"
    )
    judged = [f"{c}:q0\t{c}:D1:1\t1" for c in conversations] + ["conv-42:q0\tconv-42:D1:2\t1"]
    (source / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(judged))
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "work"), "--data", str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    split = tmp_path / "work" / "locomo-dev"
    assert (split / "corpus.jsonl").read_text() == (source / "corpus.jsonl").read_text()

    def questions(name: str) -> list[str]:
        lines = (split / "qrels" / f"{name}.tsv").read_text().splitlines()
        assert lines[0] == "query-id\tcorpus-id\tscore"
        return [line.split("\t")[0] for line in lines[1:]]

    assert questions("tune") == ["conv-26:q0", "conv-30:q0", "conv-41:q0"]
    assert questions("heldout") == ["conv-42:q0", "conv-43:q0", "conv-42:q0"]
    assert sorted(questions("tune") + questions("heldout")) == sorted(questions("dev"))
