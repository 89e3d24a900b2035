"""The exceptions vrom raises: one root, `VromError`, and a short tree under it.

    VromError            anything vrom reports on purpose
    ├── StorageError     the store could not be opened, read or written
    ├── ValidationError  an argument or input was rejected before anything was written
    ├── NotFoundError    a vault, note or store that was asked for does not exist
    ├── ModelError       an embedding model could not be loaded or run
    └── PackError        a knowledge pack or registry is missing, unreachable or fails its check

Third-party exceptions are converted where they cross into vrom (``raise X(...) from exc``),
so callers only ever need to catch `VromError`. A message never carries a password: one in a
URL (``postgresql://user:secret@host/db``) or a ``password=`` setting is masked as ``***``
(`hide_passwords`), so an error can name the database it failed on, in a terminal, an MCP
result or a log.
"""

from __future__ import annotations

import re

SHOWN_CHARS = 80
"""How much of a rejected value a message quotes."""
MASK = "***"
"""What a password is shown as."""

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")
_PASSWORD_SETTING = re.compile(r"(password\s*=\s*)('[^']*'|[^\s&;,]+)", re.IGNORECASE)


def hide_passwords(text: str) -> str:
    """Return ``text`` with every password in it masked: a URL's (``user:***@host``) and a
    ``password=...`` setting's (in a URL's query or a connection string).

    A URL's user information runs to its last ``@``, so a password with a raw ``@`` or ``/``
    in it is masked whole: masking too much is safe, too little is not.
    """
    return _PASSWORD_SETTING.sub(rf"\g<1>{MASK}", _URL.sub(_masked_url, text))


def _masked_url(match: re.Match[str]) -> str:
    url = match.group(0)
    scheme, _, rest = url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if not at or ":" not in userinfo or rest.startswith("/"):  # no user, or no host (a file)
        return url
    user = userinfo.split(":", 1)[0]
    return f"{scheme}://{user}:{MASK}@{host}"


class VromError(Exception):
    """Base class of every error vrom raises on purpose; its message is one line for a person.

    A password in the message is masked (`hide_passwords`) when the error is made.
    """

    def __init__(self, *args: object) -> None:
        super().__init__(*(hide_passwords(a) if isinstance(a, str) else a for a in args))


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


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def check_unicode(text: str, what: str) -> str:
    """Return ``text`` if it is valid Unicode, else raise `ValidationError` naming ``what``.

    A lone surrogate (``\\udcff``) is what Python makes of bytes that are not UTF-8 in a
    command-line argument or a file name; it cannot be stored, matched or embedded, so it is
    refused where it comes in rather than failing deep inside SQLite or a tokenizer.
    """
    found = _LONE_SURROGATE.search(text)
    if found is not None:
        raise ValidationError(
            f"{what} is not valid Unicode: it holds a lone surrogate ({found.group()!a} at"
            f" character {found.start()}), as bytes that are not UTF-8 become; pass UTF-8 text"
        )
    return text


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
