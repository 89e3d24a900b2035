"""``vrom eval``: BEIR loading, metrics that agree with trec_eval, and the CLI end to end.

The agreement tests score the same runs with vrom's metric code and with trec_eval through
ir_measures' pytrec_eval backend (``nDCG@10``, ``R@10``, ``R@100``) and its MS MARCO backend for
``RR@10`` (the pytrec_eval backend has no cut-off for RR, so trec_eval's ``recip_rank`` on the
top 10 is checked as well). Ties: trec_eval sorts a run by score, then by document id, both
descending (pinned below), while vrom scores the order its search returned. So a vrom ranking
goes to trec_eval with scores that fall strictly with the rank (no ties to re-sort); the test of
tied scores instead ranks them by trec_eval's rule before vrom scores them.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from vrom import Collection, NotFoundError, ValidationError
from vrom.embed import Embedder, Fingerprint
from vrom.evaluation import MODES, EvalResult, Evaluation, evaluate
from vrom.evaluation.beir import (
    CorpusEntry,
    Qrels,
    available_splits,
    corpus_documents,
    load_beir,
)
from vrom.evaluation.metrics import score_ranking
from vrom.evaluation.runs import IndexTimings, memory_fields, search_queries
from vrom.memories import MAX_CONTENT_CHARS, MAX_TITLE_CHARS

BEIR_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "beir"
TOLERANCE = 1e-6
K = 10
TIMEOUT = 60

# -- a tiny BEIR dataset -----------------------------------------------------------------------

SEABIRDS = "\n\n".join(
    f"Paragraph {i}: seabirds glide for hours over the water without resting."
    + (" The albatross crosses the southern ocean." if i == 25 else "")
    for i in range(30)
)  # about 2,400 characters: several chunks, the albatross in a late one
DOCS = [
    ("cat", "Cats", "Cats are small domestic felines that purr when content and hunt mice."),
    ("cat-copy", "Cats", "Cats are small domestic felines that purr when content and hunt mice."),
    ("dog", "Dogs", "Dogs are loyal animals that bark at strangers and guard houses."),
    ("wolf", "Wolves", "Wolves are wild relatives of dogs that hunt in packs and howl."),
    ("fish", "Fish", "Fish swim in water and breathe with gills."),
    ("bird", "Birds", "Birds fly with wings and lay eggs in nests; some cross the ocean."),
    ("ocean", "Seabirds", SEABIRDS),
    ("MED/5.x", "Cars", "Cars drive on roads and burn fuel in engines."),
    ("train", "", "Trains run on rails between cities and stations."),
    ("blank", "", ""),  # nothing to index: skipped
]
QUERIES = [
    ("q1", "purring felines"),
    ("q2", "loyal animals that bark"),
    ("q3", "albatross over the southern ocean"),
    ("q4", "roads and engines"),
    ("q5", "quantum chromodynamics"),  # shares no word with any document
    ("q6", "fish gills"),
]
QRELS = {
    "test": [
        ("q1", "cat", 2),
        ("q1", "cat-copy", 1),  # the same text as cat: tied scores
        ("q2", "dog", 2),
        ("q2", "wolf", 1),
        ("q2", "fish", 0),
        ("q3", "ocean", 1),
        ("q3", "bird", 1),
        ("q4", "MED/5.x", 1),
        ("q4", "train", 0),
        ("q5", "car-not-in-corpus", 1),  # nothing relevant can be retrieved
        ("q6", "fish", 0),  # no relevant judgement at all
        ("q7", "dog", 1),  # no text in queries.jsonl
    ],
    "train": [("q1", "cat", 1), ("q2", "dog", 1)],
    "dev": [("q3", "ocean", 1)],
}


def write_dataset(folder: Path) -> Path:
    """Write the tiny BEIR dataset (three splits) into ``folder``; return it."""
    (folder / "qrels").mkdir(parents=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for doc_id, title, text in DOCS:
            handle.write(json.dumps({"_id": doc_id, "title": title, "text": text}) + "\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for query_id, text in QUERIES:
            handle.write(json.dumps({"_id": query_id, "text": text, "metadata": {}}) + "\n")
    for split, rows in QRELS.items():
        lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{s}" for q, d, s in rows]
        (folder / "qrels" / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return write_dataset(tmp_path / "tiny")


# -- the reference: trec_eval through ir_measures ----------------------------------------------

NAMES = ("ndcg", "recall", "recall_100", "mrr")


def rank_scored(rankings: Mapping[str, Sequence[str]]) -> dict[str, dict[str, float]]:
    """Return the rankings as a scored run whose scores fall strictly with the rank."""
    return {
        qid: {doc: float(len(ranking) - i) for i, doc in enumerate(ranking)}
        for qid, ranking in rankings.items()
        if ranking
    }


def reference(qrels: Qrels, run: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Return trec_eval's metrics per query of ``qrels``.

    A query without a hit is not in ``run``: pytrec_eval alone would leave it out (and BEIR's mean
    with it), ir_measures scores it 0, as vrom does.
    """
    ir_measures = pytest.importorskip("ir_measures")
    from ir_measures import RR, R, nDCG

    values: dict[str, dict[str, float]] = defaultdict(dict)
    names = {"nDCG@10": "ndcg", "R@10": "recall", "R@100": "recall_100"}
    for metric in ir_measures.pytrec_eval.iter_calc([nDCG @ 10, R @ 10, R @ 100], qrels, run):
        values[metric.query_id][names[str(metric.measure)]] = metric.value
    for metric in ir_measures.iter_calc([RR @ 10], qrels, run):  # the MS MARCO backend
        values[metric.query_id]["mrr"] = metric.value
    top_10 = {
        qid: dict(sorted(scores.items(), key=lambda item: (item[1], item[0]), reverse=True)[:10])
        for qid, scores in run.items()
    }
    for metric in ir_measures.pytrec_eval.iter_calc([RR], qrels, top_10):
        values[metric.query_id]["trec_eval recip_rank@10"] = metric.value
    return values


