"""Shared fixtures: tiny vaults built in tmp_path, and a state dir that never touches the user's."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from postgres_server import BACKENDS, Spot, StoreSpot, namespace_for, start_server
from postgres_server import open_vault as open_postgres_vault

from vrom import Vault

WriteVault = Callable[[dict[str, str | bytes]], Path]


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep every test's vault state (and the 'vault indexed last' hint) inside tmp_path.

    Vaults are keyword-only unless a test asks for an embedder (subprocesses inherit this):
    the keyword suites pin keyword behaviour, the vector suites pass the fake or real model.
    No pack keys are trusted unless a test sets them (the developer's shell may).
    """
    monkeypatch.setenv("VROM_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("VROM_EMBEDDER", "none")
    monkeypatch.delenv("VROM_VAULT", raising=False)
    monkeypatch.delenv("VAULT_ROOT", raising=False)
    monkeypatch.delenv("VROM_DATABASE_URL", raising=False)  # stores stay in the state dir
    monkeypatch.delenv("VROM_TRUSTED_KEYS", raising=False)


@pytest.fixture
def write_vault(tmp_path: Path) -> WriteVault:
    """Return a function that writes {relative path: text or bytes} into a vault folder."""
    root = tmp_path / "vault"

    def write(files: dict[str, str | bytes]) -> Path:
        root.mkdir(exist_ok=True)
        for rel, content in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")
        return root

    return write


@pytest.fixture
def open_vault(tmp_path: Path) -> Iterator[Callable[[Path], Vault]]:
    """Return a function that opens (and later closes) a vault with state under tmp_path."""
    opened: list[Vault] = []

    def open_(root: Path) -> Vault:
        vault = Vault.open(root, state_dir=tmp_path / "state")
        opened.append(vault)
        return vault

    yield open_
    for vault in opened:
        vault.close()


@pytest.fixture(scope="session")
def postgres_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Start one PostgreSQL server (18, with pgvector) for the session; yield its URL."""
    server = start_server(tmp_path_factory.mktemp("postgres") / "data")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


@pytest.fixture(params=BACKENDS)
def store_spot(request: pytest.FixtureRequest, tmp_path: Path) -> StoreSpot:
    """Where this test's store lives: a SQLite file, or a namespace of its own in PostgreSQL
    (the store contract tests run against both)."""
    if request.param == "sqlite":
        return StoreSpot("sqlite", str(tmp_path / "s" / "store.db"), None)
    url = request.getfixturevalue("postgres_url")
    return StoreSpot("postgresql", url, namespace_for(request.node.name))


OpenBackendVault = Callable[..., Vault]


@pytest.fixture(params=BACKENDS)
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], Spot]:
    """Return where another store lives, by name: a SQLite file of its own per name, or a
    namespace of its own per name (and test) in PostgreSQL (what a sync copies to and from)."""
    run = uuid.uuid4().hex[:8]
    url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None
    (tmp_path / "shared").mkdir()

    def spot(name: str) -> Spot:
        if url is None:
            return Spot(f"sqlite:///{tmp_path / 'shared' / name}.db", None)
        return Spot(url, f"{name}-{run}")

    return spot


@pytest.fixture
def open_backend_vault(store_spot: StoreSpot, tmp_path: Path) -> Iterator[OpenBackendVault]:
    """Return a function that opens a vault on this test's backend (see `store_spot`):
    ``open_(root, embedder=None)``; the vaults close after the test."""
    opened: list[Vault] = []

    def open_(root: Path, embedder: Any = None) -> Vault:
        if store_spot.backend == "sqlite":
            vault = Vault.open(root, state_dir=tmp_path / "state", embedder=embedder)
        else:
            vault = open_postgres_vault(root, store_spot.open(), embedder)
        opened.append(vault)
        return vault

    yield open_
    for vault in opened:
        vault.close()
