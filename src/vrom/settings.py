"""Settings: one immutable value, resolved from the environment in one place.

`Settings.from_environment` reads every variable `VARIABLES` lists, once, into a frozen
`Settings`. The faces resolve it when they are opened or called: the CLI once per command, the
MCP server once at start, and the facades' ``open`` class methods and constructors
(`vrom.Vault.open`, `vrom.Collection.open`, `vrom.AgentMemory`) when given no ``settings=``.
An argument a face is given beats the value (`Settings.given`); the value is then passed down,
and the engines below the facades (ingest, search, embed, index, packs, store, the core) never
read the environment: they take what they need as arguments (tests/test_layers.py checks it).

A variable set to the empty string counts as unset, except ``VAULT_ROOT`` (see
`Settings.vault_variable`). docs/configuration.md lists every variable, from `VARIABLES`
(tests/test_docs.py keeps the two equal).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vrom.errors import ValidationError

VAULT_ENV = "VROM_VAULT"
VAULT_ROOT_ENV = "VAULT_ROOT"
STATE_DIR_ENV = "VROM_STATE_DIR"
DATABASE_URL_ENV = "VROM_DATABASE_URL"
EMBEDDER_ENV = "VROM_EMBEDDER"
STORAGE_KEY_ENV = "VROM_STORAGE_KEY"
REGISTRY_URL_ENV = "VROM_REGISTRY_URL"
CACHE_DIR_ENV = "VROM_CACHE_DIR"
CACHE_QUOTA_ENV = "VROM_CACHE_QUOTA"
TRUSTED_KEYS_ENV = "VROM_TRUSTED_KEYS"
MCP_TOKEN_ENV = "VROM_MCP_TOKEN"
NO_COLOR_ENV = "NO_COLOR"
TERM_ENV = "TERM"
OPENAI_API_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_EMBEDDER_SPEC = "default"


@dataclass(frozen=True)
class Variable:
    """One environment variable vrom reads: its ``name``, the `Settings` ``field`` it fills,
    what it means when unset (``default``) and what it does (``meaning``)."""

    name: str
    field: str
    default: str
    meaning: str


VARIABLES: tuple[Variable, ...] = (
    Variable(
        VAULT_ENV,
        "vault",
        "the indexed vault at or above the current folder, else the vault indexed last",
        "The vault to use when none is named (CLI, MCP server, `Vault.open_default`).",
    ),
    Variable(
        VAULT_ROOT_ENV,
        "vault_root",
        "as for `VROM_VAULT`",
        "The same as `VROM_VAULT`, by the name MCP client configs often give it; set both, they"
        " must name the same folder; set but empty, it is refused.",
    ),
    Variable(
        STATE_DIR_ENV,
        "state_dir",
        "the user data dir (platformdirs: ~/.local/share/vrom on Linux)",
        "Where vaults' stores live, one folder per vault (`--state-dir`, `state_dir=`).",
    ),
    Variable(
        DATABASE_URL_ENV,
        "database_url",
        "each vault has its own SQLite file in the state directory",
        "The database vaults' stores live in when no `--db`/`database_url=` is given"
        " (`postgresql://USER:PASSWORD@HOST/DB` or `sqlite:///FILE`).",
    ),
    Variable(
        EMBEDDER_ENV,
        "embedder",
        f"`{DEFAULT_EMBEDDER_SPEC}`: the built-in all-MiniLM-L6-v2 model",
        "The embedder spec `auto` stands for (`--embedder`, `embedder=`): `default`, `none`,"
        " `fake[:DIMS[:MS]]`, `onnx:DIR` or `openai:MODEL[@URL]`.",
    ),
    Variable(
        STORAGE_KEY_ENV,
        "storage_key",
        "no key: the collection file is not encrypted",
        "The key of an encrypted collection file, when `Collection.open` is given no `key=`.",
    ),
    Variable(
        REGISTRY_URL_ENV,
        "registry_url",
        "none: a command that needs a registry says to set it",
        "The knowledge-pack registry (a `registry.json` URL, a `file://` URL or a folder path;"
        " `--registry`, `registry_url=`).",
    ),
    Variable(
        CACHE_DIR_ENV,
        "cache_dir",
        "the user cache dir (platformdirs: ~/.cache/vrom on Linux)",
        "Where pulled knowledge packs are cached (`cache_dir=`).",
    ),
    Variable(
        CACHE_QUOTA_ENV,
        "cache_quota",
        "10 GiB",
        "The most the pack cache may hold: bytes, a size such as `2GiB`, or `unlimited`"
        " (`cache_quota=`).",
    ),
    Variable(
        TRUSTED_KEYS_ENV,
        "trusted_keys",
        "none: unsigned packs are accepted with a warning",
        "Publisher keys a pack must be signed by: public keys or `.pub` paths, split at commas"
        " or the path separator; set, an unsigned or otherwise signed pack is refused"
        " (`--trusted-keys`, `trusted_keys=`).",
    ),
    Variable(
        MCP_TOKEN_ENV,
        "mcp_token",
        "no token: the HTTP transport serves this machine only",
        "The bearer token of the MCP server's HTTP transport (`vrom mcp --token`).",
    ),
    Variable(
        NO_COLOR_ENV,
        "no_color",
        "unset: colour on a terminal",
        "Set and not empty: the CLI writes no colour (https://no-color.org).",
    ),
    Variable(
        TERM_ENV,
        "term",
        "the terminal's own",
        "`dumb`: the CLI writes no colour.",
    ),
    Variable(
        OPENAI_API_KEY_ENV,
        "openai_api_key",
        "no key: requests carry no Authorization header",
        "The API key of an `openai:MODEL` embedder (`Embedder.openai` reads the variable its"
        " `api_key_env=` names, this one by default).",
    ),
)
"""Every variable vrom reads, in the order docs/configuration.md lists them."""


@dataclass(frozen=True)
class Settings:
    """What the environment configures, resolved once (see the module's docstring).

    Each field is the value of the variable `VARIABLES` names for it, None when unset or empty
    (``vault_root`` keeps an empty value, which `vault_variable` refuses). Immutable, so one
    value is safely shared by threads; `given` makes a changed copy.
    """

    vault: str | None = None
    vault_root: str | None = None
    state_dir: str | None = None
    database_url: str | None = None
    embedder: str | None = None
    storage_key: str | None = None
    registry_url: str | None = None
    cache_dir: str | None = None
    cache_quota: str | None = None
    trusted_keys: tuple[str, ...] = ()
    mcp_token: str | None = None
    no_color: str | None = None
    term: str | None = None
    openai_api_key: str | None = None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Return the settings ``environ`` (by default the process's environment) holds now."""
        env = os.environ if environ is None else environ
        raw = {v.field: env.get(v.name) for v in VARIABLES}  # each read once
        values: dict[str, Any] = {field: value or None for field, value in raw.items()}
        values["vault_root"] = raw["vault_root"]  # set but empty is refused, not unset
        values["trusted_keys"] = tuple(key_list(values["trusted_keys"] or ""))
        return cls(**values)

    def given(self, **arguments: Any) -> Settings:
        """Return these settings with the fields ``arguments`` gives (None: keep this value),
        so an argument a face was given beats the environment."""
        changed = {name: value for name, value in arguments.items() if value is not None}
        return dataclasses.replace(self, **changed) if changed else self

    def vault_variable(self) -> tuple[str, str] | None:
        """Return the variable naming the vault to use when none is named, and its value.

        ``VROM_VAULT`` and ``VAULT_ROOT`` mean the same; set both, they must name the same
        folder, else neither wins: a `ValidationError` names both (a client config that sets
        one and a shell that exports the other must not quietly serve the wrong vault).
        ``VAULT_ROOT`` set but empty is refused like an empty ``--vault``, since it would
        otherwise mean the current folder; an empty ``VROM_VAULT`` counts as unset, like every
        other variable. None when neither is set.
        """
        root, named = self.vault_root, self.vault
        if root is not None and not root.strip():
            raise ValidationError(
                f"${VAULT_ROOT_ENV} is set but empty: set it to the vault folder, or unset it"
            )
        if named and root and _folder(named) != _folder(root):
            raise ValidationError(
                f"${VAULT_ENV} ({named!r}) and ${VAULT_ROOT_ENV} ({root!r}) name different"
                " vaults: unset one of them"
            )
        if named:
            return VAULT_ENV, named
        return None if root is None else (VAULT_ROOT_ENV, root)

    def named_vault(self) -> str | None:
        """Return the vault ``$VROM_VAULT`` or ``$VAULT_ROOT`` names (see `vault_variable`)."""
        named = self.vault_variable()
        return None if named is None else named[1]

    @property
    def embedder_spec(self) -> str:
        """The embedder spec ``"auto"`` stands for: ``$VROM_EMBEDDER``, else ``default``."""
        return (self.embedder or DEFAULT_EMBEDDER_SPEC).strip()

    @property
    def colour(self) -> bool:
        """False when ``$NO_COLOR`` is set and not empty, or ``$TERM`` is ``dumb``."""
        return not self.no_color and self.term != "dumb"


def _folder(path: str) -> Path:
    return Path(path).expanduser().resolve()


def key_list(text: str) -> list[str]:
    """Return the public keys or ``.pub`` paths in ``text``, split at commas and `os.pathsep`."""
    parts = text.replace(os.pathsep, ",").split(",")
    return [part.strip() for part in parts if part.strip()]


def api_key(variable: str = OPENAI_API_KEY_ENV) -> str | None:
    """Return the API key the environment variable ``variable`` holds (None: unset or empty).

    For `vrom.embed.Embedder.openai`, whose ``api_key_env=`` may name any variable (a
    provider's own, such as ``NVIDIA_API_KEY``); the faces pass `Settings.openai_api_key`.
    """
    return os.environ.get(variable) or None


def environment() -> Mapping[str, str]:
    """Return the whole environment, for the client installers' config-folder rules (``HOME``,
    ``XDG_CONFIG_HOME``, ``APPDATA``, ``CLAUDE_CONFIG_DIR``: where each client keeps its
    config, not vrom settings)."""
    return os.environ
