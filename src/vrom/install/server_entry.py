"""The server entry an MCP client's config gets: how the client launches vrom's MCP server.

The command is the absolute path of the running interpreter (`sys.executable`, symlinks kept so
a virtual environment stays itself), not the ``vrom`` console script: desktop apps start servers
with a minimal ``PATH``, and the interpreter that ran ``vrom install`` is the one known to have
vrom installed. ``launcher="script"`` uses the ``vrom`` script beside it (or on ``PATH``)
instead. ``VROM_STATE_DIR`` is written into the entry so the server finds the same index whatever
environment the client passes; so is ``VROM_EMBEDDER`` when one was chosen.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vrom import state
from vrom.errors import NotFoundError, ValidationError
from vrom.install.client_configs import CLIENTS
from vrom.settings import EMBEDDER_ENV, STATE_DIR_ENV, Settings
from vrom.vault import AUTO, Vault

LAUNCHERS = ("python", "script")


@dataclass(frozen=True)
class ServerLaunch:
    """How a client starts the server: ``command`` with ``args``, plus ``env`` to set."""

    command: str
    args: list[str]
    env: dict[str, str]


def _vrom_script() -> Path:
    beside = Path(os.path.abspath(sys.executable)).parent
    for candidate in (beside / "vrom", beside / "vrom.exe", beside / "Scripts" / "vrom.exe"):
        if candidate.is_file():
            return candidate
    found = shutil.which("vrom")
    if found is None:
        raise NotFoundError(
            f"no 'vrom' console script beside {sys.executable} or on PATH: use --launcher python"
        )
    return Path(os.path.abspath(found))


def server_launch(
    vault_root: Path,
    *,
    state_dir: str | os.PathLike[str] | None = None,
    embedder: str | None = None,
    launcher: str = "python",
    settings: Settings | None = None,
) -> ServerLaunch:
    """Return how a client should start vrom's MCP server for the vault at ``vault_root``.

    ``embedder`` is a spec to pin (None: ``$VROM_EMBEDDER`` if set, else the server's default).
    ``settings``: as for `vrom.Vault.open` (resolved from the environment when not given).
    """
    config = Settings.from_environment() if settings is None else settings
    if launcher not in LAUNCHERS:
        raise ValidationError(f"launcher must be one of {', '.join(LAUNCHERS)}, not {launcher!r}")
    served = ["mcp", "--vault", str(vault_root)]
    if launcher == "python":
        # abspath, not resolve(): a venv's python is a symlink, and following it leaves the venv
        command, args = os.path.abspath(sys.executable), ["-m", "vrom", *served]
    else:
        command, args = str(_vrom_script()), served
    env = {STATE_DIR_ENV: str(state.state_dir(state_dir, config))}
    spec = embedder if embedder not in (None, AUTO) else config.embedder
    if spec:
        env[EMBEDDER_ENV] = spec
    return ServerLaunch(command, args, env)


def client_entry(client: str, launch: ServerLaunch) -> dict[str, Any]:
    """Return the server entry ``client``'s config format wants for ``launch``."""
    if client == "opencode":
        return {
            "type": "local",
            "command": [launch.command, *launch.args],
            "enabled": True,
            "environment": dict(launch.env),
        }
    entry: dict[str, Any] = {"command": launch.command, "args": list(launch.args)}
    if client == "claude-code":
        entry = {"type": "stdio", **entry}
    elif client not in CLIENTS:
        raise ValidationError(f"unknown client {client!r}: use one of {', '.join(CLIENTS)}")
    entry["env"] = dict(launch.env)
    return entry


def entry_command(client: str, entry: Mapping[str, Any]) -> list[str]:
    """Return the command line (program first) a client's server entry runs."""
    command = entry.get("command")
    if client == "opencode":
        if isinstance(command, list) and command and all(isinstance(c, str) for c in command):
            return list(command)
    elif isinstance(command, str) and command:
        args = entry.get("args", [])
        if isinstance(args, list) and all(isinstance(a, str) for a in args):
            return [command, *args]
    raise ValidationError(f"the {client} entry has no usable command: {json.dumps(entry)}")


def resolve_vault(
    vault: str | os.PathLike[str] | None,
    state_dir: str | os.PathLike[str] | None = None,
    settings: Settings | None = None,
) -> Path:
    """Return the absolute vault folder: ``vault``, or the one vrom uses when none is named
    (``settings`` as for `vrom.Vault.open_default`)."""
    if vault is None:
        with Vault.open_default(state_dir, embedder=None, settings=settings) as found:
            return found.root
    root = Path(vault).expanduser()
    if not root.is_dir():
        problem = "is not a folder" if root.exists() else "does not exist"
        raise NotFoundError(f"vault folder {os.fspath(vault)!r} {problem}")
    return root.resolve()
