"""Add vrom's MCP server to an MCP client's config: Claude Desktop, Claude Code, Cursor, opencode.

Each client gets one entry that launches ``<python> -m vrom mcp --vault <absolute vault path>``
(`vrom.install.server_entry`), in the config file and shape that client reads
(`vrom.install.client_configs`):

- **claude-desktop**, **cursor**: ``mcpServers`` → ``{command, args, env}``.
- **claude-code**: user scope, so the vault is there in every project: ``~/.claude.json`` →
  ``mcpServers`` → ``{type: "stdio", command, args, env}``. A project's ``.mcp.json`` has the
  same shape: pass it with ``--config``.
- **opencode**: ``opencode.json`` → ``mcp`` → ``{type: "local", command: [...], enabled,
  environment}``. opencode also gets a section in ``AGENTS.md`` and a ``vrom`` skill telling the
  agent which tool to use when (`vrom.install.opencode_instructions`).

Merging keeps every other server and every unrelated key (and keys the user added to vrom's own
entry). A changed file is backed up first and written atomically (`vrom.install.file_changes`),
with a 2-space indent; an unchanged entry leaves the file untouched. A file that is not plain
JSON is refused and left as it is (opencode's JSONC with comments included: rewriting it would
drop the comments). ``AGENTS.md`` and the skill file are changed only in vrom's own parts, so
neither is backed up.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vrom import state
from vrom.errors import ValidationError
from vrom.install.client_configs import (
    CLIENT_TITLES,
    CLIENTS,
    DEFAULT_NAME,
    default_config_path,
    dump_config,
    merged_entry,
    parse_config,
    read_text,
    servers_of,
)
from vrom.install.file_changes import FileChange, apply_change
from vrom.install.opencode_instructions import (
    agents_text,
    opencode_instruction_paths,
    skill_text,
)
from vrom.install.server_entry import LAUNCHERS, client_entry, resolve_vault, server_launch
from vrom.settings import Settings

__all__ = [
    "CLIENTS",
    "CLIENT_TITLES",
    "DEFAULT_NAME",
    "LAUNCHERS",
    "FileChange",
    "InstallResult",
    "install",
]

OPENCODE_SCHEMA = "https://opencode.ai/config.json"
# valid as an MCP server key in every client and as an opencode skill name (and its folder)
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


@dataclass(frozen=True)
class InstallResult:
    """What `install` did: the ``entry`` written for server ``name`` into ``config``.

    ``files`` lists the config file first, then (opencode) ``AGENTS.md`` and the skill file.
    ``notes`` are things the user should know (restart the client; the vault is not indexed).
    """

    client: str
    name: str
    config: str
    vault: str
    entry: dict[str, Any]
    dry_run: bool
    files: list[FileChange]
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """True when any file was (or, in a dry run, would be) changed."""
        return any(f.changed for f in self.files)


def _require_mcp_sdk() -> None:
    """Refuse to write an entry whose server could not start: the MCP SDK must be importable
    by this Python, which every entry runs."""
    if importlib.util.find_spec("mcp") is None:
        raise ValidationError(
            f"the MCP SDK is not installed for {sys.executable}, so the server this entry "
            "starts could not run: pip install 'vrom[mcp]' first (nothing was written)"
        )


def install(
    client: str,
    vault: str | os.PathLike[str] | None = None,
    *,
    name: str = DEFAULT_NAME,
    config: str | os.PathLike[str] | None = None,
    dry_run: bool = False,
    launcher: str = "python",
    state_dir: str | os.PathLike[str] | None = None,
    embedder: str | None = None,
    settings: Settings | None = None,
) -> InstallResult:
    """Add (or update) server ``name`` for ``vault`` in ``client``'s MCP config; return the result.

    ``vault`` None means the vault vrom uses when none is named (see `Vault.open_default`).
    ``config`` overrides the client's config file. ``dry_run`` computes everything and writes
    nothing. Running it twice changes nothing the second time (and makes no second backup).
    ``settings``: as for `vrom.Vault.open` (resolved from the environment when not given).
    """
    if client not in CLIENTS:
        raise ValidationError(f"unknown client {client!r}: use one of {', '.join(CLIENTS)}")
    if not _NAME.match(name) or len(name) > 64:
        raise ValidationError(
            f"server name {name!r} must be lowercase letters and digits, joined by single "
            "hyphens (at most 64 characters)"
        )
    _require_mcp_sdk()
    resolved = Settings.from_environment() if settings is None else settings
    root = resolve_vault(vault, state_dir, resolved)
    launch = server_launch(
        root, state_dir=state_dir, embedder=embedder, launcher=launcher, settings=resolved
    )
    entry = client_entry(client, launch)
    path = Path(config).expanduser() if config is not None else default_config_path(client)
    if path.is_dir():
        raise ValidationError(f"{path} is a folder: --config takes the config file itself")

    old = read_text(path)
    by_hand = None
    if client == "opencode":
        by_hand = f'"{name}": {json.dumps(entry, ensure_ascii=False)} under "mcp"'
    data = parse_config(path, old, by_hand=by_hand)
    if client == "opencode" and old is None:
        data["$schema"] = OPENCODE_SCHEMA
    servers = servers_of(client, data, path, create=True)
    env_key = "environment" if client == "opencode" else "env"
    merged = merged_entry(servers.get(name), entry, env_key)
    if servers.get(name) == merged:
        new = old if old is not None else dump_config(data)
    else:
        servers[name] = merged
        new = dump_config(data)
    files = [apply_change(path, old, new, dry_run=dry_run, backup=True)]

    if client == "opencode":
        agents, skill = opencode_instruction_paths(path, name)
        old_agents = read_text(agents)
        new_agents = agents_text(old_agents, name, root)
        files.append(apply_change(agents, old_agents, new_agents, dry_run=dry_run, backup=False))
        old_skill = read_text(skill)
        new_skill = skill_text(name, root)
        files.append(apply_change(skill, old_skill, new_skill, dry_run=dry_run, backup=False))

    notes = []
    if not state.store_path(root, state.state_dir(state_dir, resolved)).exists():
        notes.append(
            f"the vault is not indexed yet: the server indexes it when {CLIENT_TITLES[client]} "
            f"first starts it; 'vrom index {root}' does it now"
        )
    if files[0].changed and not dry_run:
        notes.append(f"restart {CLIENT_TITLES[client]} to load the {name!r} server")
        if client == "claude-code":
            notes.append(f"'claude mcp get {name}' shows what Claude Code sees")
    return InstallResult(
        client=client,
        name=name,
        config=str(path),
        vault=str(root),
        entry=merged,
        dry_run=dry_run,
        files=files,
        notes=notes,
    )
