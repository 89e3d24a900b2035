"""How `SQLiteStore` reaches its file: the DB-API driver (SQLCipher for a key) and SQL scripts.

Checks an encryption key before it is used, picks the driver that can open the store, and splits
a migration script into statements so it runs inside the caller's transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

from vrom.errors import StorageError, ValidationError


def _checked_key(key: str | None) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not key or "\x00" in key:
        raise ValidationError("an encryption key must be a non-empty string without NUL")
    return key


def _driver(encrypted: bool) -> Any:
    """Return the DB-API module to open stores with: sqlite3, or SQLCipher's for a key."""
    if not encrypted:
        return sqlite3
    try:
        from sqlcipher3 import dbapi2
    except ImportError as exc:
        raise StorageError(
            "an encrypted store needs SQLCipher: pip install 'vrom[encrypted]'"
        ) from exc
    return dbapi2


def _statements(script: str) -> Iterator[str]:
    """Yield the statements of an SQL script one by one (a trigger body holds ``;`` too).

    ``executescript`` would run them all, but it commits first: a migration must stay inside
    the transaction that also records its version.
    """
    pending = ""
    for part in script.split(";"):
        pending += part + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                yield pending
            pending = ""
