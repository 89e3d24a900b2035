"""Retrieval quality and speed of vrom on a BEIR dataset: keyword, vector and hybrid search.

    python bench/beir_eval.py DATASET_DIR [--split train] [--modes keyword,vector,hybrid]
        [--k 10] [--depths 100] [--limit-queries N] [--embedder default] [--json OUT]
        [--workdir DIR] [--runs-dir DIR] [--raw-sequential] [--raw-whole]

DATASET_DIR holds BEIR files: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/SPLIT.tsv``. Each
document becomes one note ``# {title}\\n\\n{text}`` (the first H1 is vrom's title) in a temporary
vault, indexed into a temporary state dir: first the keyword part (no embedder), then the
embedding part (``Vault.index`` with the embedder, which only embeds), so the two are timed apart.

For every query of the split that has a relevant judgement, each mode returns ``depth`` chunks
(``--depths``, default 100); chunks collapse to documents in order (a document ranks at its best
chunk). Metrics, as BEIR computes them with pytrec_eval: nDCG@k (graded gain = qrels score, log2
discount, ideal from all the query's judged-relevant documents), recall@k, recall@100 and MRR@k
(relevant = score > 0), computed by ``vrom.evaluation`` (the code ``vrom eval`` uses). Latency is
the wall time of ``Vault.search`` (query embedding included).

Embedding throughput: vrom's embedding phase (chunks/s) against the raw model: a second model
instance runs ``embed_documents`` on exactly the texts vrom embeds (``embedding_text`` of the
stored chunks, vrom's batches of ``EMBED_BATCH``, chunk order) right after each of vrom's batches,
so both see the same machine load; its time is taken out of vrom's. vrom's time inside its model
is measured too (the rest is vrom's own work: reading chunks, writing vectors). ``--raw-sequential``
and ``--raw-whole`` add a separate raw pass after indexing. Open to first answer: a fresh Python
process imports vrom, opens the store and answers one hybrid query (the model loads inside).
Wall-clock numbers on a shared machine: the load average is recorded.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from vrom import Vault, __version__
from vrom.embed import Embedder, Fingerprint
from vrom.evaluation.metrics import RECALL_DEPTH, mrr_at_k, ndcg_at_k, percentile, recall_at_k
from vrom.ingest.embedding import EMBED_BATCH, embedding_text

Qrels = dict[str, dict[str, int]]

# -- rankings --------------------------------------------------------------------------------


def collapse(paths: Sequence[str], doc_of: Mapping[str, str]) -> list[str]:
    """Return the documents of ranked chunk paths, each at the rank of its best chunk."""
    return list(dict.fromkeys(doc_of[p] for p in paths))


# -- data ------------------------------------------------------------------------------------


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def read_qrels(path: Path) -> Qrels:
    """Return query id → {document id → score} from a BEIR qrels TSV (header line optional)."""
    qrels: Qrels = {}
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            fields = line.rstrip("\n").split("\t")
            if len(fields) < 3 or fields[0] == "query-id":
                continue
            qrels.setdefault(fields[0], {})[fields[1]] = int(float(fields[2]))
    return qrels


def note_name(doc_id: str, used: set[str]) -> str:
    """Return a safe, unique file name for a document id (a hash is added when it was changed)."""
    safe = re.sub(r"[^A-Za-z0-9_-]+", "_", doc_id).strip("_")[:80] or "doc"
    if safe != doc_id or safe.lower() in used:
        safe = f"{safe}-{hashlib.sha1(doc_id.encode()).hexdigest()[:10]}"
    used.add(safe.lower())  # unique even on a case-insensitive file system
    return f"{safe}.md"


def note_text(title: str, text: str) -> str:
    """Return the note of a document: its title as the H1 (vrom's title), then its text."""
    title = " ".join(title.split())
    return f"# {title}\n\n{text}\n" if title else f"{text}\n"


def write_vault(corpus: Sequence[Mapping[str, Any]], folder: Path) -> dict[str, str]:
    """Write one note per document; return note path (vault-relative) → document id."""
    folder.mkdir(parents=True, exist_ok=True)
    used: set[str] = set()
    doc_of: dict[str, str] = {}
    for doc in corpus:
        name = note_name(str(doc["_id"]), used)
        (folder / name).write_text(
            note_text(doc.get("title") or "", doc.get("text") or ""), encoding="utf-8"
        )
        doc_of[name] = str(doc["_id"])
    return doc_of


# -- phases ----------------------------------------------------------------------------------


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(start: tuple[float, float]) -> tuple[float, float]:
    wall, cpu = _clock()
    return wall - start[0], cpu - start[1]


def load_embedder(spec: str) -> tuple[Embedder | None, float]:
    started = time.perf_counter()
    embedder = Embedder.from_spec(spec)
    return embedder, time.perf_counter() - started


class TimedEmbedder(Embedder):
    """Delegates to another embedder and adds up the wall time spent inside it."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.seconds = 0.0

    @property
    def fingerprint(self) -> Fingerprint:
        return self.inner.fingerprint

    def _embed(self, texts: Sequence[str], kind: str) -> Any:
        started = time.perf_counter()
        try:
            return self.inner._embed(texts, kind)
        finally:
            self.seconds += time.perf_counter() - started

    def close(self) -> None:
        self.inner.close()


def build_index(
    vault_dir: Path, state_dir: Path, spec: str, log: Callable[[str], None]
) -> tuple[dict[str, Any], list[str]]:
    """Index the keyword part, then embed through vrom with the raw model interleaved.

    Returns timings and the texts vrom embedded. After each of vrom's embedding batches a second,
    fresh model instance embeds the same texts (raw ``embed_documents``, vrom's batch); that time
    is taken out of vrom's, so both see the same machine load, batch by batch.
    """
    import numpy as np

    out: dict[str, Any] = {}
    with Vault.open(vault_dir, state_dir, embedder=None) as vault:
        started = _clock()
        summary = vault.index()
        out["keyword_index_s"], out["keyword_index_cpu_s"] = _since(started)
        out["notes"], out["chunks"], out["skipped"] = summary.notes, summary.chunks, summary.skipped
        chunks = vault.store.vectors.missing(10**9)  # chunk order, as embed_missing reads
    texts = [embedding_text(c) for c in chunks]
    out["embedded_chars_mean"] = round(statistics.fmean(len(t) for t in texts), 1) if texts else 0
    log(
        f"keyword index: {summary.notes} notes, {summary.chunks} chunks in "
        f"{out['keyword_index_s']:.1f} s"
    )
    inner, out["model_load_s"] = load_embedder(spec)
    if inner is None:
        return out, texts
    out["embedder"] = inner.fingerprint.describe()
    raw_model, _ = load_embedder(spec)
    assert raw_model is not None
    embedder = TimedEmbedder(inner)
    raw = {"wall": 0.0, "cpu": 0.0, "done": 0, "model": 0.0, "logged": time.perf_counter()}
    raw_parts = []

    def paired_raw(done: int, total: int) -> None:
        paused = _clock()
        batch = texts[int(raw["done"]) : done]  # exactly what vrom embedded just now
        started = time.perf_counter()
        raw_parts.append(raw_model.embed_documents(batch))
        raw["model"] += time.perf_counter() - started
        raw["done"] = done
        wall, cpu = _since(paused)
        raw["wall"] += wall
        raw["cpu"] += cpu
        if time.perf_counter() - raw["logged"] >= 60:
            raw["logged"] = time.perf_counter()
            log(f"  embedded {done}/{total}")

    with Vault.open(vault_dir, state_dir, embedder=embedder) as vault:
        started = _clock()
        summary = vault.index(embed_progress=paired_raw)
        wall, cpu = _since(started)
        stored = vault.store.vectors.rows()
    embedded = summary.embedded
    keyword_s = summary.parse_seconds + summary.index_seconds
    out["rescan_s"] = keyword_s  # the no-change keyword pass of this index() call
    out["embed_index_s"] = wall - keyword_s - raw["wall"]
    out["embed_index_cpu_s"] = cpu - raw["cpu"]
    out["embedded"] = embedded
    out["vrom_chunks_per_s"] = embedded / out["embed_index_s"]
    out["vrom_model_s"] = embedder.seconds  # of embed_index_s, inside the model
    out["vrom_overhead_s"] = out["embed_index_s"] - embedder.seconds
    out["raw_s"], out["raw_cpu_s"] = raw["model"], raw["cpu"]
    out["raw_chunks_per_s"] = int(raw["done"]) / raw["model"] if raw["model"] else 0.0
    out["vrom_over_raw"] = out["vrom_chunks_per_s"] / out["raw_chunks_per_s"]
    matrix = np.concatenate(raw_parts) if raw_parts else np.zeros((0, inner.dim), np.float32)
    vrom_matrix = np.array([np.frombuffer(row, dtype="<f4") for _, row in sorted(stored)])
    out["raw_vs_stored_max_abs_diff"] = (
        float(np.abs(vrom_matrix - matrix).max(initial=0.0))
        if vrom_matrix.shape == matrix.shape
        else f"shape {vrom_matrix.shape} vs {matrix.shape}"
    )
    raw_model.close()
    log(
        f"embedding: vrom {out['vrom_chunks_per_s']:.2f} chunks/s, raw "
        f"{out['raw_chunks_per_s']:.2f} chunks/s, ratio {out['vrom_over_raw']:.3f}"
    )
    return out, texts


def measure_raw_sequential(spec: str, texts: Sequence[str], whole: bool) -> dict[str, Any]:
    """Embed the texts again with a fresh model after indexing, in vrom's batches or in one call."""
    embedder, _ = load_embedder(spec)
    assert embedder is not None
    started = _clock()
    if whole:
        embedder.embed_documents(list(texts))
    else:
        for i in range(0, len(texts), EMBED_BATCH):
            embedder.embed_documents(texts[i : i + EMBED_BATCH])
    wall, cpu = _since(started)
    embedder.close()
    return {"s": wall, "cpu_s": cpu, "chunks_per_s": len(texts) / wall}


FIRST_ANSWER = """
import json, sys, time
started = time.perf_counter()
from vrom import Vault
imported = time.perf_counter()
vault = Vault.open(sys.argv[1], sys.argv[2], create=False, embedder=sys.argv[3])
opened = time.perf_counter()
hits = vault.search(sys.argv[4], k=10, mode="hybrid")
answered = time.perf_counter()
print(json.dumps({"import_s": imported - started, "open_s": opened - imported,
                  "first_hybrid_s": answered - opened, "open_to_answer_s": answered - imported,
                  "hits": len(hits)}))
"""


def open_to_first_answer(
    vault_dir: Path, state_dir: Path, spec: str, query: str, runs: int
) -> dict[str, Any]:
    """Time a fresh process's import, ``Vault.open`` and first hybrid answer (model load inside)."""
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", FIRST_ANSWER, str(vault_dir), str(state_dir), spec, query],
            check=True,
            capture_output=True,
            text=True,
        )
        sample = json.loads(done.stdout.strip().splitlines()[-1])
        sample["process_s"] = time.perf_counter() - started
        samples.append(sample)
    best = min(samples, key=lambda s: s["open_to_answer_s"])
    return {
        "runs": samples,
        "open_to_answer_s_median": statistics.median(s["open_to_answer_s"] for s in samples),
        "open_to_answer_s_min": best["open_to_answer_s"],
        "process_s_median": statistics.median(s["process_s"] for s in samples),
    }


def run_queries(
    vault: Vault,
    queries: Sequence[tuple[str, str]],
    qrels: Qrels,
    doc_of: Mapping[str, str],
    modes: Sequence[str],
    depth: int,
    k: int,
    log: Callable[[str], None],
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, list[str]]]]:
    """Run every query in every mode (modes interleaved per query); return metrics and rankings."""
    for mode in modes:  # load the vector index (and warm caches) outside the timings
        vault.search(queries[0][1], k=depth, mode=mode)
    latencies: dict[str, list[float]] = {m: [] for m in modes}
    rankings: dict[str, dict[str, list[str]]] = {m: {} for m in modes}
    last = time.perf_counter()
    for done, (qid, text) in enumerate(queries, start=1):
        for mode in modes:
            started = time.perf_counter()
            hits = vault.search(text, k=depth, mode=mode)
            latencies[mode].append(time.perf_counter() - started)
            rankings[mode][qid] = collapse([h.path for h in hits], doc_of)
        if time.perf_counter() - last >= 60:
            last = time.perf_counter()
            log(f"  depth {depth}: {done}/{len(queries)} queries")
    results: dict[str, dict[str, Any]] = {}
    for mode in modes:
        per_query = {
            qid: {
                f"ndcg@{k}": ndcg_at_k(ranking, qrels[qid], k),
                f"recall@{k}": recall_at_k(ranking, qrels[qid], k),
                f"recall@{RECALL_DEPTH}": recall_at_k(ranking, qrels[qid], RECALL_DEPTH),
                f"mrr@{k}": mrr_at_k(ranking, qrels[qid], k),
            }
            for qid, ranking in rankings[mode].items()
        }
        names = next(iter(per_query.values())).keys()
        results[mode] = {
            **{name: statistics.fmean(m[name] for m in per_query.values()) for name in names},
            "p50_ms": 1000 * percentile(latencies[mode], 0.5),
            "p95_ms": 1000 * percentile(latencies[mode], 0.95),
            "docs_per_query": statistics.fmean(len(r) for r in rankings[mode].values()),
            "per_query": per_query,
        }
    return results, rankings


