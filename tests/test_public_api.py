"""The public surface: a pinned ``__all__`` and an import that stays light."""

from __future__ import annotations

import inspect
import logging
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path

import vrom


def test_exported_members_are_pinned() -> None:
    assert sorted(vrom.__all__) == sorted(
        [
            "AgentMemory",
            "AsyncCollection",
            "BackendInfo",
            "Collection",
            "Context",
            "DeleteResult",
            "Document",
            "Embedder",
            "ExportSummary",
            "Fingerprint",
            "FolderListing",
            "FormatReport",
            "Hit",
            "IndexSummary",
            "IndexWarning",
            "Link",
            "Memories",
            "Memory",
            "MemoryHit",
            "MemoryStats",
            "ModelError",
            "MountStatus",
            "Neighbor",
            "NotFoundError",
            "Note",
            "NoteRef",
            "Pack",
            "PackError",
            "RegistryEntry",
            "Related",
            "Reranker",
            "SearchReport",
            "SearchResult",
            "SearchTool",
            "SharedTags",
            "SimilarNote",
            "StorageError",
            "StorageEstimate",
            "SyncSummary",
            "TagCount",
            "ToolResult",
            "UnverifiedPackWarning",
            "ValidationError",
            "Vault",
            "VaultStats",
            "VectorDB",
            "VectorDBStats",
            "VectorInfo",
            "VromError",
            "WriteResult",
            "__version__",
            "format_context",
            "to_jsonable",
        ]
    )
    for name in vrom.__all__:
        assert hasattr(vrom, name), name


def test_errors_form_one_tree() -> None:
    for error in (
        vrom.StorageError,
        vrom.ValidationError,
        vrom.NotFoundError,
        vrom.ModelError,
        vrom.PackError,
    ):
        assert issubclass(error, vrom.VromError)
    assert vrom.ValidationError("x").code == "invalid_value"


def test_import_vrom_stays_light() -> None:
    heavy = [
        "rich",
        "numpy",
        "onnxruntime",
        "tokenizers",
        "httpx",
        "mcp",
        "usearch",
        "cryptography",
        "psycopg",
        "psycopg_pool",
        "pgvector",
    ]
    code = f"import sys, vrom; print([m for m in {heavy!r} if m in sys.modules])"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def _returned_classes(annotation: object) -> Iterator[type]:
    """Yield the classes an annotation names, through its generic arguments."""
    if isinstance(annotation, type):
        yield annotation
    for argument in typing.get_args(annotation):
        yield from _returned_classes(argument)


def test_every_type_a_facade_returns_is_importable_from_vrom() -> None:
    facades = (
        vrom.Vault,
        vrom.Collection,
        vrom.AsyncCollection,
        vrom.AgentMemory,
        vrom.Pack,
        vrom.Memories,
        vrom.VectorDB,
    )
    unreachable = []
    for facade in facades:
        for name in dir(facade):  # inherited too: Vault's writing half is a base class
            if name.startswith("_"):
                continue
            member = inspect.getattr_static(facade, name)
            function = getattr(member, "fget", None) or getattr(member, "func", None) or member
            if isinstance(function, staticmethod | classmethod):
                function = function.__func__
            if not callable(function):
                continue
            returned = typing.get_type_hints(function).get("return")
            for cls in _returned_classes(returned):
                home = cls.__module__.split(".")[0]
                if home in ("builtins", "collections", "typing", "pathlib", "numpy"):
                    continue  # the language's and numpy's own types
                if getattr(vrom, cls.__name__, None) is not cls:
                    unreachable.append(f"{facade.__name__}.{name} -> {cls.__qualname__}")
    assert unreachable == []
    assert {"Memories", "SearchReport"} <= set(vrom.__all__)


def test_using_every_facade_leaves_the_root_and_vrom_logger_levels_unchanged(
    tmp_path: Path,
) -> None:
    root, package = logging.getLogger(), logging.getLogger("vrom")
    saved = (root.level, package.level)
    root.setLevel(logging.ERROR)  # an application's own choice, neither vrom's nor the default
    package.setLevel(logging.INFO)
    try:
        notes = tmp_path / "notes"
        notes.mkdir()
        (notes / "a.md").write_text("# Alpha\n\nThe network switch is in the rack.\n")
        with vrom.Vault.open(notes, embedder=vrom.Embedder.fake(32), state_dir=tmp_path) as vault:
            vault.index()
            vault.search("network switch", k=1)
            vault.memories.remember("Rack", "The switch is in rack 3.")
            vault.memories.recall("switch", k=1)
        with vrom.Collection.open("docs", embedder=vrom.Embedder.fake(32)) as docs:
            docs.add([{"id": "a", "text": "Annual leave is 25 days."}])
            docs.search("leave", k=1)
        with vrom.AgentMemory(cache_dir=tmp_path / "cache") as memory:
            memory.init()
            memory.get_mount_status()
        database = vrom.VectorDB(dim=4)
        database.insert([1.0, 0.0, 0.0, 0.0], {"id": 1})
        database.search([1.0, 0.0, 0.0, 0.0], k=1)
        assert (root.level, package.level) == (logging.ERROR, logging.INFO)
    finally:
        root.setLevel(saved[0])
        package.setLevel(saved[1])
