"""Where each MCP client keeps its config, and reading and merging the JSON in it.

- **claude-desktop**: ``claude_desktop_config.json`` → ``mcpServers``; in
  ``~/Library/Application Support/Claude/`` (macOS), ``%APPDATA%\\Claude\\`` (Windows),
  ``$XDG_CONFIG_HOME/Claude/`` or ``~/.config/Claude/`` (Linux, unofficial builds).
- **claude-code**: ``~/.claude.json`` (or ``$CLAUDE_CONFIG_DIR/.claude.json``) → ``mcpServers``.
- **cursor**: ``~/.cursor/mcp.json`` → ``mcpServers``.
- **opencode**: ``$XDG_CONFIG_HOME/opencode/opencode.json`` (``~/.config/opencode/``, also on
  Windows; ``opencode.jsonc`` when only that exists) → ``mcp`` (or ``mcp.servers`` when the file
  already uses that shape).

The rules read the environment passed in (``env``); by default, vrom's
(`vrom.settings.environment`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vrom import settings
from vrom.errors import ValidationError, VromError

CLIENTS = ("claude-desktop", "claude-code", "cursor", "opencode")
CLIENT_TITLES = {
    "claude-desktop": "Claude Desktop",
    "claude-code": "Claude Code",
    "cursor": "Cursor",
    "opencode": "opencode",
}
DEFAULT_NAME = "vrom"


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or env.get("USERPROFILE") or Path.home())


def _xdg_config(env: Mapping[str, str]) -> Path:
    return Path(env.get("XDG_CONFIG_HOME") or _home(env) / ".config")


def opencode_dir(env: Mapping[str, str] | None = None) -> Path:
    """Return opencode's global config folder (XDG, on every platform)."""
    return _xdg_config(settings.environment() if env is None else env) / "opencode"


def default_config_path(
    client: str, *, platform: str | None = None, env: Mapping[str, str] | None = None
) -> Path:
    """Return the config file ``client`` reads its MCP servers from on this machine."""
    env = settings.environment() if env is None else env
    platform = sys.platform if platform is None else platform
    if client == "claude-desktop":
        if platform == "darwin":
            folder = _home(env) / "Library" / "Application Support" / "Claude"
        elif platform == "win32":
            appdata = env.get("APPDATA")
            base = Path(appdata) if appdata else _home(env) / "AppData" / "Roaming"
            folder = base / "Claude"
        else:
            folder = _xdg_config(env) / "Claude"
        return folder / "claude_desktop_config.json"
    if client == "claude-code":
        custom = env.get("CLAUDE_CONFIG_DIR")
        return (Path(custom) if custom else _home(env)) / ".claude.json"
    if client == "cursor":
        return _home(env) / ".cursor" / "mcp.json"
    if client == "opencode":
        folder = opencode_dir(env)
        plain, commented = folder / "opencode.json", folder / "opencode.jsonc"
        return commented if commented.exists() and not plain.exists() else plain
    raise ValidationError(f"unknown client {client!r}: use one of {', '.join(CLIENTS)}")


def read_text(path: Path) -> str | None:
    """Return a config file's text, or None when it does not exist."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise VromError(f"cannot read {path}: {exc}") from exc


def parse_config(path: Path, text: str | None, *, by_hand: str | None = None) -> dict[str, Any]:
    """Return a config file's JSON object ({} for a missing or blank file).

    A file that is not a plain JSON object raises `ValidationError` (nothing is written); with
    ``by_hand`` (the entry as text) the message says to add it by hand instead (for JSONC files,
    whose comments a rewrite would lose).
    """
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        if by_hand is not None:
            raise ValidationError(
                f"{path} is not plain JSON ({exc}); vrom will not rewrite a file with comments "
                f"or trailing commas: add {by_hand} by hand"
            ) from exc
        raise ValidationError(
            f"{path} is not valid JSON ({exc}): fix it, or pass --config FILE to write another file"
        ) from exc
    if not isinstance(data, dict):
        raise ValidationError(f"{path} holds a JSON {type(data).__name__}, not an object")
    return data


def servers_of(client: str, data: dict[str, Any], path: Path, *, create: bool) -> dict[str, Any]:
    """Return the object that maps server names to entries in ``data`` (made when ``create``)."""
    key = "mcp" if client == "opencode" else "mcpServers"
    if key not in data and create:
        data[key] = {}
    servers = data.get(key, {})
    if not isinstance(servers, dict):
        raise ValidationError(f"{path}: {key!r} is a JSON {type(servers).__name__}, not an object")
    nested = servers.get("servers")
    if client == "opencode" and isinstance(nested, dict) and "type" not in nested:
        return nested  # opencode 2's native shape: mcp.servers.<name>
    return servers


def find_entry(client: str, data: dict[str, Any], name: str = DEFAULT_NAME) -> Any:
    """Return server ``name``'s entry in a parsed config (None when absent)."""
    return servers_of(client, data, Path("config"), create=False).get(name)


def merged_entry(old: Any, new: dict[str, Any], env_key: str) -> dict[str, Any]:
    """Return ``new`` over ``old``: keys the user added to the entry (and its env) stay."""
    if not isinstance(old, dict):
        return new
    merged = {**old, **new}
    old_env = old.get(env_key)
    if isinstance(old_env, dict):
        merged[env_key] = {**old_env, **new[env_key]}
    return merged


def dump_config(data: Mapping[str, Any]) -> str:
    """Return a config as the text vrom writes: JSON with a 2-space indent and a final newline."""
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
