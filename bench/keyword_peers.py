"""Benchmark vrom's keyword search against bm25s on BEIR datasets: quality, indexing, queries/s.

    python bench/keyword_peers.py [DATASET_DIR ...] [--split SPLIT ...] [--out FILE]
        [--base OTHER_TREE/src] [--vault VAULT] [--rounds N] [--cpu-only]

Default datasets: scifact (split train) and nfcorpus (split dev) under ``shared/data/beir`` next
to the repository. One ``--split`` applies to every dataset, or give one per dataset.

Both sides see the same corpus and queries in the same run. vrom: a `Collection` without an
embedder in a temporary folder, filled by `vrom.evaluation.runs.add_corpus` (one document per
entry, ``title\\n\\ntext``, chunked as usual, one hit per document), queried by
`vrom.evaluation.runs.search_queries` (keyword mode, 100 documents per query). bm25s: the same
document texts, bm25s's English stopwords and PyStemmer's English stemmer (when PyStemmer is
installed; the JSON says which), BM25 with bm25s's defaults (method ``lucene``, k1 1.5, b 0.75),
100 documents per query (documents scoring 0 matched no query term and are dropped, as vrom
never returns them). Its build time counts tokenizing the corpus and indexing it; a query's time
counts tokenizing it and retrieving. Queries/s is measured twice for bm25s: one query at a time
(as vrom is asked) and all queries in one batched ``retrieve`` (single process, ``n_threads=0``).
Each side runs one untimed query first.

nDCG@10 and recall@100 come from `vrom.evaluation.metrics.score_ranking` on both runs. Ratios are
vrom / bm25s: above 1 means vrom scores higher, takes longer to build, or answers more queries/s.
Without bm25s the script says so and reports vrom's numbers only (exit 0).

CPU per query (`run_cpu`; the machine may be loaded, so CPU time, not wall time): this tree's
keyword search and, with ``--base``, another tree's (the round's start: "before"), each in a
`bench/keyword_side.py` subprocess, and bm25s in this process, at k=10 and k=100 (hit ids read;
k=100 once more with every hit's excerpt and text read), the sides taking turns, rotated each
of ``--rounds``; ratios to bm25s are per round, against the same round's bm25s. Each vrom side
has its in-memory keyword copy made first (a long-running process has one). Then the vault's
(default: the obsidian-hub vault, when on this machine) 100 note titles as queries, k=10, hits
read: CPU, and how many went to FTS5 instead of the copy.

Prints tables and writes JSON to bench/results/keyword_peers.json.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from beir_datasets import DATA, add_dataset_arguments, chosen_datasets

from vrom import Collection, __version__
from vrom.documents import MAX_TEXT_CHARS
from vrom.evaluation.beir import BeirDataset, Qrels, corpus_documents, load_beir
from vrom.evaluation.metrics import RECALL_DEPTH, percentile, score_ranking
from vrom.evaluation.runs import add_corpus, search_queries

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "keyword_peers.json"
K = 10
HUB = DATA / "vault" / "obsidian-hub"
"""The obsidian-hub vault (its titles as queries), when it is on this machine."""
BM25S_INSTALL = "pip install 'bm25s==0.3.16' 'PyStemmer==3.1.0'"


def _optional(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _quality(rankings: Mapping[str, Sequence[str]], qrels: Qrels) -> dict[str, float]:
    scores = [score_ranking(ranking, qrels[qid], K) for qid, ranking in rankings.items()]
    return {
        f"ndcg_at_{K}": statistics.fmean(s.ndcg for s in scores),
        "recall_at_100": statistics.fmean(s.recall_100 for s in scores),
    }


def _speed(latencies_s: Sequence[float]) -> dict[str, float]:
    return {
        "queries_per_s": len(latencies_s) / sum(latencies_s),
        "latency_p50_ms": 1000 * percentile(latencies_s, 0.5),
        "latency_p95_ms": 1000 * percentile(latencies_s, 0.95),
    }


def run_vrom(dataset: BeirDataset) -> dict[str, Any]:
    """Return vrom's keyword numbers on the dataset: quality, build time, single-query speed."""
    with (
        tempfile.TemporaryDirectory(prefix="vrom-bench-", ignore_cleanup_errors=True) as work,
        Collection.open("beir", embedder=None, storage=work) as collection,
    ):
        index = add_corpus(collection, dataset.folder)
        run = search_queries(collection, dataset.queries, ["keyword"], RECALL_DEPTH)["keyword"]
    return {
        "documents": index.documents,
        "truncated": index.truncated,
        "build_s": index.total_s,
        **_quality(run.rankings, dataset.qrels),
        **_speed(run.latencies_s),
    }


