"""Resolve links between notes, the way Obsidian does, against what the store holds."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import PurePosixPath

from vrom.store import LinkRecord, Store, StoredDocument
from vrom.store.records import path_ends


def resolve_link(store: Store, link: LinkRecord, source: StoredDocument) -> StoredDocument | None:
    """Return the note a link points to, or None.

    An empty target (``[[#Heading]]``) is the source note itself. An exact path wins; among notes
    with the same name, one in the source's folder wins, then the shortest path.
    """
    if not link.target_key:
        return source
    return _choose(store.documents.find(link.target_key), link.target_key, source.path)


def _choose(
    candidates: list[StoredDocument], target_key: str, source_path: str
) -> StoredDocument | None:
    """Return the candidate a link from ``source_path`` means (see `resolve_link`), or None."""
    if not candidates:
        return None
    exact = [c for c in candidates if c.path_key == target_key]
    if exact:
        return exact[0]
    folder = PurePosixPath(source_path).parent
    for candidate in candidates:
        if PurePosixPath(candidate.path).parent == folder:
            return candidate
    return candidates[0]


class LinkResolver:
    """Resolves many links against one state of the store as `resolve_link` does, looking each
    target key up once (an export resolves every link of a vault).

    Given every note of that state (``documents``, read in the same snapshot), it finds the
    candidates in memory by the rules of `DocumentStore.find` instead of asking the store once
    per key: thousands of keys with a ``/`` would each scan the notes' paths.
    """

    def __init__(self, store: Store, documents: Iterable[StoredDocument] | None = None) -> None:
        self._store = store
        self._found: dict[str, list[StoredDocument]] = {}
        self._by_key: dict[str, list[StoredDocument]] | None = None
        if documents is not None:
            self._by_key = defaultdict(list)
            for document in documents:
                for key in target_keys(document):
                    self._by_key[key].append(document)

    def path(self, target_key: str, source_path: str) -> str | None:
        """Return the path of the note a link with ``target_key`` in ``source_path`` points
        to (the source itself for an empty key), or None when no note matches."""
        if not target_key:
            return source_path
        candidates = self._found.get(target_key)
        if candidates is None:
            candidates = self._found[target_key] = self._candidates(target_key)
        chosen = _choose(candidates, target_key, source_path)
        return None if chosen is None else chosen.path

    def _candidates(self, key: str) -> list[StoredDocument]:
        """Return what `DocumentStore.find` returns for ``key``: a key with ``/`` matches a
        path key or its trailing parts, one without a path key or a name key; an exact path
        first, then the shortest path, then by path."""
        if self._by_key is None:
            return self._store.documents.find(key)
        if "/" in key:
            found = [
                d
                for d in self._by_key.get(key, ())
                if d.path_key == key or d.path_key.endswith("/" + key)
            ]
        else:
            found = [d for d in self._by_key.get(key, ()) if key in (d.path_key, d.name_key)]
        return sorted(found, key=lambda d: (d.path_key != key, len(d.path), d.path))


def target_keys(document: StoredDocument) -> set[str]:
    """Return every link target key that can find ``document``: its path key, each trailing
    part of it, and its name key (a link with another key never resolves to it)."""
    return path_ends(document.path_key) | {document.name_key}


def backlink_sources(store: Store, target: StoredDocument) -> list[StoredDocument]:
    """Return the notes with at least one link that resolves to ``target``, by path."""
    parts = target.path_key.split("/")
    keys = ["/".join(parts[i:]) for i in range(len(parts))]
    sources: dict[int, StoredDocument] = {}
    cache: dict[int, StoredDocument | None] = {}
    for source_id, link in store.documents.links(targets=keys):
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
