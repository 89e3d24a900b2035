"""Write, list, tag-query and delete a vault's notes safely: the engine behind `Vault`'s file methods.

Every path goes through `vrom.ingest.confine.confine` first (see there for the rules), and
the note's folder is then opened one real folder at a time (`vrom.ingest.vault_folder`): every
step after that names its file in the open folder, so a folder swapped for a symlink meanwhile
cannot send a write, a read or a delete out of the vault.
A write never leaves a half-written note: the new bytes go to a hidden temporary file in the
same folder, are flushed to disk, and replace the note in one rename (a new note is hard-linked
into place, so a file that appeared meanwhile is never clobbered); an overwritten note keeps its
permission bits. After a write the note is re-indexed at once; if that fails the file stays
written and the result says so. A deleted note goes to ``<vault>/.trash/<its path>`` unless the
caller asks for a permanent delete.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from vrom.errors import (
    NotFoundError,
    StorageError,
    ValidationError,
    VromError,
    check_unicode,
    shown,
)
from vrom.ingest.confine import IGNORED_DIRS, OUTSIDE, confine, is_inside
from vrom.ingest.frontmatter import load_yaml, split_frontmatter
from vrom.ingest.parse import is_utf8, shown_path
from vrom.ingest.vault_folder import VaultFolder, make_folder, open_folder
from vrom.ingest.walk import is_ignored_path
from vrom.results import (
    DeleteResult,
    FolderListing,
    IndexSummary,
    NoteRef,
    TagCount,
    WriteResult,
)
from vrom.store import Store

WRITE_MODES = ("create", "overwrite", "append")
TRASH = ".trash"
_BOM = b"\xef\xbb\xbf"

_Opened = TypeVar("_Opened", VaultFolder, VaultFolder | None)

Reindex = Callable[[list[str]], IndexSummary]
"""Re-indexes vault-relative paths: `Vault.reindex_paths`."""


class VaultFiles:
    """The file operations of one vault: its root, its store, its size limit and its re-indexer."""

    def __init__(self, root: Path, store: Store, max_file_bytes: int, reindex: Reindex) -> None:
        self.root = Path(os.path.realpath(root))
        self._store = store
        self._max_file_bytes = max_file_bytes
        self._reindex = reindex

    # -- reading ---------------------------------------------------------------------------

    def resolve_note_path(self, path: str) -> str:
        """Return ``path`` confined to the vault, as a vault-relative POSIX path (for reading)."""
        return confine(self.root, path, "read").relative

    def list_folder(self, folder: str = "") -> FolderListing:
        """Return a folder's direct subfolders and the indexed notes directly in it."""
        if not isinstance(folder, str):
            raise ValidationError(f"a folder is a path string, not {type(folder).__name__}")
        if folder.strip().replace("\\", "/").strip("/") in ("", "."):
            absolute, rel = self.root, ""
        else:
            confined = confine(self.root, folder, "read")
            absolute, rel = confined.absolute, confined.relative
        prefix = f"{rel}/" if rel else ""
        try:
            if not absolute.is_dir():
                raise NotFoundError(f"no folder {rel!r} in vault {self.root}")
            with os.scandir(absolute) as scan:
                entries = sorted(scan, key=lambda e: e.name)
        except OSError as exc:  # a folder this user may not read: one line, no traceback
            raise StorageError(f"could not list folder {rel!r}: {exc.strerror or exc}") from exc
        folders = [
            prefix + entry.name
            for entry in entries
            if not entry.name.startswith(".")
            and entry.name.lower() not in IGNORED_DIRS
            and _is_folder_inside(entry, self.root)
        ]
        notes = [
            NoteRef(doc.document_id, doc.path, doc.title)
            for doc in self._store.documents.in_folder(rel)
        ]
        return FolderListing(folder=rel, folders=folders, notes=notes)

    def notes(self, after: str, limit: int) -> list[NoteRef]:
        """Return up to ``limit`` indexed notes whose paths sort after ``after``, by path."""
        return [
            NoteRef(doc.document_id, doc.path, doc.title)
            for doc in self._store.documents.after_path(after, limit)
        ]

    def tags(self) -> list[TagCount]:
        """Return every tag with the number of notes that have it, most used first."""
        return [TagCount(tag, count) for tag, count in self._store.documents.tag_counts()]

    def notes_with_tag(self, tag: str) -> list[NoteRef]:
        """Return the notes tagged ``tag`` or a tag nested under it, sorted by path."""
        if not isinstance(tag, str) or not tag.strip().lstrip("#").strip("/"):
            raise ValidationError(f"a tag is a non-empty string like 'project', not {shown(tag)}")
        check_unicode(tag, f"tag {shown(tag)}")
        wanted = tag.strip().lstrip("#").strip("/").lower()
        return [
            NoteRef(doc.document_id, doc.path, doc.title)
            for doc in self._store.documents.with_tag(wanted)
        ]

    # -- writing ---------------------------------------------------------------------------

    def write_note(
        self,
        path: str,
        content: str,
        *,
        mode: str = "create",
        frontmatter: Mapping[str, Any] | None = None,
    ) -> WriteResult:
        """Write a note atomically, re-index it, and return what was done (see `Vault.write_note`)."""
        if mode not in WRITE_MODES:
            raise ValidationError(
                f"mode must be one of {', '.join(WRITE_MODES)}, not {shown(mode)}"
            )
        if not isinstance(content, str):
            raise ValidationError(f"content must be a string, not {type(content).__name__}")
        if "\x00" in content:
            raise ValidationError("content contains NUL bytes; a note is text")
        rel = confine(self.root, _utf8_name(path), "write").relative
        name = rel.rsplit("/", 1)[-1]
        folder = self._folder(rel, open_folder)
        try:
            exists = folder is not None and _existing_file(folder, name, rel)
            if mode == "create" and exists:
                raise ValidationError(
                    f"note {rel!r} already exists: write it with mode 'overwrite' or 'append'",
                    "exists",
                )
            bom = b""
            if mode == "append":
                if folder is None or not exists:
                    raise NotFoundError(
                        f"no note {rel!r} to append to: write it with mode 'create'"
                    )
                bom, text = self._read_text(folder, name, rel)
                text = _appended(text, content)
            else:
                text = content
            if frontmatter is not None:
                text = with_frontmatter(text, frontmatter, merge=True, path=rel)
            data = bom + _encode(text, rel)
            self._check_size(rel, len(data))
            if folder is None:  # made only now, so a refused write leaves no empty folder
                folder = self._folder(rel, make_folder)
            self._replace(folder, name, rel, data, exclusive=mode == "create")
        finally:
            if folder is not None:
                folder.close()
        indexed, warning = self._reindexed(rel, data)
        return WriteResult(rel, not exists, len(data), indexed, warning)

    def set_frontmatter(self, path: str, values: Mapping[str, Any], *, merge: bool = True) -> str:
        """Rewrite a note's frontmatter (body untouched), re-index it; return its vault path.

        Raises `StorageError` when the file was written but could not be re-indexed.
        """
        rel = confine(self.root, _utf8_name(path), "write").relative
        name = rel.rsplit("/", 1)[-1]
        folder = self._folder(rel, open_folder)
        if folder is None:
            raise NotFoundError(f"no note {rel!r} in vault {self.root}")
        with folder:
            if not _existing_file(folder, name, rel):
                raise NotFoundError(f"no note {rel!r} in vault {self.root}")
            bom, text = self._read_text(folder, name, rel)
            data = bom + _encode(with_frontmatter(text, values, merge=merge, path=rel), rel)
            self._check_size(rel, len(data))
            if data != bom + text.encode("utf-8"):
                self._replace(folder, name, rel, data, exclusive=False)
        indexed, warning = self._reindexed(rel, data)
        if not indexed:
            raise StorageError(
                f"the frontmatter of note {rel!r} was written, but the note could not be"
                f" re-indexed ({warning}): run 'vrom index'"
            )
        return rel

    def delete_note(self, path: str, *, permanent: bool = False) -> DeleteResult:
        """Move a note to the vault's ``.trash`` (or unlink it), and drop it from the store."""
        rel = confine(self.root, path, "write").relative
        name = rel.rsplit("/", 1)[-1]
        folder = self._folder(rel, open_folder)
        if folder is None:
            raise NotFoundError(f"no note {rel!r} in vault {self.root}")
        trashed_to = None
        with folder:
            if not _existing_file(folder, name, rel):
                raise NotFoundError(f"no note {rel!r} in vault {self.root}")
            try:
                if permanent:
                    folder.unlink(name)
                else:
                    trash, target = self._trash_target(rel)
                    with trash:
                        folder.move_to(name, trash, target)
                        trash.sync()
                    trashed_to = f"{trash.relative}/{target}"
            except OSError as exc:
                raise StorageError(f"could not delete note {rel!r}: {exc.strerror or exc}") from exc
            folder.sync()
        try:
            self._reindex([rel])
            gone = self._store.documents.state(rel) is None
            warning = None if gone else "the store still holds it: run 'vrom index'"
        except Exception as exc:  # the file is gone either way; say so instead of raising
            gone, warning = False, f"could not remove it from the store ({exc})"
        return DeleteResult(rel, trashed_to, gone, warning)

    # -- the parts -------------------------------------------------------------------------

    def _folder(self, rel: str, opener: Callable[[Path, list[str]], _Opened]) -> _Opened:
        """Return the folder of the note ``rel`` as `open_folder` or `make_folder` opens it,
        with a refusal or a failure said for the note."""
        try:
            return opener(self.root, rel.split("/")[:-1])
        except ValidationError as exc:
            raise ValidationError(f"refused path {rel!r}: {exc}", exc.code) from None
        except OSError as exc:
            raise StorageError(
                f"could not open the folder of note {rel!r}: {exc.strerror or exc}"
            ) from exc

    def _read_text(self, folder: VaultFolder, name: str, rel: str) -> tuple[bytes, str]:
        """Return (byte-order mark or b"", text) of an existing note, refusing non-text files."""
        try:
            data = folder.read(name)
        except OSError as exc:
            raise StorageError(f"could not read note {rel!r}: {exc.strerror or exc}") from exc
        bom = _BOM if data.startswith(_BOM) else b""
        data = data[len(bom) :]
        if b"\x00" in data:
            raise ValidationError(f"note {rel!r} holds binary data (NUL bytes); not changed")
        try:
            return bom, data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError(
                f"note {rel!r} is not valid UTF-8 (byte {exc.start}); not changed, so nothing"
                " in it is lost"
            ) from None

    def _check_size(self, rel: str, size: int) -> None:
        if size > self._max_file_bytes:
            raise ValidationError(
                f"note {rel!r} would be {size:,} bytes, over this vault's"
                f" {self._max_file_bytes:,}-byte limit; nothing was written",
                "too_large",
            )

    def _replace(
        self, folder: VaultFolder, name: str, rel: str, data: bytes, *, exclusive: bool
    ) -> None:
        """Put ``data`` as ``name`` in ``folder`` atomically; ``exclusive`` refuses an existing
        file."""
        try:
            info = folder.lstat(name)
        except OSError as exc:
            raise StorageError(f"could not read note {rel!r}: {exc.strerror or exc}") from exc
        old_mode = None if info is None else stat.S_IMODE(info.st_mode)
        if old_mode is not None and not folder.writable(name):
            raise ValidationError(f"note {rel!r} is read-only; vrom leaves it alone", "read_only")
        temporary = f".vrom-{secrets.token_hex(6)}.tmp"  # hidden: never indexed
        try:
            folder.write_new(temporary, data, old_mode)
            if exclusive:
                _link_new(folder, temporary, name, rel)
            else:
                folder.replace(temporary, name)
        except OSError as exc:
            raise StorageError(f"could not write note {rel!r}: {exc.strerror or exc}") from exc
        finally:
            with contextlib.suppress(OSError):  # renamed into place, or never made
                folder.unlink(temporary)
        folder.sync()

    def _reindexed(self, rel: str, data: bytes) -> tuple[bool, str | None]:
        """Re-index a written note; return (the store holds these bytes, warning)."""
        failure = None
        reasons: list[str] = []
        try:
            summary = self._reindex([rel])
            reasons = [w.reason for w in summary.warnings if w.path == rel]
        except Exception as exc:  # the file is written either way: report it, do not raise
            failure = f"re-indexing failed ({type(exc).__name__}: {exc})"
        try:
            state = self._store.documents.state(rel)
        except VromError:
            state = None
        if state is not None and state.content_hash == hashlib.sha256(data).hexdigest():
            return True, "; ".join(r for r in (failure, *reasons) if r) or None
        why = failure or "; ".join(reasons) or "the store does not hold it"
        return False, f"written, but not indexed: {why}; run 'vrom index' once that is fixed"

    def _trash_target(self, rel: str) -> tuple[VaultFolder, str]:
        """Return the open folder under ``.trash`` for ``rel`` (made if missing, never through
        a symlink) and a free name in it."""
        trash = self.root / TRASH
        if trash.is_symlink() or (trash.exists() and not trash.is_dir()):
            raise ValidationError(
                f"refused to delete {rel!r}: {TRASH!r} in the vault is not a plain folder;"
                " fix it or delete permanently",
                OUTSIDE,
            )
        *folders, name = [TRASH, *rel.split("/")]
        try:
            folder = make_folder(self.root, folders)
        except ValidationError:
            raise ValidationError(
                f"refused to delete {rel!r}: a symlink inside {TRASH!r} is on the way", OUTSIDE
            ) from None
        stamp = time.strftime("%Y%m%d-%H%M%S")
        try:
            for n in range(1000):
                extra = "" if n == 0 else f".{stamp}" if n == 1 else f".{stamp}-{n}"
                candidate = f"{Path(name).stem}{extra}{Path(name).suffix}"
                if folder.lstat(candidate) is None:
                    return folder, candidate
        except BaseException:
            folder.close()
            raise
        folder.close()
        raise StorageError(f"could not find a free name in {TRASH!r} for {rel!r}")


