"""Derived structures built beside searches, never inside one.

A search that finds the structure it would use (the in-memory keyword copy, an HNSW graph)
missing or too far behind answers the exact way meanwhile (FTS5, an exact scan) and asks a
`BackgroundBuild` to make it: a daemon thread builds it while searches go on, and the next
search after it finished takes the result. One build runs at a time in the process (the
machine's cores are the searches' too), so a build waits for the one before it; a process that
exits does not wait for any. A build that runs native threads (usearch's, for a graph) must not
be running while the process exits (C++ aborts the process: "terminate called without an active
exception"), so such a build is made ``stops_at_exit``: it checks `exiting` between parts and
raises `BuildStopped`, and the exit waits for the part under way (a fraction of a second). A
build that fails is logged on the ``vrom`` logger and leaves searches as they were: they keep
answering the exact way, and a later one may ask again.

Builds are timed in CPU seconds of their own thread (`time.thread_time`), and searches that
weigh a build against them time themselves the same way: on a loaded machine wall time counts
the waiting for a core, which is neither side's cost.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

logger = logging.getLogger(__name__)
_ONE_AT_A_TIME = threading.Lock()
"""Held by the build running in this process."""
_EXITING = threading.Event()
_STOPPING: set[threading.Thread] = set()  # builds that stop at exit, while they run
_STOPPING_LOCK = threading.Lock()


class BuildStopped(Exception):
    """Raised by a build that stops because the process exits."""


def exiting() -> bool:
    """True once the process has begun to exit: a build that `stops_at_exit` stops."""
    return _EXITING.is_set()


@atexit.register
def _stop_builds() -> None:
    with _STOPPING_LOCK:
        _EXITING.set()
        running = list(_STOPPING)
    for thread in running:
        thread.join()


class BackgroundBuild(Generic[T]):
    """One structure built in a daemon thread: `start` it, `take` it when done; see the module
    docstring. ``what`` names it in the log ("the keyword copy"); ``stops_at_exit`` makes the
    process's exit wait for the part of the build under way (see the module docstring)."""

    def __init__(self, what: str, *, stops_at_exit: bool = False) -> None:
        self._what = what
        self._stops_at_exit = stops_at_exit
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
            me = threading.current_thread()
            if self._stops_at_exit:
                with _STOPPING_LOCK:
                    if _EXITING.is_set():
                        return
                    _STOPPING.add(me)
            started = time.thread_time()
            try:
                built = build()
            except BuildStopped:
                return
            except Exception as exc:  # a background thread has no caller to raise to
                self.failures += 1
                logger.warning(
                    "building %s failed (%s: %s); searches go on without it",
                    self._what,
                    type(exc).__name__,
                    exc,
                )
                return
            finally:
                with _STOPPING_LOCK:
                    _STOPPING.discard(me)
            seconds = time.thread_time() - started
        with self._lock:
            self._done = (built, seconds)
