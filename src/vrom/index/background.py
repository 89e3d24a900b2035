"""Derived structures built beside searches, never inside one.

A search that finds the structure it would use (the in-memory keyword copy, an HNSW graph)
missing or too far behind answers the exact way meanwhile (FTS5, an exact scan) and asks a
`BackgroundBuild` to make it: a daemon thread builds it while searches go on, and the next
search after it finished takes the result. One build runs at a time in the process (the
machine's cores are the searches' too), so a build waits for the one before it; a process that
exits does not wait for any. A build that fails is logged on the ``vrom`` logger and leaves
searches as they were: they keep answering the exact way, and a later one may ask again.

Builds are timed in CPU seconds of their own thread (`time.thread_time`), and searches that
weigh a build against them time themselves the same way: on a loaded machine wall time counts
the waiting for a core, which is neither side's cost.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

logger = logging.getLogger(__name__)
_ONE_AT_A_TIME = threading.Lock()
"""Held by the build running in this process."""


class BackgroundBuild(Generic[T]):
    """One structure built in a daemon thread: `start` it, `take` it when done; see the module
    docstring. ``what`` names it in the log ("the keyword copy of /x/store.db")."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._done: tuple[T, float] | None = None
        self.failures = 0
        """How many builds raised (each logged)."""

    @property
    def running(self) -> bool:
        """True while a build was started and its result not yet finished."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def start(self, build: Callable[[], T]) -> bool:
        """Build ``build()`` in a daemon thread unless one is running or its result waits to
        be taken; True if this call started it."""
        with self._lock:
            if self.running or self._done is not None:
                return False
            self._thread = threading.Thread(
                target=self._run, args=(build,), name="vrom-build", daemon=True
            )
            self._thread.start()
            return True

    def take(self) -> tuple[T, float] | None:
        """Return the finished result and the CPU seconds its build took, once (None: none
        finished since the last take)."""
        with self._lock:
            done, self._done = self._done, None
            return done

    def wait(self) -> None:
        """Return once the build running now, if any, has finished (for tests and benches)."""
        thread = self._thread
        if thread is not None:
            thread.join()

    def _run(self, build: Callable[[], T]) -> None:
        with _ONE_AT_A_TIME:
            started = time.thread_time()
            try:
                built = build()
            except Exception as exc:  # a background thread has no caller to raise to
                self.failures += 1
                logger.warning(
                    "building %s failed (%s: %s); searches go on without it",
                    self._what,
                    type(exc).__name__,
                    exc,
                )
                return
            seconds = time.thread_time() - started
        with self._lock:
            self._done = (built, seconds)
