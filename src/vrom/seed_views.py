"""The seeds' own shapes, as thin views over the one read half (`vrom.queryable.Queryable`).

What the seeds define keeps its names and shapes, each made here from what the read half
returns, never by a second search: a collection's hit is its whole document (`whole_documents`);
a pack's result is the seed's `SearchResult` (`search_results`) and its context the seed's
rendering of the one formatting engine (`pack_context`). The views hold no ranking and no SQL:
the facades call the read half, fetch what a view needs, and hand it over.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from vrom.errors import ValidationError
from vrom.results import Hit, SearchReport, SearchResult, changed_hit
from vrom.search.context import (
    RELATIVE_CUTOFF,
    Passage,
    above_cutoff,
    choose_passages,
)

__all__ = ["pack_context", "search_result", "search_results", "whole_documents"]


def whole_documents(report: SearchReport, texts: Mapping[int, str]) -> SearchReport:
    """Return a collection's report with each chunk's hit as its document's: ``text`` the whole
    document (``texts``: document id → text as added), the chunk in ``chunk_text``.

    A document added before whole texts were kept (not in ``texts``), or rewritten by another
    process since the search read its chunk (the chunk is no longer its slice), keeps the chunk
    as its text.
    """
    return report.with_hits([_whole_document(hit, texts.get(hit.note_id)) for hit in report])


def _whole_document(hit: Hit, text: str | None) -> Hit:
    whole = text if text is not None and text[hit.char_start : hit.char_end] == hit.text else None
    return changed_hit(hit, text=hit.text if whole is None else whole, chunk_text=hit.text)


def search_results(report: SearchReport, mode: str, url_base: object = None) -> list[SearchResult]:
    """Return a pack's report as the seed's `SearchResult`s (`search_result` of each hit)."""
    best = report[0].score if report else 0.0
    return [search_result(hit, mode, best, url_base) for hit in report]


def search_result(hit: Hit, mode: str, best: float, url_base: object = None) -> SearchResult:
    """Return the seed's `SearchResult` view of a `Hit` from a pack.

    ``distance`` is the cosine distance in vector mode, else ``1 - score / best`` (``best``:
    the first hit's score); a reranked hit's is 1 minus the sigmoid of the reranker's logit.
    ``url`` is the chunk's frontmatter ``url``, else ``url_base`` joined with the note's path. An expanded hit's text is its context, ``metadata["text"]`` the chunk
    alone, and ``_context_chunks`` how many chunks were joined.
    """
    fields = hit.metadata
    url = fields.get("url")
    if not isinstance(url, str):
        url = (
            f"{url_base.rstrip('/')}/{hit.path.rsplit('.', 1)[0]}"
            if isinstance(url_base, str) and url_base
            else None
        )
    title = fields.get("title") if isinstance(fields.get("title"), str) else hit.title
    metadata: dict[str, Any] = {
        "chunk_id": hit.chunk_id,
        "source_file": hit.path,
        "section_heading": hit.heading_path,
        "prev_chunk_id": hit.prev_chunk_id,
        "next_chunk_id": hit.next_chunk_id,
        "url": url,
        "doc_title": title or hit.path,
        "content_hash": hit.content_hash,
        "text": hit.text,
    }
    if hit.score_kind == "reranker":  # a logit: 1 - its sigmoid, the relevance it says
        distance = 1.0 - 1.0 / (1.0 + math.exp(-max(min(hit.score, 700.0), -700.0)))
    elif mode == "vector":
        distance = 1.0 - hit.score
    else:
        distance = 1.0 - hit.score / best if best > 0 else 1.0
    if mode != "vector" or hit.score_kind == "reranker":
        metadata["score"] = hit.score
        metadata["scores"] = dict(hit.scores)
        metadata["score_kind"] = hit.score_kind
    text = hit.text
    if hit.context_text is not None:
        text = hit.context_text
        metadata["_expanded"] = True
        metadata["_context_chunks"] = len(hit.context_chunk_ids)
    return SearchResult(text, metadata, round(min(2.0, max(0.0, distance)), 6), hit.chunk_id)


PACK_SEPARATOR = "\n\n---\n\n"
"""What separates the blocks of a pack's context (the seed's rendering)."""


def pack_context(
    results: Sequence[SearchResult],
    include_sources: bool = True,
    max_tokens: int | None = None,
    *,
    relative_cutoff: float | None = RELATIVE_CUTOFF,
) -> str:
    """Return results as prompt context: ``## heading`` (unless the text begins with it),
    text, ``[Source: url]`` (the source file when the pack has no URL), split by ``---``,
    within ``max_tokens`` (estimated as ceil(characters / 4); None: no limit), best first:
    `vrom.AgentMemory.format_context`, the seed's rendering of the one formatting engine
    (`vrom.search.context.choose_passages`, as `vrom.format_context` renders it for a vault).

    As for a vault: results far below the best are left out (``relative_cutoff`` of the best
    similarity, or of the best score outside vector mode; None, or reranked results, keep
    all: `vrom.search.context.above_cutoff`), overlapping texts
    of one document (expanded neighbours) are joined once and a text or line already given is
    not repeated, and each block that fits is used (an expanded one too long is tried as its
    chunk alone), so the budget holds the most relevant distinct text.
    """
    if max_tokens is not None and (isinstance(max_tokens, bool) or max_tokens < 1):
        raise ValidationError(f"max_tokens must be a positive integer, not {max_tokens!r}")
    similarity = [_similarity(result) for result in results]
    kinds = [str(result.metadata.get("score_kind", "")) for result in results]
    kept = [results[i] for i in above_cutoff(similarity, relative_cutoff, kinds)]

    def blocks(selection: list[Passage], bodies: list[str]) -> str:
        rendered = []
        for passage, body in zip(selection, bodies, strict=True):
            first = kept[passage.members[0]]
            heading = first.metadata.get("section_heading") or first.metadata.get("doc_title")
            said = body.lstrip("# \n").split("\n", 1)[0].strip() == heading  # its own line
            text = f"## {heading}\n\n{body}" if heading and not said else body
            # a pack built without a URL base still names the file the text came from
            source = first.metadata.get("url") or first.metadata.get("source_file")
            cited = include_sources and source
            rendered.append(text + f"\n\n[Source: {source}]" if cited else text)
        return PACK_SEPARATOR.join(rendered)

    texts = [(str(r.metadata.get("source_file") or f"#{r.id}"), r.text, _chunk(r)) for r in kept]
    chosen, bodies, _ = choose_passages(texts, blocks, max_tokens)
    return blocks(chosen, bodies)


def _chunk(result: SearchResult) -> str:
    """Return a result's own chunk (before any expansion), or "" when it has none."""
    chunk = result.metadata.get("text")
    return chunk if isinstance(chunk, str) else ""


def _similarity(result: SearchResult) -> float:
    """Return how near a result is, higher nearer: its score outside vector mode, else the
    cosine similarity."""
    score = result.metadata.get("score")
    if isinstance(score, (int, float)) and not isinstance(score, bool):
        return float(score)
    return 1.0 - result.distance
