"""The seeds' own shapes, as thin views over the one read half (`vrom.queryable.Queryable`).

What the seeds define keeps its names and shapes, each made here from what the read half
returns, never by a second search: a collection's hit is its whole document (`whole_documents`);
a pack's result is the seed's `SearchResult` (`search_results`) and its context the seed's
rendering of the one formatting engine (`pack_context`). The views hold no ranking and no SQL:
the facades call the read half, fetch what a view needs, and hand it over.
"""

from __future__ import annotations

from collections.abc import Mapping

from vrom.results import Hit, SearchReport, changed_hit

__all__ = ["whole_documents"]


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
