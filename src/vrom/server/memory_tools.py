"""The MCP tools over the agent's memories (kept in the served vault's store).

(No ``from __future__ import annotations``: the SDK reads the tool functions' annotations.)
"""

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from vrom.server.declared import (
    ADD,
    READ,
    UPDATE,
    MemoryReply,
    MemoryStatsReply,
    RecallReply,
    tool,
    where_argument,
)
from vrom.server.state import ServerState
from vrom.server.tools import Rerank, call_on_vault


def register_memory_tools(server: MCPServer, state: ServerState) -> None:
    """Add the memory tools (``vault_remember``, ``vault_recall``, ``vault_memory_stats``,
    ``vault_memory_archive``) to ``server``."""

    @tool(server, ADD)
    async def vault_remember(
        title: Annotated[str, Field(description="One line: what this memory is about")],
        content: Annotated[str, Field(description="The memory itself (up to 20,000 characters)")],
        ctx: Context,
        type: Annotated[
            str,
            Field(description="note, decision, fact, preference, todo, observation (or a word)"),
        ] = "note",
        project: Annotated[str | None, Field(description="The project it belongs to")] = None,
        tags: list[str] | None = None,
        related: Annotated[
            list[str] | None, Field(description="Paths of notes this memory relates to")
        ] = None,
        source: Annotated[
            str | None,
            Field(
                description="Where it came from. A conversation's id makes its memories turns: "
                "each is embedded with the two remembered before it from that source"
            ),
        ] = None,
        timestamp: Annotated[
            str | None,
            Field(description="When it happened, if not now: ISO 8601 or '8 May, 2023'"),
        ] = None,
    ) -> MemoryReply:
        """Remember something across sessions; returns the memory with its id."""
        return await call_on_vault(
            state,
            ctx,
            lambda vault: vault.memories.remember(
                title,
                content,
                type=type,
                project=project,
                tags=tags or (),
                related=related or (),
                source=source,
                timestamp=timestamp,
            ),
        )

    @tool(server, READ)
    async def vault_recall(
        query: Annotated[str, Field(description="What to recall: words or a question")],
        ctx: Context,
        k: Annotated[int, Field(ge=1, le=50)] = 5,
        project: str | None = None,
        type: str | None = None,
        status: Literal["active", "archived", "superseded", "any"] = "active",
        since: Annotated[
            str | None,
            Field(description="Only memories from this date or time on (ISO 8601, or a year)"),
        ] = None,
        until: Annotated[
            str | None,
            Field(description="Only memories up to this date or time (ISO 8601, or a year)"),
        ] = None,
        half_life_days: Annotated[
            float | None,
            Field(gt=0, description="Favour recent memories: a score halves every this many days"),
        ] = None,
        mode: Annotated[
            Literal["hybrid", "keyword", "vector"] | None,
            Field(description="hybrid (default with a model), keyword or vector"),
        ] = None,
        where: Annotated[
            dict[str, Any] | None,
            where_argument(
                "project, type, status, source, tags and the dates created and updated",
                '{"type": {"$in": ["decision", "fact"]}, "created": {"$gte": "2026-01-01"}}',
            ),
        ] = None,
        rerank: Rerank = False,
    ) -> RecallReply:
        """Recall memories by meaning and keywords, best first."""
        return await call_on_vault(
            state,
            ctx,
            lambda vault: vault.memories.recall(
                query,
                k=k,
                project=project,
                type=type,
                status=status,
                since=since,
                until=until,
                half_life_days=half_life_days,
                mode=mode,
                where=where,
                rerank=rerank,
            ),
        )

    @tool(server, READ)
    async def vault_memory_stats(ctx: Context) -> MemoryStatsReply:
        """Count memories by status, type and project."""
        return await call_on_vault(state, ctx, lambda vault: vault.memories.stats())

    @tool(server, UPDATE)
    async def vault_memory_archive(
        id: Annotated[str, Field(description="The memory's id (mem_...)")],
        ctx: Context,
        status: Literal["archived", "superseded"] = "archived",
        superseded_by: Annotated[
            str | None, Field(description="With status superseded: the memory that replaces it")
        ] = None,
    ) -> MemoryReply:
        """Retire a memory: archived, or superseded by a newer one."""
        return await call_on_vault(
            state,
            ctx,
            lambda vault: vault.memories.archive(id, status=status, superseded_by=superseded_by),
        )
