"""Open a folder of the vault one real folder at a time, and act on its files by name in it.

`vrom.ingest.confine.confine` checks a path before a write, but another process can swap a
folder on the way for a symlink between that check and the write, and a write by path would
follow it out of the vault. `open_folder` closes that gap where the OS can (POSIX): it opens
the vault root, then each folder below it relative to the one before with ``O_NOFOLLOW |
O_DIRECTORY`` (a symlink there is refused, never followed), and every later step (looking at
the note, reading it, the temporary file, the rename or link that puts it in place, an unlink)
names its file relative to that open folder (``dir_fd``). A folder swapped once it is open no
longer matters: the open folder is still the real one, inside the vault.

Where the OS has no ``dir_fd`` (Windows), the folder is checked with `is_symlink_free` right
before use, which narrows the window but cannot close it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from vrom.errors import ValidationError
from vrom.ingest.confine import IS_SYMLINK, is_symlink_free
from vrom.ingest.walk import read_regular_file

AT_FOLDERS = all(f in os.supports_dir_fd for f in (os.open, os.mkdir, os.rename, os.link)) and (
    hasattr(os, "O_DIRECTORY") and hasattr(os, "O_NOFOLLOW")
)
"""Whether folders are opened and used by descriptor (POSIX); else by checked path."""
NOT_A_FOLDER = "not_a_folder"

_FOLDER_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)


class VaultFolder:
    """A folder of the vault opened by `open_folder`; close it (or use ``with``) when done."""

    def __init__(self, path: Path, relative: str, fd: int | None) -> None:
        self.path = path
        """Where the folder was when it was opened (for messages; files are named in ``fd``)."""
        self.relative = relative
        """Its path from the vault root, POSIX style ("" for the root)."""
        self._fd = fd

    def __enter__(self) -> VaultFolder:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Let go of the folder."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def lstat(self, name: str) -> os.stat_result | None:
        """Return what ``name`` in this folder is (a symlink not followed), or None if nothing."""
        try:
            return os.lstat(self._name(name), dir_fd=self._fd)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def writable(self, name: str) -> bool:
        """Return whether this user may write the file ``name``."""
        return os.access(self._name(name), os.W_OK, dir_fd=self._fd)

    def read(self, name: str) -> bytes:
        """Return the bytes of the regular file ``name`` (never through a symlink)."""
        return read_regular_file(self._name(name), dir_fd=self._fd, follow_symlinks=False)

    def write_new(self, name: str, data: bytes, mode: int | None) -> None:
        """Create the file ``name`` (it must not exist), write ``data`` to disk, and give it the
        permission bits ``mode`` (None: the default for a new file)."""
        flags = _NEW_FILE | getattr(os, "O_BINARY", 0)
        fd = os.open(self._name(name), flags, 0o666, dir_fd=self._fd)
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            if mode is not None:
                if os.chmod in os.supports_fd:
                    os.chmod(fd, mode)
                else:
                    os.chmod(self._name(name), mode)
            os.fsync(fd)

    def replace(self, source: str, target: str) -> None:
        """Rename ``source`` to ``target`` in this folder, replacing what ``target`` was."""
        os.replace(self._name(source), self._name(target), src_dir_fd=self._fd, dst_dir_fd=self._fd)

    def link(self, source: str, target: str) -> None:
        """Give the file ``source`` the new name ``target`` too; `FileExistsError` if taken."""
        os.link(
            self._name(source),
            self._name(target),
            src_dir_fd=self._fd,
            dst_dir_fd=self._fd,
            follow_symlinks=False,
        )

    def move_to(self, name: str, folder: VaultFolder, target: str) -> None:
        """Rename ``name`` in this folder to ``target`` in ``folder``."""
        os.rename(
            self._name(name), folder._name(target), src_dir_fd=self._fd, dst_dir_fd=folder._fd
        )

    def unlink(self, name: str) -> None:
        """Remove the file ``name`` from this folder."""
        os.unlink(self._name(name), dir_fd=self._fd)

    def sync(self) -> None:
        """Flush the folder's entries to disk, so a rename survives a power cut (POSIX only)."""
        if self._fd is None:
            return
        # some file systems cannot sync a folder; the file itself is already synced
        with contextlib.suppress(OSError):
            os.fsync(self._fd)

    def _name(self, name: str) -> str:
        return name if self._fd is not None else os.path.join(self.path, name)


def open_folder(root: Path, segments: Sequence[str]) -> VaultFolder | None:
    """Open the folder ``segments`` below the vault root, never through a symlink; None when
    it (or a folder above it) does not exist.

    A symlink on the way raises `ValidationError` (code ``path_is_symlink``), a file on the way
    one with code ``not_a_folder``; any other failure is the `OSError` it is.
    """
    return _open(root, segments, create=False)


def make_folder(root: Path, segments: Sequence[str]) -> VaultFolder:
    """Open the folder ``segments`` below the vault root as `open_folder` does, making the
    folders that are missing (each made in the real folder above it, so none outside)."""
    folder = _open(root, segments, create=True)
    if folder is None:  # _open raises rather than return None when it creates
        raise FileNotFoundError(errno.ENOENT, "folder removed as it was made", "/".join(segments))
    return folder


def _open(root: Path, segments: Sequence[str], *, create: bool) -> VaultFolder | None:
    relative = "/".join(segments)
    path = root.joinpath(*segments)
    if not AT_FOLDERS:
        if create:
            path.mkdir(parents=True, exist_ok=True)
        if not is_symlink_free(path):
            raise _symlink(relative)
        return VaultFolder(path, relative, None) if path.is_dir() else None
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for depth, segment in enumerate(segments):
            if create:
                with contextlib.suppress(FileExistsError):  # a folder, or what open refuses
                    os.mkdir(segment, dir_fd=fd)
            try:
                child = os.open(segment, _FOLDER_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if create:
                    raise  # removed again since it was made
                os.close(fd)
                return None
            except OSError as exc:
                if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                    raise
                on_the_way = "/".join(segments[: depth + 1])
                if stat.S_ISLNK(os.lstat(segment, dir_fd=fd).st_mode):
                    raise _symlink(on_the_way) from None
                raise ValidationError(
                    f"{on_the_way!r} in the vault is a file, not a folder", NOT_A_FOLDER
                ) from None
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return VaultFolder(path, relative, fd)


def _symlink(relative: str) -> ValidationError:
    return ValidationError(
        f"folder {relative!r} of the vault is a symlink (it may have been swapped for one since"
        " the path was checked); vrom writes only through real folders",
        IS_SYMLINK,
    )
