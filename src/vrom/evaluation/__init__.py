"""Retrieval quality and speed on a BEIR dataset: index its corpus, run its queries, score them.

A BEIR folder holds ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``,
``text``) and ``qrels/<split>.tsv`` (query id, document id, graded relevance). `evaluate` adds
the corpus to a `Collection` in a temporary folder (one document per entry, text ``title\\n\\n
text``, chunked like any document), runs every judged query of the split in each search mode,
and scores the rankings as BEIR does with pytrec_eval (trec_eval):

- nDCG@k: gain = the judged relevance, discount log2(rank + 1), ideal from all of the query's
  judged-relevant documents (its top k);
- recall@k and recall@100: the share of the relevant documents (relevance > 0) in the top k;
- MRR@k: 1 / the rank of the first relevant document in the top k, else 0.

A document is ranked at its best chunk (`Collection.search` returns one hit per document). The
ranking is the order search returns: a tie in score keeps vrom's order, where trec_eval would
re-sort tied documents by id (descending); the metrics equal trec_eval's on a run whose scores
fall with the rank. A query without a relevant judgement scores 0, as in BEIR; so does a query
with no hit (trec_eval would leave it out of its mean). Every mean is over the queries run.

    evaluation = evaluate("datasets/scifact", split="test", modes=("keyword",), embedder=None)
    for result in evaluation.results:
        print(result.mode, result.ndcg, result.latency_p50_ms)

`evaluate` ties the parts together: `vrom.evaluation.beir` reads the dataset,
`vrom.evaluation.runs` indexes the corpus and runs the queries, and `vrom.evaluation.metrics`
scores each ranking.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from vrom.collection import Collection
from vrom.documents import MAX_TEXT_CHARS
from vrom.embed import Embedder, resolve_embedder
from vrom.embed.rerank import RerankerChoice, Reranking
from vrom.errors import ValidationError, shown
from vrom.evaluation.beir import BeirDataset, Qrels, load_beir
from vrom.evaluation.metrics import RECALL_DEPTH, percentile, score_ranking
from vrom.evaluation.runs import (
    IndexTimings,
    ModeRun,
    Progress,
    TimedEmbedder,
    add_corpus,
    add_memories,
    recall_queries,
    search_queries,
)
from vrom.memories import Memories
from vrom.search.fusion import MAX_K
from vrom.settings import Settings
from vrom.store import open_store

__all__ = ["MODES", "TARGETS", "EvalResult", "Evaluation", "evaluate", "summarise"]

MODES = ("keyword", "vector", "hybrid")
"""The search modes `evaluate` runs, in report order."""
TARGETS = ("collection", "memories")
"""What `evaluate` loads the corpus into."""


@dataclass(frozen=True)
class EvalResult:
    """One search mode's quality and speed on the dataset.

    Fields:
        mode: ``keyword``, ``vector`` or ``hybrid``.
        k: the cut-off of ``ndcg``, ``recall`` and ``mrr``.
        queries: queries run (the means are over them).
        ndcg: mean nDCG@k.
        recall: mean recall@k.
        recall_100: mean recall@100.
        mrr: mean MRR@k.
        index_keyword_s: the keyword part of indexing (see `IndexTimings.keyword_s`).
        index_embedding_s: the embedding part (None for keyword mode, which needs no vectors).
        latency_p50_ms, latency_p95_ms: median and 95th percentile of a query's search time.
        docs_per_query: mean number of documents a search returned.
    """

    mode: str
    k: int
    queries: int
    ndcg: float
    recall: float
    recall_100: float
    mrr: float
    index_keyword_s: float
    index_embedding_s: float | None
    latency_p50_ms: float
    latency_p95_ms: float
    docs_per_query: float


def summarise(run: ModeRun, qrels: Qrels, k: int, index: IndexTimings) -> EvalResult:
    """Return a mode's mean metrics over its queries, its latencies and its index timings."""
    scores = [score_ranking(ranking, qrels[qid], k) for qid, ranking in run.rankings.items()]
    return EvalResult(
        mode=run.mode,
        k=k,
        queries=len(scores),
        ndcg=statistics.fmean(s.ndcg for s in scores),
        recall=statistics.fmean(s.recall for s in scores),
        recall_100=statistics.fmean(s.recall_100 for s in scores),
        mrr=statistics.fmean(s.mrr for s in scores),
        index_keyword_s=index.keyword_s,
        index_embedding_s=None if run.mode == "keyword" else index.embedding_s,
        latency_p50_ms=1000 * percentile(run.latencies_s, 0.5),
        latency_p95_ms=1000 * percentile(run.latencies_s, 0.95),
        docs_per_query=statistics.fmean(len(r) for r in run.rankings.values()),
    )


