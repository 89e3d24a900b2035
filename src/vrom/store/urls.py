"""Store locations given as URLs: which name a database server, how to show one, and the
server it names.

A location is a file path, a ``sqlite:///`` URL (a file too), or a server's URL
(``postgresql://USER:PASSWORD@HOST:PORT/DB``), in which a namespace picks one vault's or
collection's store among many. A URL is never turned into a `pathlib.Path`; anything vrom
prints, logs or returns as JSON shows ``mask_url(location)`` instead, and errors name the
server by `server_of`.
"""

from __future__ import annotations

import os
import re
from urllib.parse import parse_qsl, unquote, urlsplit

POSTGRES_SCHEMES = ("postgresql", "postgres")
FILE_SCHEMES = ("sqlite",)
"""URL schemes that name a file on this machine rather than a server."""
MASK = "***"
_PASSWORD_PARAMETER = re.compile(r"(?i)((?:^|[?&;])password=)[^&;#]*")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


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


def is_postgres_url(location: object) -> bool:
    """Return True when ``location`` is a ``postgresql://`` or ``postgres://`` URL."""
    if not isinstance(location, str) or "://" not in location:
        return False
    return location.split("://", 1)[0] in POSTGRES_SCHEMES


def mask_url(location: str | os.PathLike[str]) -> str:
    """Return a location as it may be shown: a URL with its password (in the user part or a
    ``password=`` parameter) masked; a path as it is.

    A URL that does not parse is masked whole after its scheme, so no secret slips through.
    """
    if not is_url(location):
        return os.fspath(location)
    url = os.fspath(location)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a malformed port raises here)
    except ValueError:
        scheme = url.split("://", 1)[0] if "://" in url else ""
        return f"{scheme}://{MASK}" if scheme else MASK
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        if ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":" + MASK
        netloc = f"{userinfo}@{host}"
    query = _PASSWORD_PARAMETER.sub(lambda m: m.group(1) + MASK, parts.query)
    shown = f"{parts.scheme}://{netloc}{parts.path}"
    if query:
        shown += f"?{query}"
    if parts.fragment:
        shown += f"#{parts.fragment}"
    return shown


def server_of(url: str) -> str:
    """Return the server a PostgreSQL URL names, for an error: ``host:port``, or the socket
    folder (``socket folder /tmp/x``), never the user or password."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "the server in the URL (it does not parse)"
    params = dict(parse_qsl(parts.query))
    host = params.get("host") or unquote(parts.hostname or "") or "localhost"
    port_text = params.get("port") or (str(port) if port else "5432")
    if host.startswith("/"):
        return f"socket folder {host} (port {port_text})"
    return f"{host}:{port_text}"


def secrets_of(url: str) -> list[str]:
    """Return the passwords a URL holds (to scrub them from a driver's error text)."""
    found = []
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    if parts.password:
        found += [parts.password, unquote(parts.password)]
    found += [value for key, value in parse_qsl(parts.query) if key.lower() == "password"]
    return [secret for secret in found if secret]


def scrub(text: str, url: str) -> str:
    """Return ``text`` with every password of ``url`` masked (and the URL itself, masked)."""
    text = text.replace(url, mask_url(url))
    for secret in secrets_of(url):
        text = text.replace(secret, MASK)
    return text
