"""The MCP tools and resources over a vault: each parses, calls the SDK, and returns JSON.

(No ``from __future__ import annotations`` here: the SDK reads each tool function's annotations
to build its input schema, and needs them as objects.)
"""

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from vrom.errors import ValidationError, VromError
from vrom.results import FormatReport, SearchReport, to_jsonable
from vrom.search.context import CHANGED_ON_DISK
from vrom.server.state import ServerState, client_roots
from vrom.server.watch import OFF
from vrom.vault import Vault

T = TypeVar("T")

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)

NotePath = Annotated[
    str,
    Field(
        description="A note's path relative to the vault root (e.g. 'Projects/Atlas.md'); "
        "for reading, a note name or id also works"
    ),
]


def _result(value: Any) -> CallToolResult:
    data = to_jsonable(value)
    structured = data if isinstance(data, dict) else {"results": data}
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(structured, ensure_ascii=False))],
        structured_content=structured,
    )


def _search_reply(report: SearchReport) -> CallToolResult:
    """Return a search report: the data once, as structured content without null fields, and
    as text a one-line-per-hit summary (not the same data again, serialized) that says which
    hits' notes changed on disk since they were indexed."""
    how = f"{report.mode} search"
    if report.fallback:
        how += f" ({report.fallback})"
    lines = [
        f"{len(report.results)} hits, {how}; {report.vectors}/{report.chunks} chunks have "
        "vectors (whole texts, hashes, times: structured content)"
    ]
    lines += [
        f"{rank}. {hit.path} › {hit.heading_path} "
        f"(chunk {hit.chunk_id}, {hit.score_kind or 'score'} {hit.score:.3g}"
        f"{f', stale since {hit.stale_after}' if hit.stale else ''}"
        f"{'' if hit.fresh is not False else f'; {CHANGED_ON_DISK}: vault_reindex'}): "
        f"{_shortened(hit.excerpt)}"
        for rank, hit in enumerate(report.results, start=1)
    ]
    return CallToolResult(
        content=[TextContent(type="text", text="\n".join(lines))],
        structured_content=to_jsonable(report, omit_empty=True),
    )


FORMAT_LINES = 50
"""How many notes the text of a ``vault_format`` reply names (those with something to say);
every note is in the structured content."""


def _format_reply(report: FormatReport) -> CallToolResult:
    """Return a format report: the data once, as structured content without empty fields, and
    as text a summary and a line per note with an error, a warning or a field to add."""
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
    telling = [n for n in report.notes if n.errors or n.warnings or n.enrichment]
    for note in telling[:FORMAT_LINES]:
        parts = [f"error {i.code}: {i.message}" for i in note.errors]
        parts += [f"warning {i.code}: {i.message}" for i in note.warnings]
        parts += [f"{'added' if note.enriched else 'add'} {e.field}" for e in note.enrichment]
        lines.append(f"{note.path} ({note.format}): " + "; ".join(parts))
    if len(telling) > FORMAT_LINES:
        lines.append(f"… and {len(telling) - FORMAT_LINES} more notes (structured content)")
    return CallToolResult(
        content=[TextContent(type="text", text="\n".join(lines))],
        structured_content=to_jsonable(report, omit_empty=True),
    )


SUMMARY_EXCERPT_CHARS = 90
"""How much of each hit's excerpt the text summary shows: enough for a model that reads only
the text to see why a hit matched; the whole chunk is in the structured content."""


def _shortened(excerpt: str) -> str:
    """Return an excerpt cut at a word to `SUMMARY_EXCERPT_CHARS` (with … when cut)."""
    if len(excerpt) <= SUMMARY_EXCERPT_CHARS:
        return excerpt
    return excerpt[:SUMMARY_EXCERPT_CHARS].rsplit(" ", 1)[0].rstrip(" .,;:…") + "…"


def _error(message: str) -> CallToolResult:
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
        return _error(str(exc))
    if isinstance(exc, OSError):
        where = "" if exc.filename is None else f" on {_quoted_path(str(exc.filename))}"
        return _error(f"{tool} failed{where}: {exc.strerror or type(exc).__name__}")
    _logger.exception("%s failed unexpectedly", tool)
    return _error(
        f"{tool} failed unexpectedly ({type(exc).__name__}): this is a bug in vrom; "
        "the server's log has the traceback"
    )


