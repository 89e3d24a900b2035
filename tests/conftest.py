"""Shared fixtures: tiny vaults built in tmp_path, and a state dir that never touches the user's."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

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
