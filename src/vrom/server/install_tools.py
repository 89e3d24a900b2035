"""The MCP tool that sets opencode up for the served vault: what ``vrom install opencode`` does.

(No ``from __future__ import annotations``: the SDK reads the tool functions' annotations.)
"""

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from vrom.install import InstallResult, install
from vrom.results import to_jsonable
from vrom.server.declared import INSTALL, InstallReply, tool
from vrom.server.state import ServerState
from vrom.server.tools import call_on_vault


def _install_reply(result: InstallResult) -> CallToolResult:
    """Return an install result: the whole of it (diffs included) as structured content, and
    as text a line per file saying what was, or would be, done, and what to do next."""
    lines = []
    for change in result.files:
        if not change.changed:
            done = "unchanged"
        elif result.dry_run:
            done = "would be created" if change.created else "would be updated"
            if change.backs_up:
                done += " (backed up first)"
        else:
            done = "created" if change.created else "updated"
            if change.backup:
                done += f" (backup: {change.backup})"
        lines.append(f"{change.path}: {done}")
    if result.dry_run:
        lines.append(
            "dry run: nothing was written; call vault_install_opencode with apply=true to write it"
            if result.changed
            else "dry run: opencode is already set up for this vault"
        )
    lines += [f"note: {note}" for note in result.notes]
    return CallToolResult(
        content=[TextContent(type="text", text="\n".join(lines))],
        structured_content=to_jsonable(result),
    )


def register_install_tools(server: MCPServer, state: ServerState) -> None:
    """Add ``vault_install_opencode`` to ``server``."""

    @tool(server, INSTALL)
    async def vault_install_opencode(
        ctx: Context,
        apply: Annotated[
            bool,
            Field(
                description="Write the changes (the user's opencode config is backed up "
                "first); false (the default) only shows what would change"
            ),
        ] = False,
    ) -> InstallReply:
        """Add this vault's server to opencode's global config, with an AGENTS.md section and a
        skill saying which tool to use when (as `vrom install opencode` does). A dry run unless
        apply is true: it returns each file, the server entry, and whether a backup is made."""
        embedder = state.embedder_spec
        return await call_on_vault(
            state,
            ctx,
            lambda vault: install(
                "opencode",
                vault.root,
                dry_run=not apply,
                state_dir=state.state_dir,
                embedder=embedder,
            ),
            reply=_install_reply,
        )
