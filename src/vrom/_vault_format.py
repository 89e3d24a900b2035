"""Check a vault's notes against OKF v0.2 and enrich their frontmatter: the engine behind
`Vault.check_format` and `Vault.enrich_format`.

Notes are found as indexing finds them (`vrom.ingest.walk.walk_vault`: hidden and ignored
folders, files over the size limit and names no store can hold are left out) and read from disk,
so a check sees the files as they are now, indexed or not. The OKF rules are in
`vrom.ingest.okf`, the suggestions in `vrom.ingest.okf_enrich`. Enrichment writes only when
asked, and only through `VaultFiles.set_frontmatter`: the frontmatter is merged (every field
already there is kept), the body is kept byte for byte, the write is atomic and the note is
re-indexed at once. One note that cannot be read or written never stops the others: it is
reported with the reason.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from vrom._vault_files import VaultFiles
from vrom.errors import NotFoundError, StorageError, ValidationError, VromError
from vrom.ingest.confine import NOT_A_NOTE, confine
from vrom.ingest.okf import (
    CONCEPT,
    FORMATS,
    MARKDOWN,
    OKF_VERSION,
    NoteCheck,
    check_note,
    index_entries,
)
from vrom.ingest.okf_enrich import suggest_enrichment
from vrom.ingest.parse import name_problem
from vrom.ingest.walk import NoteFile, is_note_name, read_note_text, read_regular_file, walk_vault
from vrom.results import Enrichment, FormatIssue, FormatReport, NoteFormat


class VaultFormat:
    """The format checks of one vault: its root, its safe write path and its size limit."""

    def __init__(self, root: Path, files: VaultFiles, max_file_bytes: int) -> None:
        self.root = Path(os.path.realpath(root))
        self._files = files
        self._max_file_bytes = max_file_bytes

    def report(self, path: str | None, *, enrich: bool, apply: bool = False) -> FormatReport:
        """Return how the notes at ``path`` (a note, a folder, or None for the whole vault)
        stand against OKF v0.2; with ``enrich``, the fields each lacks, written with ``apply``."""
        if apply and not enrich:
            raise ValidationError("apply writes enrichment: it goes with enrich, not check")
        walked, _ = walk_vault(self.root, self._max_file_bytes)  # skipped files: not notes
        notes = _Notes(walked)
        scope, targets = self._scope(path, notes)
        results = []
        for note in targets:
            check = notes.check(note)
            enrichment = self._enrichment(note, check, notes) if enrich else []
            enriched = False
            warnings = list(check.warnings)
            if apply and enrichment:
                check, enriched, failure = self._apply(note, enrichment)
                warnings = list(check.warnings) + ([failure] if failure else [])
            results.append(
                NoteFormat(
                    note.path,
                    check.format,
                    check.errors,
                    tuple(warnings),
                    tuple(enrichment),
                    enriched,
                )
            )
        formats = {kind: sum(1 for n in results if n.format == kind) for kind in FORMATS}
        return FormatReport(
            action="enrich" if enrich else "check",
            scope=scope,
            applied=apply,
            notes=results,
            formats=formats,
            errors=sum(len(n.errors) for n in results),
            warnings=sum(len(n.warnings) for n in results),
            enrichable=sum(1 for n in results if n.enrichment),
            enriched=sum(1 for n in results if n.enriched),
            okf_version=OKF_VERSION,
        )

    def _scope(self, path: str | None, notes: _Notes) -> tuple[str, list[NoteFile]]:
        """Return (the scope as a vault path, the notes in it); a folder takes every note
        under it."""
        if path is not None and not isinstance(path, str):
            raise ValidationError(f"a path is a string, not {type(path).__name__}")
        if path is None or path.strip().replace("\\", "/").strip("/") in ("", "."):
            return "", notes.all
        confined = confine(self.root, path, "read")
        rel = confined.relative
        if confined.absolute.is_dir():
            return rel, [note for note in notes.all if note.path.startswith(rel + "/")]
        for candidate in (rel, f"{rel}.md"):
            if candidate in notes.by_path:
                return candidate, [notes.by_path[candidate]]
        if confined.absolute.exists():
            if not is_note_name(confined.absolute.name):
                raise ValidationError(f"{rel!r} is not a Markdown note", NOT_A_NOTE)
            raise ValidationError(
                f"{rel!r} is not a note vrom reads (over the size limit, or a name no store can"
                " hold)"
            )
        raise NotFoundError(f"no note or folder {rel!r} in vault {self.root}")

    def _enrichment(self, note: NoteFile, check: NoteCheck, notes: _Notes) -> list[Enrichment]:
        """Return the fields ``note`` lacks, its folder's index and concepts as context."""
        folder = PurePosixPath(note.path).parent.as_posix()
        folder = "" if folder == "." else folder
        return suggest_enrichment(
            check,
            note.path,
            note.mtime,
            listed_under=notes.listed(folder).get(note.path),
            sibling_types=notes.types(folder),
        )

    def _apply(
        self, note: NoteFile, enrichment: list[Enrichment]
    ) -> tuple[NoteCheck, bool, FormatIssue | None]:
        """Write ``enrichment`` into the note's frontmatter; return the note as checked after,
        whether the fields were written, and why the write failed (or None)."""
        failure, refused = None, False
        try:
            self._files.set_frontmatter(note.path, {e.field: e.value for e in enrichment})
        except StorageError as exc:  # written but not re-indexed, or not written: the file says
            failure = FormatIssue("not_enriched", f"enrichment: {exc}")
        except VromError as exc:  # refused before writing; the other notes go on
            failure = FormatIssue("not_enriched", f"enrichment was not written: {exc}")
            refused = True
        after = _check_file(note)
        frontmatter = after.frontmatter or {}
        written = not refused and all(frontmatter.get(e.field) == e.value for e in enrichment)
        return after, written, failure


