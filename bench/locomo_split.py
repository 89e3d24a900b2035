"""Split LoCoMo's questions by conversation: three to tune on, two held out (issue 30).

    python bench/locomo_split.py WORK_DIR [--data ../shared/data/locomo-dev]
    python bench/quality.py WORK_DIR/locomo-dev --split tune
    python bench/quality.py WORK_DIR/locomo-dev --split heldout

Writes ``WORK_DIR/locomo-dev``: the same corpus and queries (linked, not copied: the corpus is
the whole of it, every conversation's turns, so the other conversations stay distractors and
the cached vectors of `bench/quality.py` still apply) with two more qrels splits, ``tune``
(the questions of `TUNE`) and ``heldout`` (those of `HELD_OUT`), beside ``dev`` (all of them).
Chosen once and fixed: conversations in their order in the data set, the first three to tune.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from beir_datasets import DATA

TUNE = ("conv-26", "conv-30", "conv-41")
HELD_OUT = ("conv-42", "conv-43")


def write_split(source: Path, work: Path) -> Path:
    """Write the split folder under ``work`` from the LoCoMo folder ``source``; return it."""
    folder = work / source.name
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/dev.tsv"):
        link = folder / name
        link.unlink(missing_ok=True)
        link.symlink_to((source / name).resolve())
    with (source / "qrels" / "dev.tsv").open(newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t"))
    header, judged = rows[0], rows[1:]
    for split, conversations in (("tune", TUNE), ("heldout", HELD_OUT)):
        kept = [row for row in judged if row[0].split(":", 1)[0] in conversations]
        with (folder / "qrels" / f"{split}.tsv").open("w", newline="") as handle:
            csv.writer(handle, delimiter="\t", lineterminator="\n").writerows([header, *kept])
        questions = len({row[0] for row in kept})
        print(f"{split}: {', '.join(conversations)}: {questions} questions, {len(kept)} judgements")
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", type=Path, help="where the split folder is written")
    parser.add_argument("--data", type=Path, default=DATA / "locomo-dev")
    args = parser.parse_args()
    print(write_split(args.data, args.work))


if __name__ == "__main__":
    main()
