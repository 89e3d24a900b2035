"""The pack cache on disk: verified pack folders, partial downloads, and a lock file per pack.

Layout of the cache (docs/packs.md)::

    <cache>/registry.json              the registry as fetched, plus where from and when
    <cache>/packs/<id>/<version>/      a verified pack: manifest.json, the files it names, the
                                       signature (manifest.json.sig) if signed, verified.json
    <cache>/packs/<id>/.partial-<v>/   a pull in progress; the next pull resumes its files
    <cache>/locks/<id>.lock            held for the whole of a pull or an evict of that id
    <cache>/last-used/<id>             empty; its modification time is the pack's last mount or
                                       pull (a cache quota evicts the least recently used first)

A pack folder that exists has been verified: a pull fills the partial folder and `install`
renames it into place only after every file's SHA-256 matched the manifest. `verify_folder` hashes
the files and writes ``verified.json``: the manifest's SHA-256 and each file's size and
modification time, which it first sets to the pack's ``created_at`` (so any later write changes
it, however soon). `check_record` compares those on each load, a stat per file, so a cached file
edited after it was verified is refused without hashing it again; `verify_folder` again (``vrom
pack verify``) re-hashes. Someone who can write the cache can also set a file's time back: the
record catches accidents and careless edits; ``verify`` and trusted keys catch the rest.

Two processes pulling the same pack take turns: the pull holds ``locks/<id>.lock`` with
``fcntl.flock`` on POSIX and ``msvcrt.locking`` on Windows (not exercised in CI there). The lock
file is never deleted, because deleting a lock file others may be waiting on breaks the lock.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, BinaryIO

from vrom.errors import PackError
from vrom.packs.hash_check import HashCheck
from vrom.packs.manifest import (
    MANIFEST_NAME,
    PACK_ID,
    VERSION,
    PackManifest,
    bytes_sha256,
    version_key,
)
from vrom.packs.registry import parse_pack_ref

if sys.platform == "win32":
    import msvcrt
else:
    import fcntl


RECORD_NAME = "verified.json"


@dataclass(frozen=True)
class CachedPack:
    """A verified pack in the cache: where its folder and files are, and its manifest.

    ``signed_by`` is the id of the trusted key whose signature was checked when this value was
    made (None when no trusted keys were given, or the pack was not checked against them).
    ``hash_check`` is the background hash check of a cached pack loaded with trusted keys
    (`vrom.packs.hash_check`); a reader of its files waits for it (`wait_until_hashed`).
    """

    id: str
    version: str
    directory: Path
    manifest: PackManifest
    store_path: Path
    index_path: Path
    signed_by: str | None = None
    hash_check: HashCheck | None = field(default=None, compare=False, repr=False)

    def wait_until_hashed(self) -> None:
        """Return once the files passed their background hash check (at once when none runs),
        or raise `PackError` naming the file that changed."""
        if self.hash_check is not None:
            self.hash_check.wait()


@dataclass(frozen=True)
class StorageEstimate:
    """How much the pack cache holds, and may hold.

    Fields:
        used: bytes of every file under the cache's ``packs/`` folder (partial downloads
            included).
        quota: the most the cache may hold, in bytes: the configured quota, or with none
            ``used + free_bytes`` (the disk is the limit).
        free_bytes: bytes free on the cache's disk.
        packs: how many packs are cached (intact, verified folders).
        limited: True when ``quota`` is a configured quota (a pull evicts the least recently
            used packs to stay under it), False when it is the disk.
    """

    used: int
    quota: int
    free_bytes: int
    packs: int
    limited: bool = False

    @property
    def used_bytes(self) -> int:
        """``used``, by its earlier name."""
        return self.used


class CacheFolders:
    """The packs cached under ``cache_dir``: finding, checking, removing and locking them."""

    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = cache_dir

    def pack_dir(self, pack_id: str) -> Path:
        """Return the folder holding every cached version and partial download of a pack."""
        return self.cache_dir / "packs" / pack_id

    def version_folders(self, pack_id: str, version: str | None) -> list[tuple[str, Path]]:
        """Return ``(version, folder)`` of each cached version folder, newest first."""
        folder = self.pack_dir(pack_id)
        if not folder.is_dir():
            return []
        found = [
            (child.name, child)
            for child in folder.iterdir()
            if VERSION.match(child.name) and child.is_dir() and version in (None, child.name)
        ]
        return sorted(found, key=lambda item: version_key(item[0]), reverse=True)

    def current(self, ref: str) -> CachedPack | None:
        """Return the newest intact cached version of ``id`` or ``id@version``, if any."""
        pack_id, version = parse_pack_ref(ref)
        for found, folder in self.version_folders(pack_id, version):
            with contextlib.suppress(PackError):
                return cached_pack(pack_id, found, folder, check_folder(pack_id, found, folder))
        return None

    def cached_at(self, pack_id: str, version: str) -> CachedPack | None:
        """Return the cached pack at exactly ``version``, if it is there and intact."""
        return self.current(f"{pack_id}@{version}")

    def pack_ids(self) -> list[str]:
        """Return the ids of the packs with a folder in the cache (cached, partial or damaged)."""
        packs_dir = self.cache_dir / "packs"
        if not packs_dir.is_dir():
            return []
        return sorted(f.name for f in packs_dir.iterdir() if PACK_ID.match(f.name) and f.is_dir())

    def pack_bytes(self, pack_id: str) -> int:
        """Return the bytes of every file in a pack's folder (all versions and partials)."""
        return _folder_bytes(self.pack_dir(pack_id))

    def mark_used(self, pack_id: str) -> None:
        """Record now as the pack's last use (best effort: a read-only cache still loads)."""
        if not self.pack_dir(pack_id).is_dir():
            return
        with contextlib.suppress(OSError):
            self._used_marker(pack_id).parent.mkdir(parents=True, exist_ok=True)
            self._used_marker(pack_id).touch()  # an existing file gets the time now

    def last_used(self, pack_id: str) -> float:
        """Return when the pack was last mounted or pulled (seconds since the epoch).

        A pack cached before uses were recorded counts from its newest folder's time.
        """
        with contextlib.suppress(OSError):
            return self._used_marker(pack_id).stat().st_mtime
        times = [0.0]
        for _, version_folder in self.version_folders(pack_id, None):
            with contextlib.suppress(OSError):
                times.append(version_folder.stat().st_mtime)
        return max(times)

    def remove_pack(self, pack_id: str) -> bool:
        """Delete every cached version and partial download of a pack; return whether any existed.

        The caller holds the pack's lock.
        """
        folder = self.pack_dir(pack_id)
        if not folder.exists():
            return False
        try:
            shutil.rmtree(folder)
        except OSError as exc:
            raise PackError(f"cannot delete {folder}: {exc}") from exc
        with contextlib.suppress(OSError):
            self._used_marker(pack_id).unlink(missing_ok=True)
        return True

    def _used_marker(self, pack_id: str) -> Path:
        return self.cache_dir / "last-used" / pack_id

    def storage_estimate(self, quota: int | None = None) -> StorageEstimate:
        """Return the bytes cached packs use and may use (``quota``: None is the disk), the bytes
        free on the cache's disk, and the pack count."""
        used = _folder_bytes(self.cache_dir / "packs")
        count = sum(1 for pack_id in self.pack_ids() if self.current(pack_id) is not None)
        existing = self.cache_dir
        while not existing.exists() and existing.parent != existing:
            existing = existing.parent
        free = shutil.disk_usage(existing).free
        if quota is None:
            return StorageEstimate(used, used + free, free, count)
        return StorageEstimate(used, quota, free, count, limited=True)

    def _lock_file(self, pack_id: str) -> BinaryIO:
        """Open the pack's lock file (made if missing), for `locked` and `locked_if_free`."""
        locks = self.cache_dir / "locks"
        try:
            locks.mkdir(parents=True, exist_ok=True)
            return open(locks / f"{pack_id}.lock", "a+b")  # the caller closes it
        except OSError as exc:
            raise PackError(f"cannot create a lock file in {locks}: {exc}") from exc

    @contextlib.contextmanager
    def locked(self, pack_id: str) -> Iterator[None]:
        """Hold the pack's lock file (other processes pulling or evicting it wait)."""
        with self._lock_file(pack_id) as handle:
            _lock(handle)
            try:
                yield
            finally:
                _unlock(handle)

    @contextlib.contextmanager
    def locked_if_free(self, pack_id: str) -> Iterator[bool]:
        """Hold the pack's lock if no one else does, yielding True; else yield False at once.

        For evicting another pack to make room: waiting for its lock while holding one's own
        could deadlock with a process doing the same the other way round.
        """
        with self._lock_file(pack_id) as handle:
            if not _try_lock(handle):
                yield False
                return
            try:
                yield True
            finally:
                _unlock(handle)


