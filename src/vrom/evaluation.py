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
"""

from __future__ import annotations

import json
import math
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vrom import settings
from vrom.collection import Collection
from vrom.documents import MAX_TEXT_CHARS, Document
from vrom.embed import Embedder, Fingerprint, resolve_embedder
from vrom.errors import NotFoundError, ValidationError
from vrom.search.fusion import MAX_K

if TYPE_CHECKING:
    from vrom.embed import Matrix

Qrels = dict[str, dict[str, int]]
"""Query id → {document id → judged relevance}."""
Progress = Callable[[str, int, int], None]
"""``progress(stage, done, total)``: stage ``indexing`` (documents) or ``searching`` (queries)."""

MODES = ("keyword", "vector", "hybrid")
"""The search modes `evaluate` runs, in report order."""
RECALL_DEPTH = 100
"""The cut-off of the second recall (recall@100), whatever k is."""
ADD_BATCH = 256
"""Documents added (and embedded) per `Collection.add` call."""

# -- metrics (per query; a ranking is a list of document ids, best first, without repeats) ------


def ndcg_at_k(ranking: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    """Return nDCG@k: gain = judged score, discount log2(rank + 1), ideal from all judgements."""
    dcg = sum(max(judged.get(doc, 0), 0) / math.log2(rank + 1) for rank, doc in _top(ranking, k))
    ideal = sorted((g for g in judged.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(rank + 1) for rank, g in enumerate(ideal, start=1))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranking: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    """Return the share of the relevant documents (score > 0) found in the top k."""
    relevant = {doc for doc, g in judged.items() if g > 0}
    found = sum(1 for _, doc in _top(ranking, k) if doc in relevant)
    return found / len(relevant) if relevant else 0.0


def mrr_at_k(ranking: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    """Return 1 / the rank of the first relevant document in the top k, or 0."""
    for rank, doc in _top(ranking, k):
        if judged.get(doc, 0) > 0:
            return 1.0 / rank
    return 0.0


def _top(ranking: Sequence[str], k: int) -> list[tuple[int, str]]:
    return list(enumerate(ranking[:k], start=1))


def percentile(values: Sequence[float], q: float) -> float:
    """Return the value at quantile ``q`` (0..1) of ``values``, by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@dataclass(frozen=True)
class QueryScores:
    """One query's metrics: ``ndcg`` (nDCG@k), ``recall`` (recall@k), ``recall_100``, ``mrr``."""

    ndcg: float
    recall: float
    recall_100: float
    mrr: float


def score_ranking(ranking: Sequence[str], judged: Mapping[str, int], k: int) -> QueryScores:
    """Return the metrics of one query's ranking (document ids, best first) at cut-off ``k``."""
    return QueryScores(
        ndcg=ndcg_at_k(ranking, judged, k),
        recall=recall_at_k(ranking, judged, k),
        recall_100=recall_at_k(ranking, judged, RECALL_DEPTH),
        mrr=mrr_at_k(ranking, judged, k),
    )


# -- data ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BeirDataset:
    """A BEIR folder's split: the queries to run and their judgements (the corpus stays on disk).

    Fields:
        folder: the dataset folder.
        split: the qrels split (``qrels/<split>.tsv``).
        queries: (query id, text) of every judged query that has a text, in qrels order.
        qrels: query id → {document id → judged relevance} for those queries.
        without_relevant: of those queries, how many have no relevant judgement (all score 0,
            as they do in BEIR).
        without_text: judged queries left out because queries.jsonl has no text for them.
    """

    folder: Path
    split: str
    queries: list[tuple[str, str]]
    qrels: Qrels
    without_relevant: int = 0
    without_text: int = 0


def available_splits(folder: str | Path) -> list[str]:
    """Return the splits a BEIR folder has judgements for (``qrels/*.tsv``), sorted."""
    return sorted(p.stem for p in (Path(folder) / "qrels").glob("*.tsv"))


def load_beir(
    folder: str | Path, split: str = "test", limit_queries: int | None = None
) -> BeirDataset:
    """Return the queries and judgements of a BEIR folder's split (the first ``limit_queries``).

    Raises `NotFoundError` when the folder, its corpus, its queries or the split is missing (the
    message lists the splits found), `ValidationError` for an unreadable line or a split with no
    query to run.
    """
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise NotFoundError(f"dataset folder {folder} does not exist")
    for name in ("corpus.jsonl", "queries.jsonl"):
        if not (folder / name).is_file():
            raise NotFoundError(f"{folder} is not a BEIR dataset: it has no {name}")
    qrels_file = folder / "qrels" / f"{split}.tsv"
    if not qrels_file.is_file():
        found = ", ".join(available_splits(folder)) or "none"
        raise NotFoundError(
            f"{folder} has no split {split!r} (no qrels/{split}.tsv); splits found: {found}"
        )
    if limit_queries is not None and (isinstance(limit_queries, bool) or limit_queries < 1):
        raise ValidationError(f"limit_queries must be a positive integer, not {limit_queries!r}")
    judged = read_qrels(qrels_file)
    texts = {str(q["_id"]): str(q.get("text") or "") for _, q in _jsonl(folder / "queries.jsonl")}
    queries = [(qid, texts[qid]) for qid in judged if qid in texts]
    if not queries:
        raise ValidationError(
            f"split {split!r} of {folder} has no judged query with a text in queries.jsonl"
        )
    without_text = len(judged) - len(queries)
    queries = queries[:limit_queries]
    qrels = {qid: judged[qid] for qid, _ in queries}
    without_relevant = sum(
        1 for scores in qrels.values() if not any(g > 0 for g in scores.values())
    )
    return BeirDataset(folder, split, queries, qrels, without_relevant, without_text)


