"""A pack's manifest and a registry's entries: parsed, checked, and written back (docs/packs.md)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vrom.bounded_json import loads_bounded
from vrom.errors import PackError, ValidationError

MANIFEST_NAME = "manifest.json"
STORE_NAME = "store.db"
INDEX_NAME = "index.usearch"
PACK_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
VERSION = re.compile(r"^\d+\.\d+\.\d+([-+][0-9A-Za-z.-]+)?$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_KEY_ID = re.compile(r"^[0-9a-f]{16}$")
HASH_CHUNK = 1 << 20
# A registry or manifest (a peer's JSON, and the copies of it cached) is refused past these:
# the real ones are a few KB and 4 levels deep (registry → packs → entry → files).
MAX_JSON_BYTES = 32 * 1024 * 1024
MAX_JSON_DEPTH = 32


@dataclass(frozen=True)
class PackFile:
    """One file of a pack: its name inside the pack folder, size in bytes and SHA-256 (hex)."""

    path: str
    size: int
    sha256: str


@dataclass(frozen=True)
class PackManifest:
    """What ``manifest.json`` says; see docs/packs.md for every field."""

    vrom_id: str
    version: str
    embedding_spec: Mapping[str, Any]
    hnsw_config: Mapping[str, Any]
    vector_count: int
    total_tokens: int
    total_chunks: int
    corpus_hash: str
    created_at: str
    chunk_strategy: Mapping[str, Any]
    files: Mapping[str, PackFile]
    name: str = ""
    description: str = ""
    tags: tuple[str, ...] = ()
    source: Mapping[str, Any] = field(default_factory=dict)

    @property
    def model(self) -> str:
        """The embedding model's id."""
        return str(self.embedding_spec.get("model", ""))

    @property
    def dimensions(self) -> int:
        """The vectors' dimensions."""
        return int(self.embedding_spec.get("dimensions", 0))

    def to_dict(self) -> dict[str, Any]:
        """Return the manifest as JSON-ready data."""
        data = asdict(self)
        data["tags"] = list(self.tags)
        return data

    def write(self, folder: Path) -> Path:
        """Write ``manifest.json`` into ``folder``; return its path."""
        path = folder / MANIFEST_NAME
        path.write_text(json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n", "utf-8")
        return path

    @classmethod
    def from_dict(cls, data: Any, where: str = "manifest") -> PackManifest:
        """Return the manifest ``data`` describes, or raise `PackError` saying what is wrong."""
        if not isinstance(data, Mapping):
            raise PackError(f"{where} is not a JSON object")
        try:
            files = {
                role: PackFile(str(f["path"]), int(f["size"]), str(f["sha256"]).lower())
                for role, f in dict(data["files"]).items()
            }
            manifest = cls(
                vrom_id=str(data["vrom_id"]),
                version=str(data["version"]),
                embedding_spec=dict(data["embedding_spec"]),
                hnsw_config=dict(data["hnsw_config"]),
                vector_count=int(data["vector_count"]),
                total_tokens=int(data["total_tokens"]),
                total_chunks=int(data["total_chunks"]),
                corpus_hash=str(data["corpus_hash"]),
                created_at=str(data["created_at"]),
                chunk_strategy=dict(data["chunk_strategy"]),
                files=files,
                name=str(data.get("name") or ""),
                description=str(data.get("description") or ""),
                tags=tuple(str(t) for t in data.get("tags") or ()),
                source=dict(data.get("source") or {}),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise PackError(f"{where} is malformed: {type(exc).__name__} {exc}") from exc
        manifest.check(where)
        return manifest

    @classmethod
    def read(cls, folder: Path) -> PackManifest:
        """Return the manifest in ``folder``, or raise `PackError`."""
        path = folder / MANIFEST_NAME
        try:
            data = loads_bounded(
                path.read_bytes(),
                max_depth=MAX_JSON_DEPTH,
                max_bytes=MAX_JSON_BYTES,
                what=str(path),
            )
        except FileNotFoundError as exc:
            raise PackError(f"no {MANIFEST_NAME} in {folder}") from exc
        except OSError as exc:
            raise PackError(f"cannot read {path}: {exc}") from exc
        except ValidationError as exc:
            raise PackError(str(exc)) from exc
        return cls.from_dict(data, str(path))

    def check(self, where: str = "manifest") -> None:
        """Raise `PackError` if the manifest breaks a rule a loader relies on."""
        if not PACK_ID.match(self.vrom_id):
            raise PackError(f"{where}: pack id {self.vrom_id!r} is not valid (a-z, 0-9, . _ -)")
        if not VERSION.match(self.version):
            raise PackError(f"{where}: version {self.version!r} is not X.Y.Z")
        for role in ("store", "index"):
            if role not in self.files:
                raise PackError(f"{where}: the '{role}' file is missing")
        for role, file in self.files.items():
            name = Path(file.path)
            if name.name != file.path or file.path in ("", ".", ".."):
                raise PackError(
                    f"{where}: file {role} must be a plain file name, not {file.path!r}"
                )
            if file.size < 0 or not _SHA256.match(file.sha256):
                raise PackError(f"{where}: file {role} has a bad size or sha256")
        if self.dimensions < 1:
            raise PackError(f"{where}: embedding_spec.dimensions must be positive")

    def verify(self, folder: Path) -> None:
        """Raise `PackError` unless every file in ``folder`` has the manifest's size and hash."""
        for role, file in self.files.items():
            path = folder / file.path
            try:
                size = path.stat().st_size
            except OSError as exc:
                raise PackError(f"pack {self.vrom_id}: {file.path} is missing") from exc
            if size != file.size:
                raise PackError(
                    f"pack {self.vrom_id}: {file.path} is {size} bytes, the manifest says "
                    f"{file.size}: truncated or replaced"
                )
            if file_sha256(path) != file.sha256:
                raise PackError(
                    f"pack {self.vrom_id}: {file.path} ({role}) does not match its SHA-256: "
                    "corrupted or tampered with"
                )


@dataclass(frozen=True)
class RegistryEntry:
    """One pack in a registry (see docs/packs.md); ``files`` values are URLs or relative paths.

    ``manifest_sha256`` is the SHA-256 of the manifest's bytes and ``key_id`` the id of the key
    that signed it (``files["signature"]``); both are empty in entries of unsigned packs and of
    registries written before packs were signed.
    """

    id: str
    name: str
    description: str
    version: str
    vectors: int
    dimensions: int
    tokens: int
    size_mb: float
    model: str
    tags: tuple[str, ...]
    official: bool
    files: Mapping[str, str]
    manifest_sha256: str = ""
    key_id: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Return the entry as JSON-ready data."""
        data = asdict(self)
        data["tags"] = list(self.tags)
        return data

    @classmethod
    def from_dict(cls, data: Any, where: str = "registry entry") -> RegistryEntry:
        """Return the entry ``data`` describes, or raise `PackError`."""
        if not isinstance(data, Mapping):
            raise PackError(f"{where} is not a JSON object")
        try:
            entry = cls(
                id=str(data["id"]),
                name=str(data.get("name") or data["id"]),
                description=str(data.get("description") or ""),
                version=str(data["version"]),
                vectors=int(data.get("vectors") or 0),
                dimensions=int(data.get("dimensions") or 0),
                tokens=int(data.get("tokens") or 0),
                size_mb=float(data.get("size_mb") or 0.0),
                model=str(data.get("model") or ""),
                tags=tuple(str(t) for t in data.get("tags") or ()),
                official=bool(data.get("official", False)),
                files={str(k): str(v) for k, v in dict(data["files"]).items()},
                manifest_sha256=str(data.get("manifest_sha256") or "").lower(),
                key_id=str(data.get("key_id") or "").lower(),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise PackError(f"{where} is malformed: {type(exc).__name__} {exc}") from exc
        if not PACK_ID.match(entry.id):
            raise PackError(f"{where}: pack id {entry.id!r} is not valid")
        if entry.manifest_sha256 and not _SHA256.match(entry.manifest_sha256):
            raise PackError(f"{where}: manifest_sha256 is not 64 hex digits")
        if entry.key_id and not _KEY_ID.match(entry.key_id):
            raise PackError(f"{where}: key_id is not 16 hex digits")
        for role in ("manifest", "index", "chunks"):
            if role not in entry.files:
                raise PackError(f"{where}: files.{role} is missing")
        return entry


def bytes_sha256(data: bytes) -> str:
    """Return the SHA-256 (hex) of ``data``."""
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: Path) -> str:
    """Return the SHA-256 (hex) of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while block := file.read(HASH_CHUNK):
            digest.update(block)
    return digest.hexdigest()


REGISTRY_NAME = "registry.json"
REGISTRY_VERSION = 1


@dataclass(frozen=True)
class Registry:
    """What ``registry.json`` says: its format version, when it was updated, and its packs."""

    packs: tuple[RegistryEntry, ...]
    updated_at: str = ""
    registry_version: int = REGISTRY_VERSION

    def get(self, pack_id: str) -> RegistryEntry | None:
        """Return the entry for ``pack_id``, or None."""
        return next((entry for entry in self.packs if entry.id == pack_id), None)

    def to_dict(self) -> dict[str, Any]:
        """Return the registry as JSON-ready data."""
        return {
            "registry_version": self.registry_version,
            "updated_at": self.updated_at,
            "packs": [entry.to_dict() for entry in self.packs],
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "registry") -> Registry:
        """Return the registry ``data`` describes, or raise `PackError` saying what is wrong."""
        if not isinstance(data, Mapping):
            raise PackError(f"{where} is not a JSON object")
        version = data.get("registry_version", REGISTRY_VERSION)
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise PackError(f"{where}: registry_version {version!r} is not a positive integer")
        if version > REGISTRY_VERSION:
            raise PackError(
                f"{where} has registry_version {version}, newer than this vrom reads "
                f"({REGISTRY_VERSION}): upgrade vrom"
            )
        packs = data.get("packs")
        if not isinstance(packs, list):
            raise PackError(f"{where}: 'packs' must be a list")
        entries = tuple(
            RegistryEntry.from_dict(item, f"{where}: packs[{i}]") for i, item in enumerate(packs)
        )
        seen: set[str] = set()
        for entry in entries:
            if entry.id in seen:
                raise PackError(f"{where}: pack {entry.id!r} is listed twice (one entry per id)")
            seen.add(entry.id)
        return cls(entries, str(data.get("updated_at") or ""), version)


def version_key(version: str) -> tuple[int, int, int, int, str]:
    """Return a sort key for an ``X.Y.Z[-pre]`` version: numeric, a pre-release before its release."""
    match = re.match(r"^(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?", version)
    if not match:
        return (-1, -1, -1, -1, version)
    major, minor, patch, pre = match.groups()
    return (int(major), int(minor), int(patch), 0 if pre else 1, pre or "")