def assert_agreement(qrels: Qrels, rankings: Mapping[str, Sequence[str]]) -> int:
    """Assert vrom's metrics equal trec_eval's for every query (and on average); return count."""
    theirs = reference(qrels, rank_scored(rankings))
    ours = {qid: score_ranking(ranking, qrels[qid], K) for qid, ranking in rankings.items()}
    assert set(theirs) == set(ours)
    for qid, scores in ours.items():
        expected = theirs[qid]
        for name in NAMES:
            wanted = pytest.approx(expected[name], abs=TOLERANCE)
            assert getattr(scores, name) == wanted, (qid, name, rankings[qid], qrels[qid])
        assert scores.mrr == pytest.approx(expected["trec_eval recip_rank@10"], abs=TOLERANCE)
    for name in NAMES:
        mean_ours = sum(getattr(s, name) for s in ours.values()) / len(ours)
        mean_theirs = sum(theirs[q][name] for q in ours) / len(ours)
        assert mean_ours == pytest.approx(mean_theirs, abs=TOLERANCE), name
    return len(ours)


# -- metric agreement --------------------------------------------------------------------------

EDGE_CASES: dict[str, tuple[dict[str, int], list[str]]] = {
    "graded 0/1/2, one relevant never retrieved": (
        {"a": 2, "b": 1, "c": 1, "z": 0},
        ["x", "b", "a", "z", "y"],
    ),
    "no relevant document retrieved": ({"a": 1, "b": 2}, ["x", "y", "z"]),
    "fewer results than k": ({"a": 1, "b": 2}, ["b"]),
    "no result at all": ({"a": 1}, []),
    "more relevant documents than k": (
        {f"r{i:02d}": 1 + i % 2 for i in range(15)},
        [f"r{i:02d}" for i in range(14, -1, -1)] + ["x", "y"],
    ),
    "first relevant at rank 11": ({"a": 2}, [f"x{i}" for i in range(10)] + ["a"]),
    "relevant only past rank 100": ({"a": 1}, [f"x{i:03d}" for i in range(100)] + ["a"]),
    "no relevant judgement": ({"a": 0, "b": 0}, ["a", "b"]),
    "negative relevance counts as 0": ({"a": -2, "b": 1, "c": 2}, ["a", "b", "c"]),
    "all relevant, ideal order": ({"a": 2, "b": 1, "c": 1}, ["a", "b", "c"]),
}


