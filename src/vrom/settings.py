"""Settings from the environment, read in one place.

The faces (CLI, MCP server, installers) and the facades' ``open`` class methods ask here; the
engines below them (ingest, search, embed, index, packs, store) never read the environment and
take every setting as an argument. A variable set to the empty string counts as unset, except
``VAULT_ROOT`` (see `vault_variable`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from vrom.errors import ValidationError

VAULT_ENV = "VROM_VAULT"
"""The vault to use when none is named (CLI, MCP server, `Vault.open_default`)."""
VAULT_ROOT_ENV = "VAULT_ROOT"
"""The same as ``VROM_VAULT``, by the name MCP client configs often give it."""
STATE_DIR_ENV = "VROM_STATE_DIR"
"""Where vaults' stores live (default: the user data dir)."""
DATABASE_URL_ENV = "VROM_DATABASE_URL"
"""The database vaults' stores live in when no ``--db``/``database_url`` is given
(``postgresql://USER:PASSWORD@HOST/DB``, or ``sqlite:///FILE``); unset, each vault has its own
SQLite file in the state directory."""
EMBEDDER_ENV = "VROM_EMBEDDER"
"""The embedder spec ``"auto"`` stands for (see `vrom.embed.Embedder.from_spec`)."""
STORAGE_KEY_ENV = "VROM_STORAGE_KEY"
"""The key of an encrypted collection, when none is given."""
REGISTRY_URL_ENV = "VROM_REGISTRY_URL"
"""The knowledge-pack registry (a URL, a file:// URL or a path)."""
CACHE_DIR_ENV = "VROM_CACHE_DIR"
"""Where pulled knowledge packs are cached (default: the user cache dir)."""
CACHE_QUOTA_ENV = "VROM_CACHE_QUOTA"
"""The most the pack cache may hold (bytes, or a size such as ``2GiB``; default: no limit)."""
TRUSTED_KEYS_ENV = "VROM_TRUSTED_KEYS"
"""Publisher keys a pack must be signed by: public keys or ``.pub`` paths, split at commas or
`os.pathsep`; set, an unsigned or otherwise signed pack is refused."""
MCP_TOKEN_ENV = "VROM_MCP_TOKEN"
"""The bearer token of the MCP server's HTTP transport."""
NO_COLOR_ENV = "NO_COLOR"
"""Set and not empty: the CLI writes no colour (https://no-color.org)."""
OPENAI_API_KEY_ENV = "OPENAI_API_KEY"
"""The default variable an OpenAI-compatible embedder's API key is read from."""
DEFAULT_EMBEDDER_SPEC = "default"


def get(name: str) -> str | None:
    """Return the environment variable ``name``, or None when it is unset or empty."""
    return os.environ.get(name) or None


def environment() -> Mapping[str, str]:
    """Return the whole environment (for the client installers' config-folder rules)."""
    return os.environ


def vault() -> str | None:
    """Return the vault ``$VROM_VAULT`` or ``$VAULT_ROOT`` names (see `vault_variable`)."""
    named = vault_variable()
    return None if named is None else named[1]


def vault_variable() -> tuple[str, str] | None:
    """Return the variable naming the vault to use when none is named, and its value.

    ``VROM_VAULT`` and ``VAULT_ROOT`` mean the same; set both, they must name the same folder,
    else neither wins: a `ValidationError` names both (a client config that sets one and a
    shell that exports the other must not quietly serve the wrong vault). ``VAULT_ROOT`` set
    but empty is refused like an empty ``--vault``, since it would otherwise mean the current
    folder; an empty ``VROM_VAULT`` counts as unset, like every other variable here. None
    when neither is set.
    """
    root = os.environ.get(VAULT_ROOT_ENV)
    if root is not None and not root.strip():
        raise ValidationError(
            f"${VAULT_ROOT_ENV} is set but empty: set it to the vault folder, or unset it"
        )
    named = get(VAULT_ENV)
    if named and root and _folder(named) != _folder(root):
        raise ValidationError(
            f"${VAULT_ENV} ({named!r}) and ${VAULT_ROOT_ENV} ({root!r}) name different vaults:"
            " unset one of them"
        )
    if named:
        return VAULT_ENV, named
    return None if root is None else (VAULT_ROOT_ENV, root)


def _folder(path: str) -> Path:
    return Path(path).expanduser().resolve()


def state_dir() -> str | None:
    """Return ``$VROM_STATE_DIR``."""
    return get(STATE_DIR_ENV)


def database_url() -> str | None:
    """Return ``$VROM_DATABASE_URL``."""
    return get(DATABASE_URL_ENV)


def embedder_spec() -> str:
    """Return the embedder spec ``"auto"`` stands for: ``$VROM_EMBEDDER``, else ``default``."""
    return (get(EMBEDDER_ENV) or DEFAULT_EMBEDDER_SPEC).strip()


def storage_key() -> str | None:
    """Return ``$VROM_STORAGE_KEY``."""
    return get(STORAGE_KEY_ENV)


def registry_url() -> str | None:
    """Return ``$VROM_REGISTRY_URL``."""
    return get(REGISTRY_URL_ENV)


def cache_dir() -> str | None:
    """Return ``$VROM_CACHE_DIR``."""
    return get(CACHE_DIR_ENV)


def cache_quota() -> str | None:
    """Return ``$VROM_CACHE_QUOTA``."""
    return get(CACHE_QUOTA_ENV)


def trusted_keys() -> list[str]:
    """Return ``$VROM_TRUSTED_KEYS`` as a list (`key_list`; empty when unset)."""
    return key_list(get(TRUSTED_KEYS_ENV) or "")


def key_list(text: str) -> list[str]:
    """Return the public keys or ``.pub`` paths in ``text``, split at commas and `os.pathsep`."""
    parts = text.replace(os.pathsep, ",").split(",")
    return [part.strip() for part in parts if part.strip()]


def mcp_token() -> str | None:
    """Return ``$VROM_MCP_TOKEN``."""
    return get(MCP_TOKEN_ENV)


def colour_allowed() -> bool:
    """Return False when ``$NO_COLOR`` is set and not empty, or ``$TERM`` is ``dumb``."""
    return not get(NO_COLOR_ENV) and get("TERM") != "dumb"