def check_folder(pack_id: str, version: str, folder: Path) -> PackManifest:
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


def cached_pack(
    pack_id: str,
    version: str,
    folder: Path,
    manifest: PackManifest,
    signed_by: str | None = None,
) -> CachedPack:
    """Return the `CachedPack` of a checked folder, with its store and index paths."""
    return CachedPack(
        id=pack_id,
        version=version,
        directory=folder,
        manifest=manifest,
        store_path=folder / manifest.files["store"].path,
        index_path=folder / manifest.files["index"].path,
        signed_by=signed_by,
    )


def verify_folder(folder: Path, manifest: PackManifest) -> None:
    """Hash every file of ``folder`` against the manifest, then record them in ``verified.json``.

    The old record is deleted first, so a file that fails leaves the folder unverified (setting
    its time again must not make an edited file pass `check_record`). Each file's modification
    time is set to the manifest's ``created_at`` before it is hashed, and must be unchanged after:
    a write during the hash is refused, and one after it changes the time the record holds.
    Raises `PackError` when a file is missing or does not match.
    """
    record_path = folder / RECORD_NAME
    try:  # unverified from here on: a failed or interrupted check leaves no record behind
        record_path.unlink(missing_ok=True)
    except OSError as exc:
        raise PackError(f"cannot remove {record_path}: {exc.strerror or exc}") from exc
    stamp = _created_ns(manifest.created_at)
    files: dict[str, dict[str, int]] = {}
    for file in manifest.files.values():
        data_path = folder / file.path
        try:
            os.utime(data_path, ns=(data_path.stat().st_atime_ns, stamp))
        except FileNotFoundError as exc:
            raise PackError(f"pack {manifest.vrom_id}: {file.path} is missing") from exc
        except OSError as exc:
            raise PackError(
                f"pack {manifest.vrom_id}: cannot check {file.path}: {exc.strerror or exc}"
            ) from exc
        files[file.path] = _stat(data_path)
    manifest.verify(folder)
    for name, seen in files.items():
        if _stat(folder / name) != seen:
            raise PackError(f"pack {manifest.vrom_id}: {name} changed while it was verified")
    record = {
        "manifest_sha256": bytes_sha256((folder / MANIFEST_NAME).read_bytes()),
        "files": files,
    }
    temporary = folder / f".{RECORD_NAME}.{os.getpid()}.tmp"
    try:
        temporary.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        os.replace(temporary, record_path)
    except OSError as exc:
        raise PackError(f"cannot write {record_path}: {exc.strerror or exc}") from exc