def test_metrics_agree_with_trec_eval_on_edge_cases() -> None:
    qrels = {qid: judged for qid, (judged, _) in EDGE_CASES.items()}
    rankings = {qid: ranking for qid, (_, ranking) in EDGE_CASES.items()}
    assert assert_agreement(qrels, rankings) == len(EDGE_CASES)


def test_metrics_agree_with_trec_eval_on_a_generated_run() -> None:
    rng = random.Random(20240611)
    docs = [f"d{i:03d}" for i in range(400)]
    qrels: Qrels = {}
    rankings: dict[str, list[str]] = {}
    for number in range(150):
        qid = f"q{number}"
        judged = rng.sample(docs, rng.randint(1, 40))
        qrels[qid] = {doc: rng.choice((0, 1, 1, 2)) for doc in judged}
        length = rng.choice((0, 1, 5, 9, 10, 11, 30, 99, 100, 101, 150, 300))
        ranking = rng.sample(docs, length)
        for doc in judged:  # retrieve about half of the judged documents, anywhere
            if doc not in ranking and rng.random() < 0.5:
                ranking.insert(rng.randint(0, len(ranking)), doc)
        rankings[qid] = ranking
    assert assert_agreement(qrels, rankings) == 150


@pytest.mark.parametrize("mode", MODES)
def test_metrics_agree_with_trec_eval_on_a_vrom_run(dataset: Path, mode: str) -> None:
    beir = load_beir(dataset, "test")
    with Collection.open("tiny", embedder="fake") as collection:
        collection.add(corpus_documents(dataset))
        run = search_queries(collection, beir.queries, [mode], depth=100)[mode]
    assert set(run.rankings) == {"q1", "q2", "q3", "q4", "q5", "q6"}
    assert "blank" not in {doc for ranking in run.rankings.values() for doc in ranking}
    assert_agreement(beir.qrels, run.rankings)


def test_trec_eval_breaks_ties_by_descending_document_id() -> None:
    ir_measures = pytest.importorskip("ir_measures")
    from ir_measures import RR

    # b is ranked before a, so the relevant a is second
    (metric,) = ir_measures.pytrec_eval.iter_calc([RR], {"q": {"a": 1}}, {"q": {"a": 1, "b": 1}})
    assert metric.value == 0.5


def test_tied_scores_ranked_by_trec_eval_rule_agree() -> None:
    rng = random.Random(7)
    docs = [f"d{i:03d}" for i in range(200)]
    qrels: Qrels = {}
    run: dict[str, dict[str, float]] = {}
    for number in range(120):
        qid = f"q{number}"
        qrels[qid] = {doc: rng.choice((0, 1, 2)) for doc in rng.sample(docs, rng.randint(1, 25))}
        pool = rng.sample(docs, 60) + list(qrels[qid])
        # short runs (at most 10 documents) for RR, whose cut-off trec_eval lacks; long ones too
        length = rng.randint(1, 10) if number % 2 else rng.randint(11, 150)
        chosen = rng.sample(sorted(set(pool)), min(length, len(set(pool))))
        run[qid] = {doc: float(rng.choice((1, 2, 3))) for doc in chosen}  # many ties
    # trec_eval's rule: score descending, then document id descending
    rankings = {
        qid: sorted(scores, key=lambda doc: (scores[doc], doc), reverse=True)
        for qid, scores in run.items()
    }
    ir_measures = pytest.importorskip("ir_measures")
    from ir_measures import RR, R, nDCG

    measures = [nDCG @ 10, R @ 10, R @ 100, RR]
    names = {"nDCG@10": "ndcg", "R@10": "recall", "R@100": "recall_100", "RR": "mrr"}
    compared = 0
    for metric in ir_measures.pytrec_eval.iter_calc(measures, qrels, run):
        name = names[str(metric.measure)]
        if name == "mrr" and len(run[metric.query_id]) > 10:
            continue  # trec_eval's recip_rank has no cut-off
        ours = score_ranking(rankings[metric.query_id], qrels[metric.query_id], K)
        assert getattr(ours, name) == pytest.approx(metric.value, abs=TOLERANCE)
        compared += 1
    assert compared == 120 * 3 + 60