def write_run(path: Path, rankings: Mapping[str, list[str]], tag: str) -> None:
    """Write rankings as a TREC run file (for trec_eval / pytrec_eval cross-checks)."""
    with path.open("w", encoding="utf-8") as handle:
        for qid, ranking in rankings.items():
            for rank, doc in enumerate(ranking, start=1):
                handle.write(f"{qid} Q0 {doc} {rank} {len(ranking) - rank + 1} {tag}\n")


# -- report ----------------------------------------------------------------------------------


def report(result: Mapping[str, Any]) -> str:
    k = result["k"]
    lines = [
        f"{result['dataset']} ({result['split']}): {result['queries']} queries, "
        f"{result['index'].get('notes')} notes, {result['index'].get('chunks')} chunks; "
        f"embedder {result['index'].get('embedder', 'none')}",
        "",
        f"{'mode':<9} {'depth':>5} {f'nDCG@{k}':>8} {f'R@{k}':>7} {'R@100':>7} "
        f"{f'MRR@{k}':>7} {'p50 ms':>7} {'p95 ms':>7} {'docs/q':>6}",
    ]
    for depth, by_mode in result["results"].items():
        for mode, m in by_mode.items():
            lines.append(
                f"{mode:<9} {depth:>5} {m[f'ndcg@{k}']:>8.4f} {m[f'recall@{k}']:>7.4f} "
                f"{m[f'recall@{RECALL_DEPTH}']:>7.4f} {m[f'mrr@{k}']:>7.4f} "
                f"{m['p50_ms']:>7.1f} {m['p95_ms']:>7.1f} {m['docs_per_query']:>6.1f}"
            )
    ix = result["index"]
    lines += [
        "",
        f"index, keyword part: {ix['keyword_index_s']:.1f} s "
        f"({ix['notes'] / ix['keyword_index_s']:.0f} notes/s)",
    ]
    if "embed_index_s" in ix:
        ratio = ix["vrom_over_raw"]
        lines += [
            f"index, embedding part: {ix['embed_index_s']:.1f} s for {ix['embedded']} chunks "
            f"(cpu {ix['embed_index_cpu_s']:.0f} s; inside the model {ix['vrom_model_s']:.1f} s, "
            f"vrom's own work {ix['vrom_overhead_s']:.1f} s; model load "
            f"{ix['model_load_s']:.2f} s not included)",
            f"embedding throughput (raw interleaved batch by batch): raw model "
            f"{ix['raw_chunks_per_s']:.2f} chunks/s ({ix['raw_s']:.1f} s), vrom indexing "
            f"{ix['vrom_chunks_per_s']:.2f} chunks/s: vrom/raw = {ratio:.3f} "
            f"({'within' if ratio >= 0.85 else 'NOT within'} 15%)",
            f"  raw vs stored vectors, max |diff|: {ix['raw_vs_stored_max_abs_diff']}",
        ]
    for name, label in (("sequential", "vrom's batches"), ("whole", "one call")):
        seq = result.get(f"raw_{name}")
        if seq:
            lines.append(
                f"  raw model again after indexing, {label}: {seq['chunks_per_s']:.2f} chunks/s "
                f"({seq['s']:.1f} s)"
            )
    first = result.get("first_answer")
    if first:
        times = ", ".join(f"{r['open_to_answer_s']:.2f}" for r in first["runs"])
        one = first["runs"][0]
        lines.append(
            f"open → first hybrid answer (fresh process, after imports): median "
            f"{first['open_to_answer_s_median']:.2f} s [{times}]; first run: import "
            f"{one['import_s']:.2f} s, open {one['open_s']:.3f} s, first search "
            f"{one['first_hybrid_s']:.2f} s; whole process {first['process_s_median']:.2f} s"
        )
    lines.append(
        f"load average (1 min) at start {result['load_start']:.2f}, at end "
        f"{result['load_end']:.2f} on {result['cpus']} CPUs; total {result['total_s']:.0f} s"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path, help="a BEIR dataset folder")
    parser.add_argument("--split", default="train")
    parser.add_argument("--modes", default="keyword,vector,hybrid")
    parser.add_argument("--k", type=int, default=10, help="cut-off of nDCG, recall and MRR")
    parser.add_argument(
        "--depths", default="100", help="chunks each search returns, comma-separated (first: main)"
    )
    parser.add_argument("--limit-queries", type=int, default=None)
    parser.add_argument("--embedder", default="default", help="an Embedder.from_spec spec")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument("--workdir", type=Path, default=None, help="keep vault and state here")
    parser.add_argument("--runs-dir", type=Path, default=None, help="write TREC run files here")
    parser.add_argument(
        "--raw-sequential",
        action="store_true",
        help="also time the raw model on all texts after indexing, in vrom's batches",
    )
    parser.add_argument(
        "--raw-whole",
        action="store_true",
        help="also time the raw model on all texts after indexing, in one call",
    )
    parser.add_argument("--first-answer-runs", type=int, default=3)
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    began = time.perf_counter()
    load_start = os.getloadavg()[0]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    depths = [int(d) for d in args.depths.split(",")]
    corpus = read_jsonl(args.dataset / "corpus.jsonl")
    texts_of = {str(q["_id"]): q["text"] for q in read_jsonl(args.dataset / "queries.jsonl")}
    qrels = read_qrels(args.dataset / "qrels" / f"{args.split}.tsv")
    queries = [
        (qid, texts_of[qid])
        for qid, judged in qrels.items()
        if qid in texts_of and any(g > 0 for g in judged.values())
    ][: args.limit_queries]
    if not queries:
        parser.error("no query of the split has a relevant judgement")

    work = args.workdir or Path(tempfile.mkdtemp(prefix="vrom-beir-"))
    if args.workdir and work.exists() and any(work.iterdir()):
        parser.error(f"--workdir {work} is not empty")
    vault_dir, state_dir = work / "vault", work / "state"
    try:
        doc_of = write_vault(corpus, vault_dir)
        log(f"wrote {len(doc_of)} notes; {len(queries)} queries")
        index, texts = build_index(vault_dir, state_dir, args.embedder, log)
        result: dict[str, Any] = {
            "dataset": args.dataset.name,
            "split": args.split,
            "queries": len(queries),
            "k": args.k,
            "embedder_spec": args.embedder,
            "vrom": __version__,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_start": load_start,
            "index": index,
        }
        if "embedded" not in index:  # no embedder: keyword search only
            modes = [m for m in modes if m == "keyword"]
        else:
            for name, whole in (("sequential", False), ("whole", True)):
                if getattr(args, f"raw_{name}"):
                    result[f"raw_{name}"] = measure_raw_sequential(args.embedder, texts, whole)
                    log(f"raw {name}: {result[f'raw_{name}']['chunks_per_s']:.2f} chunks/s")
            result["first_answer"] = open_to_first_answer(
                vault_dir, state_dir, args.embedder, queries[0][1], args.first_answer_runs
            )
        embedder, _ = load_embedder(args.embedder)
        result["results"] = {}
        with Vault.open(vault_dir, state_dir, embedder=embedder, create=False) as vault:
            for depth in depths:
                metrics, rankings = run_queries(
                    vault, queries, qrels, doc_of, modes, depth, args.k, log
                )
                result["results"][depth] = metrics
                if args.runs_dir:
                    args.runs_dir.mkdir(parents=True, exist_ok=True)
                    for mode, by_query in rankings.items():
                        write_run(args.runs_dir / f"{mode}.depth{depth}.run", by_query, mode)
        result["load_end"] = os.getloadavg()[0]
        result["total_s"] = time.perf_counter() - began
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(report(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1, default=str) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
