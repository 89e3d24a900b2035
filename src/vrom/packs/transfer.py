"""Moving a pack's bytes into the cache: HTTP downloads, ``Range`` resume, local copies, progress.

`fetch_file` brings one file in a pull's partial folder up to the size the manifest gives. From an
``http://``/``https://`` URL it streams with httpx (a core dependency, imported only then),
asking with a ``Range`` request for only the rest of a file an interrupted pull left behind, and
starting over when the server ignores or refuses that; from a ``file://`` URL it copies, resuming
the same way. A file that would grow past the manifest's size, or whose size as the server or the
file system states it differs, raises `Corrupt` (the caller deletes the partial folder); a fetch
that fails or stops raises `FetchFailed` and leaves the partial file for the next pull to resume.
A `Session` carries one overall deadline for everything fetched through it: it is checked as
each block arrives, and no read waits past it, so a server dripping its bytes cannot hold a pull
(or a registry fetch) longer than that; the pull stops with `FetchFailed` and can be resumed.
By default (`deadline_for`) it is the timeout for the small documents, plus a second per
`SLOWEST_RATE` bytes of the pack's files once the manifest has said how many there are.
Each file is flushed to disk before the caller renames the folder into place; SHA-256 hashes are
checked afterwards, by the caller, against the manifest. `read_bytes` fetches a whole small
document (a registry or manifest) the same ways.

Progress goes to the caller's callback as `PullProgress` events through a `Reporter`, throttled
by a `Meter` to one event per `PROGRESS_STEP` bytes of a file plus one at its end.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import IO, TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from vrom.errors import PackError
from vrom.packs.manifest import PackManifest

if TYPE_CHECKING:
    import httpx

__all__ = [
    "COPY_BLOCK",
    "PROGRESS_STEP",
    "SLOWEST_RATE",
    "Corrupt",
    "FetchFailed",
    "Meter",
    "ProgressCallback",
    "PullProgress",
    "Reporter",
    "Session",
    "deadline_for",
    "fetch_file",
    "file_path",
    "read_bytes",
]

PROGRESS_STEP = 64 * 1024  # report progress at most once per this many bytes (and at each end)
COPY_BLOCK = 256 * 1024
SLOWEST_RATE = 64 * 1024  # bytes/s: a pull slower than this on average stops (and resumes later)


@dataclass(frozen=True)
class PullProgress:
    """How far a pull has got.

    ``phase`` is ``manifest``, ``index`` (the index file), ``chunks`` (the store file), the role
    name for any other file, or ``done``. ``file`` is the file's name in the pack (empty for
    ``done``); ``loaded`` and ``total`` are bytes of that file (of all data files for ``done``).
    ``loaded`` starts at the resumed size and grows to ``total``; it starts again at 0 only when
    a server ignores the ``Range`` request and the file is downloaded again from the start.
    """

    phase: str
    file: str
    loaded: int
    total: int

    @property
    def fraction(self) -> float:
        """Return ``loaded / total`` (1.0 for an empty file)."""
        return self.loaded / self.total if self.total else 1.0


ProgressCallback = Callable[[PullProgress], None]


class FetchFailed(PackError):
    """A registry, manifest or file could not be fetched (offline, HTTP error, interrupted)."""


class Corrupt(PackError):
    """Downloaded data does not match the manifest; the partial folder must go."""


class Session:
    """An httpx client opened on first use (only http(s) URLs need one) and closed at the end,
    and the deadline, ``deadline`` seconds from now (None: ``timeout``), by which everything
    fetched must be in."""

    def __init__(
        self, given: httpx.Client | None, timeout: float, deadline: float | None = None
    ) -> None:
        self._given = given
        self._own: httpx.Client | None = None
        self._timeout = timeout
        self._started = time.monotonic()
        self.deadline = timeout if deadline is None else deadline
        self._ends = self._started + self.deadline

    def extend_deadline(self, seconds: float) -> None:
        """Move the deadline to ``seconds`` after the session began."""
        self.deadline = seconds
        self._ends = self._started + seconds

    def read_timeout(self, url: str, have: int, size: int | None) -> float:
        """Return how long one request may wait now (the timeout, cut to the deadline), or
        raise `FetchFailed` when the deadline has passed."""
        left = self._ends - time.monotonic()
        if left <= 0:
            got = f"{have:,} of {size:,} bytes" if size is not None else f"{have:,} bytes"
            raise FetchFailed(
                f"{url}: not done within the deadline of {self.deadline:.1f} s ({got} in): too "
                "slow; pull again to resume, or allow more time (pull_deadline=)"
            )
        return min(self._timeout, left)

    def client(self) -> httpx.Client:
        if self._given is not None:
            return self._given
        if self._own is None:
            self._own = _httpx().Client(timeout=self._timeout, follow_redirects=True)
        return self._own

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._own is not None:
            self._own.close()


class Reporter:
    """Delivers `PullProgress` events to the caller's callback, if any."""

    def __init__(self, callback: ProgressCallback | None) -> None:
        self.callback = callback

    def event(self, phase: str, file: str, loaded: int, total: int) -> None:
        if self.callback is not None:
            self.callback(PullProgress(phase, file, loaded, total))

    def meter(self, phase: str, file: str, total: int) -> Meter:
        return Meter(self, phase, file, total)

    def done(self, manifest: PackManifest) -> None:
        total = sum(f.size for f in manifest.files.values())
        self.event("done", "", total, total)


