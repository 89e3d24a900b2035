"""Writing the files `vrom.install.install` changes: diffed, backed up, replaced atomically.

A changed config is backed up first (``<file>.bak-<timestamp>``) and written atomically (a
temporary file, then `os.replace`); an unchanged file is left untouched, and a dry run computes
the diff and writes nothing.
"""

from __future__ import annotations

import difflib
import os
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from vrom.errors import VromError


@dataclass(frozen=True)
class FileChange:
    """One file `install` wrote (or would write, in a dry run).

    ``changed`` is False when the file already said the same; ``created`` when it did not exist;
    ``backup`` is the copy made of the old file (None when none was made: none was needed, or a
    dry run); ``diff`` is the unified diff from the old text to the new (empty when unchanged);
    ``backs_up`` is True when writing it backs the old file up first (so a dry run says whether
    applying it would make a backup).
    """

    path: str
    changed: bool
    created: bool
    backup: str | None
    diff: str
    backs_up: bool = False


def _backup(path: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    backup = path.with_name(f"{path.name}.bak-{stamp}")
    n = 1
    while backup.exists():
        n += 1
        backup = path.with_name(f"{path.name}.bak-{stamp}-{n}")
    try:
        shutil.copy2(path, backup)
    except OSError as exc:
        raise VromError(f"cannot back up {path} to {backup}: {exc}") from exc
    return backup


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (temporary file, then `os.replace`).

    The file keeps its permissions; a new file (and its folder) is created as usual.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else None
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            if mode is not None:
                os.chmod(tmp, mode)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    except OSError as exc:
        raise VromError(f"cannot write {path}: {exc}") from exc


def apply_change(
    path: Path, old: str | None, new: str, *, dry_run: bool, backup: bool
) -> FileChange:
    """Write ``new`` over ``old`` at ``path`` unless they are equal; return what happened."""
    target = Path(os.path.realpath(path))  # a symlinked dotfile stays a symlink
    changed = old != new
    diff = ""
    if changed:
        diff = "".join(
            difflib.unified_diff(
                (old or "").splitlines(keepends=True),
                new.splitlines(keepends=True),
                fromfile=str(path) if old is not None else "/dev/null",
                tofile=str(path),
            )
        )
    backs_up = changed and backup and old is not None
    made: Path | None = None
    if changed and not dry_run:
        if backs_up:
            made = _backup(target)
        write_atomic(target, new)
    return FileChange(
        str(path), changed, old is None, None if made is None else str(made), diff, backs_up
    )