class _Notes:
    """The vault's notes as walked, each read and checked at most once."""

    def __init__(self, walked: Iterable[NoteFile]) -> None:
        # a name no store or JSON can hold (not UTF-8, a control character) is left out, as
        # indexing leaves it out
        self.all = [note for note in walked if name_problem(note.path) is None]
        self.by_path = {note.path: note for note in self.all}
        self._folders: dict[str, list[NoteFile]] = {}
        for note in self.all:
            parent = PurePosixPath(note.path).parent.as_posix()
            self._folders.setdefault("" if parent == "." else parent, []).append(note)
        self._checked: dict[str, NoteCheck] = {}
        self._listed: dict[str, dict[str, str]] = {}
        self._types: dict[str, Counter[str]] = {}

    def listed(self, folder: str) -> dict[str, str]:
        """Return {note path: heading} for what the folder's ``index.md`` lists (once a folder)."""
        if folder not in self._listed:
            index = self.by_path.get(f"{folder}/index.md" if folder else "index.md")
            found = {} if index is None else index_entries(self.check(index).text, index.path)
            self._listed[folder] = found
        return self._listed[folder]

    def types(self, folder: str) -> Counter[str]:
        """Return how many of the folder's concepts have each ``type`` (once a folder)."""
        if folder not in self._types:
            kinds: Counter[str] = Counter()
            for note in self._folders.get(folder, []):
                check = self.check(note)
                kind = (check.frontmatter or {}).get("type")
                if check.format == CONCEPT and isinstance(kind, str):
                    kinds[kind] += 1
            self._types[folder] = kinds
        return self._types[folder]

    def check(self, note: NoteFile) -> NoteCheck:
        if note.path not in self._checked:
            self._checked[note.path] = _check_file(note)
        return self._checked[note.path]


def _check_file(note: NoteFile) -> NoteCheck:
    """Read a note from disk and check it; an unreadable file is an error of its own."""
    try:
        data = read_regular_file(note.abs_path)
    except OSError as exc:
        unreadable = FormatIssue("unreadable", f"could not be read: {exc.strerror or exc}")
        return NoteCheck(MARKDOWN, (unreadable,), (), None, False, "", 0)
    text, problem = read_note_text(data)
    if text is None:
        return check_note(note.path, None, "it holds NUL bytes")
    return check_note(note.path, text, problem.split(":", 1)[0] if problem else None)