def run_bm25s(dataset: BeirDataset, bm25s: ModuleType, stemmer: Any) -> dict[str, Any]:
    """Return bm25s's numbers on the dataset: quality, build time, single and batched speed."""
    ids, texts = [], []
    for doc in corpus_documents(dataset.folder):
        ids.append(doc.id)
        texts.append(doc.text[:MAX_TEXT_CHARS])  # the text vrom holds
    depth = min(RECALL_DEPTH, len(ids))

    def ranking(doc_indices: Any, scores: Any) -> list[str]:
        return [ids[i] for i, score in zip(doc_indices, scores, strict=True) if score > 0]

    started = time.perf_counter()
    retrieve_at = _bm25s_retriever(texts, bm25s, stemmer)
    build_s = time.perf_counter() - started

    def retrieve(batch: list[str]) -> tuple[Any, Any]:
        return retrieve_at(batch, depth)

    texts_to_run = [(qid, text) for qid, text in dataset.queries if text.strip()]
    if texts_to_run:
        retrieve([texts_to_run[0][1]])  # untimed, as vrom's first query
    rankings: dict[str, list[str]] = {qid: [] for qid, _ in dataset.queries}
    latencies = []
    for qid, text in texts_to_run:
        started = time.perf_counter()
        docs, scores = retrieve([text])
        latencies.append(time.perf_counter() - started)
        rankings[qid] = ranking(docs[0], scores[0])

    started = time.perf_counter()
    batch_docs, batch_scores = retrieve([text for _, text in texts_to_run])
    batched_s = time.perf_counter() - started
    same = all(
        ranking(d, s) == rankings[qid]
        for (qid, _), d, s in zip(texts_to_run, batch_docs, batch_scores, strict=True)
    )
    return {
        "documents": len(ids),
        "build_s": build_s,
        **_quality(rankings, dataset.qrels),
        **_speed(latencies),
        "batched_queries_per_s": len(texts_to_run) / batched_s,
        "batched_rankings_match_single": same,
    }


def _bm25s_retriever(texts: list[str], bm25s: ModuleType, stemmer: Any) -> Any:
    """Return ``retrieve(queries, k) -> (documents, scores)`` over ``texts`` indexed by bm25s
    (its English stopwords, the stemmer, its defaults; one thread)."""
    corpus_tokens = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(corpus_tokens, show_progress=False)

    def retrieve(batch: list[str], k: int) -> tuple[Any, Any]:
        tokens = bm25s.tokenize(
            batch, stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False
        )
        result = retriever.retrieve(tokens, k=min(k, len(texts)), show_progress=False, n_threads=0)
        return result[0], result[1]

    return retrieve


def _ratios(vrom: Mapping[str, Any], peer: Mapping[str, Any]) -> dict[str, float]:
    keys = (f"ndcg_at_{K}", "recall_at_100", "build_s", "queries_per_s")
    ratios = {key: vrom[key] / peer[key] if peer[key] else float("nan") for key in keys}
    ratios["queries_per_s_vs_batched"] = vrom["queries_per_s"] / peer["batched_queries_per_s"]
    return ratios


def run(datasets: Sequence[tuple[Path, str]]) -> dict[str, Any]:
    """Return the comparison on every (folder, split); bm25s's parts are None without it."""
    bm25s = _optional("bm25s")
    stemmer_module = _optional("Stemmer")
    stemmer = None if stemmer_module is None else stemmer_module.Stemmer("english")
    results: dict[str, Any] = {
        "vrom": __version__,
        "bm25s": None if bm25s is None else bm25s.__version__,
        "bm25s_setup": None
        if bm25s is None
        else {
            "method": "lucene",
            "k1": 1.5,
            "b": 0.75,
            "stopwords": "bm25s 'en'",
            "stemmer": "PyStemmer english (Snowball)" if stemmer else None,
            "backend": "numpy",
        },
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores",
        "depth": RECALL_DEPTH,
        "datasets": [],
    }
    for folder, split in datasets:
        dataset = load_beir(folder, split)
        vrom = run_vrom(dataset)
        peer = None if bm25s is None else run_bm25s(dataset, bm25s, stemmer)
        results["datasets"].append(
            {
                "dataset": dataset.folder.resolve().name,
                "split": split,
                "queries": len(dataset.queries),
                "vrom": vrom,
                "bm25s": peer,
                "ratios": None if peer is None else _ratios(vrom, peer),
            }
        )
    return results


