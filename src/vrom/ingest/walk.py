"""Find the notes of a vault: Markdown files, minus what must not be indexed.

Skipped with a warning: symlinks that leave the vault (or loop), symlinks to a folder (which is
indexed under its real path: a note has one path, the one the file watcher reports), symlinks
into a hidden or ignored folder (``ws.md -> .obsidian/workspace.md``: the rules apply to where a
link leads, not only to its name), files over the size limit, named pipes, sockets and devices,
and unreadable entries. Skipped
silently: ``.git``, ``.obsidian``, ``.trash``, ``node_modules``, hidden files and folders, and
files that are not Markdown. Binary content is detected later, when the file is read
(`read_note_text`).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from vrom.ingest.confine import IGNORED_DIRS, is_inside
from vrom.ingest.parse import NOTE_SUFFIXES
from vrom.results import IndexWarning

DEFAULT_MAX_FILE_BYTES = 5 * 1024 * 1024


@dataclass(frozen=True)
class NoteFile:
    """A Markdown file found in the vault: POSIX path relative to the root, size, mtime."""

    path: str
    abs_path: Path
    size: int
    mtime: float


def is_note_name(name: str) -> bool:
    """Return True when a file name is a Markdown note vrom indexes."""
    return name.lower().endswith(NOTE_SUFFIXES) and not name.startswith(".")


def walk_vault(
    root: Path, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
) -> tuple[list[NoteFile], list[IndexWarning]]:
    """Return the vault's note files (sorted by path) and a warning for each one skipped."""
    root = root.resolve()
    files: list[NoteFile] = []
    warnings: list[IndexWarning] = []
    # a folder is indexed under its real path: a symlink to it (or to the root) is skipped, so
    # a note has one path, the one the watcher reports (walking the real folders first)
    seen_dirs = {str(folder) for folder in real_folders(root)}
    for entry, rel in _entries(root, root, "", seen_dirs, warnings):
        try:
            stat = entry.stat()  # follows symlinks, already confirmed to stay in the vault
        except OSError as exc:
            warnings.append(IndexWarning(rel, f"unreadable: {exc.strerror or exc}"))
            continue
        if stat.st_size > max_file_bytes:
            warnings.append(IndexWarning(rel, too_large(stat.st_size, max_file_bytes)))
            continue
        files.append(NoteFile(rel, Path(entry.path), stat.st_size, stat.st_mtime))
    files.sort(key=lambda f: f.path)
    return files, warnings


def real_folders(root: Path) -> list[Path]:
    """Return the vault's folders reached without following a symlink, the root first, minus
    hidden and ignored ones and those that cannot be listed (what a file watcher watches).

    Raises `FileNotFoundError` (or another `OSError`) when the root is not a readable folder.
    """
    root = root.resolve()
    with os.scandir(root):  # the root itself must be there: its failure is the caller's to see
        pass
    folders = []
    for folder, subfolders, _ in os.walk(root, followlinks=False):
        folders.append(Path(folder))
        subfolders[:] = sorted(
            name for name in subfolders if not (name.startswith(".") or name in IGNORED_DIRS)
        )
    return folders


def is_note_in_vault(root: Path, path: str | os.PathLike[str]) -> bool:
    """Return True when ``path`` (absolute) names a note indexing would take, by its name and
    by where it really leads: inside the resolved ``root``, neither hidden nor ignored there.

    The file need not exist (a deleted note's path is a note path too).
    """
    candidate = Path(path)
    if not is_note_name(candidate.name) or not is_inside(root, candidate):
        return False
    if is_ignored_path(candidate.relative_to(root).as_posix()):
        return False
    real = Path(os.path.realpath(candidate))
    return (
        real != root
        and is_inside(root, real)
        and not is_ignored_path(real.relative_to(root).as_posix())
    )


def too_large(size: int, max_file_bytes: int) -> str:
    """Return the warning for a file skipped for its size."""
    return f"skipped: {size:,} bytes is over the {max_file_bytes:,}-byte limit"


def is_ignored_path(rel: str) -> bool:
    """Return True when a vault-relative path is inside a folder vrom never indexes, or hidden."""
    return any(part.startswith(".") or part in IGNORED_DIRS for part in rel.split("/"))


def _entries(
    root: Path, folder: Path, prefix: str, seen_dirs: set[str], warnings: list[IndexWarning]
) -> Iterator[tuple[os.DirEntry[str], str]]:
    try:
        with os.scandir(folder) as scan:
            entries = sorted(scan, key=lambda e: e.name)
    except OSError as exc:
        warnings.append(IndexWarning(prefix or ".", f"unreadable folder: {exc.strerror or exc}"))
        return
    for entry in entries:
        rel = f"{prefix}{entry.name}"
        if entry.name.startswith("."):
            continue
        try:
            is_link = entry.is_symlink()
            is_dir = entry.is_dir()
        except OSError as exc:
            warnings.append(IndexWarning(rel, f"unreadable: {exc.strerror or exc}"))
            continue
        if is_dir and entry.name in IGNORED_DIRS:
            continue
        if not is_dir and not is_note_name(entry.name):
            continue
        if is_link:
            target = os.path.realpath(entry.path)
            if not os.path.exists(target):
                warnings.append(IndexWarning(rel, "skipped: broken symlink"))
                continue
            if not is_inside(root, target):
                warnings.append(IndexWarning(rel, "skipped: symlink points outside the vault"))
                continue
            target_rel = Path(target).relative_to(root).as_posix()
            if target_rel != "." and is_ignored_path(target_rel):
                warnings.append(
                    IndexWarning(rel, f"skipped: symlink into a hidden folder ({target_rel})")
                )
                continue
        if is_dir and is_link:
            real = os.path.realpath(entry.path)
            if real in seen_dirs:
                shown = Path(real).relative_to(root).as_posix()
                why = "loop" if shown == "." else f"to a folder indexed as {shown}"
                warnings.append(IndexWarning(rel, f"skipped: symlink {why}"))
                continue
            seen_dirs.add(real)
        if is_dir:
            yield from _entries(root, Path(entry.path), f"{rel}/", seen_dirs, warnings)
        elif entry.is_file():
            yield entry, rel
        else:  # a named pipe would block the read for ever; a device could be endless
            warnings.append(IndexWarning(rel, "skipped: not a regular file"))


def read_regular_file(
    path: str | os.PathLike[str], *, dir_fd: int | None = None, follow_symlinks: bool = True
) -> bytes:
    """Return a file's bytes; `OSError` when it is not a regular file (a named pipe would block
    the read until a writer comes, a device could be endless), checked on the opened file.

    ``dir_fd`` names ``path`` in an open folder; without ``follow_symlinks`` a symlink is
    refused (`OSError`), not read through.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
        return file.read()


def read_note_text(data: bytes) -> tuple[str | None, str | None]:
    """Decode a note's bytes; return (text, warning) or (None, reason) for binary content.

    A NUL byte anywhere makes a file binary: no store holds the character
    (`vrom.store.storable`), so a note holding one past its first page would be indexed here and
    refused by a sync. Invalid UTF-8 is decoded with replacement characters (never a lone
    surrogate) and a warning. A UTF-8 byte-order mark is dropped; line endings are kept as
    written so offsets match the file.
    """
    if b"\x00" in data:
        return None, "skipped: binary content (NUL bytes)"
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return (
            data.decode("utf-8", errors="replace"),
            f"invalid UTF-8 at byte {exc.start}: decoded with replacement characters",
        )
