"""Reading a BEIR dataset folder: its corpus, its queries and a split's judgements (qrels).

A BEIR folder holds ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``,
``text``) and ``qrels/<split>.tsv`` (query id, document id, graded relevance).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vrom.documents import Document
from vrom.errors import NotFoundError, ValidationError
from vrom.ingest.embedding import DATE_KEYS

MAX_CONTEXT_CHARS = 1_000
"""Titles and dates longer than this are not copied into a document's metadata."""
Qrels = dict[str, dict[str, int]]
"""Query id → {document id → judged relevance}."""


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


@dataclass(frozen=True)
class CorpusEntry:
    """One corpus entry: ``title`` and ``text`` with runs of whitespace in the title made one
    space and the text stripped, and ``metadata`` (an object in the entry; else empty)."""

    id: str
    title: str
    text: str
    metadata: dict[str, Any]


def corpus_entries(folder: str | Path) -> Iterator[CorpusEntry]:
    """Yield the corpus's entries in file order.

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
        metadata = entry.get("metadata")
        if title or body:
            yield CorpusEntry(doc_id, title, body, metadata if isinstance(metadata, dict) else {})


def entry_source(entry: CorpusEntry) -> str:
    """Return the conversation an entry belongs to: its metadata's ``source`` when it is text,
    else its title (entries sharing a title, a dialogue session's turns, are one), runs of
    whitespace made one space ("" for neither)."""
    named = entry.metadata.get("source")
    return " ".join((named if isinstance(named, str) and named.strip() else entry.title).split())


def corpus_documents(folder: str | Path) -> Iterator[Document]:
    """Yield the corpus as documents: id ``_id``, text ``title\\n\\ntext`` (title left out if
    empty), and metadata ``title`` (when it has one), the entry's date (its metadata's first
    of `DATE_KEYS` holding a string) and ``source`` (`entry_source`), each up to
    `MAX_CONTEXT_CHARS`: what `vrom.ingest.embedding.context_text` embeds with each chunk.

    An entry with neither title nor text is skipped (nothing could find it). A repeated id is a
    `ValidationError`.
    """
    for entry in corpus_entries(folder):
        text = (
            f"{entry.title}\n\n{entry.text}"
            if entry.title and entry.text
            else entry.title or entry.text
        )
        metadata: dict[str, Any] = {"title": entry.title} if entry.title else {}
        if len(entry.title) > MAX_CONTEXT_CHARS:  # metadata is bounded; the text keeps it whole
            metadata = {}
        for key in DATE_KEYS:
            value = entry.metadata.get(key)
            if isinstance(value, str) and len(value) <= MAX_CONTEXT_CHARS:
                metadata[key] = entry.metadata[key]
                break
        source = entry_source(entry)
        if source and len(source) <= MAX_CONTEXT_CHARS:
            metadata["source"] = source
        yield Document(entry.id, text, metadata)


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


def count_corpus(folder: str | Path) -> int:
    """Return how many entries (non-blank lines) the folder's ``corpus.jsonl`` has."""
    path = Path(folder) / "corpus.jsonl"
    with path.open(encoding="utf-8") as handle:
        return sum(1 for line in handle if line.strip())
