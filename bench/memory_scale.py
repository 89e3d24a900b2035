"""Memories at scale: recall p50 at 10k, 30k and 100k memories against a collection's search of
the same texts and vectors, in keyword, vector and hybrid mode, before and after a change.

    python bench/memory_scale.py [--sizes 10000 30000 100000] [--queries 60]
        [--cache bench/results/cache/memory_scale] [--base ../base29/src]
        [--out bench/results/memory_scale.json] [--plot docs/memory_scale.png]

Texts: LoCoMo-dev's conversation turns cycled, each with a ``[m<i>]`` suffix (so the ``n``-th
copy of a turn is its own memory); title: the turn's first eight words. Vectors: a table-lookup
embedder of unit vectors drawn around 1,000 centres (384 dims; ``[m<i>]`` is row ``i``), so the
store holds real-looking neighbourhoods without a model. Queries: LoCoMo's questions, each with
its own clustered vector. Each size is one SQLite store of memories and one `Collection` of the
same texts (one chunk each), built once and kept in ``--cache`` (building 100k takes minutes).

Per size and mode, every query is recalled (`Memories.recall`, k=10, the default filter:
active memories) and searched (`Collection.search`, k=10) in the same process, the order of the
two alternating per query; each call is timed in CPU seconds of the calling thread
(`time.thread_time`: the machine is shared, and a build beside the searches is not the call's
cost). Before timing, one call per mode warms each side, and any HNSW graph due and the
in-memory keyword copies (the collection's, and the memories' where the tree measured has
one) are waited for (steady state: what a process that goes on searching has). ``--base``
runs the same measurement with another vrom source tree (the "before") in a subprocess, on the
same cached stores. Prints a table with the ratios and writes
JSON, and a plot of recall p50 against N per mode.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "locomo-dev"
RESULTS = REPO / "bench" / "results" / "memory_scale.json"
CACHE = REPO / "bench" / "results" / "cache" / "memory_scale"
PLOT = REPO / "docs" / "memory_scale.png"
MODES = ("keyword", "vector", "hybrid")
SIZES = (10_000, 30_000, 100_000)
DIMS = 384
CENTRES = 1_000
K = 10
_MARK = re.compile(r"\[m(\d+)\]")


def _unit(rows: npt.NDArray[np.float64]) -> npt.NDArray[np.float32]:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def _texts(data: Path) -> tuple[list[str], list[str]]:
    """Return LoCoMo-dev's turns and questions."""
    turns = [json.loads(line)["text"] for line in (data / "corpus.jsonl").open(encoding="utf-8")]
    questions = [
        json.loads(line)["text"] for line in (data / "queries.jsonl").open(encoding="utf-8")
    ]
    return turns, questions


def _tables(size: int, queries: int) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    rng = np.random.default_rng(29)
    centres = rng.normal(size=(CENTRES, DIMS))
    documents = _unit(centres[rng.integers(0, CENTRES, size)] + 0.6 * rng.normal(size=(size, DIMS)))
    asked = _unit(
        centres[rng.integers(0, CENTRES, queries)] + 0.6 * rng.normal(size=(queries, DIMS))
    )
    return documents, asked


def _embedder(documents: npt.NDArray[np.float32], questions: Sequence[str], asked: Any) -> Any:
    from vrom import Embedder
    from vrom.embed import Fingerprint

    by_question = {text: row for row, text in enumerate(questions)}

    class TableEmbedder(Embedder):
        """Row ``i`` of the document table for a text holding ``[m<i>]``; a question's row."""

        @property
        def fingerprint(self) -> Fingerprint:
            return Fingerprint("bench-memory-table", "1", DIMS, "none", 0)

        def _embed(self, texts: Sequence[str], kind: str) -> Any:
            rows = []
            for text in texts:
                found = _MARK.search(text)
                if found is not None and kind != "query":
                    rows.append(documents[int(found.group(1))])
                else:
                    rows.append(asked[by_question.get(text, 0)])
            return np.stack(rows)

    return TableEmbedder()


def _memory(turns: Sequence[str], i: int) -> tuple[str, str]:
    turn = turns[i % len(turns)]
    return " ".join(turn.split()[:8]), f"{turn} [m{i}]"


def _build(folder: Path, size: int, embedder: Any, turns: Sequence[str]) -> None:
    """Write ``size`` memories (with vectors) and the same texts as a collection, once."""
    from vrom import Collection
    from vrom.ingest.embedding import embed_missing_memories
    from vrom.store import MemoryRecord, open_store

    done = folder / f"built-{size}"
    if done.exists():
        return
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob(f"*-{size}.db*"):
        stale.unlink()
    store = open_store(str(folder / f"memories-{size}.db"))
    try:
        now = time.time()
        for start in range(0, size, 5_000):
            with store.transaction():
                for i in range(start, min(size, start + 5_000)):
                    title, content = _memory(turns, i)
                    status = "archived" if i % 50 == 49 else "active"  # a few retired ones
                    # id, created, updated, project, type, title, content
                    fields = (f"mem-{i:07d}", now - size + i, now, None, "note", title, content)
                    store.memories.put(MemoryRecord(*fields, status=status))
        embed_missing_memories(store, embedder)
    finally:
        store.close()
    with Collection.open(
        "scale", embedder=embedder, storage=str(folder / f"collection-{size}.db")
    ) as collection:
        for start in range(0, size, 5_000):
            batch = [_memory(turns, i) for i in range(start, min(size, start + 5_000))]
            collection.add(
                [
                    {"id": f"mem-{start + n:07d}", "text": f"{title}\n{text}"}
                    for n, (title, text) in enumerate(batch)
                ]
            )
    done.write_text("ok")


