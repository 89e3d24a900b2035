"""What an MCP tool answers: its data as structured content (bounded, `vrom.server.bounds`)
with a text summary, or a one-line error result for whatever the call raised."""

import json
import logging
from typing import Any

from mcp.types import CallToolResult, TextContent

from vrom._background_embedding import EmbeddingProgress
from vrom.errors import VromError
from vrom.results import FormatReport, SearchReport, to_jsonable
from vrom.search.context import CHANGED_ON_DISK
from vrom.server.bounds import MAX_HITS, PAGE_ITEMS, cut_lines, fitted, page


def json_result(value: Any) -> CallToolResult:
    """Return ``value`` as JSON data, cut to fit (`fitted`), as text and structured content."""
    data = to_jsonable(value)
    return json_reply(fitted(data if isinstance(data, dict) else {"results": data}))


def json_reply(structured: dict[str, Any]) -> CallToolResult:
    """Return data as it is (already bounded): structured content, and the same JSON as text."""
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(structured, ensure_ascii=False))],
        structured_content=structured,
    )


def search_reply(report: SearchReport, offset: int = 0, k: int = MAX_HITS) -> CallToolResult:
    """Return the hits from ``offset`` of a search report: the data once, as structured
    content without null fields (`page`: at most ``k`` hits, and what fits), and as text a
    one-line-per-hit summary (not the same data again, serialized) that says which hits'
    notes changed on disk since they were indexed."""
    data = page(to_jsonable(report, omit_empty=True), "results", offset, k)
    hits = report.results[offset : offset + len(data["results"])]
    how = f"{report.mode} search"
    if report.fallback:
        how += f" ({report.fallback})"
    lines = [
        f"{len(hits)} {'hit' if len(hits) == 1 else 'hits'}, {how};"
        f" {report.vectors}/{report.chunks} chunks have "
        "vectors (whole texts, hashes, times: structured content)"
    ]
    lines += [
        f"{rank}. {hit.path} › {hit.heading_path} "
        f"(chunk {hit.chunk_id}, {hit.score_kind or 'score'} {hit.score:.3g}"
        f"{f', stale since {hit.stale_after}' if hit.stale else ''}"
        f"{'' if hit.fresh is not False else f'; {CHANGED_ON_DISK}: vault_reindex'}): "
        f"{_shortened(hit.excerpt)}"
        for rank, hit in enumerate(hits, start=offset + 1)
    ]
    lines += cut_lines(data)
    return CallToolResult(
        content=[TextContent(type="text", text="\n".join(lines))], structured_content=data
    )


FORMAT_LINES = 50
"""How many notes of its page the text of a ``vault_format`` reply names (those with something
to say); every note of the page is in the structured content."""


def format_reply(report: FormatReport, offset: int = 0, limit: int = PAGE_ITEMS) -> CallToolResult:
    """Return a format report with the notes from ``offset``: the data once, as structured
    content without empty fields (`page`: ``limit`` notes, and what fits; the counts are of
    every note), and as text a summary and a line per note of the page with an error, a
    warning or a field to add."""
    data = page(to_jsonable(report, omit_empty=True), "notes", offset, limit)
    counts = ", ".join(f"{count} {kind}" for kind, count in report.formats.items() if count)
    summary = (
        f"{len(report.notes)} notes checked against OKF v{report.okf_version} ({counts or 'none'}):"
        f" {report.errors} errors, {report.warnings} warnings"
    )
    if report.applied:
        summary += f"; {report.enriched} notes enriched"
    elif report.action == "enrich":
        summary += f"; {report.enrichable} notes can be enriched (apply: true writes it)"
    lines = [summary]
    shown = report.notes[offset : offset + len(data["notes"])]
    telling = [n for n in shown if n.errors or n.warnings or n.enrichment]
    for note in telling[:FORMAT_LINES]:
        parts = [f"error {i.code}: {i.message}" for i in note.errors]
        parts += [f"warning {i.code}: {i.message}" for i in note.warnings]
        parts += [f"{'added' if note.enriched else 'add'} {e.field}" for e in note.enrichment]
        lines.append(f"{note.path} ({note.format}): " + "; ".join(parts))
    if len(telling) > FORMAT_LINES:
        lines.append(f"… and {len(telling) - FORMAT_LINES} more notes (structured content)")
    lines += cut_lines(data)
    return CallToolResult(
        content=[TextContent(type="text", text="\n".join(lines))], structured_content=data
    )


SUMMARY_EXCERPT_CHARS = 90
"""How much of each hit's excerpt the text summary shows: enough for a model that reads only
the text to see why a hit matched; the whole chunk is in the structured content."""


def _shortened(excerpt: str) -> str:
    """Return an excerpt cut at a word to `SUMMARY_EXCERPT_CHARS` (with … when cut)."""
    if len(excerpt) <= SUMMARY_EXCERPT_CHARS:
        return excerpt
    return excerpt[:SUMMARY_EXCERPT_CHARS].rsplit(" ", 1)[0].rstrip(" .,;:…") + "…"


def error_reply(message: str) -> CallToolResult:
    """Return an error result saying ``message`` in one line."""
    return CallToolResult(
        content=[TextContent(type="text", text=" ".join(message.split()))], is_error=True
    )


_logger = logging.getLogger("vrom.server")

ERROR_PATH_CHARS = 80
"""How much of a file name an error message quotes (a path can be thousands of characters)."""


def failure_reply(tool: str, exc: Exception) -> CallToolResult:
    """Return the error result of a tool call that raised ``exc``: a `VromError`'s own message;
    for a file the system refused (`OSError`: a name too long, a permission), what and where; for
    anything else (a bug) a line naming it, its traceback logged, never the SDK's bare "Error
    executing tool"."""
    if isinstance(exc, VromError):
        return error_reply(str(exc))
    if isinstance(exc, OSError):
        where = "" if exc.filename is None else f" on {_quoted_path(str(exc.filename))}"
        return error_reply(f"{tool} failed{where}: {exc.strerror or type(exc).__name__}")
    _logger.exception("%s failed unexpectedly", tool)
    return error_reply(
        f"{tool} failed unexpectedly ({type(exc).__name__}): this is a bug in vrom; "
        "the server's log has the traceback"
    )


def _quoted_path(path: str) -> str:
    if len(path) > ERROR_PATH_CHARS:
        path = f"{path[: ERROR_PATH_CHARS // 2]}…{path[-ERROR_PATH_CHARS // 2 :]}"
    return repr(path)


CLI_EMBED_ADVICE = ": run 'vrom embed'"
"""Where the engine's message about missing vectors turns to advice for a CLI user."""


def while_embedding(message: str, progress: EmbeddingProgress | None, meanwhile: str) -> str:
    """Return ``message``, whose advice to run 'vrom embed' is, while the server embeds in the
    background, replaced by how far it has got and ``meanwhile`` (what happens or to do)."""
    if progress is None or not progress.running or CLI_EMBED_ADVICE not in message:
        return message
    left = (
        f", about {round(progress.eta_seconds):,} s left"
        if progress.eta_seconds is not None
        else ""
    )
    return (
        f"{message.partition(CLI_EMBED_ADVICE)[0]}: the server is embedding them in the background"
        f" ({progress.vectors:,} of {progress.chunks:,} chunks have vectors{left}); {meanwhile}"
        " (vault_stats shows how far it is)"
    )
