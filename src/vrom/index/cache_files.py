"""Files an index derives from a store and keeps beside it (the HNSW graph, the exact matrix).

Each is written to a temporary file beside its final name and renamed over it, so a reader
sees the old file or the new one, never half of one. The temporary gets the store's permission
bits (a shared store shares its caches). A process killed mid-save leaves its temporary behind;
the next index to open the cache removes the ones older than `STALE_TEMPORARY_SECONDS`.
"""

from __future__ import annotations

import glob
import os
import tempfile
import time
from pathlib import Path

from vrom.store import Sidecar

STALE_TEMPORARY_SECONDS = 600.0
"""A cache's temporary file unchanged for this long was left by a save that never finished (a
killed process): a save writes its temporaries within seconds, then renames them."""


def temporary(beside: Path, temporaries: list[str], cache: Sidecar | None) -> str:
    """Return a new temporary file beside ``beside``, as private as the store's database.

    Its name is appended to ``temporaries``: the caller removes whatever is left of them.
    """
    fd, name = tempfile.mkstemp(prefix=beside.name + ".", suffix=".tmp", dir=beside.parent)
    os.close(fd)
    temporaries.append(name)
    if cache is not None:  # mkstemp makes it 0600; a shared store shares its cache
        os.chmod(name, cache.mode)
    return name


def remove_stale_temporaries(*paths: Path) -> None:
    """Remove the temporaries of the files at ``paths`` that a killed save left (older than
    `STALE_TEMPORARY_SECONDS`; a newer one may be another process's save under way)."""
    now = time.time()
    for path in paths:
        for leftover in path.parent.glob(glob.escape(path.name) + ".*.tmp"):
            try:
                if now - leftover.stat().st_mtime > STALE_TEMPORARY_SECONDS:
                    leftover.unlink()
            except OSError:  # gone meanwhile, or not ours to remove: the next open tries again
                pass