def _quoted_path(path: str) -> str:
    if len(path) > ERROR_PATH_CHARS:
        path = f"{path[: ERROR_PATH_CHARS // 2]}…{path[-ERROR_PATH_CHARS // 2 :]}"
    return repr(path)


Progress = tuple[float, float | None, str]
"""What a progress notification says: done, total (None: unknown), and a message."""

PROGRESS_SECONDS = 0.5
"""How often a waiting tool call looks at its progress (it reports only a change)."""


async def call_on_vault(
    state: ServerState,
    ctx: Context,
    work: Callable[[Vault], Any],
    progress: Callable[[], Progress | None] | None = None,
    reply: Callable[[Any], CallToolResult] = _result,
) -> CallToolResult:
    """Run ``work`` on the served vault in a worker thread and return ``reply(value)`` (by
    default JSON, as text and structured content); whatever it raises is a one-line error
    result (`failure_reply`). Every tool runs through here, so none answers with a traceback.

    A client that sent a progress token hears how the wait for the keyword index goes (when
    the vault is still being opened) and, with ``progress``, how ``work`` goes.
    """
    try:
        opening = state.vault(client_roots(ctx.session))
        vault = await (opening if state.ready else _reporting(ctx, opening, state_progress(state)))
        running = asyncio.to_thread(state.run, work, vault)
        value = await (running if progress is None else _reporting(ctx, running, progress))
        return reply(value)
    except Exception as exc:
        return failure_reply(_tool_name(ctx), exc)


def _tool_name(ctx: Context) -> str:
    """Return the name of the tool a call asked for (as the request's params say it)."""
    name = (ctx.request_context.params or {}).get("name")
    return name if isinstance(name, str) else "the tool call"


async def _reporting(
    ctx: Context, work: Awaitable[T], progress: Callable[[], Progress | None]
) -> T:
    """Await ``work``, sending the client ``progress()`` whenever it has grown, the last
    state included; without a progress token in the request, just await it."""
    if progress_token_from_params(ctx.request_context.params) is None:
        return await work
    task = asyncio.ensure_future(work)
    sent: float | None = None
    while True:
        finished, _ = await asyncio.wait({task}, timeout=PROGRESS_SECONDS)
        now = progress()
        if now is not None and (sent is None or now[0] > sent):  # progress must grow
            await ctx.report_progress(*now)
            sent = now[0]
        if finished:
            return task.result()


def state_progress(state: ServerState) -> Callable[[], Progress | None]:
    """Return a reader of the vault's indexing progress, as a progress notification says it."""

    def read() -> Progress | None:
        indexing = state.indexing
        if indexing is None:
            return None
        return (
            indexing.done,
            indexing.total,
            f"indexing the vault by keyword: {indexing.done}/{indexing.total} files",
        )

    return read


