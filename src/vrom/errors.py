"""The exceptions vrom raises: one root, `VromError`, and a short tree under it.

    VromError            anything vrom reports on purpose
    ├── StorageError     the store could not be opened, read or written
    ├── ValidationError  an argument or input was rejected before anything was written
    ├── NotFoundError    a vault, note or store that was asked for does not exist
    ├── ModelError       an embedding model could not be loaded or run
    └── PackError        a knowledge pack or registry is missing, unreachable or fails its check

Third-party exceptions are converted where they cross into vrom (``raise X(...) from exc``),
so callers only ever need to catch `VromError`.
"""

from __future__ import annotations


class VromError(Exception):
    """Base class of every error vrom raises on purpose; its message is one line for a person."""


class StorageError(VromError):
    """The store could not be opened, read or written (corrupt file, disk full, busy too long)."""


class ValidationError(VromError):
    """An argument or an input was rejected before anything was written.

    ``code`` is a short machine-readable reason, e.g. ``invalid_value``.
    """

    def __init__(self, message: str, code: str = "invalid_value") -> None:
        super().__init__(message)
        self.code = code


class NotFoundError(VromError):
    """A vault, note or store that was asked for does not exist."""


class ModelError(VromError):
    """An embedding model could not be loaded or run."""


class PackError(VromError):
    """A knowledge pack or its registry is missing, unreachable, malformed or failed its check."""