def with_frontmatter(
    text: str, values: Mapping[str, Any], *, merge: bool, path: str = "note"
) -> str:
    """Return ``text`` with its YAML frontmatter merged with (or replaced by) ``values``.

    The body after the frontmatter is kept byte for byte, and so are line endings. Merging
    updates the keys given and keeps the others (a value of None is written as ``null``);
    replacing with an empty mapping removes the frontmatter. Broken frontmatter raises
    `ValidationError` (code ``bad_frontmatter``) rather than being overwritten. YAML comments
    inside the frontmatter are not kept.
    """
    if not isinstance(values, Mapping):
        raise ValidationError(f"frontmatter must be a mapping, not {type(values).__name__}")
    if any(not isinstance(key, str) or not key.strip() for key in values):
        raise ValidationError("frontmatter keys must be non-empty strings", "bad_frontmatter")
    newline = "\r\n" if text.split("\n", 1)[0].endswith("\r") and "\n" in text else "\n"
    existing, body = _frontmatter_and_body(text, path)
    if merge and not values:
        return text
    merged = {**existing, **_plain(values)} if merge else _plain(values)
    if not merged:
        return body
    try:
        dumped = yaml.safe_dump(
            merged, sort_keys=False, allow_unicode=True, default_flow_style=False, width=1 << 16
        )
    except yaml.YAMLError as exc:
        raise ValidationError(
            f"frontmatter for {path!r} cannot be written as YAML ({exc})", "bad_frontmatter"
        ) from None
    result = f"---{newline}{dumped.replace(chr(10), newline)}---{newline}{body}"
    _, body_start, problems = split_frontmatter(result)
    if problems or result[body_start:] != body:  # a value must never end the block early
        raise ValidationError(
            f"frontmatter for {path!r} would not read back as written", "bad_frontmatter"
        )
    return result


