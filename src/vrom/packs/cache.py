"""The pack registry and the local pack cache: fetch the registry, pull packs, verify, evict.

Layout of the cache (docs/packs.md)::

    <cache>/registry.json              the registry as fetched, plus where from and when
    <cache>/packs/<id>/<version>/      a verified pack: manifest.json and the files it names
    <cache>/packs/<id>/.partial-<v>/   a pull in progress; the next pull resumes its files
    <cache>/locks/<id>.lock            held for the whole of a pull or an evict of that id

A pull downloads the manifest, then each file it names into the partial folder (resuming a
file left there by an interrupted pull with an HTTP ``Range`` request), checks every file's size
and SHA-256 against the manifest, and only then renames the folder into place, so a pack folder
that exists has been verified. A size or hash mismatch deletes the partial folder (a corrupt
partial must not be resumed forever) and leaves the previous good version in place.

Registries and packs can be served over ``https://``/``http://`` (needs httpx, the ``remote``
extra, imported only then) or read from ``file://`` URLs and plain paths, which are copied with
the same checks and progress events. Moving the bytes (streaming, resuming, copying, progress
events) is `vrom.packs.transfer`'s job; this module decides what to fetch and where it goes.

Two processes pulling the same pack take turns: the pull holds ``locks/<id>.lock`` with
``fcntl.flock`` on POSIX and ``msvcrt.locking`` on Windows (not exercised in CI there). The lock
file is never deleted, because deleting a lock file others may be waiting on breaks the lock.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import logging
import os
import shutil
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

import platformdirs

from vrom.errors import PackError, ValidationError
from vrom.packs.manifest import (
    MANIFEST_NAME,
    PACK_ID,
    REGISTRY_NAME,
    VERSION,
    PackFile,
    PackManifest,
    Registry,
    RegistryEntry,
    version_key,
)
from vrom.packs.transfer import PROGRESS_STEP as PROGRESS_STEP  # the pull tests count steps of it
from vrom.packs.transfer import (
    Corrupt,
    FetchFailed,
    ProgressCallback,
    PullProgress,
    Reporter,
    Session,
    fetch_file,
    file_path,
    read_bytes,
)

if sys.platform == "win32":
    import msvcrt
else:
    import fcntl

if TYPE_CHECKING:
    import httpx

__all__ = [
    "CACHE_DIR_ENV",
    "REGISTRY_URL_ENV",
    "CachedPack",
    "PullProgress",
    "StorageEstimate",
    "VromCache",
    "parse_pack_ref",
]

logger = logging.getLogger(__name__)

REGISTRY_URL_ENV = "VROM_REGISTRY_URL"
CACHE_DIR_ENV = "VROM_CACHE_DIR"
DEFAULT_TTL = 3600.0
MAX_JSON_BYTES = 32 * 1024 * 1024  # a registry or manifest larger than this is refused
HUB_PREFIX = "hub://"
# A manifest's file role → the registry entry's key for its URL, which is also the pull phase.
_ROLE_PHASE = {"index": "index", "store": "chunks"}


@dataclass(frozen=True)
class CachedPack:
    """A verified pack in the cache: where its folder and files are, and its manifest."""

    id: str
    version: str
    directory: Path
    manifest: PackManifest
    store_path: Path
    index_path: Path


@dataclass(frozen=True)
class StorageEstimate:
    """Bytes used by cached packs (partial downloads included), bytes free on that disk, packs."""

    used_bytes: int
    free_bytes: int
    packs: int


def parse_pack_ref(ref: str) -> tuple[str, str | None]:
    """Return ``(id, version or None)`` from ``id``, ``hub://id`` or ``hub://id@version``."""
    text = ref.strip()
    if text.lower().startswith(HUB_PREFIX):
        text = text[len(HUB_PREFIX) :]
    pack_id, _, version = text.partition("@")
    if not PACK_ID.match(pack_id):
        raise PackError(f"{ref!r} is not a pack id or hub://id (a-z, 0-9, . _ -)")
    if version and not VERSION.match(version):
        raise PackError(f"{ref!r}: version {version!r} is not X.Y.Z")
    return pack_id, version or None


