"""Which BEIR datasets a benchmark runs on: the shared command-line arguments and their defaults.

Imported by the benchmark scripts beside it (``python bench/NAME.py`` puts this folder first
on ``sys.path``).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
BEIR = DATA / "beir"
DEFAULTS = ((BEIR / "scifact", "train"), (BEIR / "nfcorpus", "dev"))
DEV_SETS = (*DEFAULTS, (DATA / "locomo-dev", "dev"))
"""The retrieval rounds' development sets: the two BEIR sets and LoCoMo's five conversations."""


def add_dataset_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``DATASET_DIR ...`` and ``--split`` (once for all, or once per dataset)."""
    parser.add_argument("datasets", nargs="*", type=Path, metavar="DATASET_DIR")
    parser.add_argument(
        "--split",
        action="append",
        help="qrels split (default: test; train and dev for the default datasets)",
    )


def chosen_datasets(
    folders: Sequence[Path],
    splits: Sequence[str] | None,
    defaults: Sequence[tuple[Path, str]] = DEFAULTS,
) -> list[tuple[Path, str]]:
    """Return (folder, split) pairs: ``defaults`` without folders; one split each otherwise."""
    if not folders:
        return [(folder, splits[0] if splits else split) for folder, split in defaults]
    splits = splits or ["test"]
    if len(splits) == 1:
        splits = list(splits) * len(folders)
    if len(splits) != len(folders):
        raise SystemExit(f"give one --split for all datasets or one per dataset ({len(folders)})")
    return list(zip(folders, splits, strict=True))


def chosen_dev_sets(
    folders: Sequence[Path], splits: Sequence[str] | None
) -> list[tuple[Path, str]]:
    """Return `chosen_datasets` with `DEV_SETS` as the defaults, those not on this machine left
    out; exit with a message when none is left."""
    datasets = [
        (folder, split)
        for folder, split in chosen_datasets(folders, splits, DEV_SETS)
        if folders or folder.is_dir()  # the default sets that are here
    ]
    if not datasets:
        raise SystemExit(f"no dataset given and none under {DATA}")
    return datasets
