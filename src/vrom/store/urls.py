"""Store locations given as URLs: which name a database server, how to show one, and the
server it names.

A location is a file path, a ``sqlite:///`` URL (a file too), or a server's URL
(``postgresql://USER:PASSWORD@HOST:PORT/DB``), in which a namespace picks one vault's or
collection's store among many. A URL is never turned into a `pathlib.Path`; anything vrom
prints, logs or returns as JSON shows ``mask_url(location)`` instead, and errors name the
server by `server_of`.
"""

from __future__ import annotations

import functools
import os
import re
from urllib.parse import parse_qsl, unquote, urlsplit

POSTGRES_SCHEMES = ("postgresql", "postgres")
FILE_SCHEMES = ("sqlite",)
"""URL schemes that name a file on this machine rather than a server."""
MASK = "***"
_PASSWORD_PARAMETER = re.compile(r"(?i)((?:^|[?&;])password=)[^&;#]*")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_MIN_FRAGMENT = 4
"""A driver's error text holding this many characters of a password in a row has them masked."""
_MIN_QUOTED = 3
"""A value a driver's error quotes is masked whole when it shares this many characters in a row
with a password (or all of its own, when shorter)."""
_QUOTED = re.compile(r"""(["'])([^"']{0,200})\1""")


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
    if credentials_problem(url) is not None:  # where its password ends is anyone's guess
        return f"{url.split('://', 1)[0]}://{MASK}"
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


def _userinfo(url: str) -> str:
    """Return the widest reading of a URL's ``user:password`` part: up to its last ``@``
    before the query (or anywhere, when a ``/``, ``?`` or ``#`` in a password cut it short)."""
    rest = url.split("://", 1)[1] if "://" in url else url
    head = re.split(r"[?#]", rest, maxsplit=1)[0]
    for scope in (head, rest):
        if "@" in scope:
            return scope[: scope.rfind("@")]
    return ""


def credentials_problem(url: str) -> str | None:
    """Return why a server URL's user and password cannot be read one way, or None.

    Python and libpq split ``user:password@host`` differently when the password holds a raw
    ``@`` (libpq stops at the first, Python at the last) or a raw ``/``, ``?`` or ``#`` (both
    stop there, and the rest reads as host, database or options), and libpq refuses a ``%``
    that starts no ``%XX``: its error would then quote the password.
    """
    userinfo = _userinfo(url)
    if not userinfo:
        return None
    if "@" in userinfo:
        return "holds a raw '@'"
    if any(mark in userinfo for mark in "/?#"):
        return "holds a raw '/', '?' or '#'"
    if _BAD_PERCENT.search(userinfo):
        return "holds a '%' that starts no %XX code"
    return None


def secrets_of(url: str) -> list[str]:
    """Return the passwords a URL holds (to scrub them from a driver's error text): the
    password as written and decoded, however the URL is read."""
    found = []
    userinfo = _userinfo(url)
    if ":" in userinfo:
        written = userinfo.split(":", 1)[1]
        found += [written, unquote(written)]
    try:
        parts = urlsplit(url)
    except ValueError:
        parts = None
    if parts is not None:
        if parts.password:
            found += [parts.password, unquote(parts.password)]
        found += [value for key, value in parse_qsl(parts.query) if key.lower() == "password"]
    return sorted({secret for secret in found if secret}, key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """Return ``text`` with every password of ``url`` masked (and the URL itself, masked),
    and the parts of one a driver quotes (the piece of a password it could not read): a quoted
    value sharing characters with one is masked whole, a run of `_MIN_FRAGMENT` characters of
    one anywhere else."""
    text = text.replace(url, mask_url(url))
    for secret in secrets_of(url):
        text = text.replace(secret, MASK)
        text = _QUOTED.sub(functools.partial(_masked_quote, secret=secret), text)
        text = _mask_runs(text, secret)
    return text


def _longest_run(text: str, secret: str) -> int:
    """Return the length of the longest piece of ``text`` that is part of ``secret``."""
    longest = 0
    for start in range(len(text)):
        end = start + longest + 1
        while end <= len(text) and text[start:end] in secret:
            longest, end = end - start, end + 1
    return longest


def _masked_quote(match: re.Match[str], secret: str) -> str:
    quoted = match.group(2)
    shared = _longest_run(quoted, secret)
    if quoted != MASK and shared and shared >= min(_MIN_QUOTED, len(quoted), len(secret)):
        return f"{match.group(1)}{MASK}{match.group(1)}"
    return match.group(0)


def _mask_runs(text: str, secret: str) -> str:
    """Return ``text`` with each longest run that is part of ``secret`` masked (runs shorter
    than `_MIN_FRAGMENT` characters, or than the secret, are left)."""
    shortest = min(_MIN_FRAGMENT, len(secret))
    shown: list[str] = []
    start = 0
    while start < len(text):
        end = start
        while end < len(text) and text[start : end + 1] in secret:
            end += 1
        if end - start >= shortest:
            shown.append(MASK)
            start = end
        else:
            shown.append(text[start])
            start += 1
    return "".join(shown)
