"""Keep a path given by a user (or an agent) inside the vault: the gate every file access uses.

`confine` turns a path into a `ConfinedPath` (the absolute path under the vault root and the
vault-relative POSIX path), or refuses it with a one-line `ValidationError` whose ``code`` is
``path_outside_vault`` unless noted. What is allowed depends on what the path is for:

- ``"read"``: a note (or folder) named by its path from the vault root, to be read. This is
  what a tool takes from an agent, and what `Vault.resolve_note_path` and `list_folder` take.
- ``"reference"``: a note looked up for reading by `Vault.get_note` and `Vault.related`: as for
  ``read``, and an absolute path inside the vault is accepted too (taken from the vault root,
  ``..`` folded; any other absolute path is refused).
- ``"write"``: a note to create, change or delete: the ``read`` rules plus the write rules.
- ``"reindex"``: a file whose note must be brought up to date with the disk, relative to the
  root or absolute. It names a file as it is on disk (the watcher reports real files, whatever
  their names), so only where it really leads counts: ``..`` and symlinks are resolved and the
  result must be inside the vault (and not the vault itself); the file may be gone (its note
  is then removed); hidden and ignored folders pass, for the indexer to skip as the full index
  does. The relative path returned is the resolved one.

Rules for ``read``, ``reference`` and ``write`` (a NUL byte, and a lone surrogate the file
system cannot encode, are refused for every purpose; ``\\udcff`` and its neighbours are how
Python names a file's bytes that are not UTF-8, and pass):

- Separators: ``/`` and ``\\`` both separate segments (so a file whose name holds a backslash
  cannot be named); ``.`` segments and repeated separators are dropped.
- Refused: an empty path (or one naming the vault itself); absolute paths (``/x``, ``\\x``,
  ``//server/x``, ``\\\\server\\share``, ``C:\\x`` and drive-relative ``C:x``), except as said
  for ``reference``; ``~`` home paths; URLs (``file:///x``); control characters (for writes,
  bidirectional-override characters too: a note named with them is indexed and read, and every
  face shows its name escaped, `vrom.ingest.parse.shown_path`); every ``..`` segment, even one
  that would stay inside (``a/../b.md``): a note is named from the vault root and never needs one; segments of only
  dots and spaces (``...``, ``.. ``), which Windows collapses into ``..``; segments that only
  look harmless: percent-encoded (``%2e%2e``, ``%2F``, double-encoded ``%252e``) or Unicode
  look-alikes (fullwidth ``．．``, NFKC-normalised) that decode to ``..``, a hidden name or a
  separator are refused, while other ``%`` text is kept literally (``100%25.md`` names that
  very file); and symlinks, of the file or of any folder above it, that resolve outside the
  vault.
- Hidden segments (``.name``) and the folders vrom never indexes (``.git``, ``.obsidian``,
  ``.trash``, ``node_modules``) are refused for reads as well as writes: they hold settings and
  plugin data (sometimes tokens), never notes. They are checked on the path as written and on
  the path symlinks resolve to, so a symlink into ``.obsidian`` does not get around the rule.
- Writes only: the file must be a Markdown note. A name ending in ``.md`` or ``.markdown`` (any
  case) is kept; a name without an extension, or whose last dot part is not one (``1.2``,
  ``Dr. Who``), gets ``.md`` appended; any other extension (``.txt``, ``.sh``) is refused with
  code ``not_a_note``. A write through a symlink that stays inside the vault is refused with
  code ``path_is_symlink`` (the message names the real path), so a write always changes the
  file it names and never a file elsewhere.

Code that checks paths it found itself (walking the vault, a watcher's events, the trash) uses
the same two predicates as `confine`: `is_inside` and `is_symlink_free`, and applies the hidden
and ignored rules (`vrom.ingest.walk.is_ignored_path`) to where a symlink leads as well.

A check cannot stop another process from swapping a folder for a symlink between the check and
the write, so the writer does not act on the path it checked: it opens the note's folder one
real folder at a time from the vault root and names every file in that open folder
(`vrom.ingest.vault_folder`). A path whose folders change while it is resolved is refused with
code ``path_unresolved``; one the file system could not hold (a name over its 255-byte limit, a
path over 4,096 bytes) with code ``path_too_long``, whatever it is for but ``reindex``.
"""

from __future__ import annotations

import functools
import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args
from urllib.parse import unquote

from vrom.errors import ValidationError
from vrom.ingest.parse import BIDI_CONTROLS, NOTE_SUFFIXES, has_control

IGNORED_DIRS = frozenset({".git", ".obsidian", ".trash", "node_modules"})
"""Folders vrom never indexes, reads or writes into (besides every hidden one)."""

OUTSIDE = "path_outside_vault"
NOT_A_NOTE = "not_a_note"
IS_SYMLINK = "path_is_symlink"
TOO_LONG = "path_too_long"
UNRESOLVED = "path_unresolved"

ReadPurpose = Literal["read", "reference"]
"""How a note to read may be named: from the vault root, or also by an absolute path in it."""
Purpose = Literal[ReadPurpose, "write", "reindex"]
"""What a path is for; it decides which rules `confine` applies (see the module docstring)."""
PURPOSES: tuple[Purpose, ...] = get_args(Purpose)

