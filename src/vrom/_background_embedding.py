"""Embedding a vault in the background, so it can be searched by keyword at once.

`BackgroundEmbedding` runs in a thread with its own connection to the vault's store: it embeds
the chunks that have no vector a batch at a time, committing each, while the served vault keeps
answering (searches use the vectors that exist; `vrom.results.SearchReport` says how many). A
run that is stopped or killed keeps every committed batch, and the next run starts with the
chunks still missing, so no committed work is done twice.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vrom.embed import Embedder
from vrom.ingest.embed_job import ChunkRate, EmbeddingBusy, embedding_status
from vrom.results import EmbeddingStatus, rough_duration
from vrom.settings import Settings
from vrom.vault import Vault

BUSY_RETRY_S = 2.0  # how often a worker waiting for another process's run looks again
PROGRESS_SECONDS = 5.0
"""How often a long run logs how far it has got."""


@dataclass(frozen=True)
class EmbeddingProgress:
    """How far background embedding has got.

    Fields: ``running`` (the worker is embedding), ``vectors`` and ``chunks`` (how many of the
    store's chunks have a vector), ``embedded`` (by this run), ``chunks_per_second`` and
    ``eta_seconds`` (measured from the first batch on; None until then), ``error`` (why the
    worker stopped early, else None), ``other_process`` (the pid of another process embedding
    the store, whose progress this mirrors while it waits for it; -1 when its pid is unknown).
    """

    running: bool
    vectors: int
    chunks: int
    embedded: int
    chunks_per_second: float | None
    eta_seconds: float | None
    error: str | None = None
    other_process: int | None = None


class BackgroundEmbedding:
    """A thread that embeds a vault's missing vectors; `start`, `wake`, `progress`, `stop`.

    One worker writes at a time: `wake` after new chunks are indexed runs another pass on the
    same worker, or starts one if the last has ended.
    """

    def __init__(
        self,
        root: Path,
        state_dir: str | os.PathLike[str] | None,
        embedder: Embedder,
        log: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
        progress_seconds: float = PROGRESS_SECONDS,
        *,
        database_url: str | None = None,
        namespace: str | None = None,
        settings: Settings | None = None,
    ) -> None:
        self._root = root
        self._settings = settings  # the served vault's, resolved once: each pass opens with it
        self._state_dir = state_dir
        self._database_url = database_url  # the served vault's store, as it was opened
        self._namespace = namespace
        self._embedder = embedder  # shared with the served vault: never closed here
        self._log = log
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._vectors = self._chunks = self._embedded = 0
        self._meter = ChunkRate(clock)  # a new one each pass: its first batch starts the clock
        self._rate: float | None = None  # the last rate measured
        self._error: str | None = None
        self._other_process: int | None = None
        self._progress_seconds = progress_seconds
        self._logged = 0.0  # when progress was last logged
        self._running = False  # a worker is embedding, or about to (set and read under _lock)
        self._again = False  # woken while a pass ran: run another before ending
        self._before = 0  # chunks embedded by earlier passes of this worker

    def start(self) -> None:
        """Start embedding in a daemon thread (it ends by itself when nothing is missing)."""
        with self._lock:
            self._start()

    def wake(self) -> None:
        """Embed chunks indexed since the last pass: start the worker again if it has ended,
        else have it run one more pass before it ends (never two writers)."""
        with self._lock:
            if self._stop.is_set():
                return
            if self._running:
                self._again = True
            else:
                self._start()

    def _start(self) -> None:
        self._running, self._again, self._error = True, False, None
        self._thread = threading.Thread(
            target=self._run, args=(self._thread,), name="vrom-embedding", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 60.0) -> None:
        """Ask the worker to stop after the batch it is on, and wait for it."""
        with self._lock:  # so that no `wake` starts a worker this misses
            self._stop.set()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def join(self, timeout: float | None = None) -> None:
        """Wait for the worker to finish (tests, and commands that embed in the foreground)."""
        if self._thread is not None:
            self._thread.join(timeout)

    def progress(self) -> EmbeddingProgress:
        """Return how far the worker has got."""
        with self._lock:
            running = self._thread is not None and self._thread.is_alive()
            left = self._chunks - self._vectors
            eta = left / self._rate if self._rate else None
            return EmbeddingProgress(
                running,
                self._vectors,
                self._chunks,
                self._embedded,
                None if self._rate is None else round(self._rate, 2),
                None if eta is None else round(eta, 1),
                self._error,
                self._other_process,
            )

    def _run(self, previous: threading.Thread | None) -> None:
        if previous is not None:
            previous.join()  # it may still be closing its connection: one worker at a time
        try:
            with Vault.open(
                self._root,
                self._state_dir,
                embedder=self._embedder,
                database_url=self._database_url,
                namespace=self._namespace,
                settings=self._settings,
            ) as vault:
                while True:
                    while not self._embed(vault):  # another process is embedding: wait for it
                        if self._stop.wait(BUSY_RETRY_S):
                            return
                    with self._lock:  # `wake` takes this lock too: no wake-up is lost
                        if not self._again or self._stop.is_set():
                            self._running = False
                            return
                        self._again = False
        except Exception as exc:  # the worker must say why it stopped, never die silently
            with self._lock:
                self._error = f"{type(exc).__name__}: {exc}"
            self._log(f"vrom: error: background embedding stopped: {self._error}")
        finally:
            with self._lock:
                if self._thread is threading.current_thread():  # not a newer worker's flag
                    self._running = False

    def _embed(self, vault: Vault) -> bool:
        """Embed what is missing; return False when another process holds the store's claim
        (its progress is mirrored meanwhile), True when the work is done or stopped."""
        counts = vault.store.counts()
        with self._lock:
            self._vectors, self._chunks = counts.vectors, counts.chunks
            self._before, self._meter = self._embedded, ChunkRate(self._clock)
        if counts.vectors >= counts.chunks:
            return True
        if self._other_process is None:
            self._log(
                f"vrom: embedding {counts.chunks - counts.vectors:,} chunks in the background"
            )
        self._logged = self._clock()
        try:
            embedded = vault.corpus.embed_missing(
                lambda done, total: self._batch(counts.vectors, done),
                stop=self._stop.is_set,
            )
        except EmbeddingBusy as exc:
            self._mirror(exc.pid, embedding_status(vault.store))
            return False
        with self._lock:
            self._other_process = None
        self._log(f"vrom: embedded {embedded:,} chunks")
        return True

    def _mirror(self, pid: int | None, status: EmbeddingStatus | None) -> None:
        """Report another process's embedding run as this worker's progress."""
        with self._lock:
            first_time = self._other_process is None
            self._other_process = pid or -1
            if status is not None and status.running:
                self._vectors = max(self._vectors, status.vectors)
                self._rate = status.chunks_per_second
        if first_time:
            who = f"process {pid}" if pid else "another process"
            self._log(f"vrom: {who} is embedding this vault: searches use its vectors as they come")

    def _batch(self, start_vectors: int, done: int) -> None:
        now = self._clock()
        with self._lock:
            self._embedded = self._before + done
            self._vectors = start_vectors + done
            self._rate = self._meter.update(done) or self._rate
        if now - self._logged >= self._progress_seconds:
            self._logged = now
            progress = self.progress()
            pace = ""
            if progress.chunks_per_second is not None and progress.eta_seconds is not None:
                pace = (
                    f" ({progress.chunks_per_second:g} chunks/s, "
                    f"about {rough_duration(progress.eta_seconds)} left)"
                )
            self._log(
                f"vrom: embedding: {progress.vectors:,}/{progress.chunks:,} chunks have vectors"
                + pace
            )
