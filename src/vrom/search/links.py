"""Resolve links between notes, the way Obsidian does, against what the store holds."""

from __future__ import annotations

from pathlib import PurePosixPath

from vrom.store import LinkRecord, Store, StoredDocument


def resolve_link(store: Store, link: LinkRecord, source: StoredDocument) -> StoredDocument | None:
    """Return the note a link points to, or None.

    An empty target (``[[#Heading]]``) is the source note itself. An exact path wins; among notes
    with the same name, one in the source's folder wins, then the shortest path.
    """
    if not link.target_key:
        return source
    candidates = store.documents.find(link.target_key)
    if not candidates:
        return None
    exact = [c for c in candidates if c.path_key == link.target_key]
    if exact:
        return exact[0]
    folder = PurePosixPath(source.path).parent
    for candidate in candidates:
        if PurePosixPath(candidate.path).parent == folder:
            return candidate
    return candidates[0]


def backlink_sources(store: Store, target: StoredDocument) -> list[StoredDocument]:
    """Return the notes with at least one link that resolves to ``target``, by path."""
    parts = target.path_key.split("/")
    keys = ["/".join(parts[i:]) for i in range(len(parts))]
    sources: dict[int, StoredDocument] = {}
    cache: dict[int, StoredDocument | None] = {}
    for source_id, link in store.documents.links_to_keys(keys):
        if source_id in sources or source_id == target.document_id:
            continue
        if source_id not in cache:
            cache[source_id] = store.documents.get(source_id)
        source = cache[source_id]
        if source is None:
            continue
        resolved = resolve_link(store, link, source)
        if resolved is not None and resolved.document_id == target.document_id:
            sources[source_id] = source
    return sorted(sources.values(), key=lambda doc: doc.path)
