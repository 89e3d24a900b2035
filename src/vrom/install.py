"""Add vrom's MCP server to an MCP client's config: Claude Desktop, Claude Code, Cursor, opencode.

Each client gets one entry that launches ``<python> -m vrom mcp --vault <absolute vault path>``:

- **claude-desktop**: ``claude_desktop_config.json`` → ``mcpServers`` → ``{command, args, env}``;
  in ``~/Library/Application Support/Claude/`` (macOS), ``%APPDATA%\\Claude\\`` (Windows),
  ``$XDG_CONFIG_HOME/Claude/`` or ``~/.config/Claude/`` (Linux, unofficial builds).
- **claude-code**: user scope, so the vault is there in every project: ``~/.claude.json`` (or
  ``$CLAUDE_CONFIG_DIR/.claude.json``) → ``mcpServers`` → ``{type: "stdio", command, args, env}``.
  A project's ``.mcp.json`` has the same shape: pass it with ``--config``.
- **cursor**: ``~/.cursor/mcp.json`` → ``mcpServers`` → ``{command, args, env}``.
- **opencode**: ``$XDG_CONFIG_HOME/opencode/opencode.json`` (``~/.config/opencode/``, also on
  Windows; ``opencode.jsonc`` when only that exists) → ``mcp`` → ``{type: "local", command:
  [...], enabled, environment}`` (under ``mcp.servers`` when the file already uses that
  shape). opencode also gets a section in ``AGENTS.md`` and a ``vrom`` skill telling the agent
  which tool to use when, placed where opencode reads them for that config: beside a global
  config (``~/.config/opencode/AGENTS.md``, ``~/.config/opencode/skills/vrom/SKILL.md``) or in
  the project of a project config (``AGENTS.md``, ``.opencode/skills/vrom/SKILL.md``). Not in
  the vault: vrom only reads the vault, and an ``AGENTS.md`` there would be indexed as a note.

The command is the absolute path of the running interpreter (`sys.executable`, symlinks kept so
a virtual environment stays itself), not the ``vrom`` console script: desktop apps start servers
with a minimal ``PATH``, and the interpreter that ran ``vrom install`` is the one known to have
vrom installed. ``launcher="script"`` uses the ``vrom`` script beside it (or on ``PATH``)
instead. ``VROM_STATE_DIR`` is written into the entry so the server finds the same index whatever
environment the client passes; so is ``VROM_EMBEDDER`` when one was chosen.

Merging keeps every other server and every unrelated key (and keys the user added to vrom's own
entry). A changed file is backed up first (``<file>.bak-<timestamp>``) and written atomically
(temporary file + `os.replace`), with a 2-space indent; an unchanged entry leaves the file
untouched. A file that is not plain JSON is refused and left as it is (opencode's JSONC with
comments included: rewriting it would drop the comments). ``AGENTS.md`` is changed only between
vrom's markers (``<!-- vrom:start -->`` … ``<!-- vrom:end -->``, replaced on each run) and the
skill file is vrom's own, so neither is backed up.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import stat
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vrom import settings, state
from vrom.errors import NotFoundError, ValidationError, VromError
from vrom.settings import EMBEDDER_ENV
from vrom.vault import AUTO, Vault

CLIENTS = ("claude-desktop", "claude-code", "cursor", "opencode")
CLIENT_TITLES = {
    "claude-desktop": "Claude Desktop",
    "claude-code": "Claude Code",
    "cursor": "Cursor",
    "opencode": "opencode",
}
LAUNCHERS = ("python", "script")
DEFAULT_NAME = "vrom"
OPENCODE_SCHEMA = "https://opencode.ai/config.json"
# valid as an MCP server key in every client and as an opencode skill name (and its folder)
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


@dataclass(frozen=True)
class ServerLaunch:
    """How a client starts the server: ``command`` with ``args``, plus ``env`` to set."""

    command: str
    args: list[str]
    env: dict[str, str]


@dataclass(frozen=True)
class FileChange:
    """One file `install` wrote (or would write, in a dry run).

    ``changed`` is False when the file already said the same; ``created`` when it did not exist;
    ``backup`` is the copy made of the old file (None when none was needed); ``diff`` is the
    unified diff from the old text to the new (empty when unchanged).
    """

    path: str
    changed: bool
    created: bool
    backup: str | None
    diff: str


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


# -- where clients keep their config ---------------------------------------------------------


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or env.get("USERPROFILE") or Path.home())


def _xdg_config(env: Mapping[str, str]) -> Path:
    return Path(env.get("XDG_CONFIG_HOME") or _home(env) / ".config")


def opencode_dir(env: Mapping[str, str] | None = None) -> Path:
    """Return opencode's global config folder (XDG, on every platform)."""
    return _xdg_config(os.environ if env is None else env) / "opencode"


def default_config_path(
    client: str, *, platform: str | None = None, env: Mapping[str, str] | None = None
) -> Path:
    """Return the config file ``client`` reads its MCP servers from on this machine."""
    env = os.environ if env is None else env
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