class VromCache:
    """The registry of packs and the local cache of pulled packs."""

    def __init__(
        self,
        registry_url: str | os.PathLike[str] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        *,
        ttl_seconds: float = DEFAULT_TTL,
        http_client: httpx.Client | None = None,
        timeout: float = 30.0,
    ) -> None:
        """Point at a registry and a cache folder; nothing is read or fetched yet.

        ``registry_url`` (else ``$VROM_REGISTRY_URL``) is an ``https://``/``http://`` URL of a
        ``registry.json`` (a URL ending in ``/`` gets ``registry.json`` appended), a ``file://``
        URL, or a path to a ``registry.json`` or to a folder holding one. Without one, cached packs
        still load; fetching the registry raises `PackError`. ``cache_dir`` defaults to
        ``$VROM_CACHE_DIR``, else platformdirs' user cache dir. An HTTP registry's copy is reused
        for ``ttl_seconds``; a local registry is read on every call. ``http_client`` is used as
        given (and not closed); otherwise a client with ``timeout`` is opened per operation.
        """
        if ttl_seconds < 0 or timeout <= 0:
            raise ValidationError("ttl_seconds must be ≥ 0 and timeout > 0")
        source = registry_url if registry_url is not None else os.environ.get(REGISTRY_URL_ENV)
        self.registry_url: str | None = _registry_location(os.fspath(source)) if source else None
        folder = cache_dir if cache_dir else os.environ.get(CACHE_DIR_ENV)
        self.cache_dir = (
            Path(folder).expanduser().absolute()
            if folder
            else Path(platformdirs.user_cache_dir("vrom", appauthor=False))
        )
        self.ttl_seconds = float(ttl_seconds)
        self.timeout = float(timeout)
        self._http_client = http_client

    # -- the registry ---------------------------------------------------------------------------

    def get_registry(self, refresh: bool = False) -> Registry:
        """Return the registry: the cached copy while fresh, else fetched again.

        When a fetch fails (offline, HTTP error, not JSON) and a copy of this registry exists,
        the copy is used with a `RuntimeWarning`; with no copy, `PackError`. A registry that is
        JSON but breaks the format raises `PackError` naming what is wrong.
        """
        url = self._require_registry()
        copy = self._read_registry_copy(url)
        now = time.time()
        if copy is not None and not refresh and not url.startswith("file:"):
            registry, fetched_at = copy
            if 0 <= now - fetched_at < self.ttl_seconds:
                return registry
        try:
            with Session(self._http_client, self.timeout) as session:
                raw = read_bytes(session, url, MAX_JSON_BYTES)
            data = _parse_json(raw, url)
        except FetchFailed as exc:
            if copy is None:
                raise PackError(
                    f"cannot fetch the pack registry ({exc}) and no copy of it is cached: "
                    f"check the connection or {REGISTRY_URL_ENV}"
                ) from exc
            registry, fetched_at = copy
            message = (
                f"cannot refresh the pack registry ({exc}); using the copy fetched "
                f"{_age(now - fetched_at)} ago"
            )
            logger.warning(message)
            warnings.warn(message, RuntimeWarning, stacklevel=2)
            return registry
        registry = Registry.from_dict(data, f"registry at {url}")
        self._write_registry_copy(url, data, now)
        return registry

    def resolve(self, id_or_uri: str) -> RegistryEntry:
        """Return the registry's entry for ``id``, ``hub://id`` or ``hub://id@version``."""
        pack_id, version = parse_pack_ref(id_or_uri)
        registry = self.get_registry()
        entry = registry.get(pack_id)
        if entry is None:
            available = ", ".join(sorted(e.id for e in registry.packs)) or "(none)"
            raise PackError(
                f"pack {pack_id!r} is not in the registry at {self.registry_url}; "
                f"available: {available}"
            )
        if version is not None and version != entry.version:
            raise PackError(
                f"the registry at {self.registry_url} has {pack_id} {entry.version}, not "
                f"{version} (it lists one version per pack): ask for {pack_id} instead"
            )
        return entry

    def list(self) -> builtins.list[RegistryEntry]:
        """Return the registry's packs."""
        return builtins.list(self.get_registry().packs)

    # -- the cache ------------------------------------------------------------------------------

    def is_cached(self, pack_id: str) -> bool:
        """Return whether a verified folder of the pack (at ``@version``, if given) is cached."""
        return self._current(pack_id) is not None

    def get_cached_manifest(self, pack_id: str) -> PackManifest | None:
        """Return the manifest of the cached pack, or None when it is not cached."""
        pack = self._current(pack_id)
        return pack.manifest if pack else None

    def load_index(self, pack_id: str) -> CachedPack:
        """Return the cached pack's paths and manifest, or raise `PackError` if not cached.

        Every file's size is checked against the manifest on each call (a stat per file); the
        SHA-256 is checked once, by the pull, before the folder became visible, not on each load.
        When several versions are cached (a pull stopped before deleting the old one), the
        newest intact one is used.
        """
        pack = self._current(pack_id)
        if pack is not None:
            return pack
        name, version = parse_pack_ref(pack_id)
        folders = self._version_folders(name, version)
        if folders:
            try:
                _check_folder(name, *folders[0])
            except PackError as exc:
                raise PackError(
                    f"cached pack {name} {folders[0][0]} is damaged ({exc}): pull it again "
                    "with force_download=True"
                ) from exc
        wanted = f"{name} {version}" if version else name
        raise PackError(f"pack {wanted!r} is not cached in {self.cache_dir}: pull it first")

    def evict(self, pack_id: str) -> bool:
        """Delete every cached version and partial download of a pack; return whether any existed."""
        name, _ = parse_pack_ref(pack_id)
        folder = self._pack_dir(name)
        with self._locked(name):
            if not folder.exists():
                return False
            try:
                shutil.rmtree(folder)
            except OSError as exc:
                raise PackError(f"cannot delete {folder}: {exc}") from exc
        return True

    def storage_estimate(self) -> StorageEstimate:
        """Return the bytes cached packs use, the bytes free on the cache's disk, and the pack count."""
        packs_dir = self.cache_dir / "packs"
        used = 0
        count = 0
        if packs_dir.is_dir():
            for path in packs_dir.rglob("*"):
                with contextlib.suppress(OSError):
                    if path.is_file():
                        used += path.stat().st_size
            count = sum(
                1
                for folder in packs_dir.iterdir()
                if PACK_ID.match(folder.name) and self._current(folder.name) is not None
            )
        existing = self.cache_dir
        while not existing.exists() and existing.parent != existing:
            existing = existing.parent
        return StorageEstimate(used, shutil.disk_usage(existing).free, count)

    # -- pulling --------------------------------------------------------------------------------

    def pull(
        self,
        id_or_entry: str | RegistryEntry,
        entry: RegistryEntry | None = None,
        on_progress: ProgressCallback | None = None,
        force_download: bool = False,
    ) -> CachedPack:
        """Download, verify and cache a pack; return it.

        ``id_or_entry`` is an id, ``hub://id[@version]`` (resolved in the registry) or an entry;
        ``entry`` skips the registry look-up for an id. When the same version is cached and its
        manifest is unchanged, nothing but the manifest is fetched (and if even that fails, the
        cached copy is returned with a warning). ``force_download`` downloads every file again,
        ignoring partial files; the cached copy is replaced only once the new one is verified.
        ``on_progress`` gets `PullProgress` events. Raises `PackError` when a download fails
        (the partial file is kept, so pulling again resumes it) or a file does not match the
        manifest (the partial folder is deleted; the previous version stays).
        """
        if isinstance(id_or_entry, RegistryEntry):
            entry = id_or_entry
        elif entry is not None:
            pack_id, version = parse_pack_ref(id_or_entry)
            if entry.id != pack_id or version not in (None, entry.version):
                raise PackError(
                    f"{id_or_entry!r} does not name the entry {entry.id} {entry.version}"
                )
        else:
            entry = self.resolve(id_or_entry)
        with self._locked(entry.id):
            return self._pull_locked(entry, Reporter(on_progress), force_download)

    def _pull_locked(self, entry: RegistryEntry, report: Reporter, force: bool) -> CachedPack:
        pack_dir = self._pack_dir(entry.id)
        target = pack_dir / entry.version
        manifest_url = self._locate(entry.files["manifest"])
        with Session(self._http_client, self.timeout) as session:
            try:
                raw = read_bytes(session, manifest_url, MAX_JSON_BYTES)
            except FetchFailed as exc:
                cached = None if force else self._cached_at(entry.id, entry.version)
                if cached is None:
                    raise
                message = f"cannot fetch the manifest of {entry.id} ({exc}); using the cached copy"
                logger.warning(message)
                warnings.warn(message, RuntimeWarning, stacklevel=3)
                report.done(cached.manifest)
                return cached
            report.event("manifest", MANIFEST_NAME, len(raw), len(raw))
            manifest = _check_manifest(_parse_json(raw, manifest_url), entry, manifest_url)
            if not force:
                cached = self._cached_at(entry.id, entry.version)
                if cached is not None and cached.manifest == manifest:
                    _remove_others(pack_dir, entry.version)
                    report.done(manifest)
                    return cached
            partial = pack_dir / f".partial-{entry.version}"
            _remove_others(pack_dir, entry.version, versions=False, partial=force)
            try:  # a partial folder for another manifest of this version is not resumed
                if partial.exists() and _read_or_none(partial / MANIFEST_NAME) != raw:
                    shutil.rmtree(partial)
                partial.mkdir(parents=True, exist_ok=True)
                (partial / MANIFEST_NAME).write_bytes(raw)
            except OSError as exc:
                raise PackError(f"cannot prepare the download folder {partial}: {exc}") from exc
            try:
                for role, file in _ordered(manifest):
                    key = _ROLE_PHASE.get(role, role)
                    url = (
                        self._locate(entry.files[key])
                        if key in entry.files
                        else urljoin(manifest_url, file.path)
                    )
                    meter = report.meter(key, file.path, file.size)
                    fetch_file(session, url, partial / file.path, file.size, meter)
                try:
                    manifest.verify(partial)
                except PackError as exc:
                    raise Corrupt(f"{exc}; the download was discarded") from exc
            except Corrupt:
                shutil.rmtree(partial, ignore_errors=True)
                raise
        _install(partial, target)
        _remove_others(pack_dir, entry.version)
        logger.info("pulled pack %s %s into %s", entry.id, entry.version, target)
        report.done(manifest)
        return _cached_pack(entry.id, entry.version, target, manifest)

    # -- internals ------------------------------------------------------------------------------

    def _require_registry(self) -> str:
        if self.registry_url is None:
            raise PackError(
                "no pack registry is configured: pass registry_url= or set "
                f"{REGISTRY_URL_ENV} to a registry.json URL, a file:// URL or a folder path"
            )
        return self.registry_url

    def _locate(self, ref: str) -> str:
        """Return the URL of a registry file reference: absolute as is, else registry-relative."""
        if urlsplit(ref).scheme.lower() in ("http", "https", "file"):
            return ref
        if Path(ref).is_absolute():
            return Path(ref).as_uri()
        return urljoin(self._require_registry(), ref)

    def _pack_dir(self, pack_id: str) -> Path:
        return self.cache_dir / "packs" / pack_id

    def _version_folders(
        self, pack_id: str, version: str | None
    ) -> builtins.list[tuple[str, Path]]:
        """Return ``(version, folder)`` of each cached version folder, newest first."""
        folder = self._pack_dir(pack_id)
        if not folder.is_dir():
            return []
        found = [
            (child.name, child)
            for child in folder.iterdir()
            if VERSION.match(child.name) and child.is_dir() and version in (None, child.name)
        ]
        return sorted(found, key=lambda item: version_key(item[0]), reverse=True)

    def _current(self, ref: str) -> CachedPack | None:
        pack_id, version = parse_pack_ref(ref)
        for found, folder in self._version_folders(pack_id, version):
            with contextlib.suppress(PackError):
                return _cached_pack(pack_id, found, folder, _check_folder(pack_id, found, folder))
        return None

    def _cached_at(self, pack_id: str, version: str) -> CachedPack | None:
        return self._current(f"{pack_id}@{version}")

    @contextlib.contextmanager
    def _locked(self, pack_id: str) -> Iterator[None]:
        """Hold the pack's lock file (other processes pulling or evicting it wait)."""
        locks = self.cache_dir / "locks"
        try:
            locks.mkdir(parents=True, exist_ok=True)
            handle = open(locks / f"{pack_id}.lock", "a+b")  # noqa: SIM115 (closed below)
        except OSError as exc:
            raise PackError(f"cannot create a lock file in {locks}: {exc}") from exc
        with handle:
            _lock(handle)
            try:
                yield
            finally:
                _unlock(handle)

    def _read_registry_copy(self, url: str) -> tuple[Registry, float] | None:
        """Return the cached copy of the registry at ``url`` and its fetch time, if readable."""
        try:
            data = json.loads((self.cache_dir / REGISTRY_NAME).read_text(encoding="utf-8"))
            if data.get("fetched_from") != url:
                return None
            return Registry.from_dict(data), float(data["fetched_at"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError, PackError):
            return None

    def _write_registry_copy(self, url: str, data: Any, now: float) -> None:
        """Save the registry with where and when it was fetched (best effort)."""
        path = self.cache_dir / REGISTRY_NAME
        copy = {**data, "fetched_from": url, "fetched_at": now}
        try:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{REGISTRY_NAME}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(copy, indent=1, ensure_ascii=False), encoding="utf-8")
            os.replace(tmp, path)
        except OSError as exc:
            logger.warning("cannot save the registry copy to %s: %s", path, exc)


