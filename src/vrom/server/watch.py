"""Re-index notes that change on disk while the server runs (watchfiles, debounced).

Changes are gathered for `DEBOUNCE_MS` after the last event, then the changed notes are
re-indexed in one go, so an editor's save is searchable by keyword within about a second. Their
new chunks are embedded by the background worker (`embed_later`, which the server passes), not
while the watcher holds the vault's lock; without one they are embedded inline.
Only Markdown notes count; hidden and ignored folders are skipped the way indexing skips them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from vrom.errors import VromError
from vrom.ingest.confine import is_inside
from vrom.ingest.walk import is_ignored_path, is_note_name
from vrom.vault import Vault

DEBOUNCE_MS = 300


class Watcher:
    """A daemon thread that re-indexes the notes that change under a vault's root."""

    def __init__(
        self,
        vault: Vault,
        lock: threading.RLock,
        log: Callable[[str], None],
        embed_later: Callable[[], None] | None = None,
    ) -> None:
        self._vault = vault
        self._lock = lock
        self._log = log
        self._embed_later = embed_later
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vrom-watch", daemon=True)
        self.reindexed = 0
        """How many notes the watcher has re-indexed (for tests and stats)."""

    def start(self) -> None:
        """Start watching."""
        self._thread.start()

    def stop(self) -> None:
        """Stop watching and wait for the thread (a re-index in progress finishes first)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        try:
            from watchfiles import watch
        except ImportError:
            self._log(
                "vrom: warning: watchfiles is missing: notes edited on disk are not re-indexed"
            )
            return
        root = self._vault.root
        try:
            for changes in watch(
                root,
                watch_filter=lambda _change, path: _is_note(root, path),
                debounce=DEBOUNCE_MS,
                step=50,
                stop_event=self._stop,
                raise_interrupt=False,
            ):
                paths = sorted({path for _change, path in changes})
                self._reindex(paths)
        except Exception as exc:
            self._log(f"vrom: warning: the file watcher stopped: {exc}")

    def _reindex(self, paths: list[str]) -> None:
        try:
            with self._lock:
                summary = self._vault.reindex_paths(paths, embed=self._embed_later is None)
        except VromError as exc:
            self._log(f"vrom: warning: re-indexing {len(paths)} changed notes failed: {exc}")
            return
        self.reindexed += len(paths)
        self._log(
            f"vrom: re-indexed {len(paths)} changed notes ({summary.added} added, "
            f"{summary.changed} changed, {summary.removed} removed)"
        )
        if self._embed_later is not None:
            self._embed_later()


def _is_note(root: Path, path: str) -> bool:
    """Return True when a changed path is a note that indexing would take (by its name)."""
    candidate = Path(path)
    if not is_note_name(candidate.name) or not is_inside(root, candidate):
        return False
    return not is_ignored_path(candidate.relative_to(root).as_posix())
