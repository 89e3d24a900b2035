"""The pack cache's size limit: reading a quota, and making room for a pull within it.

A cache has a quota unless told otherwise: `DEFAULT_QUOTA` (10 GiB), so a manifest claiming
50 GB is refused before a byte of it is fetched; ``unlimited`` leaves the disk as the only limit,
and a pull larger than the disk's free space is refused too (`check_disk`).

A quota bounds the bytes under the cache's ``packs/`` folder once a pull is done (while a pull
runs, the previous version of the same pack stays until the new one is verified). Before a pull
downloads anything, `make_room` checks that the pack fits: a pack larger than the quota by
itself is refused at once, and otherwise the least recently used packs (by the last mount or
pull recorded in the cache) are evicted until it fits. A pack is never evicted for room when it
is the one being pulled, one the caller keeps (the mounted pack), or one another process holds
the lock of (it is being pulled or evicted there).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection

from vrom.errors import PackError, ValidationError
from vrom.packs.cache_folders import CacheFolders
from vrom.packs.manifest import PackManifest

logger = logging.getLogger(__name__)

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
DEFAULT_QUOTA = 10 * 1024**3
UNLIMITED = ("unlimited", "none")
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*")
# verified.json, written after the files are hashed: its size is not known before the pull
_RECORD_ALLOWANCE = 256
_RECORD_ALLOWANCE_PER_FILE = 128


def parse_quota(value: int | str | None) -> int | None:
    """Return a cache quota in bytes (None: no quota), or raise `ValidationError`.

    ``value`` is a number of bytes, or a text such as ``"500MB"``, ``"2 GiB"`` or ``"750000"``
    (units ``B``, ``KB``/``MB``/``GB``/``TB`` of 1000 and ``KiB``/``MiB``/``GiB``/``TiB`` of
    1024, in any case), or ``"unlimited"``. A quota is at least one byte. None is the default
    quota, `DEFAULT_QUOTA`.
    """
    if value is None:
        return DEFAULT_QUOTA
    if isinstance(value, str) and value.strip().lower() in UNLIMITED:
        return None
    quota: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        quota = value
    elif isinstance(value, str):
        match = _SIZE.fullmatch(value)
        factor = _UNITS.get(match.group(2).lower()) if match else None
        if match and factor is not None:
            quota = int(float(match.group(1)) * factor)
    if quota is None or quota < 1:
        raise ValidationError(
            f"the cache quota must be a positive number of bytes, a size such as 500MB or "
            f"2GiB, or 'unlimited', not {value!r}"
        )
    return quota


def pack_size(manifest: PackManifest, manifest_bytes: int, signature_bytes: int) -> int:
    """Return the bytes a pack takes in the cache: its files, manifest, signature and record."""
    files = sum(file.size for file in manifest.files.values())
    record = _RECORD_ALLOWANCE + _RECORD_ALLOWANCE_PER_FILE * len(manifest.files)
    return files + manifest_bytes + signature_bytes + record


def check_disk(folders: CacheFolders, manifest: PackManifest, needed: int) -> None:
    """Raise `PackError` when the pack needs more bytes than the cache's disk has free."""
    free = folders.storage_estimate().free_bytes
    if needed > free:
        raise PackError(
            f"pack {manifest.vrom_id} {manifest.version} needs {needed:,} bytes, but the disk "
            f"holding the cache {folders.cache_dir} has {free:,} free: free some space, or "
            "pull into a cache on another disk ($VROM_CACHE_DIR)"
        )


def make_room(
    folders: CacheFolders,
    manifest: PackManifest,
    needed: int,
    quota: int,
    keep: Collection[str] = (),
) -> list[str]:
    """Evict the least recently used packs until ``needed`` more bytes fit in ``quota``.

    Returns the ids evicted, oldest use first. Raises `PackError` before evicting anything when
    the pack cannot fit: it is larger than the quota, or the packs that may not be evicted
    (``keep``, and the pack itself) leave too little room. The caller holds the lock of the
    pack being pulled; the others' locks are only tried, so two pulls never wait on each other.
    """
    what = f"pack {manifest.vrom_id} {manifest.version}"
    fix = "raise the quota ($VROM_CACHE_QUOTA, or cache_quota=)"
    if needed > quota:
        raise PackError(
            f"{what} needs {needed:,} bytes, more than the cache quota of {quota:,} bytes: {fix}"
        )
    sizes = {
        pack_id: folders.pack_bytes(pack_id)
        for pack_id in folders.pack_ids()
        if pack_id != manifest.vrom_id
    }
    held = sum(sizes.values())
    if held + needed <= quota:
        return []
    candidates = sorted(
        (pack_id for pack_id in sizes if pack_id not in keep),
        key=lambda pack_id: (folders.last_used(pack_id), pack_id),
    )
    kept = held - sum(sizes[pack_id] for pack_id in candidates)
    if kept + needed > quota:
        raise PackError(
            f"{what} needs {needed:,} bytes and the cache quota is {quota:,} bytes, but packs "
            f"that stay ({', '.join(sorted(set(sizes) - set(candidates)))}) hold {kept:,}: "
            f"{fix}, or unmount them first"
        )
    evicted: list[str] = []
    for pack_id in candidates:
        with folders.locked_if_free(pack_id) as free:
            if not free:
                continue  # being pulled or evicted by another process
            size = folders.pack_bytes(pack_id)
            folders.remove_pack(pack_id)
        held -= size
        evicted.append(pack_id)
        logger.info("evicted pack %s (%d bytes, least recently used) to make room", pack_id, size)
        if held + needed <= quota:
            return evicted
    raise PackError(
        f"{what} needs {needed:,} bytes and the cache quota is {quota:,} bytes, but the packs "
        f"that could make room are busy in another process: try again, or {fix}"
    )