# -- loading -----------------------------------------------------------------------------------


def test_load_beir_reads_the_judged_queries(dataset: Path) -> None:
    beir = load_beir(dataset, "test")
    assert [q for q, _ in beir.queries] == ["q1", "q2", "q3", "q4", "q5", "q6"]
    assert beir.qrels["q2"] == {"dog": 2, "wolf": 1, "fish": 0}
    assert (beir.without_relevant, beir.without_text) == (1, 1)
    assert [q for q, _ in load_beir(dataset, "test", limit_queries=2).queries] == ["q1", "q2"]
    assert available_splits(dataset) == ["dev", "test", "train"]
    documents = {doc.id: doc for doc in corpus_documents(dataset)}
    docs = {doc_id: doc.text for doc_id, doc in documents.items()}
    assert docs["dog"].startswith("Dogs\n\nDogs are loyal") and docs["train"].startswith("Trains")
    assert "blank" not in docs and len(docs) == len(DOCS) - 1
    assert documents["dog"].metadata == {"title": "Dogs", "source": "Dogs"}, "a title: a source"


def test_a_missing_split_lists_the_splits_found(dataset: Path) -> None:
    with pytest.raises(NotFoundError, match=r"no split 'validation'.*found: dev, test, train"):
        load_beir(dataset, "validation")
    with pytest.raises(NotFoundError, match="does not exist"):
        load_beir(dataset / "nowhere")
    (dataset / "corpus.jsonl").unlink()
    with pytest.raises(NotFoundError, match=r"not a BEIR dataset: it has no corpus\.jsonl"):
        load_beir(dataset)


def test_bad_lines_are_validation_errors(dataset: Path) -> None:
    (dataset / "qrels" / "bad.tsv").write_text("q1\tcat\thigh\n", encoding="utf-8")
    with pytest.raises(ValidationError, match=r"bad.tsv:1: relevance 'high'"):
        load_beir(dataset, "bad")
    with (dataset / "corpus.jsonl").open("a", encoding="utf-8") as handle:
        handle.write('{"_id": "cat", "text": "again"}\n')
    with pytest.raises(ValidationError, match="document id 'cat' appears twice"):
        list(corpus_documents(dataset))


# -- evaluate ----------------------------------------------------------------------------------


def test_evaluate_reports_every_mode(dataset: Path) -> None:
    evaluation = evaluate(dataset, embedder="fake")
    assert [r.mode for r in evaluation.results] == list(MODES)
    assert evaluation.queries == 6 and evaluation.index.documents == len(DOCS) - 1
    assert evaluation.embedder == "fake-hashed-words (64 d)"
    assert evaluation.index.embedding_s is not None and evaluation.index.embedding_s > 0
    keyword = evaluation.results[0]
    assert keyword.index_embedding_s is None and keyword.index_keyword_s > 0
    # q1 (cat first; the tied copy at 2 or 3), q2, q4 found first; q3's albatross is in the
    # ocean document's late chunk, found at its best chunk
    assert keyword.mrr >= 3 / 6
    for result in evaluation.results:
        assert 0 <= result.ndcg <= 1 and 0 <= result.mrr <= 1
        assert result.latency_p95_ms >= result.latency_p50_ms > 0
    assert any("1 queries have no relevant judgement" in note for note in evaluation.notes)