class Meter:
    """Progress of one file: reported at most every `PROGRESS_STEP` bytes and at its end."""

    def __init__(self, reporter: Reporter, phase: str, file: str, total: int) -> None:
        self._reporter = reporter
        self._phase = phase
        self._file = file
        self._total = total
        self._reported = 0

    def start(self, loaded: int) -> None:
        self._reported = loaded

    def update(self, loaded: int) -> None:
        if loaded - self._reported >= PROGRESS_STEP:
            self._reported = loaded
            self._reporter.event(self._phase, self._file, loaded, self._total)

    def finish(self, loaded: int) -> None:
        self._reported = loaded
        self._reporter.event(self._phase, self._file, loaded, self._total)


def deadline_for(timeout: float, data_bytes: int) -> float:
    """Return the default deadline of a pull of ``data_bytes``: the timeout, plus a second per
    `SLOWEST_RATE` bytes."""
    return timeout + data_bytes / SLOWEST_RATE


def file_path(url: str) -> Path:
    """Return the local path a ``file://`` URL names (``file:///C:/x`` is ``C:/x`` on Windows)."""
    path = unquote(urlsplit(url).path)
    if os.name == "nt" and len(path) > 2 and path[0] == "/" and path[2] == ":":
        path = path[1:]
    return Path(path)


def read_bytes(session: Session, url: str, limit: int) -> bytes:
    """Return the whole body at ``url`` (at most ``limit`` bytes), or raise `FetchFailed`."""
    if urlsplit(url).scheme.lower() == "file":
        path = file_path(url)
        try:
            if path.stat().st_size > limit:
                raise PackError(f"{path} is larger than {limit} bytes")
            return path.read_bytes()
        except OSError as exc:
            raise FetchFailed(f"cannot read {path}: {exc.strerror or exc}") from exc
    httpx = _httpx()
    body = bytearray()
    try:
        timeout = session.read_timeout(url, 0, None)
        with session.client().stream("GET", url, timeout=timeout) as response:
            if response.status_code != 200:
                raise FetchFailed(f"GET {url} returned HTTP {response.status_code}")
            for block in response.iter_bytes():
                body += block
                if len(body) > limit:
                    raise PackError(f"{url} is larger than {limit} bytes")
                session.read_timeout(url, len(body), None)
            return bytes(body)
    except httpx.HTTPError as exc:
        session.read_timeout(url, len(body), None)  # a read cut short by the deadline says so
        raise FetchFailed(f"cannot fetch {url}: {type(exc).__name__} {exc}") from exc


def fetch_file(session: Session, url: str, dest: Path, size: int, meter: Meter) -> None:
    """Bring ``dest`` to ``size`` bytes from ``url``, resuming what is already there."""
    have = dest.stat().st_size if dest.exists() else 0
    if have > size:
        dest.unlink()
        have = 0
    if have == size:
        meter.finish(have)
        return
    if urlsplit(url).scheme.lower() == "file":
        _copy_file(session, file_path(url), dest, size, have, meter)
    else:
        _download(session, url, dest, size, have, meter)


