"""Where a vault's state lives: outside the vault, in a per-vault folder of the state directory,
or in a namespace of a database.

The state directory is ``--state-dir`` / ``VROM_STATE_DIR`` when given, else platformdirs' user
data dir. Each vault gets a folder named from its absolute path (readable name + hash), holding
its store file; a small ``state.json`` remembers the vault indexed last, so ``vrom search`` works
right after ``vrom index PATH`` without repeating the path.

A vault whose store is in a database (``--db URL``, ``$VROM_DATABASE_URL``) has it in a
namespace there, by default the vault folder's name, so the same vault on two machines (the
same folder name) finds one store; its files stay on the machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import platformdirs

from vrom.errors import NotFoundError, StorageError, ValidationError
from vrom.settings import Settings
from vrom.store import Location, Store, is_server_url, mask_url, open_store

STORE_FILE = "store.db"
_LAST_VAULT_KEY = "last_vault"


def state_dir(override: str | os.PathLike[str] | None, settings: Settings) -> Path:
    """Return the state directory: the override, ``settings.state_dir`` (``VROM_STATE_DIR``),
    or the user data dir."""
    chosen = override or settings.state_dir
    if chosen:
        return Path(chosen).expanduser().resolve()
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


def last_vault(base: Path, *, stored_here: bool = True) -> Path | None:
    """Return the vault indexed last, if it is still indexed (``stored_here``: in its file
    under ``base``; else if its folder is still there, its store being in a database)."""
    try:
        data = json.loads((base / "state.json").read_text(encoding="utf-8"))
        root = Path(data[_LAST_VAULT_KEY])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if stored_here:
        return root if store_path(root, base).exists() else None
    return root if root.is_dir() else None


def find_indexed_vault(start: Path, base: Path) -> Path | None:
    """Return the nearest indexed vault at or above ``start``, or None."""
    current = start.resolve()
    for folder in (current, *current.parents):
        if store_path(folder, base).exists():
            return folder
    return None


# -- a vault's store in a database -----------------------------------------------------------


def default_namespace(root: Path) -> str:
    """Return the namespace a vault's store has in a database unless one is given: the vault
    folder's name, the same on every machine whose folder is named alike."""
    return root.name or "default"


def checked_namespace(namespace: object) -> str | None:
    """Return a namespace given by a caller (None: not given), or refuse one that is no text."""
    if namespace is None:
        return None
    if not isinstance(namespace, str) or not namespace.strip():
        raise ValidationError(
            f"a namespace is a non-empty text, not {namespace!r}: the vault folder's name is "
            "the default"
        )
    return namespace


def store_location(database_url: Location, local: bool, settings: Settings) -> Location:
    """Return the database a vault's store is in: ``database_url``, else
    ``settings.database_url`` (``$VROM_DATABASE_URL``); None for the vault's own file in the
    state directory (always so with ``local``)."""
    if local:
        if database_url is not None:
            raise ValidationError("give a database URL or ask for the local store, not both")
        return None
    if database_url is None:
        return settings.database_url
    if not os.fspath(database_url).strip():
        raise ValidationError(
            "the database URL is empty: give postgresql://USER@HOST/DB, sqlite:///FILE or a"
            " store file"
        )
    return database_url


def shown_location(location: Location, namespace: str) -> str:
    """Return where a store is, as a message says it: a database's namespace, URL masked."""
    if location is None:
        return "memory"
    if is_server_url(location):
        return f"namespace {namespace!r} of {mask_url(os.fspath(location))}"
    return os.fspath(location)  # a file: no password to mask


def open_in_namespace(location: Location, namespace: str, *, create: bool) -> Store:
    """Return the store at ``location``: in ``namespace`` on a database server; a SQLite file
    holds one store and takes no namespace."""
    server = is_server_url(location)
    return open_store(location, namespace=namespace if server else None, create=create)


def open_vault_store(location: Location, namespace: str, root: Path, *, create: bool) -> Store:
    """Return the store of the vault at ``root`` in a database (see `store_location`).

    Refuses a namespace that holds a collection (`StorageError`), and with ``create=False``
    one where the vault was never indexed (`NotFoundError`).
    """
    store = open_in_namespace(location, namespace, create=create)
    where = shown_location(location, namespace)
    try:
        collection = store.get_meta("collection_name")
        if collection is not None:
            raise StorageError(
                f"{where} holds collection {collection!r}, not a vault: give the vault another"
                " namespace (--namespace)"
            )
        if not create and store.get_meta("vault_root") is None:
            raise NotFoundError(
                f"vault {str(root)!r} is not indexed in {where} yet: run 'vrom index {root}'"
                " with this database, or 'vrom sync --to' from a machine where it is indexed"
            )
    except BaseException:
        store.close()
        raise
    return store
