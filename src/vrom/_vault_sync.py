"""Copy a vault's store to a database (or another store file) and back: the engine behind
`Vault.sync_to` and `Vault.sync_from`.

The copying itself is `vrom.ingest.sync.sync_stores`, over the store roles only; this module
picks the other store (a namespace of a database, or a file), refuses the vault's own store,
and says which namespace a summary is about.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from vrom import state
from vrom.errors import NotFoundError, ValidationError
from vrom.ingest.sync import SyncProgress, sync_stores
from vrom.results import SyncSummary
from vrom.store import Location, Store, is_server_url


class VaultSync:
    """The syncs of one vault: its store, its folder and its namespace in a database."""

    def __init__(self, store: Store, root: Path, namespace: str) -> None:
        self._store = store
        self._root = root
        self._namespace = namespace

    def to(
        self, location: Location, namespace: str | None, progress: SyncProgress | None
    ) -> SyncSummary:
        """Copy the vault's store into ``location`` (see `Vault.sync_to`)."""
        namespace = state.checked_namespace(namespace) or self._namespace
        target = self._other_store(location, namespace, create=True)
        try:
            summary = sync_stores(self._store, target, progress=progress)
        finally:
            target.close()
        return _with_namespace(summary, location, namespace)

    def from_(
        self, location: Location, namespace: str | None, progress: SyncProgress | None
    ) -> SyncSummary:
        """Copy the vault's store from ``location`` into its own (see `Vault.sync_from`)."""
        namespace = state.checked_namespace(namespace) or self._namespace
        source = self._other_store(location, namespace, create=False)
        try:
            if source.get_meta("vault_root") is None:
                raise NotFoundError(
                    f"{state.shown_location(location, namespace)} holds no indexed vault:"
                    " run 'vrom sync --to' (or 'vrom index --db') on the machine that has it"
                )
            summary = sync_stores(
                source, self._store, vault_root=str(self._root), progress=progress
            )
        finally:
            source.close()
        return _with_namespace(summary, location, namespace)

    def _other_store(self, location: Location, namespace: str, *, create: bool) -> Store:
        """Return the store a sync copies to or from, refusing this vault's own."""
        if location is None or not os.fspath(location).strip():
            raise ValidationError("give the database (or store file) to sync with")
        other = state.open_in_namespace(location, namespace, create=create)
        ours, theirs = self._store.location, other.location
        if is_server_url(location):
            same = theirs == ours and namespace == self._namespace
        else:  # a file, however its path is written
            same = ours != ":memory:" and os.path.realpath(theirs) == os.path.realpath(ours)
        if same:
            other.close()
            raise ValidationError(
                f"{state.shown_location(location, namespace)} is this vault's own store:"
                " sync with another database or namespace"
            )
        return other


def _with_namespace(summary: SyncSummary, location: Location, namespace: str) -> SyncSummary:
    """Return a sync's summary saying which namespace of a database it synced with."""
    return dataclasses.replace(summary, namespace=namespace if is_server_url(location) else None)
