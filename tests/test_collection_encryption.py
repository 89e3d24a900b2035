"""Encrypted collections (SQLCipher): nothing readable on disk, and a wrong key is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from vrom import Collection, Embedder, StorageError, ValidationError
from vrom.settings import STORAGE_KEY_ENV

pytest.importorskip("sqlcipher3")

SECRET_TEXT = "Zanzibar-marmalade-protocol-7741 is the vault combination"
SECRET_ID = "combination-note-5521"
SECRET_META = "quartermaster-violet-3390"
KEY = "correct horse battery staple"


def _write(storage: Path, key: str | None, index: str = "flat") -> None:
    docs = Collection.open(
        "secrets", embedder=Embedder.fake(), storage=storage, key=key, index=index
    )
    docs.add([{"id": SECRET_ID, "text": SECRET_TEXT, "metadata": {"owner": SECRET_META}}])
    docs.add([{"id": f"filler-{i}", "text": f"filler document {i}"} for i in range(50)])
    assert docs.search("Zanzibar marmalade", k=1)[0].id == SECRET_ID
    docs.close()


def _disk_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def test_a_plain_collection_shows_its_text_on_disk(tmp_path: Path) -> None:
    """The control: the scan below does find text in an unencrypted store."""
    _write(tmp_path, key=None)
    assert SECRET_TEXT.encode() in _disk_bytes(tmp_path)


@pytest.mark.parametrize("index", ["flat", "hnsw"])
def test_nothing_readable_reaches_the_disk(tmp_path: Path, index: str) -> None:
    _write(tmp_path, key=KEY, index=index)
    on_disk = _disk_bytes(tmp_path)
    assert on_disk, "the store was written"
    for secret in (SECRET_TEXT, "Zanzibar", SECRET_ID, SECRET_META, KEY, "filler document"):
        assert secret.encode() not in on_disk, secret
    assert not list(tmp_path.glob("*.hnsw.*")), "no unencrypted graph file beside the store"
    with Collection.open("secrets", embedder=Embedder.fake(), storage=tmp_path, key=KEY) as docs:
        assert docs.count() == 51
        hit = docs.search("Zanzibar marmalade", k=1)[0]
        assert (hit.id, hit.text, hit.metadata) == (SECRET_ID, SECRET_TEXT, {"owner": SECRET_META})


def test_a_wrong_or_missing_key_is_a_clear_storage_error(tmp_path: Path) -> None:
    _write(tmp_path, key=KEY)
    with pytest.raises(StorageError, match="the key is wrong"):
        Collection.open("secrets", embedder=Embedder.fake(), storage=tmp_path, key="wrong")
    with pytest.raises(StorageError, match="encrypted store, give its key"):
        Collection.open("secrets", embedder=Embedder.fake(), storage=tmp_path)
    assert SECRET_TEXT.encode() not in _disk_bytes(tmp_path), "a failed open wrote nothing"


def test_the_key_can_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STORAGE_KEY_ENV, KEY)
    _write(tmp_path, key=None)
    assert SECRET_TEXT.encode() not in _disk_bytes(tmp_path)
    monkeypatch.delenv(STORAGE_KEY_ENV)
    with Collection.open("secrets", embedder=Embedder.fake(), storage=tmp_path, key=KEY) as docs:
        assert docs.count() == 51
    with pytest.raises(StorageError):
        Collection.open("secrets", embedder=Embedder.fake(), storage=tmp_path)


def test_keys_are_checked() -> None:
    with pytest.raises(ValidationError, match="give storage a path"):
        Collection.open("x", embedder=Embedder.fake(), key=KEY)
    with pytest.raises(ValidationError, match="non-empty string"):
        Collection.open("x", embedder=Embedder.fake(), storage="/tmp/none-such-dir-vrom", key="")
