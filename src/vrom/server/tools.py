"""The MCP tools and resources over a vault: each parses, calls the SDK, and returns JSON.

(No ``from __future__ import annotations`` here: the SDK reads each tool function's annotations
to build its input schema, and needs them as objects.)
"""

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp.types import CallToolResult
from pydantic import Field

from vrom._background_embedding import EmbeddingProgress
from vrom.errors import ValidationError
from vrom.results import FormatReport, SearchReport, to_jsonable
from vrom.server.bounds import (
    BODY_CHARS,
    CONTEXT_TOKENS,
    MAX_HITS,
    MAX_OFFSET,
    PAGE_ITEMS,
    Limit,
    Offset,
    body_page,
    page,
)
from vrom.server.declared import (
    READ,
    REWRITE,
    UPDATE,
    WRITE,
    BacklinksReply,
    ContextReply,
    DeleteReply,
    FolderReply,
    FormatReply,
    FrontmatterReply,
    IndexReply,
    LinksReply,
    NoteReply,
    RelatedReply,
    SearchReply,
    StatsReply,
    TagsReply,
    WriteReply,
    tool,
    where_argument,
)
from vrom.server.replies import (
    failure_reply,
    format_reply,
    json_reply,
    json_result,
    search_reply,
    while_embedding,
)
from vrom.server.state import ServerState, client_roots
from vrom.server.watch import OFF
from vrom.vault import Vault

T = TypeVar("T")


NotePath = Annotated[
    str,
    Field(
        description="A note's path relative to the vault root (e.g. 'Projects/Atlas.md'); "
        "for reading, a note name or id also works"
    ),
]
SearchMode = Annotated[
    Literal["hybrid", "keyword", "vector", "rerank"] | None,
    Field(description="hybrid (default with a model), keyword, vector or rerank"),
]
NoteFilter = Annotated[
    dict[str, Any] | None,
    where_argument("the notes' frontmatter", '{"status": "done", "year": {"$gte": 2020}}'),
]
PathPrefix = Annotated[str | None, Field(description="Only notes under this folder or path prefix")]
TagsHeld = Annotated[
    list[str] | None,
    Field(description="Only notes holding every one of these tags (nested tags match)"),
]
Rerank = Annotated[
    bool,
    Field(
        description="Reorder the first 30 hits with the server's cross-encoder "
        "(vrom mcp --reranker); an error when it has none"
    ),
]
"""The search arguments `vault_search` and `vault_context` share (`vault_recall` too:
``rerank``)."""


Progress = tuple[float, float | None, str]
"""What a progress notification says: done, total (None: unknown), and a message."""

PROGRESS_SECONDS = 0.5
"""How often a waiting tool call looks at its progress (it reports only a change)."""