def test_keyword_mode_alone_embeds_nothing(dataset: Path) -> None:
    class Refusing(Embedder):
        @property
        def fingerprint(self) -> Fingerprint:
            return Embedder.fake(8).fingerprint

        def _embed(self, texts: Sequence[str], kind: str) -> Any:
            raise AssertionError("keyword mode must not embed")

    evaluation = evaluate(dataset, modes=["keyword"], embedder=Refusing(), k=5)
    assert [r.mode for r in evaluation.results] == ["keyword"]
    assert evaluation.embedder is None and evaluation.index.embedding_s is None
    assert evaluation.results[0].ndcg > 0


def test_without_a_model_only_keyword_mode_runs(dataset: Path) -> None:
    evaluation = evaluate(dataset, embedder=None, k=5)
    assert [r.mode for r in evaluation.results] == ["keyword"] and evaluation.k == 5
    assert evaluation.embedder is None and evaluation.index.embedding_s is None
    assert any("keyword mode only" in note for note in evaluation.notes)
    with pytest.raises(ValidationError, match="vector search needs an embedding model"):
        evaluate(dataset, modes=["vector"], embedder="none")
    with pytest.raises(ValidationError, match="modes must be some of"):
        evaluate(dataset, modes=["fuzzy"], embedder="none")


def test_memories_are_evaluated_through_remember_and_recall(dataset: Path) -> None:
    as_memories = evaluate(dataset, embedder="fake", target="memories")
    as_collection = evaluate(dataset, embedder="fake")
    assert as_memories.target == "memories" and as_collection.target == "collection"
    assert [r.mode for r in as_memories.results] == list(MODES)
    assert as_memories.index.documents == len(DOCS) - 1 and as_memories.queries == 6
    assert as_memories.index.embedding_s is not None and as_memories.index.embedding_s > 0
    assert "loaded as memories: 0 of 9 timed from their metadata" in as_memories.notes
    keyword = as_memories.results[0]
    assert keyword.mrr >= 3 / 6, "q1, q2, q4 find their memory first, as documents do"
    for mine, theirs in zip(as_memories.results, as_collection.results, strict=True):
        assert mine.docs_per_query == pytest.approx(theirs.docs_per_query, abs=1.0)
    with pytest.raises(ValidationError, match="target must be one of collection, memories"):
        evaluate(dataset, embedder="fake", target="pack")


def test_a_memory_takes_its_title_tags_time_and_source_from_the_entry() -> None:
    dated = CorpusEntry(
        "conv:D1:3",
        "session 1 (1:56 pm on 8 May, 2023)",
        "Caroline: I went to a support group yesterday.",
        {"date_time": "1:56 pm on 8 May, 2023", "tags": ["support", 3, " "]},
    )
    assert memory_fields(dated) == (
        "session 1 (1:56 pm on 8 May, 2023)",
        "Caroline: I went to a support group yesterday.",
        ["support"],
        "1:56 pm on 8 May, 2023",
        "session 1 (1:56 pm on 8 May, 2023)",  # the source: the turns sharing a title
        False,
    )
    sourced = CorpusEntry("y", "A title", "text", {"source": " chat\n42 "})
    assert memory_fields(sourced).source == "chat 42", "the metadata's source first"
    untitled = CorpusEntry("x", "", "First line here\nsecond line " + "y" * 30_000, {})
    title, content, tags, timestamp, source, cut = memory_fields(untitled)
    assert title == "First line here" and len(content) == MAX_CONTENT_CHARS and cut
    assert timestamp is None and tags == [] and source is None
    long_title = CorpusEntry("z", "t" * 300, "", {"date": "2023-05-08"})
    title, content, _, timestamp, _, cut = memory_fields(long_title)
    assert len(title) == MAX_TITLE_CHARS and content == "t" * 300 and cut
    assert timestamp == "2023-05-08"