@dataclass(frozen=True)
class Evaluation:
    """The evaluation of vrom's search modes on a BEIR dataset's split.

    Fields:
        dataset: the dataset folder's name.
        split: the qrels split.
        k: the cut-off of nDCG, recall and MRR (recall@100 is also given).
        queries: queries run in each mode.
        embedder: the embedding model (``all-MiniLM-L6-v2 (384 d)``), or None: keyword only.
        index: how long adding the corpus took.
        results: one `EvalResult` per mode, in `MODES` order.
        notes: what the reader should know: modes left out, documents cut, queries left out.
        target: what the corpus was loaded into: ``collection`` or ``memories``.
        reranker: the reranker each search's first 30 hits were reordered with (its
            `vrom.embed.Reranker` name), or None.
    """

    dataset: str
    split: str
    k: int
    queries: int
    embedder: str | None
    index: IndexTimings
    results: list[EvalResult]
    notes: list[str] = field(default_factory=list)
    target: str = "collection"
    reranker: str | None = None


def evaluate(
    folder: str | Path,
    split: str = "test",
    modes: Sequence[str] = MODES,
    k: int = 10,
    embedder: Embedder | str | None = "auto",
    limit_queries: int | None = None,
    progress: Progress | None = None,
    target: str = "collection",
    settings: Settings | None = None,
    reranker: RerankerChoice = None,
) -> Evaluation:
    """Index a BEIR corpus into a temporary collection, run the split's queries, score each mode.

    ``embedder``: an `Embedder`, a spec (see `Embedder.from_spec`; ``"auto"``: ``$VROM_EMBEDDER``
    or the default model) or None. Without one only keyword mode runs: asking for vector or
    hybrid alone is a `ValidationError`, and with keyword they are left out with a note.
    ``limit_queries`` runs the split's first N queries (for a quick look; the corpus is always
    whole, since a partial corpus would change the metrics). ``progress(stage, done, total)``
    reports indexing and searching. ``target``: ``collection`` (a `Collection`, one document
    per entry) or ``memories`` (a temporary store's `Memories`: each entry remembered, with
    `vrom.evaluation.runs.memory_fields`, and each query asked through `Memories.recall`).
    ``settings``: what the environment configures (`vrom.settings.Settings`), resolved from it
    now when not given. ``reranker`` (a `vrom.Reranker` or a spec, ``onnx:DIR``) reorders each
    search's (or recall's) first 30 hits (`vrom.search.reranking`), its time in the latencies.
    """
    if target not in TARGETS:
        raise ValidationError(f"target must be one of {', '.join(TARGETS)}, not {shown(target)}")
    wanted = _checked_modes(modes)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise ValidationError(f"k must be an integer from 1 to {MAX_K}, not {shown(k)}")
    dataset = load_beir(folder, split, limit_queries)
    if wanted == ["keyword"]:
        embedder = None  # keyword search alone: nothing to embed, no model to load
    config = Settings.from_environment() if settings is None else settings
    model, owns = resolve_embedder(embedder, config.embedder_spec, api_key=config.openai_api_key)
    owned = model if owns else None
    try:
        notes = _plan_notes(dataset, wanted, model)
        if model is None:
            wanted = [m for m in wanted if m == "keyword"]
        if target == "collection":
            return _run(dataset, wanted, k, model, progress, notes, config, reranker)
        return _run_memories(dataset, wanted, k, model, progress, notes, reranker)
    finally:
        if owned is not None:
            owned.close()


def _checked_modes(modes: Sequence[str]) -> list[str]:
    if isinstance(modes, str):
        modes = [modes]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise ValidationError(
            f"modes must be some of {', '.join(MODES)}, not {', '.join(map(repr, modes)) or 'none'}"
        )
    return [m for m in MODES if m in modes]