def _frontmatter_and_body(text: str, path: str) -> tuple[dict[Any, Any], str]:
    if not (text.startswith("---\n") or text.startswith("---\r\n")):
        return {}, text
    _, body_start, problems = split_frontmatter(text)
    if problems:
        raise ValidationError(
            f"note {path!r} has broken frontmatter ({problems[0]}); fix it by hand first,"
            " nothing was written",
            "bad_frontmatter",
        )
    raw = "".join(text[:body_start].splitlines(keepends=True)[1:-1])
    loaded = load_yaml(raw).value or {}  # the loader split_frontmatter accepted, limits and all
    return dict(loaded), text[body_start:]


def _plain(value: Any) -> Any:
    """Return ``value`` with mappings as dicts and sequences as lists, as YAML can dump them."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _utf8_name(path: str) -> str:
    """Return ``path``, or refuse a name that is not valid UTF-8: its note could not be indexed."""
    if isinstance(path, str) and not is_utf8(path):
        raise ValidationError(
            f"refused path '{shown_path(path)}': it is not valid UTF-8 (it holds lone surrogates),"
            " so its note could not be indexed; nothing was written"
        )
    return path


def _appended(text: str, content: str) -> str:
    """Return ``text`` + ``content`` with one blank line between them."""
    if not text or not content:
        return text + content
    newline = "\r\n" if "\r\n" in text else "\n"
    if text.endswith(newline * 2):
        return text + content
    if text.endswith(newline):
        return text + newline + content
    return text + newline * 2 + content


def _encode(text: str, rel: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(
            f"content for {rel!r} cannot be encoded as UTF-8 (at character {exc.start})"
        ) from None


def _existing_file(folder: VaultFolder, name: str, rel: str) -> bool:
    """Return whether ``name`` in ``folder`` is a regular file; refuse a folder or a special
    file."""
    try:
        info = folder.lstat(name)
    except OSError as exc:
        raise StorageError(f"could not read note {rel!r}: {exc.strerror or exc}") from exc
    if info is None:
        return False
    mode = info.st_mode
    if stat.S_ISDIR(mode):
        raise ValidationError(f"{rel!r} is a folder, not a note")
    if not stat.S_ISREG(mode):
        raise ValidationError(f"{rel!r} is not a regular file; vrom leaves it alone")
    return True


def _link_new(folder: VaultFolder, temporary: str, name: str, rel: str) -> None:
    """Move a temporary file to a new name, failing if that name exists (no clobbering)."""
    try:
        folder.link(temporary, name)
        return
    except FileExistsError:
        raise ValidationError(
            f"note {rel!r} already exists: write it with mode 'overwrite' or 'append'", "exists"
        ) from None
    except (OSError, NotImplementedError):
        pass  # a file system without hard links: check, then rename
    if folder.lstat(name) is not None:
        raise ValidationError(f"note {rel!r} already exists", "exists")
    folder.replace(temporary, name)


def _is_folder_inside(entry: os.DirEntry[str], root: Path) -> bool:
    """Return True for a folder, or a symlink to one that leads to a folder vrom reads (inside
    the vault, neither hidden nor ignored where it really is)."""
    try:
        if not entry.is_dir():
            return False
        if entry.is_symlink():
            real = Path(os.path.realpath(entry.path))
            return is_inside(root, real) and not is_ignored_path(real.relative_to(root).as_posix())
    except OSError:
        return False
    return True
