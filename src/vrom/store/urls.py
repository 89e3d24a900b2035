"""Store locations given as URLs: which name a database server, and how to show one.

A location is a file path, a ``sqlite:///`` URL (a file too), or a server's URL
(``postgresql://USER:PASSWORD@HOST:PORT/DB``), in which a namespace picks one vault's or
collection's store among many. A URL is never turned into a `pathlib.Path`, and one shown to a
person (an error, a log line, ``--json``) has its password masked (`mask_url`).
"""

from __future__ import annotations

import os
import re

from vrom.errors import hide_passwords

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
FILE_SCHEMES = ("sqlite",)
"""URL schemes that name a file on this machine rather than a server."""


def url_scheme(location: object) -> str | None:
    """Return the scheme of a location written as ``scheme://...`` (lower-cased), else None."""
    if not isinstance(location, str):
        return None  # a PathLike is a path, whatever its text looks like
    match = _SCHEME.match(location)
    return None if match is None else match.group(1).lower()


def is_url(location: object) -> bool:
    """Return True when a location is written as a URL (``sqlite:///...`` included)."""
    return url_scheme(location) is not None


def is_server_url(location: object) -> bool:
    """Return True when a location is the URL of a database server (not a file's URL)."""
    scheme = url_scheme(location)
    return scheme is not None and scheme not in FILE_SCHEMES


def mask_url(location: str | os.PathLike[str]) -> str:
    """Return a location as it may be shown: a URL's password (and any ``password=`` in its
    query) as ``***``; a path as it is."""
    return hide_passwords(os.fspath(location))
