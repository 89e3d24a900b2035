"""Progress of a long ``vrom index``: a bar on a terminal, a line every few seconds otherwise.

Both show notes indexed, then chunks embedded with the rate measured so far and the time left.
The rate is measured from the first embedded batch on, so a model that takes seconds to load
does not make the estimate wrong for the rest of the run.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol, TextIO

from vrom.cli.output import colour_enabled
from vrom.ingest.embed_job import ChunkRate
from vrom.results import rough_duration

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Task

LINE_INTERVAL_SECONDS = 5.0
"""A non-terminal gets at most one progress line this often (none for a run that is quicker)."""


class IndexProgress(Protocol):
    """What `vrom.Vault.index` reports to: notes as they are indexed, chunks as they are embedded."""

    def notes(self, done: int, total: int, path: str) -> None:
        """Record that ``done`` of ``total`` notes are indexed (``path`` the last)."""

    def chunks(self, done: int, total: int) -> None:
        """Record that ``done`` of ``total`` chunks are embedded."""


class LineProgress:
    """Progress for a log or a pipe: one line to ``stream`` at most every ``interval`` seconds."""

    def __init__(
        self,
        stream: TextIO,
        interval: float = LINE_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream
        self._interval = interval
        self._clock = clock
        self._last = clock()
        self._rate = ChunkRate(clock)

    def _due(self) -> bool:
        now = self._clock()
        if now - self._last < self._interval:
            return False
        self._last = now
        return True

    def notes(self, done: int, total: int, path: str) -> None:
        """Write ``indexing: 3,000 / 6,571 notes`` when a line is due."""
        if self._due():
            self._stream.write(f"indexing: {done:,} / {total:,} notes\n")
            self._stream.flush()

    def chunks(self, done: int, total: int) -> None:
        """Write ``embedding: 2,368 / 24,096 chunks (10%), 12.3 chunks/s, about 29 min left``."""
        rate = self._rate.update(done)
        if not self._due():
            return
        line = f"embedding: {done:,} / {total:,} chunks ({100 * done / max(total, 1):.0f}%)"
        if rate:
            line += f", {rate:.1f} chunks/s, about {rough_duration((total - done) / rate)} left"
        elif done == 0:
            line += ", loading the model"
        self._stream.write(line + "\n")
        self._stream.flush()


@contextmanager
def command_progress(silent: bool) -> Iterator[IndexProgress | None]:
    """Yield where a command's progress goes: nowhere when ``silent`` (``--json``,
    ``--quiet``), a bar on a terminal, else a line every few seconds to stderr (a log or a
    pipe: a background ``vrom embed`` writes its ``.embedding.log`` so)."""
    if silent:
        yield None
    elif sys.stderr.isatty():
        with terminal_progress() as bar:
            yield bar
    else:
        yield LineProgress(sys.stderr)


def stderr_console() -> Console:
    """Return the rich console progress bars draw on: stderr, coloured as `colour_enabled` says."""
    from rich.console import Console

    return Console(stderr=True, no_color=not colour_enabled(sys.stderr))


@contextmanager
def terminal_progress() -> Iterator[IndexProgress]:
    """Yield a progress bar drawn on the terminal (rich), gone when the run ends."""
    from rich.progress import (  # only a person at a terminal needs rich's progress
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task: Task) -> Text:
            unit = task.fields.get("unit", "")
            return Text("" if task.speed is None else f"{task.speed:,.1f} {unit}/s")

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, transient=True, console=stderr_console()) as bar:
        notes_task = bar.add_task("indexing", total=None, unit="notes")
        chunks_task = bar.add_task("embedding", total=None, visible=False, unit="chunks")

        class Bar:
            def notes(self, done: int, total: int, path: str) -> None:
                bar.update(notes_task, completed=done, total=total)

            def chunks(self, done: int, total: int) -> None:
                description = "embedding" if done else "embedding (loading the model)"
                bar.update(
                    chunks_task, completed=done, total=total, visible=True, description=description
                )

        yield Bar()
