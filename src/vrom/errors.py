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

SHOWN_CHARS = 80
"""How much of a rejected value a message quotes."""


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


def shown(value: object) -> str:
    """Return a rejected value as a message quotes it: its repr, cut to `SHOWN_CHARS`.

    Never raises: an int past Python's 4,300-digit limit or a list nested too deep to repr is
    named by its type; control characters and lone surrogates come out escaped, so the message
    stays one printable line.
    """
    try:
        text = repr(value)
    except (ValueError, RecursionError):
        return f"<{type(value).__name__} too large to show>"
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."
