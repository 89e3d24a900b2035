"""The MCP tool that sets opencode up for the served vault: what ``vrom install opencode`` does.

(No ``from __future__ import annotations``: the SDK reads the tool functions' annotations.)
"""

from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from vrom.install import InstallResult, install
from vrom.install.client_configs import default_config_path
from vrom.install.opencode_instructions import opencode_instruction_paths
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


def written_files() -> tuple[Path, Path, Path]:
    """Return the three files ``vault_install_opencode`` writes: opencode's global config, the
    ``AGENTS.md`` beside it and the vrom skill (the user's opencode config folder)."""
    config = default_config_path("opencode")
    return (config, *opencode_instruction_paths(config))


def register_install_tools(server: MCPServer, state: ServerState) -> None:
    """Add ``vault_install_opencode`` to ``server``, its description naming the files it
    writes (served over HTTP only when asked for: `vrom.server.app.serve`)."""
    config, agents, skill = written_files()
    described = (
        "Add this vault's server to opencode's global config, with an AGENTS.md section and a "
        "skill saying which tool to use when (as `vrom install opencode` does). It writes "
        f"outside the vault, in the user's opencode config folder: {config}, {agents} and "
        f"{skill}. A dry run unless apply is true: it returns each file, the server entry, and "
        "whether a backup is made."
    )

    @tool(server, INSTALL, described)
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
        """Set opencode up for the served vault (the description, above, names the paths)."""
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
