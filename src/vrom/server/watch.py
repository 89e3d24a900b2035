"""Re-index notes that change on disk while the server runs (watchfiles, debounced).

Changes are gathered for `DEBOUNCE_MS` after the last event, then the changed notes are
re-indexed in one go, so an editor's save is searchable by keyword within about a second. Their
new chunks are embedded by the background worker (`embed_later`, which the server passes), not
while the watcher holds the vault's lock; without one they are embedded inline.

The watcher never leaves the vault. It watches each real folder of the vault on its own
(`vrom.ingest.walk.real_folders`: no symlink followed, hidden and ignored folders left out),
never the root recursively: watchfiles follows symlinks, so a recursive watch of a vault holding
``rootlink -> /`` would walk the whole disk and die on ``/proc``. When a folder is added or
removed it starts again over the new list and catches up with a changed-only index. A changed
path counts only when it names a note by the rules indexing applies, to where it really leads
(`vrom.ingest.walk.is_note_in_vault`): a symlink out of the vault or into ``.obsidian`` is
dropped, not re-indexed.

If watching fails, the watcher says so in the log and in `status` (``restarting``, with the
reason), waits (`RESTART_DELAYS`, growing) and starts again, catching up with the disk; it
stops only when the server does (or watchfiles is missing).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from vrom.errors import VromError
from vrom.ingest.walk import is_ignored_path, is_note_in_vault, real_folders
from vrom.vault import Vault

DEBOUNCE_MS = 300
STEP_MS = 50
WAKE_MS = 250
"""How often the watch loop wakes without changes (so a new watch reports ``running`` soon)."""
RESTART_DELAYS = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
"""Seconds between a failure and the next start, one more step each failure in a row."""

WatcherState = Literal["starting", "running", "restarting", "stopped"]


@dataclass(frozen=True)
class WatcherStatus:
    """How the file watcher stands, for ``vault_stats``.

    ``state``: ``starting``, ``running``, ``restarting`` (it failed; ``reason`` says how, and
    it starts again shortly) or ``stopped`` (``reason`` says why). ``folders``: how many folders
    it watches; ``restarts``: how many times it has started again after a failure;
    ``reindexed``: how many changed notes it has re-indexed.
    """

    state: WatcherState
    reason: str | None = None
    folders: int = 0
    restarts: int = 0
    reindexed: int = 0


OFF = WatcherStatus("stopped", "the server was started with --no-watch")
"""The status `vault_stats` reports when the server does not watch."""


class _FoldersChanged(Exception):
    """A folder was added or removed: watch the new list of folders."""


class Watcher:
    """A daemon thread that re-indexes the notes that change under a vault's root."""

    def __init__(
        self,
        vault: Vault,
        lock: threading.RLock,
        log: Callable[[str], None],
        embed_later: Callable[[], None] | None = None,
        *,
        watch: Callable[..., Iterable[set[tuple[Any, str]]]] | None = None,
    ) -> None:
        """``watch`` stands in for `watchfiles.watch` (tests make it fail)."""
        self._vault = vault
        self._lock = lock
        self._log = log
        self._embed_later = embed_later
        self._watch = watch
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vrom-watch", daemon=True)
        self._status = WatcherStatus("starting")
        self._status_lock = threading.Lock()

    @property
    def reindexed(self) -> int:
        """How many notes the watcher has re-indexed (for tests and stats)."""
        return self._status.reindexed

    def status(self) -> WatcherStatus:
        """Return how the watcher stands now."""
        with self._status_lock:
            return self._status

    def start(self) -> None:
        """Start watching."""
        self._thread.start()

    def stop(self) -> None:
        """Stop watching and wait for the thread (a re-index in progress finishes first)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self._set(state="stopped", reason="the server stopped")

    def _set(self, **changes: Any) -> None:
        with self._status_lock:
            self._status = replace(self._status, **changes)

    def _run(self) -> None:
        watch = self._watch
        if watch is None:
            try:
                import watchfiles
            except ImportError:
                reason = "watchfiles is missing: notes edited on disk are not re-indexed"
                self._set(state="stopped", reason=reason)
                self._log(f"vrom: warning: {reason}")
                return
            watch = watchfiles.watch
        failures = 0
        catch_up = False  # the first start follows the server's own index
        while not self._stop.is_set():
            try:
                self._watch_folders(watch, catch_up)
            except _FoldersChanged:
                failures, catch_up = 0, True
                continue
            except Exception as exc:  # any failure: say so, and start again
                delay = RESTART_DELAYS[min(failures, len(RESTART_DELAYS) - 1)]
                failures += 1
                reason = " ".join(f"{type(exc).__name__}: {exc}".split())
                self._set(state="restarting", reason=reason, restarts=self._status.restarts + 1)
                self._log(
                    f"vrom: warning: the file watcher failed ({reason}); restarting in {delay:g} s"
                )
                catch_up = True
                self._stop.wait(delay)
        self._set(state="stopped", reason="the server stopped")

    def _watch_folders(self, watch: Callable[..., Any], catch_up: bool) -> None:
        """Watch the vault's folders until the stop event, or `_FoldersChanged`."""
        root = self._vault.root
        folders = real_folders(root)
        watched = {str(folder) for folder in folders}
        started = False
        for changes in watch(
            *folders,
            watch_filter=None,
            debounce=DEBOUNCE_MS,
            step=STEP_MS,
            rust_timeout=WAKE_MS,
            yield_on_timeout=True,
            stop_event=self._stop,
            raise_interrupt=False,
            recursive=False,
            ignore_permission_denied=True,
        ):
            if not started:  # watching now: what changed before is caught up after
                started = True
                self._set(state="running", reason=None, folders=len(folders))
                if catch_up:
                    self._catch_up()
            if _folders_changed(root, changes, watched):
                raise _FoldersChanged
            paths = sorted({path for _, path in changes if is_note_in_vault(root, path)})
            if paths:
                self._reindex(paths)

    def _catch_up(self) -> None:
        """Bring the index up to date with the disk (changed notes only) after a restart."""
        try:
            with self._lock:
                summary = self._vault.index(embed=self._embed_later is None)
        except VromError as exc:
            self._log(f"vrom: warning: catching up with the disk failed: {exc}")
            return
        if summary.added or summary.changed or summary.removed:
            self._log(
                f"vrom: caught up with the disk ({summary.added} added, {summary.changed} "
                f"changed, {summary.removed} removed)"
            )
            if self._embed_later is not None:
                self._embed_later()

    def _reindex(self, paths: list[str]) -> None:
        try:
            with self._lock:
                summary = self._vault.reindex_paths(paths, embed=self._embed_later is None)
        except VromError as exc:
            self._log(f"vrom: warning: re-indexing {len(paths)} changed notes failed: {exc}")
            return
        self._set(reindexed=self._status.reindexed + len(paths))
        self._log(
            f"vrom: re-indexed {len(paths)} changed notes ({summary.added} added, "
            f"{summary.changed} changed, {summary.removed} removed)"
        )
        if self._embed_later is not None:
            self._embed_later()


def _folders_changed(root: Path, changes: set[tuple[Any, str]], watched: set[str]) -> bool:
    """Return True when ``changes`` add a folder to watch or remove one that is watched."""
    for _, path in changes:
        if path in watched:
            if not Path(path).is_dir():
                return True  # removed, or renamed away
            continue
        candidate = Path(path)
        if (
            candidate.is_dir()
            and not candidate.is_symlink()
            and candidate.is_relative_to(root)
            and not is_ignored_path(candidate.relative_to(root).as_posix())
        ):
            return True
    return False
