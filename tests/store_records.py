"""A note's record as the store contract tests write it: a key from its path, a content hash
from its path, and the frontmatter given."""

from __future__ import annotations

from vrom.store import DocumentRecord


def note_record(
    path: str, title: str = "T", text: str | None = None, **frontmatter: object
) -> DocumentRecord:
    """Return the record of the note at ``path`` (``text``: a collection document's text)."""
    key = path.lower().removesuffix(".md")
    return DocumentRecord(
        path=path,
        path_key=key,
        name_key=key.rsplit("/", 1)[-1],
        title=title,
        frontmatter=frontmatter,
        content_hash="h-" + path,
        mtime=1.0,
        size=10,
        human_relevance_score=0.5,
        chunk_strategy="s1",
        text=text,
    )
