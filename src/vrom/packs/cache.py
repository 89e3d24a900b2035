"""The pack cache: pull packs from the registry, verify them, load and evict them.

`VromCache` is the one object callers hold. It asks `vrom.packs.registry` which packs there are
and where their files live, and keeps the pulled packs in the folders `vrom.packs.cache_folders`
lays out (docs/packs.md).

A pull downloads the manifest and its signature, checks the manifest against the registry's
``manifest_sha256`` and, when trusted keys are given, the signature against them
(`vrom.packs.signing`; an unsigned pack or one signed by another key is refused here, before any
file is fetched; with no trusted keys it is accepted with an `UnverifiedPackWarning`). Then it
downloads each file the manifest names into the partial folder (resuming a file left there by an
interrupted pull with an HTTP ``Range`` request), checks every file's size and SHA-256 against
the manifest, records them (`verify_folder`), and only then renames the folder into place, so a
pack folder that exists has been verified. A size or hash mismatch deletes the partial folder (a
corrupt partial must not be resumed forever) and leaves the previous good version in place.
Loading a cached pack compares its files with that record (`check_record`, a stat per file)
and, with trusted keys, checks its signature again and hashes every file again in the
background (`vrom.packs.hash_check`; a reader waits for it before serving text);
``verify=True`` hashes every file again before it returns.

Registries and packs can be served over ``https://``/``http://`` (httpx, a core dependency,
imported only then) or read from ``file://`` URLs and plain paths, which are copied with
the same checks and progress events. Moving the bytes (streaming, resuming, copying, progress
events) is `vrom.packs.transfer`'s job; this module decides what to fetch and where it goes.
Two processes pulling the same pack take turns on the pack's lock file.

With a quota (``quota=``), a pull first makes room for the pack within it (`vrom.packs.quota`):
the least recently mounted or pulled packs are evicted, and a pack that cannot fit is refused
before any of its files is downloaded.
"""

from __future__ import annotations

import builtins
import dataclasses
import logging
import os
import shutil
import warnings
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

import platformdirs

from vrom.errors import PackError, ValidationError
from vrom.packs.cache_folders import (
    RECORD_NAME,
    CachedPack,
    CacheFolders,
    StorageEstimate,
    cached_pack,
    check_folder,
    check_record,
    install,
    remove_others,
    verify_folder,
)
from vrom.packs.hash_check import HashCheck
from vrom.packs.manifest import (
    MANIFEST_NAME,
    MAX_JSON_BYTES,
    PackFile,
    PackManifest,
    Registry,
    RegistryEntry,
    bytes_sha256,
)
from vrom.packs.quota import check_disk, make_room, pack_size, parse_quota
from vrom.packs.registry import (
    PackRegistry,
    parse_json,
    parse_pack_ref,
    registry_location,
)
from vrom.packs.signing import (
    MAX_SIGNATURE_BYTES,
    SIGNATURE_NAME,
    PublicKey,
    UnverifiedPackWarning,
    check_signature,
    load_trusted_keys,
    unverified_message,
)
from vrom.packs.transfer import PROGRESS_STEP as PROGRESS_STEP  # the pull tests count steps of it
from vrom.packs.transfer import (
    Corrupt,
    FetchFailed,
    ProgressCallback,
    PullProgress,
    Reporter,
    Session,
    deadline_for,
    fetch_file,
    read_bytes,
)

if TYPE_CHECKING:
    import httpx

__all__ = [
    "CachedPack",
    "PullProgress",
    "StorageEstimate",
    "VromCache",
    "parse_pack_ref",
]

logger = logging.getLogger(__name__)