def read_qrels(path: str | Path) -> Qrels:
    """Return query id → {document id → score} from a BEIR qrels TSV (header line optional)."""
    qrels: Qrels = {}
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.rstrip("\n").split("\t")
            if len(fields) < 3 or fields[0] == "query-id":
                continue
            try:
                score = int(float(fields[2]))
            except ValueError as exc:
                raise ValidationError(
                    f"{path}:{number}: relevance {fields[2]!r} is not a number"
                ) from exc
            qrels.setdefault(fields[0], {})[fields[1]] = score
    return qrels


def corpus_documents(folder: str | Path) -> Iterator[Document]:
    """Yield the corpus as documents: id ``_id``, text ``title\\n\\ntext`` (title left out if empty).

    An entry with neither title nor text is skipped (nothing could find it). A repeated id is a
    `ValidationError`.
    """
    seen: set[str] = set()
    path = Path(folder) / "corpus.jsonl"
    for number, entry in _jsonl(path):
        doc_id = str(entry["_id"])
        if doc_id in seen:
            raise ValidationError(f"{path}:{number}: document id {doc_id!r} appears twice")
        seen.add(doc_id)
        title = " ".join(str(entry.get("title") or "").split())
        body = str(entry.get("text") or "").strip()
        text = f"{title}\n\n{body}" if title and body else title or body
        if text:
            yield Document(doc_id, text)


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) of each non-blank line of a JSONL file that has an ``_id``."""
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError as exc:
                raise ValidationError(f"{path}:{number}: not a JSON line ({exc})") from exc
            if not isinstance(entry, dict) or "_id" not in entry:
                raise ValidationError(f"{path}:{number}: an entry needs an '_id'")
            yield number, entry


def _count_lines(path: Path) -> int:
    with path.open(encoding="utf-8") as handle:
        return sum(1 for line in handle if line.strip())


# -- indexing and searching --------------------------------------------------------------------


class _TimedEmbedder(Embedder):
    """Delegates to another embedder and adds up the wall time spent embedding documents."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.document_seconds = 0.0

    @property
    def fingerprint(self) -> Fingerprint:
        return self.inner.fingerprint

    def _embed(self, texts: Sequence[str], kind: str) -> Matrix:
        return self.inner._embed(texts, kind)

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        started = time.perf_counter()
        try:
            return self.inner.embed_documents(texts)
        finally:
            self.document_seconds += time.perf_counter() - started

    def embed_query(self, text: str) -> Matrix:
        return self.inner.embed_query(text)


@dataclass(frozen=True)
class IndexTimings:
    """How long adding the corpus took.

    Fields:
        documents: documents added (corpus entries with a title or a text).
        total_s: wall time of adding them all.
        keyword_s: of that, everything but the embedding model: chunking, the keyword (FTS5)
            index, storing texts and vectors.
        embedding_s: of that, the time inside the embedding model (None without one).
        truncated: documents cut at 100,000 characters (a collection document's limit).
    """

    documents: int
    total_s: float
    keyword_s: float
    embedding_s: float | None
    truncated: int = 0


def add_corpus(
    collection: Collection,
    folder: str | Path,
    progress: Progress | None = None,
    embedding_seconds: Callable[[], float] | None = None,
) -> IndexTimings:
    """Add a BEIR corpus to ``collection`` in batches; return the documents added and timings.

    A text longer than a collection document may be (100,000 characters) is cut there.
    ``embedding_seconds()`` reports the time spent in the model so far (None: no model).
    """
    total = _count_lines(Path(folder) / "corpus.jsonl")
    done = truncated = 0
    total_s = 0.0
    batch: list[Document] = []

    def flush() -> None:
        nonlocal total_s
        started = time.perf_counter()
        collection.add(batch)
        total_s += time.perf_counter() - started
        batch.clear()
        if progress is not None:
            progress("indexing", done, total)

    for doc in corpus_documents(folder):
        if len(doc.text) > MAX_TEXT_CHARS:
            doc = Document(doc.id, doc.text[:MAX_TEXT_CHARS])
            truncated += 1
        batch.append(doc)
        done += 1
        if len(batch) >= ADD_BATCH:
            flush()
    if batch:
        flush()
    if progress is not None and done < total:
        progress("indexing", total, total)  # entries without text were skipped, not left unread
    embedding_s = embedding_seconds() if embedding_seconds is not None else None
    return IndexTimings(
        documents=done,
        total_s=total_s,
        keyword_s=total_s - (embedding_s or 0.0),
        embedding_s=embedding_s,
        truncated=truncated,
    )