# -- the entry -------------------------------------------------------------------------------


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
) -> ServerLaunch:
    """Return how a client should start vrom's MCP server for the vault at ``vault_root``.

    ``embedder`` is a spec to pin (None: ``$VROM_EMBEDDER`` if set, else the server's default).
    """
    if launcher not in LAUNCHERS:
        raise ValidationError(f"launcher must be one of {', '.join(LAUNCHERS)}, not {launcher!r}")
    served = ["mcp", "--vault", str(vault_root)]
    if launcher == "python":
        # abspath, not resolve(): a venv's python is a symlink, and following it leaves the venv
        command, args = os.path.abspath(sys.executable), ["-m", "vrom", *served]
    else:
        command, args = str(_vrom_script()), served
    env = {state.STATE_DIR_ENV: str(state.state_dir(state_dir))}
    spec = embedder if embedder not in (None, AUTO) else settings.get(EMBEDDER_ENV)
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
    vault: str | os.PathLike[str] | None, state_dir: str | os.PathLike[str] | None = None
) -> Path:
    """Return the absolute vault folder: ``vault``, or the one vrom uses when none is named."""
    if vault is None:
        with Vault.open_default(state_dir, embedder=None) as found:
            return found.root
    root = Path(vault).expanduser()
    if not root.is_dir():
        problem = "is not a folder" if root.exists() else "does not exist"
        raise NotFoundError(f"vault folder {os.fspath(vault)!r} {problem}")
    return root.resolve()


# -- reading and merging configs -------------------------------------------------------------


def _read_text(path: Path) -> str | None:
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


def _servers(client: str, data: dict[str, Any], path: Path, *, create: bool) -> dict[str, Any]:
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
    return _servers(client, data, Path("config"), create=False).get(name)


def _merged(old: Any, new: dict[str, Any], env_key: str) -> dict[str, Any]:
    """Return ``new`` over ``old``: keys the user added to the entry (and its env) stay."""
    if not isinstance(old, dict):
        return new
    merged = {**old, **new}
    old_env = old.get(env_key)
    if isinstance(old_env, dict):
        merged[env_key] = {**old_env, **new[env_key]}
    return merged


