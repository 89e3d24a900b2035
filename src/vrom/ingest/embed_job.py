"""One embedding job per store at a time, and its progress where other processes can read it.

A run that embeds a store's missing chunks takes the store's *embedding claim*: an exclusive
lock on ``<store>.embedding.lock`` (the operating system's file lock, so a killed process
releases it) holding the owner's pid. While it runs it writes ``<store>.embedding.json``
(vectors, chunks, chunks per second, time left), so ``vrom stats``, ``vault_stats`` and a second
``vrom index`` can say how far it has got instead of starting a second writer.

Stores in memory and encrypted stores have no files beside them (`vrom.store.Store.sidecar`):
their runs take no claim, which is safe for memory (one process) and leaves an encrypted store
to SQLite's own locking.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from vrom.errors import StorageError
from vrom.results import EmbeddingStatus
from vrom.store import Store

LOCK_SUFFIX = ".embedding.lock"
PROGRESS_SUFFIX = ".embedding.json"
LOG_SUFFIX = ".embedding.log"
TAKE_WAIT_S = 0.5  # how long taking the claim waits out a reader's probe
WRITE_EVERY_S = 1.0  # progress is rewritten at most this often (and at the end)


class EmbeddingBusy(StorageError):
    """Another process is embedding this store; ``pid`` names it when known."""

    def __init__(self, pid: int | None) -> None:
        who = f"process {pid}" if pid else "another process"
        super().__init__(
            f"{who} is embedding this store: wait for it ('vrom stats' shows its progress)"
        )
        self.pid = pid


class ChunkRate:
    """Chunks per second since the first embedded batch (so a model's loading is not part of
    the rate): what progress bars, the progress file and the server's worker report."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._start: tuple[float, int] | None = None  # (time, chunks) at the first batch

    def update(self, done: int) -> float | None:
        """Record ``done`` chunks now; return the rate, or None before it can be measured."""
        now = self._clock()
        if self._start is None:
            if done > 0:
                self._start = (now, done)
            return None
        elapsed = now - self._start[0]
        return (done - self._start[1]) / elapsed if elapsed > 0 and done > self._start[1] else None


class EmbeddingClaim:
    """The right to embed one store, held from `take` until `release`; reports progress."""

    def __init__(self, lock: IO[bytes] | None, progress_path: Path | None) -> None:
        self._lock = lock
        self._progress_path = progress_path
        self._rate = ChunkRate()
        self._written = 0.0  # when progress was last written (monotonic)

    @classmethod
    def take(cls, store: Store) -> EmbeddingClaim:
        """Take the store's embedding claim, or raise `EmbeddingBusy` when another run has it."""
        lock_file = store.sidecar(LOCK_SUFFIX)
        progress_file = store.sidecar(PROGRESS_SUFFIX)
        if lock_file is None or progress_file is None:
            return cls(None, None)
        try:
            handle = open(lock_file.path, "a+b")  # noqa: SIM115 (held until release)
        except OSError as exc:
            raise StorageError(f"cannot open {lock_file.path}: {exc}") from exc
        # a reader probing the lock holds it shared for an instant: try a few times
        deadline = time.monotonic() + TAKE_WAIT_S
        while not _try_lock(handle):
            if time.monotonic() >= deadline:
                pid = _read_pid(handle)
                handle.close()
                raise EmbeddingBusy(pid)
            time.sleep(0.05)
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()).encode())
        handle.flush()
        return cls(handle, progress_file.path)

    def report(self, vectors: int, chunks: int, embedded: int, *, final: bool = False) -> None:
        """Record progress: ``vectors`` of ``chunks`` have a vector, ``embedded`` by this run."""
        if self._progress_path is None:
            return
        rate = self._rate.update(embedded)  # every report: the first batch starts the clock
        now = time.monotonic()
        if not final and now - self._written < WRITE_EVERY_S:
            return
        self._written = now
        eta = (chunks - vectors) / rate if rate and vectors < chunks else None
        _write_json(
            self._progress_path,
            {
                "pid": os.getpid(),
                "running": not final,
                "vectors": vectors,
                "chunks": chunks,
                "embedded": embedded,
                "chunks_per_second": None if rate is None else round(rate, 2),
                "eta_seconds": None if eta is None else round(eta, 1),
                "updated_unix": time.time(),
            },
        )

    def release(self) -> None:
        """Give the claim back (the progress file stays, saying the run ended)."""
        if self._lock is not None:
            _unlock(self._lock)
            self._lock.close()
            self._lock = None


@contextlib.contextmanager
def claimed(store: Store) -> Iterator[EmbeddingClaim]:
    """Hold the store's embedding claim for the ``with`` block (see `EmbeddingClaim.take`)."""
    claim = EmbeddingClaim.take(store)
    try:
        yield claim
    finally:
        claim.release()


def embedding_status(store: Store) -> EmbeddingStatus | None:
    """Return what the store's last or current embedding run reported, or None if none did.

    ``running`` is True only while a process holds the claim; ``eta_seconds`` counts down from
    the run's last report.
    """
    lock_file = store.sidecar(LOCK_SUFFIX)
    progress_file = store.sidecar(PROGRESS_SUFFIX)
    if lock_file is None or progress_file is None:
        return None
    try:
        data: Any = json.loads(progress_file.path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = None
    running, pid = _held(lock_file.path)
    if not isinstance(data, dict):
        return EmbeddingStatus(running, pid, 0, 0, 0, None, None, None) if running else None
    updated = _number(data.get("updated_unix"))
    eta = _number(data.get("eta_seconds"))
    if eta is not None and updated is not None:
        eta = max(0.0, round(eta - max(0.0, time.time() - updated), 1))
    return EmbeddingStatus(
        running=running,
        pid=pid if running else _int(data.get("pid")),
        vectors=_int(data.get("vectors")) or 0,
        chunks=_int(data.get("chunks")) or 0,
        embedded=_int(data.get("embedded")) or 0,
        chunks_per_second=_number(data.get("chunks_per_second")),
        eta_seconds=eta if running else None,
        updated_unix=updated,
    )


def _held(path: Path) -> tuple[bool, int | None]:
    """Return whether a process holds the lock at ``path``, and its pid when it does."""
    try:
        handle = open(path, "rb")  # noqa: SIM115
    except OSError:
        return False, None
    with handle:
        if _try_lock(handle, shared=True):
            _unlock(handle)
            return False, None
        return True, _read_pid(handle)


def _read_pid(handle: IO[bytes]) -> int | None:
    try:
        handle.seek(0)
        return int(handle.read(32).decode().strip() or 0) or None
    except (OSError, ValueError):
        return None


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Replace ``path`` with ``data`` at once (a reader never sees half a file)."""
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(json.dumps(data), encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        # progress is for people watching; failing to write it must not stop the embedding
        with contextlib.suppress(OSError):
            temporary.unlink()


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _int(value: object) -> int | None:
    number = _number(value)
    return None if number is None else int(number)


if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _try_lock(handle: IO[bytes], shared: bool = False) -> bool:
        # Windows has no shared byte-range lock in msvcrt: a probe takes the same lock briefly
        try:
            handle.seek(0)
            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _unlock(handle: IO[bytes]) -> None:
        with contextlib.suppress(OSError):
            handle.seek(0)
            msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try_lock(handle: IO[bytes], shared: bool = False) -> bool:
        try:
            fcntl.flock(
                handle.fileno(), (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
            )
        except OSError:
            return False
        return True

    def _unlock(handle: IO[bytes]) -> None:
        with contextlib.suppress(OSError):
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
