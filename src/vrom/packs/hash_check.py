"""A cached pack's files hashed again in the background, when a mount has trusted keys.

Loading a cached pack compares each file's size and modification time with those recorded when
it was last hashed (`vrom.packs.cache_folders.check_record`): a stat, not a read. An edit that
keeps both (the same size, its time put back) passes that. With trusted keys the signature
vouches for the manifest, and so for each file's SHA-256 in it: `HashCheck` hashes every file
again in a thread, while the store and index open and the model loads, and the first search of
the mounted pack waits for it (`wait`), so no text of a changed file is served. The files are
checked once per load; a file changed after its check is not seen until the next load.
"""

from __future__ import annotations

import threading
from pathlib import Path

from vrom.errors import PackError
from vrom.packs.manifest import PackManifest

__all__ = ["HashCheck"]


class HashCheck:
    """Every file of a cached pack hashed against its manifest, in a background thread."""

    def __init__(self, manifest: PackManifest, directory: Path) -> None:
        self._manifest = manifest
        self._directory = directory
        self._failure: str | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"vrom-hash-check-{manifest.vrom_id}", daemon=True
        )
        self._thread.start()

    def wait(self) -> None:
        """Return once every file matched its SHA-256, or raise `PackError` naming the first
        that did not (every call, once it failed)."""
        self._thread.join()
        if self._failure is not None:
            raise PackError(self._failure)

    def _run(self) -> None:
        what = f"cached pack {self._manifest.vrom_id} {self._manifest.version}"
        try:
            self._manifest.verify(self._directory)
        except (PackError, OSError) as exc:
            reason = str(exc).removeprefix(f"pack {self._manifest.vrom_id}: ")
            self._failure = (
                f"{what} failed its hash check: {reason} (it changed after it was verified): "
                "pull it again with --force (force_download=True)"
            )
