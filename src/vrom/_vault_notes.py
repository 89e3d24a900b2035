"""Reading a vault's notes: a note by path, name or id, its links, and the notes related to it.

`Vault` answers `get_note` and `related` through `VaultNotes`; every path it is given is
confined to the vault first (`vrom.ingest.confine.confine`).
"""

from __future__ import annotations

from pathlib import Path

from vrom.errors import NotFoundError, ValidationError, VromError
from vrom.ingest.confine import ReadPurpose, confine
from vrom.ingest.parse import is_utf8, note_key, parse_note, shown_path, unshown_path
from vrom.ingest.walk import read_note_text, read_regular_file
from vrom.results import Link, Note, NoteRef, Related, SharedTags, SimilarNote
from vrom.search.links import backlink_sources, resolve_link
from vrom.store import Store, StoredDocument


def note_ref(doc: StoredDocument) -> NoteRef:
    """Return the short reference to a stored note."""
    return NoteRef(doc.document_id, doc.path, doc.title)


class VaultNotes:
    """The notes of one vault, read from its store and its folder."""

    def __init__(self, root: Path, store: Store) -> None:
        self.root = root
        self.store = store

    def document(self, path_or_id: str | int, purpose: ReadPurpose) -> StoredDocument:
        """Return the stored note a path, name or id names, confined for ``purpose``.

        A name is also found as the faces print it (`shown_path`: ``bidi \\u202egnp.md``), when
        it names no note as written.
        """
        if purpose not in ("read", "reference"):
            raise ValidationError(f"purpose must be 'read' or 'reference', not {purpose!r}")
        if isinstance(path_or_id, int) and not isinstance(path_or_id, bool):
            doc = self.store.documents.get(path_or_id)
            if doc is None:
                raise NotFoundError(f"no note with id {path_or_id} in vault {self.root}")
            return doc
        if not isinstance(path_or_id, str):
            raise ValidationError("a note is named by its path, its name or its id")
        if not is_utf8(path_or_id):  # never indexed, and SQLite would refuse to look it up
            raise NotFoundError(
                f"no note '{shown_path(path_or_id)}' in vault {self.root}: vrom does not index"
                " a file whose name is not valid UTF-8 (rename the file)"
            )
        try:
            return self._named(path_or_id, purpose)
        except VromError as as_written:  # a backslash is a separator: "\u202e" names no note
            unescaped = unshown_path(path_or_id)
            if unescaped == path_or_id:
                raise
            try:
                return self._named(unescaped, purpose)
            except VromError:
                raise as_written from None

    def _named(self, path_or_id: str, purpose: ReadPurpose) -> StoredDocument:
        ref = confine(self.root, path_or_id.strip(), purpose).relative
        key = note_key(ref)
        matches = self.store.documents.find(key)
        if matches:
            return matches[0]
        # an id: ASCII digits ("¹" is a digit to str.isdigit, not to int) that fit in 64 bits
        if ref.isascii() and ref.isdigit() and len(ref) <= 18:
            doc = self.store.documents.get(int(ref))
            if doc is not None:
                return doc
        raise NotFoundError(f"no note {path_or_id!r} in vault {self.root}")

    def _links(self, doc: StoredDocument) -> list[Link]:
        links = []
        for _, link in self.store.documents.links(sources=[doc.document_id]):
            target = resolve_link(self.store, link, doc)
            links.append(
                Link(
                    link.kind,
                    link.target,
                    link.heading,
                    link.alias,
                    None if target is None else target.path,
                )
            )
        return links

    def get_note(self, path_or_id: str | int, purpose: ReadPurpose) -> Note:
        """Return a note by path (with or without ``.md``), name, or id, with its current body.

        A path that leaves the vault (``..``, absolute elsewhere, symlinks out) or enters hidden
        folders raises `ValidationError` with code ``path_outside_vault``. An absolute path
        inside the vault is accepted, unless ``purpose="read"``: the rule for paths from an
        agent, which takes only paths from the vault root (and names and ids).
        """
        doc = self.document(path_or_id, purpose)
        absolute = confine(self.root, doc.path, "read").absolute
        text: str | None = None
        try:
            text, _ = read_note_text(read_regular_file(absolute))
        except OSError:
            text = None
        if text is None:  # gone from disk since indexing: rebuild the body from its chunks
            chunks = self.store.documents.chunks_of(doc.document_id)
            text = "\n\n".join(c.text for c in chunks)
            headings = list(dict.fromkeys(c.heading_path for c in chunks if c.heading_path))
            body = text
        else:
            parsed = parse_note(text, doc.path)
            headings = [h.text for h in parsed.headings]
            body = text[parsed.body_start :]
        return Note(
            note_id=doc.document_id,
            path=doc.path,
            title=doc.title,
            frontmatter=doc.frontmatter,
            headings=headings,
            tags=self.store.documents.tags_of(doc.document_id),
            links=self._links(doc),
            content_hash=doc.content_hash,
            modified_unix=doc.mtime,
            size=doc.size,
            human_relevance_score=doc.human_relevance_score,
            chunk_count=doc.chunk_count,
            body=body,
        )

    def related(
        self, path_or_id: str | int, k: int, purpose: ReadPurpose, *, similar_too: bool
    ) -> Related:
        """Return a note's links, backlinks, notes sharing its tags, and notes similar in meaning.

        Similar notes (cosine of mean chunk vectors) come only when the store has vectors. The
        note is named as for `get_note`, ``purpose`` included.
        """
        doc = self.document(path_or_id, purpose)
        shared = []
        for other_id, tags in self.store.documents.sharing_tags(doc.document_id, k):
            other = self.store.documents.get(other_id)
            if other is not None:
                shared.append(SharedTags(note_ref(other), tags))
        similar = []
        if similar_too:
            from vrom.search.similar import similar_notes  # numpy: only with vectors

            for other_id, score in similar_notes(self.store, doc.document_id, k):
                other = self.store.documents.get(other_id)
                if other is not None:
                    similar.append(SimilarNote(note_ref(other), round(score, 6)))
        return Related(
            note=note_ref(doc),
            links=self._links(doc),
            backlinks=[note_ref(src) for src in backlink_sources(self.store, doc)],
            shared_tags=shared,
            similar=similar,
        )
