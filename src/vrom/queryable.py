"""`Queryable`: the one read half `Vault`, `Collection`, `Pack` and `Memories` stand on.

As sqlite-utils' ``Queryable`` is the read half its ``Table`` and ``View`` share, this is what
every facade's reads are made of: ``search(query, k, *, where, mode, ...)`` returns a
`vrom.results.SearchReport` (a sequence of `Hit` that says how they were found) and
``context(query, max_tokens, ...)`` the one formatter's `Context` over the same hits
(`vrom.search.context.format_context`). A facade gives `_report`, its own filter words turned
into one call of the search core (`vrom.corpus.Corpus`), and adds its own vocabulary around
it; it never ranks. `Closing` is the context-manager protocol every facade shares.

    with Vault.open("notes") as vault:
        report = vault.search("network switch", k=5, path="lab/")
        prompt = vault.context("network switch", max_tokens=1500).text
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from vrom.errors import ValidationError, shown
from vrom.results import Context, SearchReport
from vrom.search.context import RELATIVE_CUTOFF, expand_hits, format_context
from vrom.store import Store

__all__ = ["Closing", "Queryable"]

_Opened = TypeVar("_Opened", bound="Closing")


class Closing:
    """The context-manager protocol: ``with facade:`` closes it at the end of the block."""

    def close(self) -> object:
        """Let go of what the object holds (each facade says what, and what it returns)."""
        raise NotImplementedError

    def __enter__(self: _Opened) -> _Opened:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class Queryable(Closing):
    """The read half: `search` and `context` over one store through the search core.

    A facade implements `_report` (its filter's words and its call of the core) and may extend
    `_finished` (what it does to every hit: a vault checks each note is still as indexed).
    """

    _report: Callable[..., SearchReport]
    """``_report(query, k, where, mode, *, ef_search, rerank, **own)``: the core's report,
    ``where`` and ``own`` being the facade's filter and options (a vault's ``path``, ``tags``,
    ``per_note``); each facade defines it with its own words, so a word it lacks is a
    `TypeError` as for any call."""

    def _expansion_store(self) -> Store:
        """Return the store whose chunks `expand_context` joins (the facade's)."""
        raise NotImplementedError

    def _finished(
        self, report: SearchReport, expand_context: bool, context_window: int
    ) -> SearchReport:
        """Return the core's ``report`` as the facade gives it: with ``expand_context``, each
        hit joined to ``context_window`` neighbouring chunks a side (prev/next links)."""
        if not expand_context:
            return report
        return report.with_hits(expand_hits(self._expansion_store(), report, context_window))

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        where: Any = None,
        mode: str | None = None,
        ef_search: int | None = None,
        expand_context: bool = False,
        context_window: int = 1,
        rerank: bool | int = False,
    ) -> SearchReport:
        """Return the ``k`` best hits for ``query``, best first, and how they were found.

        ``where`` is a filter of the one grammar (docs/filters.md); ``mode`` ``keyword``,
        ``vector``, ``hybrid`` or ``rerank`` (None: the facade's default); ``ef_search`` (at
        least ``k``) widens an HNSW search; ``expand_context`` fills each hit's
        ``context_text`` with ``context_window`` neighbouring chunks a side. ``rerank`` (True:
        the first 30 hits; or a number) reorders them with the facade's cross-encoder
        (``reranker=`` when it was opened: `vrom.search.reranking`).
        """
        report = self._report(query, k, where, mode, ef_search=ef_search, rerank=rerank)
        return self._finished(report, expand_context, context_window)

    def context(
        self,
        query: str,
        max_tokens: int = 2000,
        k: int = 20,
        where: Any = None,
        *,
        mode: str | None = None,
        expand_context: bool = False,
        context_window: int = 1,
        include_sources: bool = True,
        relative_cutoff: float | None = RELATIVE_CUTOFF,
        **own: Any,
    ) -> Context:
        """Return LLM-ready text for a query: the best passages within ``max_tokens``, cited.

        The hits are the read half's (``where``, ``mode`` and the facade's own filter words in
        ``own``, such as a vault's ``path`` and ``tags``), before any view a facade gives its
        `search` (a collection's whole documents). ``expand_context`` joins each hit with
        ``context_window`` neighbouring chunks a side. Hits under ``relative_cutoff`` times the
        best score are left out, overlapping text is given once, and the budget is filled with
        the most relevant distinct text first (see `vrom.format_context`).
        """
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 50:
            raise ValidationError(
                f"max_tokens must be an integer of at least 50, not {shown(max_tokens)}"
            )
        hits = self._finished(
            self._report(query, k, where, mode, **own), expand_context, context_window
        )
        context = format_context(
            hits, max_tokens, include_sources, query, relative_cutoff=relative_cutoff
        )
        if hits and not context.sources:
            raise ValidationError(
                f"max_tokens={max_tokens} cannot hold one passage with its source: raise it"
            )
        return context
