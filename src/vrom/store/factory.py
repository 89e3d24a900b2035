"""Open a store from where it lives: a path or ``sqlite://`` URL (a SQLite file), memory, or a
``postgresql://`` URL (a namespace of a PostgreSQL database with pgvector).

The one place that names a backend class. The PostgreSQL backend and its driver (the
``postgres`` extra) are imported only when a ``postgresql://`` URL is opened.
"""

from __future__ import annotations

import os
from pathlib import Path

from vrom.errors import StorageError, ValidationError
from vrom.store.roles import Store
from vrom.store.sqlite import SQLiteStore
from vrom.store.urls import POSTGRES_SCHEMES, is_postgres_url

Location = str | os.PathLike[str] | None
"""A store's location: a file path, ``sqlite:///relative`` or ``sqlite:////absolute``, or None
(``sqlite://``, ``sqlite:///:memory:``, ``:memory:``) for a store in memory, or a
``postgresql://user:password@host:port/database`` URL."""


def database_file(location: Location) -> Path | None:
    """Return the SQLite file a location names, or None for a store in memory.

    Refuses another URL scheme without echoing the rest of the URL (it may hold a password).
    """
    if location is None:
        return None
    if not isinstance(location, (str, os.PathLike)):
        raise ValidationError(
            f"a store location must be a path or a sqlite:/// URL, not {type(location).__name__}"
        )
    text = os.fspath(location)
    if not isinstance(text, str):
        raise ValidationError("a store location must be a text path, not bytes")
    if text == ":memory:":
        return None
    if text.startswith("sqlite:"):
        rest = text.removeprefix("sqlite:")
        if rest in ("//", "///:memory:"):
            return None
        if not rest.startswith("///") or rest == "///":
            raise ValidationError(f"storage URL {text!r} must look like sqlite:///path/to/file.db")
        text = rest[3:]
    elif "://" in text:
        scheme = text.split("://", 1)[0]
        if scheme in POSTGRES_SCHEMES:
            raise ValidationError(
                f"{scheme}:// names a database server, not a SQLite file: the PostgreSQL"
                " backend opens it (open_store)"
            )
        raise ValidationError(
            f"storage scheme {scheme!r} is not supported: give a path, a sqlite:/// URL or a"
            " postgresql:// URL"
        )
    if not text.strip():
        raise ValidationError("storage must not be an empty path")
    return Path(text).expanduser()


def open_store(
    location: Location,
    *,
    create: bool = True,
    key: str | None = None,
    read_only: bool = False,
    namespace: str | None = None,
) -> Store:
    """Return the store at ``location`` (see `Location`), opened for reading and writing.

    ``create=False`` refuses a missing file or namespace (`NotFoundError`); ``key`` opens an
    encrypted file (SQLCipher); ``read_only`` opens an existing file as immutable (a verified
    pack). For a ``postgresql://`` URL, ``namespace`` names the vault or collection inside the
    database (``default`` when None); files' options (``key``, ``read_only``) do not apply.
    """
    if is_postgres_url(location):
        assert isinstance(location, str)
        if key is not None or read_only:
            raise ValidationError(
                "a PostgreSQL store takes no encryption key and is not opened read-only"
            )
        return _postgres_store(location, namespace, create)
    path = database_file(location)  # refuses another server's URL (libsql://, mysql://) first
    if namespace is not None:
        raise ValidationError("a namespace applies to a postgresql:// store, not a SQLite file")
    return SQLiteStore(path, create=create, key=key, read_only=read_only)


def _postgres_store(url: str, namespace: str | None, create: bool) -> Store:
    """Return the PostgreSQL store at ``url``, or say which extra to install for it."""
    try:  # psycopg, psycopg_pool and pgvector: only when a PostgreSQL store is opened
        from vrom.store.postgres import PostgresStore
    except ImportError as exc:
        raise StorageError(
            f"a postgresql:// store needs {exc.name or 'the PostgreSQL driver'}:"
            " pip install 'vrom[postgres]'"
        ) from exc
    return PostgresStore(url, namespace, create=create)
