"""vrom: local-first memory for AI agents.

Index a folder of Markdown notes into a local SQLite store and search it with exact provenance::

    from vrom import Vault

    with Vault.open("~/notes") as vault:
        vault.index()
        for hit in vault.search("install plugins", k=5):
            print(hit.path, hit.heading_path, hit.score)

Or keep documents for an agent in a collection::

    from vrom import Collection

    docs = Collection.open("handbook", storage="~/agent-memory")
    docs.add([{"id": "leave", "text": "Annual leave is 25 days a year."}])
    docs.search("how many days off", k=3)
"""

import importlib
from typing import TYPE_CHECKING

from vrom.documents import Document
from vrom.embed import Embedder, Fingerprint
from vrom.embed.rerank import Reranker
from vrom.errors import (
    ModelError,
    NotFoundError,
    PackError,
    StorageError,
    ValidationError,
    VromError,
)
from vrom.results import (
    BackendInfo,
    Context,
    DeleteResult,
    ExportSummary,
    FolderListing,
    FormatReport,
    Hit,
    IndexSummary,
    IndexWarning,
    Link,
    MountStatus,
    Note,
    NoteRef,
    Related,
    SearchReport,
    SearchResult,
    SharedTags,
    SimilarNote,
    SyncSummary,
    TagCount,
    VaultStats,
    VectorInfo,
    WriteResult,
    to_jsonable,
)
from vrom.tools import SearchTool, ToolResult

if TYPE_CHECKING:  # imported on first use (`__getattr__`); named here for type checkers
    from vrom.agent_memory import AgentMemory
    from vrom.collection import AsyncCollection, Collection
    from vrom.memories import Memories, Memory, MemoryHit, MemoryStats
    from vrom.pack import Pack
    from vrom.packs.cache_folders import StorageEstimate
    from vrom.packs.manifest import RegistryEntry
    from vrom.packs.signing import UnverifiedPackWarning
    from vrom.search.context import format_context
    from vrom.vault import Vault
    from vrom.vectordb import Neighbor, VectorDB, VectorDBStats

__version__ = "0.1.0"

__all__ = [
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


_ON_FIRST_USE = {
    "AgentMemory": "vrom.agent_memory",
    "AsyncCollection": "vrom.collection",
    "Collection": "vrom.collection",
    "Memories": "vrom.memories",
    "Memory": "vrom.memories",
    "MemoryHit": "vrom.memories",
    "MemoryStats": "vrom.memories",
    "Neighbor": "vrom.vectordb",
    "Pack": "vrom.pack",
    "RegistryEntry": "vrom.packs.manifest",
    "StorageEstimate": "vrom.packs.cache_folders",
    "UnverifiedPackWarning": "vrom.packs.signing",
    "Vault": "vrom.vault",
    "VectorDB": "vrom.vectordb",
    "VectorDBStats": "vrom.vectordb",
    "format_context": "vrom.search.context",
}
"""The names imported on first use, and their modules: the facades and what only they need
(the store, the search engines, YAML, numpy, the pack machinery), so `import vrom` for its
results, errors or one facade does not load the others (issue 29: ~270 ms of CPU, most of
a CLI search)."""


def __getattr__(name: str) -> object:
    """Return a facade (`Vault`, `Collection`, `Memories`, `AgentMemory`, `VectorDB`, `Pack`)
    or a type only one of them needs, imported on first use (`_ON_FIRST_USE`)."""
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module 'vrom' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