_DRIVE = re.compile(r"^[A-Za-z]:")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,9}$")  # a digit-only "extension" is not one
_BIDI_WRITE = (
    "it contains bidirectional-override characters, which make a name show as another:"
    " vrom reads such a note but writes none"
)
_DECODE_ROUNDS = 3  # %2e, %252e, %25252e
_RELATIVE = "; name notes by their path from the vault root"
_NAME_MAX, _PATH_MAX = 255, 4096  # where the file system does not say (Windows: 255, 32,767)


@dataclass(frozen=True)
class ConfinedPath:
    """A path that `confine` let through."""

    absolute: Path
    """Where it is: under the vault's real root (symlinks resolved, for ``reindex``)."""
    relative: str
    """Its path from the vault root, POSIX style: ``Projects/Atlas.md``."""


def confine(root: Path, user_path: str, purpose: Purpose) -> ConfinedPath:
    """Return ``user_path`` confined to the vault at ``root`` for ``purpose``, or refuse it.

    Nothing is created; for ``write`` the name may get ``.md`` appended.
    """
    if purpose not in PURPOSES:
        raise ValidationError(f"a path's purpose is one of {', '.join(PURPOSES)}, not {purpose!r}")
    if not isinstance(user_path, str):
        raise ValidationError(
            f"a note path must be a string, not {type(user_path).__name__}", OUTSIDE
        )
    shown = _shown(user_path)
    if "\x00" in user_path:  # no file name holds one, and the OS would cut the path there
        raise _refused(shown, "it contains a NUL byte")
    try:
        os.fsencode(user_path)
    except UnicodeEncodeError:  # a lone surrogate that is no file name's undecodable byte
        raise _refused(shown, "it is not valid Unicode and names no file") from None
    real_root = Path(os.path.realpath(root))
    try:
        return _confined(real_root, user_path, purpose, shown)
    except OSError as exc:  # a folder on the way changed while it was resolved (readlink)
        raise ValidationError(
            f"refused path {shown}: it could not be resolved ({exc.strerror or exc}); a folder"
            " on the way changed meanwhile: try again",
            UNRESOLVED,
        ) from None


def _confined(real_root: Path, user_path: str, purpose: Purpose, shown: str) -> ConfinedPath:
    if purpose == "reindex":
        real = _resolved_inside(real_root, real_root / user_path, shown, "it")
        return ConfinedPath(real, real.relative_to(real_root).as_posix())
    if purpose == "reference" and os.path.isabs(user_path):
        user_path = _from_root(real_root, user_path, shown)
    writing = purpose == "write"
    why = _string_problem(user_path, writing)
    if why is not None:
        raise _refused(shown, why)
    segments = _segments(user_path, shown, writing)
    if purpose == "write":
        segments[-1] = _note_name(segments[-1], shown)
    absolute = real_root.joinpath(*segments)
    why = _length_problem(real_root, absolute, segments)
    if why is not None:
        raise ValidationError(f"refused path {shown}: {why}", TOO_LONG)
    real = _resolved_inside(real_root, absolute, shown, "a symlink on the way")
    real_rel = real.relative_to(real_root).as_posix()
    for segment in real_rel.split("/"):
        why = _hidden_problem(segment)
        if why is not None:
            raise _refused(shown, f"a symlink on the way resolves to {real_rel!r}; {why}")
    if purpose == "write" and not is_symlink_free(absolute):
        raise ValidationError(
            f"refused path {shown}: a symlink on the way leads to {real_rel!r}; vrom writes only"
            f" through real folders: use {real_rel!r}",
            IS_SYMLINK,
        )
    return ConfinedPath(absolute, "/".join(segments))


def is_inside(root: Path, path: str | os.PathLike[str]) -> bool:
    """Return True when ``path`` is ``root`` or under it, compared as written.

    Both must be absolute and normalised; resolve symlinks first (``os.path.realpath``) to ask
    where a path really leads.
    """
    return Path(path).is_relative_to(root)


def is_symlink_free(path: str | os.PathLike[str]) -> bool:
    """Return True when no symlink is on the way to ``path`` (which need not exist yet).

    Then writing there changes the file it names, never a file elsewhere. ``path`` must be
    absolute and normalised.
    """
    return os.path.realpath(path) == os.fspath(path)


def _length_problem(real_root: Path, absolute: Path, segments: list[str]) -> str | None:
    """Return why the file system could not hold this path (a name or the whole too long)."""
    name_max, path_max = _limits(real_root)
    for segment in segments:
        size = _size(segment)
        if size > name_max:
            return (
                f"a name in it is {size:,} bytes, over the file system's {name_max}-byte limit"
                " for one name: use a shorter name"
            )
    size = _size(str(absolute))
    if size >= path_max:
        return (
            f"its full path is {size:,} bytes, over the file system's {path_max:,}-byte"
            " limit for a path: use a shorter path"
        )
    return None


