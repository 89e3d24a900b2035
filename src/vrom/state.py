"""Where a vault's state lives: outside the vault, in a per-vault folder of the state directory.

The state directory is ``--state-dir`` / ``VROM_STATE_DIR`` when given, else platformdirs' user
data dir. Each vault gets a folder named from its absolute path (readable name + hash), holding
its store file; a small ``state.json`` remembers the vault indexed last, so ``vrom search`` works
right after ``vrom index PATH`` without repeating the path.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import platformdirs

from vrom import settings

STORE_FILE = "store.db"
_LAST_VAULT_KEY = "last_vault"


def state_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """Return the state directory: the override, ``VROM_STATE_DIR``, or the user data dir."""
    if override:
        return Path(override).expanduser().resolve()
    env = settings.state_dir()
    if env:
        return Path(env).expanduser().resolve()
    return Path(platformdirs.user_data_dir("vrom", appauthor=False))


def vault_id(root: Path) -> str:
    """Return a stable id for a vault: its folder name (slugged) and a hash of its absolute path."""
    absolute = str(root.resolve())
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", root.resolve().name).strip("-")[:40] or "vault"
    digest = hashlib.sha256(absolute.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{slug}-{digest}"


def store_path(root: Path, base: Path) -> Path:
    """Return the store file of the vault at ``root`` under state directory ``base``."""
    return base / "vaults" / vault_id(root) / STORE_FILE


def remember_last_vault(base: Path, root: Path) -> None:
    """Record ``root`` as the vault indexed last (best effort: a failure only loses the hint)."""
    path = base / "state.json"
    try:
        base.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({_LAST_VAULT_KEY: str(root.resolve())}), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass


def last_vault(base: Path) -> Path | None:
    """Return the vault indexed last, if it is still indexed."""
    try:
        data = json.loads((base / "state.json").read_text(encoding="utf-8"))
        root = Path(data[_LAST_VAULT_KEY])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return root if store_path(root, base).exists() else None


def find_indexed_vault(start: Path, base: Path) -> Path | None:
    """Return the nearest indexed vault at or above ``start``, or None."""
    current = start.resolve()
    for folder in (current, *current.parents):
        if store_path(folder, base).exists():
            return folder
    return None