async def call_on_vault(
    state: ServerState,
    ctx: Context,
    work: Callable[[Vault], Any],
    progress: Callable[[], Progress | None] | None = None,
    reply: Callable[[Any], CallToolResult] = json_result,
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


def _embedding(state: ServerState) -> EmbeddingProgress | None:
    return None if state.embedding is None else state.embedding.progress()


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

    def _said_while_embedding(report: SearchReport) -> SearchReport:
        if report.fallback is None:
            return report
        meanwhile = "this searched by keyword meanwhile"
        said = while_embedding(report.fallback, _embedding(state), meanwhile)
        return dataclasses.replace(report, fallback=said)

    @tool(server, READ)
    async def vault_search(
        query: Annotated[str, Field(description="What to look for: words, a question, a phrase")],
        ctx: Context,
        mode: SearchMode = None,
        k: Annotated[
            int,
            Field(ge=1, le=MAX_HITS, description="How many notes (chunks, with chunks=true)"),
        ] = 10,
        where: NoteFilter = None,
        path: PathPrefix = None,
        tags: TagsHeld = None,
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
        offset: Annotated[
            int, Field(ge=0, le=MAX_OFFSET, description="Skip this many hits: the next page")
        ] = 0,
        rerank: Rerank = False,
    ) -> SearchReply:
        """Search the notes by meaning and keywords; each hit cites path, heading, chunk, hash.

        By default the hits are k distinct notes, each with its best chunk; chunks=true gives
        the k best chunks, several of one note among them. The structured reply has the hits
        (`results`: path, heading_path, chunk_id, text, excerpt, content_hash, modified_unix,
        `fresh`: false when the note changed on disk since indexing, scores, metadata, and
        `stale` with `stale_after` when the note's OKF stale_after has passed), the `mode` that
        ran, the reason it fell back to keyword (`fallback`, only when it did: no model, or no
        vector yet) and how many `vectors` of the `chunks` exist; null fields are left out. The
        text reply is a one-line-per-hit summary. Hits that do not fit a reply are cut; `cut`
        says how many and the offset of the next page.
        """
        return await call_on_vault(
            state,
            ctx,
            lambda vault: vault.search(
                query,
                k=offset + k,
                where=where,
                mode=mode,
                path=path,
                tags=tags,
                expand_context=expand_context,
                per_note=not chunks,
                fallback=True,
                rerank=rerank,
            ),
            reply=lambda report: search_reply(_said_while_embedding(report), offset, k),
        )

    @tool(server, READ)
    async def vault_context(
        query: Annotated[str, Field(description="The question to gather context for")],
        ctx: Context,
        max_tokens: Annotated[int, Field(ge=50, le=CONTEXT_TOKENS)] = 2000,
        expand_context: bool = False,
        mode: SearchMode = None,
        where: NoteFilter = None,
        path: PathPrefix = None,
        tags: TagsHeld = None,
        rerank: Rerank = False,
    ) -> ContextReply:
        """Return the best passages for a question within a token budget, each with its source.

        The passages come from the hits vault_search would give for the same query, mode,
        filters (where, path, tags) and rerank; a mode by meaning that cannot run falls back to
        keyword."""
        return await call_on_vault(
            state,
            ctx,
            lambda vault: vault.context(
                query,
                max_tokens=max_tokens,
                where=where,
                mode=mode,
                expand_context=expand_context,
                path=path,
                tags=tags,
                fallback=True,
                rerank=rerank,
            ),
        )

    @tool(server, READ)
    async def vault_read(
        path: NotePath,
        ctx: Context,
        offset: Annotated[
            int, Field(ge=0, description="The body's first character to return (0: its start)")
        ] = 0,
        limit: Annotated[
            int, Field(ge=1, le=BODY_CHARS, description="How many characters of the body")
        ] = BODY_CHARS,
    ) -> NoteReply:
        """Read a note: frontmatter, body, headings, tags and links.

        A long body comes a page at a time: `cut` says how many characters of how many were
        returned and the offset of the next page."""

        def read(vault: Vault) -> dict[str, Any]:
            note: dict[str, Any] = to_jsonable(vault.get_note(path, purpose="read"))
            return body_page(note, offset, limit)

        return await call_on_vault(state, ctx, read, reply=json_reply)

    @tool(server, REWRITE)
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
    ) -> FrontmatterReply:
        """Read a note's YAML frontmatter, or set (merge) keys in it; the body is untouched."""

        def frontmatter(vault: Vault) -> Any:
            if set is None:
                note = vault.get_note(path, purpose="read")
            else:
                note = state.written(vault.set_frontmatter(path, set, merge=merge))
            return {"path": note.path, "frontmatter": note.frontmatter}

        return await call_on_vault(state, ctx, frontmatter)

    @tool(server, READ)
    async def vault_list(
        ctx: Context,
        folder: Annotated[str, Field(description="A folder relative to the vault root")] = "",
        offset: Offset = 0,
        limit: Limit = PAGE_ITEMS,
    ) -> FolderReply:
        """List a folder: its notes (a page at a time: `cut` says what follows) and its
        subfolders."""

        def listing(vault: Vault) -> dict[str, Any]:
            return page(to_jsonable(vault.list_folder(folder)), "notes", offset, limit)

        return await call_on_vault(state, ctx, listing, reply=json_reply)

    @tool(server, READ)
    async def vault_wikilinks(
        path: NotePath, ctx: Context, offset: Offset = 0, limit: Limit = PAGE_ITEMS
    ) -> LinksReply:
        """List the links a note makes, each with the note it resolves to (or null), a page at a
        time (`cut` says what follows)."""

        def links(vault: Vault) -> dict[str, Any]:
            related = vault.related(path, purpose="read")
            data = to_jsonable({"note": related.note, "links": related.links})
            return page(data, "links", offset, limit)

        return await call_on_vault(state, ctx, links, reply=json_reply)

    @tool(server, READ)
    async def vault_backlinks(
        path: NotePath, ctx: Context, offset: Offset = 0, limit: Limit = PAGE_ITEMS
    ) -> BacklinksReply:
        """List the notes that link to a note, a page at a time (`cut` says what follows)."""

        def backlinks(vault: Vault) -> dict[str, Any]:
            related = vault.related(path, purpose="read")
            data = to_jsonable({"note": related.note, "backlinks": related.backlinks})
            return page(data, "backlinks", offset, limit)

        return await call_on_vault(state, ctx, backlinks, reply=json_reply)

    @tool(server, READ)
    async def vault_related(
        path: NotePath, ctx: Context, k: Annotated[int, Field(ge=1, le=100)] = 20
    ) -> RelatedReply:
        """Notes related to a note: its links, backlinks, shared tags and similar notes."""

        return await call_on_vault(
            state, ctx, lambda vault: vault.related(path, k=k, purpose="read")
        )

    @tool(server, READ)
    async def vault_tags(
        ctx: Context,
        tag: Annotated[
            str | None, Field(description="A tag: list its notes (nested tags included)")
        ] = None,
    ) -> TagsReply:
        """All tags with their note counts, or the notes carrying one tag."""
        if tag is None:
            return await call_on_vault(state, ctx, lambda vault: {"tags": vault.tags()})
        return await call_on_vault(
            state, ctx, lambda vault: {"tag": tag, "notes": vault.notes_with_tag(tag)}
        )

    @tool(server, READ)
    async def vault_stats(ctx: Context) -> StatsReply:
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

    @tool(server, WRITE)
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
    ) -> WriteReply:
        """Create, overwrite or append to a note (written atomically, re-indexed at once)."""
        return await call_on_vault(
            state,
            ctx,
            lambda vault: state.written(
                vault.write_note(path, content, mode=mode, frontmatter=frontmatter)
            ),
        )

    @tool(server, REWRITE)
    async def vault_delete(
        path: NotePath,
        ctx: Context,
        permanent: Annotated[
            bool, Field(description="Delete for good instead of moving to the vault's .trash/")
        ] = False,
    ) -> DeleteReply:
        """Delete a note: moved to the vault's .trash/ folder unless permanent."""
        return await call_on_vault(
            state, ctx, lambda vault: state.written(vault.delete_note(path, permanent=permanent))
        )

    @tool(server, REWRITE)
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
        offset: Offset = 0,
        limit: Limit = PAGE_ITEMS,
    ) -> FormatReply:
        """Check notes against OKF v0.2 (the Open Knowledge Format) or enrich their frontmatter.

        Each note gets its `format` (okf_concept, okf_index, okf_log, obsidian: frontmatter
        without a type, markdown: none) with `errors` (what OKF says MUST hold) and `warnings`
        (SHOULD); enrich adds the fields it lacks (`enrichment`: field, value, source), written
        only with apply (existing fields are kept). The counts cover every note; the reply
        lists a page of them (`cut` says what follows). The text reply is a summary.
        """

        def run(vault: Vault) -> FormatReport:
            if action == "check":
                if apply:
                    raise ValidationError("apply writes enrichment: use it with action 'enrich'")
                return vault.check_format(path)
            report = vault.enrich_format(path, apply=apply)
            return state.written(report) if apply else report

        return await call_on_vault(
            state, ctx, run, reply=lambda report: format_reply(report, offset, limit)
        )

    @tool(server, UPDATE)
    async def vault_reindex(
        ctx: Context,
        paths: Annotated[
            list[str] | None, Field(description="Only these notes; omit for the whole vault")
        ] = None,
        force: Annotated[bool, Field(description="Rewrite every note")] = False,
    ) -> IndexReply:
        """Bring the keyword index up to date with the files (changed notes only, unless force);
        new chunks get their vectors in the background (see vault_stats)."""
        return await call_on_vault(
            state,
            ctx,
            lambda vault: state.reindex(vault, paths, force=force),
            None if paths else state_progress(state),
        )