def register_vault_tools(server: MCPServer, state: ServerState) -> None:
    """Add the ``vault_*`` tools to ``server``."""

    @server.tool(annotations=READ)
    async def vault_search(
        query: Annotated[str, Field(description="What to look for: words, a question, a phrase")],
        ctx: Context,
        mode: Annotated[
            Literal["hybrid", "keyword", "vector", "rerank"] | None,
            Field(description="hybrid (default with a model), keyword, vector or rerank"),
        ] = None,
        k: Annotated[
            int, Field(ge=1, le=50, description="How many notes (chunks, with chunks=true)")
        ] = 10,
        where: Annotated[
            dict[str, Any] | None,
            Field(
                description="Filter: {'path': 'Projects/', 'tags': ['a'], 'status': 'done', "
                "'year': {'$gte': 2020}}"
            ),
        ] = None,
        expand_context: Annotated[
            bool, Field(description="Add each hit's neighbouring chunks as context_text")
        ] = False,
        chunks: Annotated[
            bool,
            Field(
                description="Chunk-level hits: a note's several matching chunks each "
                "(default: k distinct notes, each with its best chunk)"
            ),
        ] = False,
    ) -> CallToolResult:
        """Search the notes by meaning and keywords; each hit cites path, heading, chunk, hash.

        By default the hits are k distinct notes, each with its best chunk; chunks=true gives
        the k best chunks, several of one note among them. The structured reply has the hits
        (`results`: path, heading_path, chunk_id, text, excerpt, content_hash, modified_unix,
        `fresh`: false when the note changed on disk since indexing, scores, metadata, and
        `stale` with `stale_after` when the note's OKF stale_after has passed), the `mode` that
        ran, the reason it fell back to keyword (`fallback`, only when it did: no model, or no
        vector yet) and how many `vectors` of the `chunks` exist; null fields are left out. The
        text reply is a one-line-per-hit summary.
        """
        return await call_on_vault(
            state,
            ctx,
            lambda vault: vault.search_report(
                query,
                k=k,
                where=where,
                mode=mode,
                expand_context=expand_context,
                per_note=not chunks,
            ),
            reply=_search_reply,
        )

    @server.tool(annotations=READ)
    async def vault_context(
        query: Annotated[str, Field(description="The question to gather context for")],
        ctx: Context,
        max_tokens: Annotated[int, Field(ge=50, le=50_000)] = 2000,
        expand_context: bool = False,
    ) -> CallToolResult:
        """Return the best passages for a question within a token budget, each with its source."""
        return await call_on_vault(
            state,
            ctx,
            lambda vault: vault.context(
                query, max_tokens=max_tokens, expand_context=expand_context
            ),
        )

    @server.tool(annotations=READ)
    async def vault_read(path: NotePath, ctx: Context) -> CallToolResult:
        """Read a note: frontmatter, body, headings, tags and links."""

        return await call_on_vault(state, ctx, lambda vault: vault.get_note(path, purpose="read"))

    @server.tool(annotations=WRITE)
    async def vault_frontmatter(
        path: NotePath,
        ctx: Context,
        set: Annotated[
            dict[str, Any] | None,
            Field(description="Keys to write; omit to only read the frontmatter"),
        ] = None,
        merge: Annotated[
            bool, Field(description="Keep keys not in 'set' (false replaces the frontmatter)")
        ] = True,
    ) -> CallToolResult:
        """Read a note's YAML frontmatter, or set (merge) keys in it; the body is untouched."""

        def frontmatter(vault: Vault) -> Any:
            if set is None:
                note = vault.get_note(path, purpose="read")
            else:
                note = state.written(vault.set_frontmatter(path, set, merge=merge))
            return {"path": note.path, "frontmatter": note.frontmatter}

        return await call_on_vault(state, ctx, frontmatter)

    @server.tool(annotations=READ)
    async def vault_list(
        ctx: Context,
        folder: Annotated[str, Field(description="A folder relative to the vault root")] = "",
    ) -> CallToolResult:
        """List a folder: its notes and its subfolders."""
        return await call_on_vault(state, ctx, lambda vault: vault.list_folder(folder))

    @server.tool(annotations=READ)
    async def vault_wikilinks(path: NotePath, ctx: Context) -> CallToolResult:
        """List the links a note makes, each with the note it resolves to (or null)."""

        def links(vault: Vault) -> Any:
            related = vault.related(path, purpose="read")
            return {"note": related.note, "links": related.links}

        return await call_on_vault(state, ctx, links)

    @server.tool(annotations=READ)
    async def vault_backlinks(path: NotePath, ctx: Context) -> CallToolResult:
        """List the notes that link to a note."""

        def backlinks(vault: Vault) -> Any:
            related = vault.related(path, purpose="read")
            return {"note": related.note, "backlinks": related.backlinks}

        return await call_on_vault(state, ctx, backlinks)

    @server.tool(annotations=READ)
    async def vault_related(
        path: NotePath, ctx: Context, k: Annotated[int, Field(ge=1, le=100)] = 20
    ) -> CallToolResult:
        """Notes related to a note: its links, backlinks, shared tags and similar notes."""

        return await call_on_vault(
            state, ctx, lambda vault: vault.related(path, k=k, purpose="read")
        )

    @server.tool(annotations=READ)
    async def vault_tags(
        ctx: Context,
        tag: Annotated[
            str | None, Field(description="A tag: list its notes (nested tags included)")
        ] = None,
    ) -> CallToolResult:
        """All tags with their note counts, or the notes carrying one tag."""
        if tag is None:
            return await call_on_vault(state, ctx, lambda vault: {"tags": vault.tags()})
        return await call_on_vault(
            state, ctx, lambda vault: {"tag": tag, "notes": vault.notes_with_tag(tag)}
        )

    @server.tool(annotations=READ)
    async def vault_stats(ctx: Context) -> CallToolResult:
        """Counts and sizes: notes, chunks, links, tags, vectors, the store's path and model,
        how far background embedding has got (with chunks/s and the time left), and whether
        notes edited on disk are re-indexed (the watcher: running, restarting or stopped, and
        why)."""

        def stats(vault: Vault) -> dict[str, Any]:
            embedding = None if state.embedding is None else state.embedding.progress()
            watcher = OFF if state.watcher is None else state.watcher.status()
            return {
                **to_jsonable(vault.stats()),
                "embedding": to_jsonable(embedding),
                "watcher": to_jsonable(watcher),
            }

        return await call_on_vault(state, ctx, stats)

    @server.tool(annotations=DESTRUCTIVE)
    async def vault_write(
        path: NotePath,
        content: Annotated[str, Field(description="Markdown text (without frontmatter)")],
        ctx: Context,
        mode: Annotated[
            Literal["create", "overwrite", "append"],
            Field(description="create (fails if it exists), overwrite, or append"),
        ] = "create",
        frontmatter: Annotated[
            dict[str, Any] | None, Field(description="Keys to merge into the frontmatter")
        ] = None,
    ) -> CallToolResult:
        """Create, overwrite or append to a note (written atomically, re-indexed at once)."""
        return await call_on_vault(
            state,
            ctx,
            lambda vault: state.written(
                vault.write_note(path, content, mode=mode, frontmatter=frontmatter)
            ),
        )

    @server.tool(annotations=DESTRUCTIVE)
    async def vault_delete(
        path: NotePath,
        ctx: Context,
        permanent: Annotated[
            bool, Field(description="Delete for good instead of moving to the vault's .trash/")
        ] = False,
    ) -> CallToolResult:
        """Delete a note: moved to the vault's .trash/ folder unless permanent."""
        return await call_on_vault(
            state, ctx, lambda vault: state.written(vault.delete_note(path, permanent=permanent))
        )

    @server.tool(annotations=WRITE)
    async def vault_format(
        ctx: Context,
        path: Annotated[
            str | None,
            Field(description="A note or folder relative to the vault root; omit for all notes"),
        ] = None,
        action: Annotated[
            Literal["check", "enrich"],
            Field(
                description="check: each note's format and what breaks OKF v0.2; enrich: also "
                "the frontmatter each note lacks (type, title, description, tags, timestamp)"
            ),
        ] = "check",
        apply: Annotated[
            bool,
            Field(description="With enrich: write the fields, merged into each note's frontmatter"),
        ] = False,
    ) -> CallToolResult:
        """Check notes against OKF v0.2 (the Open Knowledge Format) or enrich their frontmatter.

        Each note gets its `format` (okf_concept, okf_index, okf_log, obsidian: frontmatter
        without a type, markdown: none) with `errors` (what OKF says MUST hold) and `warnings`
        (SHOULD); enrich adds the fields it lacks (`enrichment`: field, value, source), written
        only with apply (existing fields are kept). The text reply is a summary.
        """

        def run(vault: Vault) -> FormatReport:
            if action == "check":
                if apply:
                    raise ValidationError("apply writes enrichment: use it with action 'enrich'")
                return vault.check_format(path)
            report = vault.enrich_format(path, apply=apply)
            return state.written(report) if apply else report

        return await call_on_vault(state, ctx, run, reply=_format_reply)

    @server.tool(annotations=WRITE)
    async def vault_reindex(
        ctx: Context,
        paths: Annotated[
            list[str] | None, Field(description="Only these notes; omit for the whole vault")
        ] = None,
        force: Annotated[bool, Field(description="Rewrite every note")] = False,
    ) -> CallToolResult:
        """Bring the keyword index up to date with the files (changed notes only, unless force);
        new chunks get their vectors in the background (see vault_stats)."""
        return await call_on_vault(
            state,
            ctx,
            lambda vault: state.reindex(vault, paths, force=force),
            None if paths else state_progress(state),
        )
