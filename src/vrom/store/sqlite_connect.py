"""How `SQLiteStore` reaches its file: the DB-API driver (SQLCipher for a key).

Checks an encryption key before it is used and picks the driver that can open the store.
"""

from __future__ import annotations

import sqlite3
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
