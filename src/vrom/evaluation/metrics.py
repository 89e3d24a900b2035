"""Retrieval metrics of one query's ranking, as BEIR scores them with pytrec_eval (trec_eval).

A ranking is a list of document ids, best first, without repeats; ``judged`` maps document ids
to graded relevance (a document is relevant when its grade is above 0).

- nDCG@k: gain = the judged relevance, discount log2(rank + 1), ideal from all of the query's
  judged-relevant documents (its top k);
- recall@k and recall@100: the share of the relevant documents in the top k;
- MRR@k: 1 / the rank of the first relevant document in the top k, else 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

RECALL_DEPTH = 100
"""The cut-off of the second recall (recall@100), whatever k is."""


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
