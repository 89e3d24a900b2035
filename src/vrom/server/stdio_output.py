"""The stdio transport's output: each reply written from the server's event loop.

The SDK's stdio transport writes and flushes every line in a worker thread, two hand-offs
between threads per reply; on a loaded machine each costs a wait for the scheduler, which
was most of a `vault_search` round trip's overhead. Here a pipe or socket is written without
blocking from the event loop itself (waiting only while it is full); anything else (a file,
a terminal) is written as it comes. fd 1 points at stderr while the server runs, as the SDK's
transport does, so a stray ``print`` cannot corrupt the protocol.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager

import anyio


def is_pollable(fd: int) -> bool:
    """True for a pipe or a socket: an event loop can wait on it (not on a file or a tty,
    whose blocking mode other processes share)."""
    if os.name == "nt":
        return False
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@contextmanager
def non_blocking(fd: int) -> Iterator[bool]:
    """Make ``fd`` non-blocking while the block runs, if it is a pipe or a socket; yield
    whether it is (its blocking mode is restored after)."""
    pollable = is_pollable(fd)
    if pollable:
        os.set_blocking(fd, False)
    try:
        yield pollable
    finally:
        if pollable:
            os.set_blocking(fd, True)


@contextmanager
def claimed_stdout() -> Iterator[LineOutput]:
    """Yield the protocol's output (a duplicate of fd 1), with fd 1 itself pointed at stderr
    meanwhile; where descriptors cannot be moved, fd 1 as it is."""
    try:
        private = os.dup(1)
    except OSError:
        yield LineOutput(1, pollable=False)
        return
    try:
        os.dup2(2, 1)
    except OSError:
        os.close(private)
        yield LineOutput(1, pollable=False)
        return
    try:
        with non_blocking(private) as pollable:
            yield LineOutput(private, pollable=pollable)
    finally:
        os.dup2(private, 1)
        os.close(private)


class LineOutput:
    """The text file the SDK's stdio transport writes its lines to, written from the event
    loop; ``first_line`` is set once a whole line (the first reply) has been written."""

    def __init__(self, fd: int, *, pollable: bool) -> None:
        self._fd = fd
        self._pollable = pollable
        self.first_line = anyio.Event()

    async def write(self, text: str) -> None:
        """Write ``text`` whole (UTF-8), waiting while the pipe is full."""
        data = memoryview(text.encode("utf-8"))
        while data:
            try:
                data = data[os.write(self._fd, data) :]
            except BlockingIOError:
                await anyio.wait_writable(self._fd)
        if text.endswith("\n"):
            self.first_line.set()

    async def flush(self) -> None:
        """Nothing to flush: every line is written whole by `write`."""
