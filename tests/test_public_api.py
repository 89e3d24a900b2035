"""The public surface: a pinned ``__all__`` and an import that stays light."""

from __future__ import annotations

import subprocess
import sys

import vrom


def test_exported_members_are_pinned() -> None:
    assert sorted(vrom.__all__) == sorted(
        [
            "AgentMemory",
            "AsyncCollection",
            "BackendInfo",
            "Collection",
            "Context",
            "Document",
            "Embedder",
            "Fingerprint",
            "Hit",
            "IndexSummary",
            "IndexWarning",
            "Link",
            "Memory",
            "MemoryHit",
            "ModelError",
            "MountStatus",
            "Note",
            "NoteRef",
            "NotFoundError",
            "PackError",
            "Related",
            "SearchResult",
            "SearchTool",
            "SharedTags",
            "SimilarNote",
            "StorageError",
            "ToolResult",
            "UnverifiedPackWarning",
            "ValidationError",
            "Vault",
            "VaultStats",
            "VectorDB",
            "VromCache",
            "VromError",
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