def _plan_notes(dataset: BeirDataset, modes: Sequence[str], model: Embedder | None) -> list[str]:
    notes = []
    if model is None:
        needing = [m for m in modes if m != "keyword"]
        if needing and "keyword" not in modes:
            raise ValidationError(
                f"{' and '.join(needing)} search needs an embedding model: not --embedder none"
            )
        if needing:
            notes.append(
                f"no embedding model (--embedder none): keyword mode only, not {', '.join(needing)}"
            )
    if dataset.without_relevant:
        notes.append(
            f"{dataset.without_relevant} queries have no relevant judgement: they score 0, as in "
            "BEIR"
        )
    if dataset.without_text:
        notes.append(
            f"{dataset.without_text} judged queries have no text in queries.jsonl: left out"
        )
    return notes


def _run(
    dataset: BeirDataset,
    modes: Sequence[str],
    k: int,
    model: Embedder | None,
    progress: Progress | None,
    notes: list[str],
    settings: Settings,
    reranker: RerankerChoice,
) -> Evaluation:
    timed = None if model is None else TimedEmbedder(model)
    with (
        tempfile.TemporaryDirectory(prefix="vrom-eval-", ignore_cleanup_errors=True) as work,
        Collection.open(
            "beir", embedder=timed, storage=work, settings=settings, reranker=reranker
        ) as collection,
    ):
        seconds = None if timed is None else (lambda: timed.document_seconds)
        index = add_corpus(collection, dataset.folder, progress, seconds)
        reranking = collection.reranker
        depth = max(k, RECALL_DEPTH)
        runs = search_queries(
            collection, dataset.queries, modes, depth, progress, rerank=reranking is not None
        )
    if index.truncated:
        notes.append(f"{index.truncated} documents were cut at {MAX_TEXT_CHARS:,} characters")
    evaluation = _evaluation(dataset, modes, k, model, index, runs, notes, "collection")
    return evaluation if reranking is None else replace(evaluation, reranker=reranking.name)


def _run_memories(
    dataset: BeirDataset,
    modes: Sequence[str],
    k: int,
    model: Embedder | None,
    progress: Progress | None,
    notes: list[str],
    reranker: RerankerChoice,
) -> Evaluation:
    timed = None if model is None else TimedEmbedder(model)
    reranking = Reranking(reranker)
    with tempfile.TemporaryDirectory(prefix="vrom-eval-", ignore_cleanup_errors=True) as work:
        store = open_store(Path(work) / "memories.db")
        try:
            plain = Memories(store)  # remembering without the model: embedded in batches after
            asked = Memories(store, timed, reranker=reranking.reranker)  # the queries' memories
            seconds = None if timed is None else (lambda: timed.document_seconds)
            load = add_memories(
                plain, None if timed is None else asked, dataset.folder, progress, seconds
            )
            depth = max(k, RECALL_DEPTH)
            runs = recall_queries(
                asked, load.documents, dataset.queries, modes, depth, progress,
                rerank=reranking.reranker is not None,
            )  # fmt: skip
        finally:
            store.close()
            reranking.close()
    notes.append(
        f"loaded as memories: {load.dated:,} of {len(load.documents):,} timed from their metadata"
    )
    if load.cut:
        notes.append(f"{load.cut} memories were cut to a memory's title or content limit")
    evaluation = _evaluation(dataset, modes, k, model, load.timings, runs, notes, "memories")
    named = reranking.reranker
    return evaluation if named is None else replace(evaluation, reranker=named.name)


def _evaluation(
    dataset: BeirDataset,
    modes: Sequence[str],
    k: int,
    model: Embedder | None,
    index: IndexTimings,
    runs: dict[str, ModeRun],
    notes: list[str],
    target: str,
) -> Evaluation:
    """Return the evaluation of each mode's run."""
    return Evaluation(
        dataset=dataset.folder.resolve().name,
        split=dataset.split,
        k=k,
        queries=len(dataset.queries),
        embedder=None if model is None else model.fingerprint.describe(),
        index=index,
        results=[summarise(runs[mode], dataset.qrels, k, index) for mode in modes],
        notes=notes,
        target=target,
    )
