"""Open a store from where it lives: a path or ``sqlite://`` URL (a SQLite file), or memory.

The one place that names a backend class. ``postgresql://`` is recognised and refused for now:
the PostgreSQL backend comes next, behind the same roles.
"""

from __future__ import annotations

import os
from pathlib import Path

from vrom.errors import ValidationError
from vrom.store.roles import Store
from vrom.store.sqlite import SQLiteStore

Location = str | os.PathLike[str] | None
"""A store's location: a file path, ``sqlite:///relative`` or ``sqlite:////absolute``, or None
(``sqlite://``, ``sqlite:///:memory:``, ``:memory:``) for a store in memory."""
_POSTGRES_SCHEMES = ("postgresql", "postgres")


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
        if scheme in _POSTGRES_SCHEMES:
            raise ValidationError(
                f"{scheme}:// stores need the PostgreSQL backend, which this vrom does not "
                "have yet: give a path or a sqlite:/// URL"
            )
        raise ValidationError(
            f"storage scheme {scheme!r} is not supported: give a path or a sqlite:/// URL"
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

    ``create=False`` refuses a missing file (`NotFoundError`); ``key`` opens an encrypted file
    (SQLCipher); ``read_only`` opens an existing file as immutable (a verified pack).
    ``namespace`` picks one store among the many a database server holds; a SQLite file holds
    one store, so it is ignored there.
    """
    return SQLiteStore(database_file(location), create=create, key=key, read_only=read_only)
