"""MCP prompts: ready-made requests a user picks in their client, filled from the vault.

(No ``from __future__ import annotations`` here: the SDK reads each prompt function's
annotations to build its arguments.)
"""

import asyncio
from typing import Annotated

from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS
from pydantic import Field

from vrom.errors import ValidationError, VromError
from vrom.results import Context as VaultContext
from vrom.server.base import VromMCPServer
from vrom.server.state import ServerState, client_roots
from vrom.vault import Vault

SUMMARY_TOKENS = 3000
"""How many tokens of passages a summary prompt carries."""


def register_prompts(server: VromMCPServer, state: ServerState) -> None:
    """Add the prompts (``summarise``) to ``server``."""

    @server.prompt(
        name="summarise",
        title="Summarise what the vault knows about a topic",
        description="The notes' best passages about a topic (as vault_context finds them), "
        "with the request to summarise them, citing each point's source",
    )
    async def summarise(
        topic: Annotated[str, Field(description="What to summarise: a subject, a question")],
        ctx: Context,
    ) -> str:
        def gather(vault: Vault) -> VaultContext:
            return vault.context(topic, max_tokens=SUMMARY_TOKENS)

        try:
            vault = await state.vault(client_roots(ctx.session))
            context = await asyncio.to_thread(state.run, gather, vault)
        except ValidationError as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from exc
        except VromError as exc:
            raise MCPError(code=INTERNAL_ERROR, message=str(exc)) from exc
        if not context.sources:
            return (
                f"My notes have nothing about {topic!r}: a search of the vault found no passage. "
                "Say so plainly rather than answering from general knowledge, and suggest other "
                "words I could search my notes for."
            )
        return (
            f"Summarise what my notes say about {topic!r}, using only the passages below. "
            "Cite each point with its passage number, like [2], and end with the sources you "
            "used (path and heading). Say what the notes leave open or contradict; do not fill "
            "gaps from general knowledge.\n\n" + context.text
        )