def _copy_file(
    session: Session, source: Path, dest: Path, size: int, have: int, meter: Meter
) -> None:
    """Copy a local file into the partial folder from byte ``have`` on."""
    try:
        actual = source.stat().st_size
    except OSError as exc:
        raise FetchFailed(f"cannot read {source}: {exc.strerror or exc}") from exc
    if actual != size:
        raise Corrupt(
            f"{source} is {actual} bytes, the manifest says {size}: truncated or replaced"
        )
    try:
        with open(source, "rb") as src, open(dest, "ab" if have else "wb") as out:
            src.seek(have)
            meter.start(have)
            while block := src.read(COPY_BLOCK):
                session.read_timeout(str(source), have, size)  # a slow network mount, say
                have = _append(out, block, have, size, source.name)
                meter.update(have)
            _sync(out)
    except OSError as exc:
        raise FetchFailed(f"cannot copy {source}: {exc.strerror or exc}") from exc
    meter.finish(have)


def _download(session: Session, url: str, dest: Path, size: int, have: int, meter: Meter) -> None:
    """Download ``url`` into ``dest``, asking for the rest only when ``have`` bytes are there.

    206 appends; 200 (a server ignoring ``Range``) starts over; 416 or a 206 for another range
    drop the partial file and ask again for all of it.
    """
    httpx = _httpx()
    for _ in range(2):
        headers = {"Accept-Encoding": "identity"}
        if have:
            headers["Range"] = f"bytes={have}-"
        try:
            timeout = session.read_timeout(url, have, size)
            with session.client().stream("GET", url, headers=headers, timeout=timeout) as response:
                status = response.status_code
                resumed = status == 206 and _range_start(response) == have
                if have and (status == 416 or (status == 206 and not resumed)):
                    dest.unlink(missing_ok=True)
                    have = 0
                    continue
                if status not in (200, 206):
                    raise FetchFailed(f"GET {url} returned HTTP {status}")
                if not resumed:
                    have = 0
                announced = _announced_size(response)
                if announced is not None and announced != size:
                    raise Corrupt(
                        f"{url} is {announced} bytes, the manifest says {size}: "
                        "truncated or replaced"
                    )
                meter.start(have)
                with open(dest, "ab" if resumed else "wb") as out:
                    for block in response.iter_bytes():
                        session.read_timeout(url, have, size)
                        have = _append(out, block, have, size, url)
                        meter.update(have)
                    _sync(out)
        except httpx.HTTPError as exc:
            session.read_timeout(url, have, size)  # a read cut short by the deadline says so
            raise FetchFailed(
                f"download of {url} stopped after {have} of {size} bytes "
                f"({type(exc).__name__} {exc}): pull again to resume"
            ) from exc
        except OSError as exc:
            raise FetchFailed(f"cannot write {dest}: {exc.strerror or exc}") from exc
        meter.finish(have)
        return
    raise FetchFailed(f"{url} refused both a resumed and a full download")


def _httpx() -> ModuleType:
    """Return the httpx module, or raise `PackError` when this install lacks it."""
    try:
        import httpx
    except ImportError as exc:
        raise PackError(
            "fetching packs over HTTP needs httpx, a dependency of vrom this install lacks: "
            "reinstall vrom (pip install --force-reinstall vrom)"
        ) from exc
    return httpx


def _append(out: IO[bytes], block: bytes, have: int, size: int, name: str) -> int:
    """Write ``block``; return the new length, refusing to grow past the manifest's size."""
    if have + len(block) > size:
        raise Corrupt(f"{name} is longer than the {size} bytes the manifest says")
    out.write(block)
    return have + len(block)


def _range_start(response: httpx.Response) -> int | None:
    """Return the first byte of a 206's ``Content-Range: bytes a-b/total``, or None."""
    value = response.headers.get("content-range", "")
    unit, _, spec = value.partition(" ")
    try:
        return int(spec.split("-", 1)[0]) if unit.lower() == "bytes" else None
    except ValueError:
        return None


def _announced_size(response: httpx.Response) -> int | None:
    """Return the whole file's size as the response states it, if it does."""
    try:
        if response.status_code == 206:
            total = response.headers.get("content-range", "").rpartition("/")[2]
            return int(total) if total not in ("", "*") else None
        length = response.headers.get("content-length")
        encoded = response.headers.get("content-encoding", "identity") != "identity"
        return int(length) if length is not None and not encoded else None
    except ValueError:
        return None


def _sync(out: IO[bytes]) -> None:
    """Flush a downloaded file to disk before the folder holding it is renamed into place."""
    out.flush()
    os.fsync(out.fileno())