def _registry_location(value: str) -> str:
    """Return the registry's URL: http(s) as given, a path or ``file://`` URL as a ``file://`` URL."""
    text = value.strip()
    scheme = urlsplit(text).scheme.lower()
    if scheme in ("http", "https"):
        return text + REGISTRY_NAME if text.endswith("/") else text
    if scheme == "file":
        path = file_path(text)
    elif len(scheme) > 1:  # one letter is a Windows drive, not a scheme
        raise PackError(
            f"registry {value!r}: use an https://, http:// or file:// URL or a path, not {scheme}:"
        )
    else:
        path = Path(text).expanduser()
    path = path.absolute()
    if path.is_dir() or (not path.exists() and path.suffix.lower() != ".json"):
        path = path / REGISTRY_NAME
    return path.as_uri()


def _parse_json(raw: bytes, url: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise FetchFailed(f"{url} is not valid JSON: {exc}") from exc


def _check_manifest(data: Any, entry: RegistryEntry, url: str) -> PackManifest:
    """Return the manifest if it describes the entry's pack and version, else raise `PackError`."""
    manifest = PackManifest.from_dict(data, f"manifest at {url}")
    if (manifest.vrom_id, manifest.version) != (entry.id, entry.version):
        raise PackError(
            f"manifest at {url} is for {manifest.vrom_id} {manifest.version}, but the registry "
            f"entry is {entry.id} {entry.version}: the registry is out of date or wrong"
        )
    if {"manifest", "chunks"} & set(manifest.files):
        raise PackError(f"manifest at {url}: 'manifest' and 'chunks' are not file roles")
    names = [file.path for file in manifest.files.values()]
    if MANIFEST_NAME in names or len(set(names)) != len(names):
        raise PackError(
            f"manifest at {url}: file names must differ from each other and from {MANIFEST_NAME}"
        )
    return manifest


def _ordered(manifest: PackManifest) -> builtins.list[tuple[str, PackFile]]:
    """Return the manifest's files: index first, then store, then any others by role."""
    rank = {"index": 0, "store": 1}
    return sorted(manifest.files.items(), key=lambda item: (rank.get(item[0], 2), item[0]))


def _check_folder(pack_id: str, version: str, folder: Path) -> PackManifest:
    """Return a cached folder's manifest if it is that pack and version with every file's size."""
    manifest = PackManifest.read(folder)
    if (manifest.vrom_id, manifest.version) != (pack_id, version):
        raise PackError(f"{folder} holds {manifest.vrom_id} {manifest.version}")
    for file in manifest.files.values():
        try:
            size = (folder / file.path).stat().st_size
        except OSError as exc:
            raise PackError(f"{file.path} is missing") from exc
        if size != file.size:
            raise PackError(f"{file.path} is {size} bytes, the manifest says {file.size}")
    return manifest


def _cached_pack(pack_id: str, version: str, folder: Path, manifest: PackManifest) -> CachedPack:
    return CachedPack(
        id=pack_id,
        version=version,
        directory=folder,
        manifest=manifest,
        store_path=folder / manifest.files["store"].path,
        index_path=folder / manifest.files["index"].path,
    )


def _install(partial: Path, target: Path) -> None:
    """Rename the verified partial folder to ``target``, replacing a folder already there."""
    trash = target.with_name(f".trash-{target.name}-{os.getpid()}")
    try:
        if target.exists():
            shutil.rmtree(trash, ignore_errors=True)
            os.replace(target, trash)
        os.replace(partial, target)
    except OSError as exc:
        raise PackError(f"cannot move the verified pack into {target}: {exc}") from exc
    shutil.rmtree(trash, ignore_errors=True)


def _remove_others(
    pack_dir: Path, keep: str, *, versions: bool = True, partial: bool = True
) -> None:
    """Delete a pack's left-over trash, partial downloads but ``keep``'s and other versions.

    ``versions=False`` keeps every version (a pull keeps the old one until the new one is in
    place); ``partial=False`` keeps ``.partial-<keep>`` too (it is about to be resumed).
    """
    if not pack_dir.is_dir():
        return
    for child in pack_dir.iterdir():
        if not child.is_dir() or child.name == keep:
            continue
        name = child.name
        stale_partial = name.startswith(".partial-") and (partial or name != f".partial-{keep}")
        old_version = versions and VERSION.match(name) is not None
        if name.startswith(".trash-") or stale_partial or old_version:
            shutil.rmtree(child, ignore_errors=True)


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _lock(handle: IO[bytes]) -> None:
    """Wait for an exclusive lock on an open lock file."""
    if sys.platform == "win32":
        while True:  # LK_LOCK gives up after about 10 s; a pull can take longer
            try:
                handle.seek(0)
                msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)
                return
            except OSError:
                continue
    else:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)


def _unlock(handle: IO[bytes]) -> None:
    if sys.platform == "win32":
        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
    else:
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _age(seconds: float) -> str:
    """Return a duration for a person: 42 s, 7 min, 3 h, 2 days."""
    if seconds < 120:
        return f"{max(seconds, 0):.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"
