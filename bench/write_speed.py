"""Time vrom's writes against its peers': CPU per side, before and after, in one run.

    python bench/write_speed.py [--part add|index|both] [--rounds N] [--before SRC]
        [--dataset DIR] [--vault DIR] [--limit-docs N] [--out FILE]

Two writes, each side in its own fresh Python process (so a side's imports and caches are its
own), the sides' order rotated every round; ``--before`` is the ``src`` folder of another vrom
to compare with (a checkout of an older commit), put first on the child's ``PYTHONPATH``
(without it there is no "before" side); "after" is this checkout's ``src``.

1. ``add``: SciFact's 5,183 documents (`corpus_documents`) into a fresh store on disk.
   vrom: `Collection.open` (file storage) and ``add`` in batches of ``ADD_BATCH`` (256); LanceDB:
   one table (id, text, title, vector) made from an Arrow table, then its native FTS index on the
   text (``create_index("text", config=FTS())``); Chroma: a ``PersistentClient`` collection
   (cosine HNSW), added in batches under its maximum. Vectors are precomputed for everyone: 384
   random unit floats per text (a seeded generator), looked up by text, so the model's time is not
   what is compared. vrom embeds each chunk (with its context, as its recipe says): its texts are
   learnt in an untimed add into a scratch store first, then looked up in the timed one; LanceDB
   and Chroma get one vector per document. Timed: ``time.process_time()`` (every thread of the
   process: LanceDB and Chroma write from Rust threads) around opening the empty store, adding
   everything, building the indexes and closing.
2. ``index``: ``vrom index VAULT --embedder none --state-dir FRESH --quiet`` of the hub vault
   (6,571 notes; a fresh state folder each run, so every note is written) against bm25s
   tokenizing (English stopwords) and indexing the same notes' texts. Timed: the CPU (user +
   system) of the whole child process (``resource.getrusage(RUSAGE_CHILDREN)``), imports and
   reading the files included for both; bm25s's tokenize + index alone is reported too.

Prints each side's CPU seconds (min, median, max over the rounds) and the ratios vrom ÷ peer of the
medians; writes JSON to bench/results/write_speed.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
DEFAULT_DATASET = DATA / "beir" / "scifact"
DEFAULT_VAULT = DATA / "vault" / "obsidian-hub"
RESULTS = REPO / "bench" / "results" / "write_speed.json"
DIMS = 384
ADD_SIDES = ("vrom before", "vrom after", "lancedb", "chroma")
INDEX_SIDES = ("vrom before", "vrom after", "bm25s")


# -- inside a child process --------------------------------------------------------------------


def _documents(dataset: Path, limit: int | None) -> list[Any]:
    from vrom.evaluation.beir import corpus_documents

    documents = []
    for doc in corpus_documents(dataset):
        if limit is not None and len(documents) >= limit:
            break
        documents.append(doc)
    return documents


def _vectors(texts: list[str]) -> Any:
    """Return one random unit vector per text, the same for the same text in every process."""
    import hashlib

    import numpy as np

    rows = []
    for text in texts:
        seed = int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:8])
        row = np.random.default_rng(seed).standard_normal(DIMS).astype(np.float32)
        rows.append(row / np.linalg.norm(row))
    return np.stack(rows) if rows else np.zeros((0, DIMS), np.float32)


def _add_vrom(dataset: Path, limit: int | None) -> float:
    import numpy as np

    from vrom import Collection
    from vrom.embed import Embedder, Fingerprint
    from vrom.evaluation.runs import ADD_BATCH

    class LookupEmbedder(Embedder):
        """Vectors looked up by text; a text not seen yet gets its `_vectors` row (and is kept)."""

        def __init__(self) -> None:
            self.table: dict[str, Any] = {}

        @property
        def fingerprint(self) -> Fingerprint:
            return Fingerprint("write-speed-lookup", "1", DIMS, "mean", 256)

        def _embed(self, texts: Any, kind: str) -> Any:
            missing = [text for text in texts if text not in self.table]
            self.table.update(zip(missing, _vectors(missing), strict=True))
            return np.stack([self.table[text] for text in texts])

    documents = _documents(dataset, limit)
    embedder = LookupEmbedder()

    def add(folder: str) -> None:
        collection = Collection.open("scifact", embedder=embedder, storage=folder)
        for start in range(0, len(documents), ADD_BATCH):
            collection.add(documents[start : start + ADD_BATCH])
        collection.close()

    with tempfile.TemporaryDirectory() as scratch:
        add(scratch)  # learns the texts vrom embeds
    with tempfile.TemporaryDirectory() as folder:
        started = time.process_time()
        add(folder)
        return time.process_time() - started


def _add_lancedb(dataset: Path, limit: int | None) -> float:
    import lancedb
    import pyarrow as pa
    from lancedb.index import FTS

    documents = _documents(dataset, limit)
    vectors = _vectors([doc.text for doc in documents])
    with tempfile.TemporaryDirectory() as folder:
        started = time.process_time()
        data = pa.table(
            {
                "id": pa.array([doc.id for doc in documents], pa.string()),
                "text": pa.array([doc.text for doc in documents], pa.string()),
                "title": pa.array([doc.metadata.get("title", "") for doc in documents]),
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIMS),
            }
        )
        table = lancedb.connect(folder).create_table("scifact", data=data)
        table.create_index("text", config=FTS())
        return time.process_time() - started


def _add_chroma(dataset: Path, limit: int | None) -> float:
    import chromadb
    from chromadb.config import Settings

    documents = _documents(dataset, limit)
    vectors = _vectors([doc.text for doc in documents])
    with tempfile.TemporaryDirectory() as folder:
        started = time.process_time()
        client = chromadb.PersistentClient(folder, settings=Settings(anonymized_telemetry=False))
        collection = client.create_collection(
            "scifact", embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
        )
        batch = client.get_max_batch_size()
        for start in range(0, len(documents), batch):
            chosen = documents[start : start + batch]
            collection.add(
                ids=[doc.id for doc in chosen],
                embeddings=vectors[start : start + batch],
                documents=[doc.text for doc in chosen],
                metadatas=[dict(doc.metadata) or None for doc in chosen],
            )
        client.close()
        return time.process_time() - started


def _bm25s(vault: Path) -> float:
    """Tokenize and index every note's text with bm25s; return that part's CPU seconds."""
    import bm25s

    texts = []
    for folder, dirs, files in os.walk(vault):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.lower().endswith(".md"):
                texts.append((Path(folder) / name).read_text("utf-8", errors="replace"))
    started = time.process_time()
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    return time.process_time() - started


def child(args: argparse.Namespace) -> None:
    side = args.child
    limit = args.limit_docs
    if side == "vrom-add":
        seconds = _add_vrom(args.dataset, limit)
    elif side == "lancedb":
        seconds = _add_lancedb(args.dataset, limit)
    elif side == "chroma":
        seconds = _add_chroma(args.dataset, limit)
    else:
        seconds = _bm25s(args.vault)
    print(json.dumps({"cpu_s": seconds}))


# -- the parent ----------------------------------------------------------------------------


def _environment(src: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src), env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        )
    return env


def _run(command: list[str], env: dict[str, str]) -> tuple[float, dict[str, Any]]:
    """Run a child; return its CPU (user + system) and what it printed last as JSON."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = done.stdout.strip().splitlines()
    printed = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
    return cpu, printed