class _Side:
    """A `bench/keyword_side.py` subprocess running one vrom tree's search (see there)."""

    def __init__(self, name: str, src: Path) -> None:
        self.name = name
        env = {**os.environ, "PYTHONPATH": str(src)}
        self._process = subprocess.Popen(
            [sys.executable, str(REPO / "bench" / "keyword_side.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def ask(self, request: Mapping[str, Any]) -> Any:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            raise SystemExit(f"the {self.name} side ended (exit {self._process.wait()})")
        return json.loads(line)

    def close(self) -> None:
        assert self._process.stdin is not None
        if self._process.poll() is None:
            self._process.stdin.write(json.dumps({"quit": True}) + "\n")
            self._process.stdin.close()
        self._process.wait()


def _summary(rounds: Sequence[Sequence[float]]) -> dict[str, Any]:
    """Return per-query CPU ms over rounds: each round's mean and p50, and their ranges."""
    means = [1000 * statistics.fmean(r) for r in rounds]
    p50s = [1000 * percentile(list(r), 0.5) for r in rounds]
    return {"mean_ms": means, "p50_ms": p50s, "mean_range_ms": [min(means), max(means)]}


def _bm25s_cpu(retrieve: Any, queries: Sequence[str], k: int) -> list[float]:
    seconds = []
    for query in queries:
        started = time.thread_time()
        retrieve([query], k)
        seconds.append(time.thread_time() - started)
    return seconds


def hub_titles(vault: Path, count: int = 100) -> list[str]:
    """Return ``count`` note titles of ``vault`` as queries: the file names of notes spread
    evenly over its Markdown files in path order."""
    notes = sorted(p for p in vault.rglob("*.md") if ".obsidian" not in p.parts)
    step = max(1, len(notes) // count)
    return [note.stem for note in notes[::step][:count]]


def run_cpu(
    datasets: Sequence[tuple[Path, str]], base: Path | None, vault: Path | None, rounds: int
) -> dict[str, Any]:
    """Return CPU per keyword query at k=10 and k=100 for this tree, ``base``'s (the round's
    start) and bm25s, the sides taking turns (rotated each round), and the vault's title
    queries: CPU and how many went to FTS5 instead of the in-memory copy."""
    sides = [_Side("after", REPO / "src")]
    if base is not None:
        sides.insert(0, _Side("before", base))
    bm25s = _optional("bm25s")
    stemmer_module = _optional("Stemmer")
    stemmer = None if stemmer_module is None else stemmer_module.Stemmer("english")
    out: dict[str, Any] = {"rounds": rounds, "sides": [side.name for side in sides], "sets": []}
    runs = [(10, False), (100, False), (100, True)]
    try:
        for folder, split in datasets:
            opened = [
                side.ask({"open": "beir", "folder": str(folder), "split": split}) for side in sides
            ]
            dataset = load_beir(folder, split)
            queries = [text for _, text in dataset.queries if text.strip()]
            texts = [doc.text[:MAX_TEXT_CHARS] for doc in corpus_documents(dataset.folder)]
            retrieve = None if bm25s is None else _bm25s_retriever(texts, bm25s, stemmer)
            times: dict[str, dict[str, list[list[float]]]] = {}
            for number in range(rounds):
                turn = [*sides, "bm25s"]
                turn = turn[number % len(turn) :] + turn[: number % len(turn)]
                for k, read in runs:
                    key = f"k{k}" + ("_read" if read else "")
                    for side in turn:
                        if isinstance(side, _Side):
                            got = side.ask({"run": k, "read": read})["cpu_s"]
                            times.setdefault(side.name, {}).setdefault(key, []).append(got)
                        elif retrieve is not None and not read:
                            got = _bm25s_cpu(retrieve, queries, k)
                            times.setdefault("bm25s", {}).setdefault(key, []).append(got)
            summary = {
                name: {key: _summary(r) for key, r in by.items()} for name, by in times.items()
            }
            ratios = {}
            if "bm25s" in times:  # per round, the same round's bm25s
                for name in (side.name for side in sides):
                    for key in times[name]:
                        peer = times["bm25s"][key.removesuffix("_read")]
                        each = [
                            statistics.fmean(m) / statistics.fmean(p)
                            for m, p in zip(times[name][key], peer, strict=True)
                        ]
                        ratios[f"{name}_{key}"] = [min(each), max(each)]
            out["sets"].append(
                {
                    "dataset": folder.name,
                    "queries": len(queries),
                    "open": opened,
                    "cpu": summary,
                    "ratios_to_bm25s": ratios,
                }
            )
        if vault is not None and vault.is_dir():
            titles = hub_titles(vault)
            opened = [
                side.ask({"open": "vault", "folder": str(vault), "titles": titles})
                for side in sides
            ]
            found: dict[str, list[Any]] = {}
            for number in range(rounds):
                for side in sides[number % len(sides) :] + sides[: number % len(sides)]:
                    found.setdefault(side.name, []).append(side.ask({"run": 10, "read": True}))
            out["vault"] = {
                "folder": vault.name,
                "queries": len(titles),
                "open": opened,
                "sides": {name: _vault_side(got) for name, got in found.items()},
            }
    finally:
        for side in sides:
            side.close()
    return out


def _vault_side(rounds: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Return a side's title-query numbers: CPU per query, and how many went to FTS5 and
    what those and the others cost (mean ms over every round)."""
    cpu = _summary([r["cpu_s"] for r in rounds])
    pairs = [(s, f) for r in rounds for s, f in zip(r["cpu_s"], r["fts5"], strict=True)]
    fts5 = [s for s, f in pairs if f]
    copy = [s for s, f in pairs if not f]
    return {
        **cpu,
        "fts5_queries": [sum(r["fts5"]) for r in rounds],
        "fts5_query_mean_ms": 1000 * statistics.fmean(fts5) if fts5 else None,
        "copy_query_mean_ms": 1000 * statistics.fmean(copy) if copy else None,
    }


def _cpu_table(results: Mapping[str, Any]) -> str:
    lines = [f"\nCPU ms per keyword query (mean; range over {results['rounds']} rounds)"]
    for entry in results["sets"]:
        lines.append(f"\n{entry['dataset']}: {entry['queries']} queries")
        for name, by in entry["cpu"].items():
            for key, got in by.items():
                low, high = got["mean_range_ms"]
                ratio = entry["ratios_to_bm25s"].get(f"{name}_{key}")
                shown = f"  x bm25s {ratio[0]:.2f}-{ratio[1]:.2f}" if ratio else ""
                lines.append(f"  {name:7} {key:9} {low:7.3f}-{high:7.3f} ms{shown}")
    vault = results.get("vault")
    if vault:
        lines.append(f"\n{vault['folder']}: {vault['queries']} title queries, k=10, hits read")
        for name, got in vault["sides"].items():
            low, high = got["mean_range_ms"]
            fts5, copy = got["fts5_query_mean_ms"], got["copy_query_mean_ms"]
            lines.append(
                f"  {name:7} {low:7.3f}-{high:7.3f} ms; to FTS5: {got['fts5_queries']} queries"
                f" ({'-' if fts5 is None else f'{fts5:.2f}'} ms each; the others"
                f" {'-' if copy is None else f'{copy:.2f}'} ms)"
            )
    return "\n".join(lines)


def _table(results: Mapping[str, Any]) -> str:
    rows = [
        (f"nDCG@{K}", f"ndcg_at_{K}", "{:.4f}"),
        ("recall@100", "recall_at_100", "{:.4f}"),
        ("index build (s)", "build_s", "{:.3f}"),
        ("queries/s, one at a time", "queries_per_s", "{:.1f}"),
        ("query p50 (ms)", "latency_p50_ms", "{:.2f}"),
        ("queries/s, bm25s batched", "batched_queries_per_s", "{:.1f}"),
    ]
    lines = []
    for entry in results["datasets"]:
        vrom, peer, ratios = entry["vrom"], entry["bm25s"], entry["ratios"] or {}
        lines.append(
            f"\n{entry['dataset']} ({entry['split']}): {vrom['documents']:,} documents, "
            f"{entry['queries']:,} queries"
        )
        lines.append(f"{'':26} {'vrom':>10} {'bm25s':>10} {'vrom/bm25s':>11}")
        for label, key, fmt in rows:
            mine = fmt.format(vrom[key]) if key in vrom else "-"
            theirs = fmt.format(peer[key]) if peer and key in peer else "-"
            ratio_key = "queries_per_s_vs_batched" if key == "batched_queries_per_s" else key
            ratio = f"{ratios[ratio_key]:.3f}" if ratio_key in ratios else "-"
            lines.append(f"{label:26} {mine:>10} {theirs:>10} {ratio:>11}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_dataset_arguments(parser)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--base", type=Path, help="another vrom tree's src folder, timed beside this one (before)"
    )
    parser.add_argument("--vault", type=Path, default=HUB, help="title queries' vault")
    parser.add_argument("--rounds", type=int, default=3, help="CPU comparison rounds")
    parser.add_argument("--cpu-only", action="store_true", help="skip quality and queries/s")
    args = parser.parse_args()
    datasets = chosen_datasets(args.datasets, args.split)
    cpu = run_cpu(datasets, args.base, args.vault, args.rounds)
    if args.cpu_only:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"cpu": cpu}, indent=2))
        print(_cpu_table(cpu))
        print(f"\nwrote {args.out}")
        return
    results = run(datasets)
    results["cpu"] = cpu
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))

    if results["bm25s"] is None:
        print(f"bm25s is not installed: vrom's numbers only (to compare: {BM25S_INSTALL})")
    else:
        setup = results["bm25s_setup"]
        print(
            f"vrom {results['vrom']} vs bm25s {results['bm25s']} ({setup['method']}, k1 "
            f"{setup['k1']}, b {setup['b']}, stopwords {setup['stopwords']}, stemmer "
            f"{setup['stemmer'] or 'none (PyStemmer not installed)'}), {results['machine']}"
        )
    print(_table(results))
    print(_cpu_table(cpu))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