def measure(folder: Path, sizes: Sequence[int], queries: int, data: Path) -> dict[str, Any]:
    """Return recall and collection-search p50 CPU ms per size and mode (this process's vrom)."""
    import vrom
    from vrom import Collection
    from vrom.memories import Memories
    from vrom.store import open_store

    turns, questions = _texts(data)
    questions = questions[:queries]
    out: dict[str, Any] = {"vrom": str(Path(vrom.__file__).parent), "sizes": {}}
    for size in sizes:
        documents, asked = _tables(size, len(questions))
        embedder = _embedder(documents, questions, asked)
        _build(folder, size, embedder, turns)
        memories = Memories(open_store(str(folder / f"memories-{size}.db")), embedder)
        collection = Collection.open(
            "scale", embedder=embedder, storage=str(folder / f"collection-{size}.db")
        )
        try:
            calls: dict[str, Any] = {"memories": memories.recall, "collection": collection.search}
            warm: dict[str, list[float]] = {}  # the first call per mode: CPU and wall ms
            for side, call in calls.items():
                for mode in MODES:
                    started, began = time.thread_time(), time.perf_counter()
                    call(questions[0], k=K, mode=mode)
                    cpu, wall = time.thread_time() - started, time.perf_counter() - began
                    warm[f"{side} {mode}"] = [round(cpu * 1e3, 2), round(wall * 1e3, 2)]
            memories._corpus._memory_index.wait_for_graph()  # steady state: any graph due built
            collection._corpus.index.wait_for_graph()
            # steady state for keyword search too: a process that searches on makes its
            # in-memory keyword copies (the collection's chunks'; the memories' where the
            # tree measured has one)
            copies = (collection._corpus.keyword, getattr(memories._corpus, "memory_keyword", None))
            for copy in copies:
                if copy is not None:
                    copy.prepare()
                    copy.wait_for_copy()
            result: dict[str, Any] = {"first_call_cpu_wall_ms": warm}
            for mode in MODES:
                spent: dict[str, list[float]] = {side: [] for side in calls}
                for n, question in enumerate(questions):
                    order = list(calls) if n % 2 == 0 else list(calls)[::-1]
                    for side in order:
                        started = time.thread_time()
                        calls[side](question, k=K, mode=mode)
                        spent[side].append(time.thread_time() - started)
                result[mode] = {
                    side: round(statistics.median(times) * 1e3, 3) for side, times in spent.items()
                }
            out["sizes"][str(size)] = result
        finally:
            memories.close()
            collection.close()
    return out


def _side(src: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Run `measure` in a subprocess with ``src`` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    folder, sizes, queries = args.cache, args.sizes, args.queries
    command = [sys.executable, __file__, "--measure-only", "--cache", str(folder)]
    command += ["--data", str(args.data)]
    command += ["--queries", str(queries), "--sizes", *map(str, sizes)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"the run with {src} failed:\n{done.stderr}")
    return dict(json.loads(done.stdout.splitlines()[-1]))


def _table(sides: dict[str, dict[str, Any]]) -> str:
    lines = [
        "side    N        mode     recall p50 ms  collection p50 ms  recall / collection"
        "  recall / recall at first N"
    ]
    for name, side in sides.items():
        sizes = list(side["sizes"])
        for size in sizes:
            for mode in MODES:
                row = side["sizes"][size][mode]
                first = side["sizes"][sizes[0]][mode]["memories"]
                lines.append(
                    f"{name:<7} {int(size):>7,}  {mode:<8} {row['memories']:>13.2f}"
                    f"  {row['collection']:>17.2f}  {row['memories'] / row['collection']:>19.2f}"
                    f"  {row['memories'] / first:>27.2f}"
                )
    return "\n".join(lines)


def _plot(sides: dict[str, dict[str, Any]], path: Path) -> None:
    try:
        import matplotlib
    except ImportError:
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(MODES), figsize=(12, 3.8), sharey=True)
    for axis, mode in zip(axes, MODES, strict=True):
        for name, side in sides.items():
            sizes = [int(size) for size in side["sizes"]]
            recall = [side["sizes"][str(size)][mode]["memories"] for size in sizes]
            axis.plot(sizes, recall, marker="o", label=f"recall ({name})")
        sizes = [int(size) for size in sides["after"]["sizes"]]
        searched = [sides["after"]["sizes"][str(size)][mode]["collection"] for size in sizes]
        axis.plot(sizes, searched, marker="s", linestyle="--", label="collection search (after)")
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_title(f"{mode}, k={K}")
        axis.set_xlabel("memories")
    axes[0].set_ylabel("p50 CPU ms per call")
    axes[0].legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--data", type=Path, default=DATA, help="LoCoMo-dev's folder")
    parser.add_argument("--cache", type=Path, default=CACHE, help="folder of the built stores")
    parser.add_argument("--base", type=Path, help="the 'before' vrom source tree (its src/)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--plot", type=Path, default=PLOT)
    parser.add_argument("--measure-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure_only:
        print(json.dumps(measure(args.cache, args.sizes, args.queries, args.data)))
        return
    sides: dict[str, dict[str, Any]] = {}
    if args.base is not None:
        sides["before"] = _side(args.base, args)
    sides["after"] = _side(REPO / "src", args)
    print(_table(sides))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(sides, indent=1) + "\n", encoding="utf-8")
    _plot(sides, args.plot)


if __name__ == "__main__":
    main()