def test_memories_are_timed_from_the_corpus_metadata(tmp_path: Path) -> None:
    folder = write_dataset(tmp_path / "dated")
    lines = (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    dated = []
    for number, line in enumerate(lines):
        entry = json.loads(line)
        entry["metadata"] = {"date_time": f"1:56 pm on {number + 1} May, 2023"}
        if entry["_id"] == "dog":
            entry["metadata"] = {"date_time": "not a date"}  # timed now, not a failure
        dated.append(json.dumps(entry))
    (folder / "corpus.jsonl").write_text("\n".join(dated) + "\n", encoding="utf-8")
    evaluation = evaluate(folder, embedder=None, target="memories")
    assert "loaded as memories: 8 of 9 timed from their metadata" in evaluation.notes


# -- the CLI, end to end -----------------------------------------------------------------------


MODE_ROWS = [[mode] for mode in MODES]


def _cli(*args: str, embedder: str = "fake") -> subprocess.Popen[str]:
    env = {**os.environ, "VROM_EMBEDDER": embedder}
    return subprocess.Popen(
        [sys.executable, "-m", "vrom", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=TIMEOUT)
    return proc.returncode, out, err


def test_vrom_eval_end_to_end(dataset: Path) -> None:
    folder = str(dataset)
    procs = [  # independent runs, started together
        _cli("eval", folder),
        _cli("eval", folder, "--json", "--k", "5"),
        _cli("eval", folder, "--mode", "keyword", "--limit-queries", "3"),
        _cli("eval", folder, embedder="none"),
        _cli("eval", folder, "--split", "validation"),
        _cli("eval", folder, "--as", "memories", "--mode", "hybrid"),
    ]
    table, as_json, keyword, no_model, missing, memories = (_finish(p) for p in procs)

    code, out, err = table
    assert code == 0, err
    assert "tiny (test): 6 queries, 9 documents; embedder fake-hashed-words (64 d)" in out
    for label in ("nDCG@10", "R@10", "R@100", "MRR@10", "index kw s", "index emb s", "p50 ms"):
        assert label in out, label
    for mode in MODES:
        assert any(line.startswith(f"{mode} ") for line in out.splitlines()), mode
    assert "keyword part" in out and "embedding part" in out

    code, out, err = as_json
    assert code == 0, err
    data = json.loads(out)
    assert set(data) == {f for f in Evaluation.__dataclass_fields__}
    assert set(data["index"]) == {f for f in IndexTimings.__dataclass_fields__}
    assert [r["mode"] for r in data["results"]] == list(MODES)
    for result in data["results"]:
        assert set(result) == {f for f in EvalResult.__dataclass_fields__}
        assert result["k"] == 5 and result["queries"] == 6

    code, out, err = keyword
    assert code == 0, err
    rows = [line.split()[0] for line in out.splitlines() if line.split()[:1] in MODE_ROWS]
    assert rows == ["keyword"] and "3 queries" in out

    code, out, err = no_model
    assert code == 0, err
    assert "embedder none" in out and "keyword mode only" in out
    assert not any(line.startswith(("vector ", "hybrid ")) for line in out.splitlines())

    code, out, err = missing
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("vrom: error: ")
    assert "no split 'validation'" in err and "splits found: dev, test, train" in err

    code, out, err = memories
    assert code == 0, err
    assert "tiny (test): 6 queries, 9 documents as memories; embedder fake-hashed-words" in out
    rows = [line.split()[0] for line in out.splitlines() if line.split()[:1] in MODE_ROWS]
    assert rows == ["hybrid"] and "loaded as memories" in out


@pytest.mark.data
def test_scifact_keyword_quality_is_plausible() -> None:
    scifact = BEIR_DATA / "scifact"
    if not (scifact / "qrels" / "train.tsv").is_file():
        pytest.skip(f"{scifact} is absent")
    args = ["eval", str(scifact), "--split", "train", "--mode", "keyword", "--limit-queries", "50"]
    code, out, err = _finish(_cli(*args, "--json", embedder="none"))
    assert code == 0, err
    (result,) = json.loads(out)["results"]
    # measured: nDCG@10 0.5916, R@10 0.76, R@100 0.92, MRR@10 0.549 (all 809 train queries:
    # nDCG@10 0.690); BM25 is 0.665 on SciFact's test split in the BEIR paper
    assert result["queries"] == 50 and result["ndcg"] > 0.5