DEFAULT_TTL = 3600.0
# A manifest's file role → the registry entry's key for its URL, which is also the pull phase.
_ROLE_PHASE = {"index": "index", "store": "chunks"}


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
        trusted_keys: Iterable[str | PublicKey] = (),
        quota: int | str | None = None,
        pull_deadline: float | None = None,
    ) -> None:
        """Point at a registry and a cache folder; nothing is read or fetched yet.

        ``registry_url`` is an ``https://``/``http://`` URL of a ``registry.json`` (a URL ending
        in ``/`` gets ``registry.json`` appended), a ``file://`` URL, or a path to a
        ``registry.json`` or to a folder holding one. Without one, cached packs still load;
        fetching the registry raises `PackError`. ``cache_dir`` defaults to platformdirs' user
        cache dir. An HTTP registry's copy is reused for ``ttl_seconds``; a local registry is read
        on every call. ``http_client`` is used as given (and not closed); otherwise a client with
        ``timeout`` is opened per operation.

        ``trusted_keys``: publisher keys (`PublicKey`, key texts or ``.pub`` paths). With any, a
        pack must be signed by one of them to be pulled or loaded; with none, packs are checked
        for integrity only and a pull warns (`UnverifiedPackWarning`).

        ``quota``: the most bytes the cached packs may take (a number, or a size such as
        ``"2GiB"``; see `vrom.packs.quota.parse_quota`). None is the default quota, 10 GiB;
        ``"unlimited"`` is no limit but the disk. A pull evicts the least recently used packs
        to make room, and refuses a pack that cannot fit (in the quota or on the disk) before
        downloading it.

        ``pull_deadline``: the seconds a pull (and a registry fetch) may take in all, checked
        as bytes arrive. None, the default, gives the registry and the manifest ``timeout``
        seconds, and a pull one more second per 64 KiB of the pack's files (at least 64 KiB/s
        on average). Past it the pull stops with `PackError`, keeping what it downloaded for
        the next pull to resume. ``timeout`` also bounds each wait for data.

        The environment is not read here: the faces (`vrom.AgentMemory`, ``vrom pack``) pass
        ``$VROM_REGISTRY_URL``, ``$VROM_CACHE_DIR``, ``$VROM_TRUSTED_KEYS`` and
        ``$VROM_CACHE_QUOTA`` (`vrom.settings`) when given none.
        """
        if ttl_seconds < 0 or timeout <= 0 or (pull_deadline is not None and pull_deadline <= 0):
            raise ValidationError("ttl_seconds must be ≥ 0, and timeout and pull_deadline > 0")
        self.registry_url: str | None = (
            registry_location(os.fspath(registry_url)) if registry_url else None
        )
        self.cache_dir = (
            Path(cache_dir).expanduser().absolute()
            if cache_dir
            else Path(platformdirs.user_cache_dir("vrom", appauthor=False))
        )
        self.ttl_seconds = float(ttl_seconds)
        self.timeout = float(timeout)
        self._http_client = http_client
        self.trusted_keys = load_trusted_keys(trusted_keys)
        self.quota = parse_quota(quota)
        """The cache's size limit in bytes, or None (no limit but the disk)."""
        self.pull_deadline = pull_deadline
        self._registry = PackRegistry(
            self.registry_url,
            self.cache_dir,
            ttl_seconds=self.ttl_seconds,
            http_client=http_client,
            timeout=self.timeout,
            deadline=self.pull_deadline,
        )
        self._folders = CacheFolders(self.cache_dir)

    # -- the registry ---------------------------------------------------------------------------

    def get_registry(self, refresh: bool = False) -> Registry:
        """Return the registry: the cached copy while fresh, else fetched again.

        When a fetch fails (offline, HTTP error, not JSON) and a copy of this registry exists,
        the copy is used with a `RuntimeWarning`; with no copy, `PackError`. A registry that is
        JSON but breaks the format raises `PackError` naming what is wrong.
        """
        return self._registry.get(refresh)

    def resolve(self, id_or_uri: str) -> RegistryEntry | None:
        """Return the registry's entry for ``id``, ``hub://id`` or ``hub://id@version``, or None
        when the registry lists no such pack (or not at that version).

        A malformed id and an unreadable registry still raise `PackError`.
        """
        return self._registry.find(id_or_uri)

    def require_entry(self, id_or_uri: str) -> RegistryEntry:
        """Return the entry `resolve` finds, or raise `PackError` naming the packs available."""
        return self._registry.resolve(id_or_uri)

    def list(self) -> builtins.list[RegistryEntry]:
        """Return the registry's packs."""
        return builtins.list(self.get_registry().packs)

    # -- the cache ------------------------------------------------------------------------------

    def is_cached(self, pack_id: str) -> bool:
        """Return whether a verified folder of the pack (at ``@version``, if given) is cached."""
        return self._folders.current(pack_id) is not None

    def get_cached_manifest(self, pack_id: str) -> PackManifest | None:
        """Return the manifest of the cached pack, or None when it is not cached."""
        pack = self._folders.current(pack_id)
        return pack.manifest if pack else None

    def load_index(self, pack_id: str, verify: bool = False) -> CachedPack:
        """Return the cached pack's paths and manifest, or raise `PackError` if not cached.

        Every file's size and modification time are compared on each call with those recorded
        when its SHA-256 was checked (a stat per file): a file changed since, even to the same
        size, raises `PackError` saying to verify or pull again. With trusted keys, the cached
        manifest's signature is checked again, and every file is hashed again in a background
        thread: `CachedPack.wait_until_hashed` waits for it (a same-size edit with its time put
        back is caught there). ``verify`` re-hashes every file first (and records them again
        when they match). When several versions are cached (a pull stopped before deleting
        the old one), the newest intact one is used.
        """
        pack = self._folders.current(pack_id)
        if pack is not None:
            checked = self._checked(pack, verify)
            self._folders.mark_used(checked.id)
            return checked
        name, version = parse_pack_ref(pack_id)
        folders = self._folders.version_folders(name, version)
        if folders:
            try:
                check_folder(name, *folders[0])
            except PackError as exc:
                raise PackError(
                    f"cached pack {name} {folders[0][0]} is damaged ({exc}): pull it again "
                    "with force_download=True"
                ) from exc
        wanted = f"{name} {version}" if version else name
        raise PackError(f"pack {wanted!r} is not cached in {self.cache_dir}: pull it first")

    def verify(self, pack_id: str) -> CachedPack:
        """Hash every file of the cached pack again and check its signature; return the pack.

        Raises `PackError` when a file does not match the manifest (pull it again with
        ``force_download``); when all do, their sizes and times are recorded again, so a file
        only touched since its last check loads again.
        """
        return self.load_index(pack_id, verify=True)

    def evict(self, pack_id: str) -> bool:
        """Delete every cached version and partial download of a pack; return whether any existed."""
        name, _ = parse_pack_ref(pack_id)
        with self._folders.locked(name):
            return self._folders.remove_pack(name)

    def storage_estimate(self) -> StorageEstimate:
        """Return the bytes cached packs use (``used``) and may use (``quota``: the configured
        quota, else used plus the bytes free on the disk), the bytes free, and the pack count."""
        return self._folders.storage_estimate(self.quota)

    # -- pulling --------------------------------------------------------------------------------

    def pull(
        self,
        id_or_entry: str | RegistryEntry,
        entry: RegistryEntry | None = None,
        on_progress: ProgressCallback | None = None,
        force_download: bool = False,
        keep: Collection[str] = (),
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

        With a quota, the least recently used packs other than this one and those in ``keep``
        (the ids of mounted packs) are evicted first to make room; a pack that cannot fit is a
        `PackError` before any of its files is downloaded.
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
            entry = self.require_entry(id_or_entry)
        with self._folders.locked(entry.id):
            pack = self._pull_locked(entry, Reporter(on_progress), force_download, keep)
        self._folders.mark_used(pack.id)
        return pack

    def _pull_locked(
        self, entry: RegistryEntry, report: Reporter, force: bool, keep: Collection[str]
    ) -> CachedPack:
        pack_dir = self._folders.pack_dir(entry.id)
        target = pack_dir / entry.version
        manifest_url = self._registry.locate(entry.files["manifest"])
        signature_url = (
            self._registry.locate(entry.files["signature"]) if "signature" in entry.files else None
        )
        with Session(self._http_client, self.timeout, self.pull_deadline) as session:
            try:
                raw = read_bytes(session, manifest_url, MAX_JSON_BYTES)
                signature = (
                    read_bytes(session, signature_url, MAX_SIGNATURE_BYTES)
                    if signature_url
                    else None
                )
            except FetchFailed as exc:
                cached = None if force else self._folders.cached_at(entry.id, entry.version)
                if cached is None:
                    raise
                cached = self._checked(cached, verify=False)
                message = f"cannot fetch the manifest of {entry.id} ({exc}); using the cached copy"
                logger.warning(message)
                warnings.warn(message, RuntimeWarning, stacklevel=3)
                report.done(cached.manifest)
                return cached
            report.event("manifest", MANIFEST_NAME, len(raw), len(raw))
            signed_by = self._authenticate(entry, raw, signature)
            manifest = _check_manifest(parse_json(raw, manifest_url), entry, manifest_url)
            if not force:
                cached = self._folders.cached_at(entry.id, entry.version)
                if (
                    cached is not None
                    and _read_or_none(cached.directory / MANIFEST_NAME) == raw
                    and _read_or_none(cached.directory / SIGNATURE_NAME) == signature
                ):
                    check_record(cached)
                    remove_others(pack_dir, entry.version)
                    report.done(manifest)
                    return dataclasses.replace(cached, signed_by=signed_by)
            needed = pack_size(manifest, len(raw), len(signature or b""))
            if self.quota is not None:
                make_room(self._folders, manifest, needed, self.quota, keep)
            check_disk(self._folders, manifest, needed)
            if self.pull_deadline is None:
                session.extend_deadline(deadline_for(self.timeout, needed))
            partial = pack_dir / f".partial-{entry.version}"
            remove_others(pack_dir, entry.version, versions=False, partial=force)
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
                        self._registry.locate(entry.files[key])
                        if key in entry.files
                        else urljoin(manifest_url, file.path)
                    )
                    meter = report.meter(key, file.path, file.size)
                    fetch_file(session, url, partial / file.path, file.size, meter)
                try:
                    verify_folder(partial, manifest)
                except PackError as exc:
                    raise Corrupt(f"{exc}; the download was discarded") from exc
            except Corrupt:
                shutil.rmtree(partial, ignore_errors=True)
                raise
            try:
                (partial / SIGNATURE_NAME).unlink(missing_ok=True)
                if signature is not None:
                    (partial / SIGNATURE_NAME).write_bytes(signature)
            except OSError as exc:
                raise PackError(f"cannot write the signature into {partial}: {exc}") from exc
        install(partial, target)
        remove_others(pack_dir, entry.version)
        logger.info("pulled pack %s %s into %s", entry.id, entry.version, target)
        report.done(manifest)
        return cached_pack(entry.id, entry.version, target, manifest, signed_by)

    def _authenticate(
        self, entry: RegistryEntry, raw: bytes, signature: bytes | None
    ) -> str | None:
        """Return the trusted key that signed the manifest, refusing what trusted keys do not
        accept; with none, warn that the pack's publisher is not checked."""
        what = f"pack {entry.id} {entry.version}"
        if entry.manifest_sha256 and bytes_sha256(raw) != entry.manifest_sha256:
            raise PackError(
                f"{what}: its manifest does not match the registry's manifest_sha256 (changed "
                "after publishing, or the registry is out of date): refused"
            )
        signed_by = check_signature(what, raw, signature, self.trusted_keys)
        if signed_by is None:
            message = unverified_message(what, signature)
            logger.info(message)  # a warning, once per message, through `warnings`
            # blame the caller of VromCache.pull (pull → _pull_locked → here)
            warnings.warn(message, UnverifiedPackWarning, stacklevel=4)
        return signed_by

    def _checked(self, pack: CachedPack, verify: bool) -> CachedPack:
        """Return the cached pack once its files and, with trusted keys, its signature pass."""
        what = f"cached pack {pack.id} {pack.version}"
        manifest_raw = _read_or_none(pack.directory / MANIFEST_NAME) or b""
        try:
            signed_by = check_signature(
                what,
                manifest_raw,
                _read_or_none(pack.directory / SIGNATURE_NAME),
                self.trusted_keys,
            )
        except PackError as exc:
            raise PackError(f"{exc}; evict it, or pull a signed copy with --force") from exc
        if verify:
            with self._folders.locked(pack.id):
                try:
                    verify_folder(pack.directory, pack.manifest)
                except PackError as exc:
                    raise PackError(
                        f"{what} failed verification ({exc}): pull it again with --force "
                        "(force_download=True)"
                    ) from exc
            return dataclasses.replace(pack, signed_by=signed_by)
        check_record(pack)
        hashing = HashCheck(pack.manifest, pack.directory) if self.trusted_keys else None
        return dataclasses.replace(pack, signed_by=signed_by, hash_check=hashing)


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
    reserved = {MANIFEST_NAME, SIGNATURE_NAME, RECORD_NAME}
    if reserved & set(names) or len(set(names)) != len(names):
        raise PackError(
            f"manifest at {url}: file names must differ from each other and from "
            f"{', '.join(sorted(reserved))}"
        )
    return manifest


def _ordered(manifest: PackManifest) -> builtins.list[tuple[str, PackFile]]:
    """Return the manifest's files: index first, then store, then any others by role."""
    rank = {"index": 0, "store": 1}
    return sorted(manifest.files.items(), key=lambda item: (rank.get(item[0], 2), item[0]))


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None