def _add_command(side: str, args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    me = [sys.executable, str(Path(__file__).resolve())]
    common = ["--dataset", str(args.dataset)]
    if args.limit_docs is not None:
        common += ["--limit-docs", str(args.limit_docs)]
    if side.startswith("vrom"):
        src = args.before if side == "vrom before" else REPO / "src"
        return [*me, "--child", "vrom-add", *common], _environment(src)
    return [*me, "--child", side, *common], _environment(None)


def _index_command(side: str, args: argparse.Namespace, state: Path) -> list[str]:
    if side == "bm25s":
        return [sys.executable, str(Path(__file__).resolve()), "--child", "bm25s", "--vault",
                str(args.vault)]  # fmt: skip
    return [sys.executable, "-m", "vrom", "index", str(args.vault), "--embedder", "none",
            "--state-dir", str(state), "--quiet"]  # fmt: skip


def _rotated(sides: tuple[str, ...], round_number: int) -> list[str]:
    shift = round_number % len(sides)
    return list(sides[shift:] + sides[:shift])


def _summary(samples: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    return {
        side: {"min": min(v), "median": statistics.median(v), "max": max(v)}
        for side, v in samples.items()
        if v
    }


def _print(title: str, summary: dict[str, dict[str, float]], peers: tuple[str, ...]) -> None:
    print(f"\n{title}: CPU seconds (min / median / max)")
    for side, stats in summary.items():
        print(f"  {side:<12} {stats['min']:7.2f} {stats['median']:7.2f} {stats['max']:7.2f}")
    for peer in peers:
        if peer in summary:
            for side in ("vrom before", "vrom after"):
                if side not in summary:
                    continue
                ratio = summary[side]["median"] / summary[peer]["median"]
                print(f"  {side} / {peer}: {ratio:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("add", "index", "both"), default="both")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", type=Path, default=None)
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--vault", type=Path, default=DEFAULT_VAULT)
    parser.add_argument("--limit-docs", type=int, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    report: dict[str, Any] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "load_average": os.getloadavg(),
        "rounds": args.rounds,
        "before": None if args.before is None else str(args.before),
    }
    with_before = () if args.before is None else ("vrom before",)
    add_sides = (*with_before, *ADD_SIDES[1:])
    index_sides = (*with_before, *INDEX_SIDES[1:])
    if args.part in ("add", "both"):
        add_cpu: dict[str, list[float]] = {side: [] for side in add_sides}
        for round_number in range(args.rounds):
            for side in _rotated(add_sides, round_number):
                command, env = _add_command(side, args)
                _, printed = _run(command, env)
                add_cpu[side].append(printed["cpu_s"])
        report["add"] = _summary(add_cpu)
        _print("Collection.add of the dataset (in-process CPU)", report["add"], ADD_SIDES[2:])
    if args.part in ("index", "both"):
        index_cpu: dict[str, list[float]] = {side: [] for side in index_sides}
        bm25s_inner: list[float] = []
        for round_number in range(args.rounds):
            for side in _rotated(index_sides, round_number):
                with tempfile.TemporaryDirectory() as state:
                    src = None if side == "bm25s" else (
                        args.before if side == "vrom before" else REPO / "src"
                    )  # fmt: skip
                    cpu, printed = _run(_index_command(side, args, Path(state)), _environment(src))
                index_cpu[side].append(cpu)
                if side == "bm25s":
                    bm25s_inner.append(printed["cpu_s"])
        report["index"] = _summary(index_cpu)
        report["bm25s_tokenize_index_only"] = _summary({"bm25s": bm25s_inner})["bm25s"]
        _print("index of the vault (process CPU)", report["index"], ("bm25s",))
        print(f"  bm25s tokenize + index alone: median {statistics.median(bm25s_inner):.2f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