def check_record(pack: CachedPack) -> None:
    """Raise `PackError` unless the pack's manifest and files are as ``verified.json`` recorded.

    A stat per file and a hash of the manifest (small): a file edited, even to the same size,
    after it was verified is refused here, before anything opens it.
    """
    what = f"cached pack {pack.id} {pack.version}"
    fix = f"run vrom pack verify {pack.id} (verify=True), or pull it again with --force"
    try:
        record: Any = json.loads((pack.directory / RECORD_NAME).read_text(encoding="utf-8"))
        manifest_sha256 = record["manifest_sha256"]
        files = record["files"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise PackError(
            f"{what} is not marked verified ({RECORD_NAME} is missing or unreadable: a check "
            f"failed, or an older vrom pulled it): {fix}"
        ) from exc
    try:
        manifest_raw = (pack.directory / MANIFEST_NAME).read_bytes()
    except OSError as exc:
        raise PackError(f"{what}: cannot read its manifest: {fix}") from exc
    if bytes_sha256(manifest_raw) != manifest_sha256:
        raise PackError(f"{what}: {MANIFEST_NAME} changed since it was verified: {fix}")
    for file in pack.manifest.files.values():
        try:
            now = _stat(pack.directory / file.path)
        except OSError as exc:
            raise PackError(f"{what}: {file.path} is missing: {fix}") from exc
        if not isinstance(files, dict) or files.get(file.path) != now:
            raise PackError(f"{what}: cached file {file.path} changed since it was verified: {fix}")


def _stat(path: Path) -> dict[str, int]:
    """Return what the record keeps of a file: its size and modification time (ns)."""
    info = path.stat()
    return {"size": info.st_size, "mtime_ns": info.st_mtime_ns}


def _created_ns(created_at: str) -> int:
    """Return ``created_at`` (ISO 8601, UTC) in ns since the epoch; 0 when it does not parse."""
    try:
        moment = datetime.fromisoformat(created_at.strip().replace("Z", "+00:00"))
    except ValueError:
        return 0
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return max(int(moment.timestamp()), 0) * 1_000_000_000


def install(partial: Path, target: Path) -> None:
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


def remove_others(
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


def _try_lock(handle: IO[bytes]) -> bool:
    """Take an exclusive lock on an open lock file if it is free; return whether it was."""
    try:
        if sys.platform == "win32":
            handle.seek(0)
            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
        else:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _folder_bytes(folder: Path) -> int:
    """Return the bytes of every file under ``folder`` (0 when it does not exist)."""
    total = 0
    if folder.is_dir():
        for path in folder.rglob("*"):
            with contextlib.suppress(OSError):
                if path.is_file():
                    total += path.stat().st_size
    return total


def _unlock(handle: IO[bytes]) -> None:
    if sys.platform == "win32":
        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
    else:
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