@dataclass(frozen=True)
class ModeRun:
    """What one search mode returned for every query.

    Fields:
        mode: ``keyword``, ``vector`` or ``hybrid``.
        rankings: query id → document ids, best first (one per document, at its best chunk).
        latencies_s: the wall time of each query's search (query embedding included).
    """

    mode: str
    rankings: dict[str, list[str]]
    latencies_s: list[float]


def search_queries(
    collection: Collection,
    queries: Sequence[tuple[str, str]],
    modes: Sequence[str],
    depth: int,
    progress: Progress | None = None,
) -> dict[str, ModeRun]:
    """Run every query in every mode (modes taking turns per query); return each mode's run.

    Each search returns up to ``depth`` documents. One search per mode runs first, untimed, so
    loading the vector index and warming caches is not counted in the latencies.
    """
    runs = {mode: ModeRun(mode, {}, []) for mode in modes}
    warm_up = next((text for _, text in queries if text.strip()), "")
    for mode in modes:
        if warm_up:
            collection.search(warm_up, k=depth, mode=mode)
    for done, (qid, text) in enumerate(queries, start=1):
        for mode, run in runs.items():
            started = time.perf_counter()
            # a blank query finds nothing (search refuses it): it scores 0, as it should
            hits = collection.search(text, k=depth, mode=mode) if text.strip() else []
            run.latencies_s.append(time.perf_counter() - started)
            run.rankings[qid] = [hit.id for hit in hits]
        if progress is not None:
            progress("searching", done, len(queries))
    return runs


# -- results ---------------------------------------------------------------------------------


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
    """

    dataset: str
    split: str
    k: int
    queries: int
    embedder: str | None
    index: IndexTimings
    results: list[EvalResult]
    notes: list[str] = field(default_factory=list)


def evaluate(
    folder: str | Path,
    split: str = "test",
    modes: Sequence[str] = MODES,
    k: int = 10,
    embedder: Embedder | str | None = "auto",
    limit_queries: int | None = None,
    progress: Progress | None = None,
) -> Evaluation:
    """Index a BEIR corpus into a temporary collection, run the split's queries, score each mode.

    ``embedder``: an `Embedder`, a spec (see `Embedder.from_spec`; ``"auto"``: ``$VROM_EMBEDDER``
    or the default model) or None. Without one only keyword mode runs: asking for vector or
    hybrid alone is a `ValidationError`, and with keyword they are left out with a note.
    ``limit_queries`` runs the split's first N queries (for a quick look; the corpus is always
    whole, since a partial corpus would change the metrics). ``progress(stage, done, total)``
    reports indexing and searching.
    """
    wanted = _checked_modes(modes)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise ValidationError(f"k must be an integer from 1 to {MAX_K}, not {k!r}")
    dataset = load_beir(folder, split, limit_queries)
    if wanted == ["keyword"]:
        embedder = None  # keyword search alone: nothing to embed, no model to load
    model, owns = resolve_embedder(embedder, settings.embedder_spec())
    owned = model if owns else None
    try:
        notes = _plan_notes(dataset, wanted, model)
        if model is None:
            wanted = [m for m in wanted if m == "keyword"]
        return _run(dataset, wanted, k, model, progress, notes)
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
) -> Evaluation:
    timed = None if model is None else _TimedEmbedder(model)
    with (
        tempfile.TemporaryDirectory(prefix="vrom-eval-", ignore_cleanup_errors=True) as work,
        Collection.open("beir", embedder=timed, storage=work) as collection,
    ):
        seconds = None if timed is None else (lambda: timed.document_seconds)
        index = add_corpus(collection, dataset.folder, progress, seconds)
        runs = search_queries(collection, dataset.queries, modes, max(k, RECALL_DEPTH), progress)
    if index.truncated:
        notes.append(f"{index.truncated} documents were cut at {MAX_TEXT_CHARS:,} characters")
    return Evaluation(
        dataset=dataset.folder.resolve().name,
        split=dataset.split,
        k=k,
        queries=len(dataset.queries),
        embedder=None if model is None else model.fingerprint.describe(),
        index=index,
        results=[summarise(runs[mode], dataset.qrels, k, index) for mode in modes],
        notes=notes,
    )