@functools.lru_cache(maxsize=16)
def _limits(real_root: Path) -> tuple[int, int]:
    """Return the longest name and path (in bytes) the vault's file system takes."""
    try:
        return os.pathconf(real_root, "PC_NAME_MAX"), os.pathconf(real_root, "PC_PATH_MAX")
    except (AttributeError, OSError, ValueError):  # no pathconf (Windows), or no answer
        return _NAME_MAX, _PATH_MAX


def _size(text: str) -> int:
    # POSIX limits count the bytes of the encoded name; Windows' count characters
    return len(os.fsencode(text)) if hasattr(os, "pathconf") else len(text)


def _from_root(real_root: Path, path: str, shown: str) -> str:
    """Return an absolute path inside the vault as a path from its root, or refuse it."""
    # as written first (``..`` folded); then with symlinks resolved, for a vault reached
    # through a symlinked folder (a home on another disk, macOS's /tmp)
    for candidate in (Path(os.path.abspath(path)), Path(os.path.realpath(path))):
        if candidate == real_root:
            raise _refused(shown, "it names the vault itself, not a note")
        if is_inside(real_root, candidate):
            return candidate.relative_to(real_root).as_posix()
    raise _refused(shown, "it is an absolute path outside the vault")


def _resolved_inside(real_root: Path, absolute: Path, shown: str, via: str) -> Path:
    """Return where ``absolute`` really leads, refusing the vault folder itself and outside."""
    real = Path(os.path.realpath(absolute))
    if real == real_root:
        raise _refused(shown, f"{via} resolves to the vault folder itself")
    if not is_inside(real_root, real):
        raise _refused(shown, f"{via} resolves to {str(real)!r}, outside the vault")
    return real


def _refused(shown: str, why: str) -> ValidationError:
    return ValidationError(f"refused path {shown}: {why}", OUTSIDE)


def _shown(path: str) -> str:
    # repr escapes control characters, so the message stays on one line
    return repr(path) if len(path) <= 160 else repr(path[:160]) + "..."


def _string_problem(path: str, writing: bool) -> str | None:
    if not path.strip():
        return "it is empty"
    if has_control(path):
        return "it contains control characters"
    if writing and any(c in BIDI_CONTROLS for c in path):
        return _BIDI_WRITE
    slashed = path.replace("\\", "/")
    if slashed.startswith("/"):
        return f"absolute paths could lead outside the vault{_RELATIVE}"
    if slashed.startswith("~"):
        return f"home-folder paths ('~') lead outside the vault{_RELATIVE}"
    if _DRIVE.match(slashed):
        return f"drive paths ('C:') lead outside the vault{_RELATIVE}"
    if _URL.match(slashed):
        return f"URLs could lead outside the vault{_RELATIVE}"
    return None


def _segments(path: str, shown: str, writing: bool) -> list[str]:
    """Return the segments of a path from the vault root, refusing any that could escape."""
    segments = []
    for segment in path.replace("\\", "/").split("/"):
        if segment in ("", "."):
            continue
        why = _segment_problem(segment, writing)
        if why is not None:
            raise _refused(shown, why)
        segments.append(segment)
    if not segments:
        raise _refused(shown, "it names the vault itself, not a note")
    return segments


def _forms(segment: str) -> list[str]:
    """Return a segment as written, percent-decoded (repeatedly), and NFKC-normalised."""
    forms = [segment]
    decoded = segment
    for _ in range(_DECODE_ROUNDS):
        again = unquote(decoded)
        if again == decoded:
            break
        decoded = again
        forms.append(decoded)
    return forms + [unicodedata.normalize("NFKC", form) for form in forms]


def _segment_problem(segment: str, writing: bool) -> str | None:
    for form in _forms(segment):
        if form == "..":
            if form == segment:
                return f"'..' segments could lead outside the vault{_RELATIVE}"
            return f"segment {segment!r} decodes to '..', which could lead outside the vault"
        if not form.strip(" ."):
            return f"segment {segment!r} is only dots and spaces"
        if "/" in form or "\\" in form:
            return f"segment {segment!r} decodes to a path separator"
        if has_control(form):
            return f"segment {segment!r} decodes to control characters"
        if writing and any(c in BIDI_CONTROLS for c in form):
            return _BIDI_WRITE
        why = _hidden_problem(form)
        if why is not None:
            return why if form == segment else f"segment {segment!r} decodes to {form!r}; {why}"
    return None


def _hidden_problem(segment: str) -> str | None:
    if segment.lower() in IGNORED_DIRS:
        return f"vrom keeps out of {segment!r}: no note is read or written there"
    if segment.startswith("."):
        return f"{segment!r} is hidden: no note is read or written there"
    return None


def _note_name(name: str, shown: str) -> str:
    if name.lower().endswith(NOTE_SUFFIXES):
        return name
    extension = _EXTENSION.search(name)
    if extension is not None:
        raise ValidationError(
            f"refused path {shown}: only Markdown notes (.md, .markdown) can be written, and"
            f" {extension.group(0)!r} is another kind of file; to write a note, name it"
            f" {name + '.md'!r}",
            NOT_A_NOTE,
        )
    return name + ".md"