def _dump(data: Mapping[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


# -- opencode's instructions -----------------------------------------------------------------

_AGENTS_SECTION = """\
<!-- {name}:start -->
## Notes vault (vrom)

The `{name}` MCP server serves the user's Markdown notes vault:
`{vault}`.
Before answering about the user's projects, decisions or notes from memory, search them with
`vault_search` (or `vault_context` for ready-to-quote passages with sources) and cite the note
path and heading.
Read a whole note with `vault_read`. Change notes only when asked: `vault_write`
(create / overwrite / append), `vault_delete` (moves to `.trash/`). Keep lasting facts with
`memory_remember` and look them up with `memory_recall`. The `{name}` skill has the full guide.
<!-- {name}:end -->
"""

_SKILL = """\
---
name: {name}
description: Search, read and write the user's Markdown notes vault ({vault}) and keep memories across sessions with the {name} MCP tools. Use when the user's notes may answer a question, when asked to find, cite, create or update a note, or to remember or recall something.
---

# The notes vault at {vault}

The `{name}` MCP server serves this vault; opencode names its tools `{name}_<tool>`
(`{name}_vault_search`, ...). Notes are Markdown with YAML frontmatter, `[[wikilinks]]` and
`#tags`; paths are relative to the vault root (`Projects/Atlas.md`).

## Find
- `vault_search`: find notes by meaning and keywords. `query` takes words, a question,
  `"an exact phrase"`, `-excluded`, `prefix*`; `where` filters (`{{"path": "Projects/",
  "tags": ["project"], "status": "done"}}`); `mode` is hybrid (default), keyword, vector or
  rerank. Every hit carries its note path, heading, chunk id and content hash: cite
  `path › heading` in answers. Use it first, before saying the notes do not cover something.
- `vault_context`: ready-to-quote passages for a question within `max_tokens`, each followed by
  its source. Use it to ground an answer in several notes at once.

## Read and browse
- `vault_read`: one note whole (frontmatter, body, headings, tags, links). Read before editing.
- `vault_list`: a folder's notes and subfolders. `vault_tags`: all tags with counts, or the notes
  with one tag (nested tags included).
- `vault_wikilinks` (links a note makes), `vault_backlinks` (notes linking to it),
  `vault_related` (links, backlinks, shared tags and notes similar in meaning).
- `vault_stats`: counts, the index's location and model.

## Write (these change the user's files: only when asked)
- `vault_write`: `mode` create (fails if the note exists), append, or overwrite; `frontmatter`
  keys are merged into the note's. Prefer append to overwrite; keep the note's style.
- `vault_frontmatter`: read or merge frontmatter keys; the body is left alone.
- `vault_delete`: moves the note to the vault's `.trash/`; `permanent` only when the user says so.
- `vault_reindex`: after notes were edited outside these tools (writes through them are indexed
  at once).

## Memory (the agent's own, kept across sessions)
- `memory_remember`: a fact, preference or decision worth keeping, in one self-contained line.
- `memory_recall`: look memories up by meaning before asking the user again.
- `memory_archive`: retire a memory that is wrong or outdated. `memory_stats`: counts.
"""


def _agents_text(old: str | None, name: str, vault: Path) -> str:
    section = _AGENTS_SECTION.format(name=name, vault=vault)
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    old = old or ""
    if old.count(start) > 1:
        raise ValidationError(f"AGENTS.md has {start} more than once: keep one section")
    begin = old.find(start)
    if begin < 0:
        if not old or old.endswith("\n\n"):
            return old + section
        return old + ("\n" if old.endswith("\n") else "\n\n") + section
    finish = old.find(end, begin)
    if finish < 0:
        raise ValidationError(f"AGENTS.md has {start} but no {end}: fix it by hand")
    after = old[finish + len(end) :]
    return old[:begin] + section + after.removeprefix("\n")


def opencode_instruction_paths(config: Path, name: str = DEFAULT_NAME) -> tuple[Path, Path]:
    """Return where the ``AGENTS.md`` section and the skill go for an opencode config file."""
    folder = config.absolute().parent
    if folder == opencode_dir().absolute():
        return folder / "AGENTS.md", folder / "skills" / name / "SKILL.md"
    if folder.name == ".opencode":
        return folder.parent / "AGENTS.md", folder / "skills" / name / "SKILL.md"
    return folder / "AGENTS.md", folder / ".opencode" / "skills" / name / "SKILL.md"


# -- writing ---------------------------------------------------------------------------------


def _backup(path: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    backup = path.with_name(f"{path.name}.bak-{stamp}")
    n = 1
    while backup.exists():
        n += 1
        backup = path.with_name(f"{path.name}.bak-{stamp}-{n}")
    try:
        shutil.copy2(path, backup)
    except OSError as exc:
        raise VromError(f"cannot back up {path} to {backup}: {exc}") from exc
    return backup


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (temporary file, then `os.replace`).

    The file keeps its permissions; a new file (and its folder) is created as usual.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else None
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            if mode is not None:
                os.chmod(tmp, mode)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    except OSError as exc:
        raise VromError(f"cannot write {path}: {exc}") from exc


def _apply(path: Path, old: str | None, new: str, *, dry_run: bool, backup: bool) -> FileChange:
    """Write ``new`` over ``old`` at ``path`` unless they are equal; return what happened."""
    target = Path(os.path.realpath(path))  # a symlinked dotfile stays a symlink
    changed = old != new
    diff = ""
    if changed:
        diff = "".join(
            difflib.unified_diff(
                (old or "").splitlines(keepends=True),
                new.splitlines(keepends=True),
                fromfile=str(path) if old is not None else "/dev/null",
                tofile=str(path),
            )
        )
    made: Path | None = None
    if changed and not dry_run:
        if backup and old is not None:
            made = _backup(target)
        write_atomic(target, new)
    return FileChange(str(path), changed, old is None, None if made is None else str(made), diff)


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
) -> InstallResult:
    """Add (or update) server ``name`` for ``vault`` in ``client``'s MCP config; return the result.

    ``vault`` None means the vault vrom uses when none is named (see `Vault.open_default`).
    ``config`` overrides the client's config file. ``dry_run`` computes everything and writes
    nothing. Running it twice changes nothing the second time (and makes no second backup).
    """
    if client not in CLIENTS:
        raise ValidationError(f"unknown client {client!r}: use one of {', '.join(CLIENTS)}")
    if not _NAME.match(name) or len(name) > 64:
        raise ValidationError(
            f"server name {name!r} must be lowercase letters and digits, joined by single "
            "hyphens (at most 64 characters)"
        )
    root = resolve_vault(vault, state_dir)
    launch = server_launch(root, state_dir=state_dir, embedder=embedder, launcher=launcher)
    entry = client_entry(client, launch)
    path = Path(config).expanduser() if config is not None else default_config_path(client)
    if path.is_dir():
        raise ValidationError(f"{path} is a folder: --config takes the config file itself")

    old = _read_text(path)
    by_hand = None
    if client == "opencode":
        by_hand = f'"{name}": {json.dumps(entry, ensure_ascii=False)} under "mcp"'
    data = parse_config(path, old, by_hand=by_hand)
    if client == "opencode" and old is None:
        data["$schema"] = OPENCODE_SCHEMA
    servers = _servers(client, data, path, create=True)
    env_key = "environment" if client == "opencode" else "env"
    merged = _merged(servers.get(name), entry, env_key)
    if servers.get(name) == merged:
        new = old if old is not None else _dump(data)
    else:
        servers[name] = merged
        new = _dump(data)
    files = [_apply(path, old, new, dry_run=dry_run, backup=True)]

    if client == "opencode":
        agents, skill = opencode_instruction_paths(path, name)
        old_agents = _read_text(agents)
        new_agents = _agents_text(old_agents, name, root)
        files.append(_apply(agents, old_agents, new_agents, dry_run=dry_run, backup=False))
        old_skill = _read_text(skill)
        new_skill = _SKILL.format(name=name, vault=root)
        files.append(_apply(skill, old_skill, new_skill, dry_run=dry_run, backup=False))

    notes = []
    if not state.store_path(root, state.state_dir(state_dir)).exists():
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
