"""Keep a note path given by a user (or an agent) inside the vault: the gate every file access uses.

`resolve_in_vault` turns a vault-relative path into an absolute path under the vault root, or
refuses it with a one-line `ValidationError` whose ``code`` is ``path_outside_vault`` unless noted.

- Separators: ``/`` and ``\\`` both separate segments (so a file whose name holds a backslash
  cannot be named); ``.`` segments and repeated separators are dropped.
- Refused everywhere: an empty path (or one naming the vault itself); absolute paths (``/x``,
  ``\\x``, ``//server/x``, ``\\\\server\\share``, ``C:\\x`` and drive-relative ``C:x``); ``~``
  home paths; URLs (``file:///x``); NUL bytes, control characters and bidirectional-override
  characters; every ``..`` segment, even one that would stay inside (``a/../b.md``): a note is
  named from the vault root and never needs one; segments of only dots and spaces (``...``,
  ``.. ``), which Windows collapses into ``..``; segments that only look harmless:
  percent-encoded (``%2e%2e``, ``%2F``, double-encoded ``%252e``) or Unicode look-alikes
  (fullwidth ``．．``, NFKC-normalised) that decode to ``..``, a hidden name or a separator are
  refused, while other ``%`` text is kept literally (``100%25.md`` names that very file); and
  symlinks, of the file or of any folder above it, that resolve outside the vault.
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

A check cannot stop another process from swapping a folder for a symlink between the check and
the write; the writer narrows that window (temporary files are created with ``O_EXCL`` and
renamed over the target, which replaces a symlink rather than following it) but cannot close it.
"""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote

from vrom.errors import ValidationError
from vrom.ingest.parse import NOTE_SUFFIXES
from vrom.ingest.walk import IGNORED_DIRS

OUTSIDE = "path_outside_vault"
NOT_A_NOTE = "not_a_note"
IS_SYMLINK = "path_is_symlink"

_DRIVE = re.compile(r"^[A-Za-z]:")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,9}$")  # a digit-only "extension" is not one
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_DECODE_ROUNDS = 3  # %2e, %252e, %25252e
_RELATIVE = "; name notes by their path from the vault root"


def resolve_in_vault(root: Path, user_path: str, *, for_write: bool) -> tuple[Path, str]:
    """Return (absolute path, vault-relative POSIX path) for a note path, or refuse it.

    ``for_write`` adds the write rules: the name must be a Markdown note (``.md`` is appended
    to a name without an extension) and no symlink may be on the way. Nothing is created.
    """
    if not isinstance(user_path, str):
        raise ValidationError(
            f"a note path must be a string, not {type(user_path).__name__}", OUTSIDE
        )
    shown = _shown(user_path)
    why = _string_problem(user_path)
    if why is not None:
        raise _refused(shown, why)
    segments = []
    for segment in user_path.replace("\\", "/").split("/"):
        if segment in ("", "."):
            continue
        why = _segment_problem(segment)
        if why is not None:
            raise _refused(shown, why)
        segments.append(segment)
    if not segments:
        raise _refused(shown, "it names the vault itself, not a note")
    if for_write:
        segments[-1] = _note_name(segments[-1], shown)
    real_root = Path(os.path.realpath(root))
    absolute = real_root.joinpath(*segments)
    real = Path(os.path.realpath(absolute))
    if real == real_root:
        raise _refused(shown, "a symlink on the way resolves to the vault folder itself")
    if not real.is_relative_to(real_root):
        raise _refused(shown, f"a symlink on the way resolves to {str(real)!r}, outside the vault")
    real_rel = real.relative_to(real_root).as_posix()
    for segment in real_rel.split("/"):
        why = _hidden_problem(segment)
        if why is not None:
            raise _refused(shown, f"a symlink on the way resolves to {real_rel!r}; {why}")
    if for_write and real != absolute:
        raise ValidationError(
            f"refused path {shown}: a symlink on the way leads to {real_rel!r}; vrom writes only"
            f" through real folders: use {real_rel!r}",
            IS_SYMLINK,
        )
    return absolute, "/".join(segments)


def note_ref_in_vault(root: Path, ref: str) -> str:
    """Return a note reference, confined for reading, as a vault-relative path (or name).

    Besides what `resolve_in_vault` takes, an absolute path inside the vault is accepted (the
    `Vault.get_note` contract); any other absolute path is refused with ``path_outside_vault``.
    """
    if isinstance(ref, str) and os.path.isabs(ref) and "\x00" not in ref:
        real_root = Path(os.path.realpath(root))
        for candidate in (Path(os.path.abspath(ref)), Path(os.path.realpath(ref))):
            if candidate != real_root and candidate.is_relative_to(real_root):
                ref = candidate.relative_to(real_root).as_posix()
                break
        else:
            raise _refused(_shown(ref), "it is an absolute path outside the vault")
    return resolve_in_vault(root, ref, for_write=False)[1]


def _refused(shown: str, why: str) -> ValidationError:
    return ValidationError(f"refused path {shown}: {why}", OUTSIDE)


def _shown(path: str) -> str:
    # repr escapes control characters, so the message stays on one line
    return repr(path) if len(path) <= 160 else repr(path[:160]) + "..."


def _string_problem(path: str) -> str | None:
    if not path.strip():
        return "it is empty"
    if "\x00" in path:
        return "it contains a NUL byte"
    if any(unicodedata.category(c) == "Cc" or c in _BIDI_CONTROLS for c in path):
        return "it contains control characters"
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


def _segment_problem(segment: str) -> str | None:
    for form in _forms(segment):
        if form == "..":
            if form == segment:
                return f"'..' segments could lead outside the vault{_RELATIVE}"
            return f"segment {segment!r} decodes to '..', which could lead outside the vault"
        if not form.strip(" ."):
            return f"segment {segment!r} is only dots and spaces"
        if "/" in form or "\\" in form:
            return f"segment {segment!r} decodes to a path separator"
        if any(unicodedata.category(c) == "Cc" or c in _BIDI_CONTROLS for c in form):
            return f"segment {segment!r} decodes to control characters"
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
