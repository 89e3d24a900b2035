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

from typing import TYPE_CHECKING

from vrom.collection import AsyncCollection, Collection
from vrom.documents import Document
from vrom.embed import Embedder, Fingerprint
from vrom.errors import (
    ModelError,
    NotFoundError,
    PackError,
    StorageError,
    ValidationError,
    VromError,
)
from vrom.memories import Memories, Memory, MemoryHit, MemoryStats
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
from vrom.search.context import format_context
from vrom.tools import SearchTool, ToolResult
from vrom.vault import Vault

if TYPE_CHECKING:  # imported on first use (`__getattr__`); named here for type checkers
    from vrom.agent_memory import AgentMemory
    from vrom.pack import Pack
    from vrom.packs.cache_folders import StorageEstimate
    from vrom.packs.manifest import RegistryEntry
    from vrom.packs.signing import UnverifiedPackWarning
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


def __getattr__(name: str) -> object:
    """Return AgentMemory and Pack (with the packs' RegistryEntry and StorageEstimate),
    UnverifiedPackWarning or VectorDB (with its Neighbor and VectorDBStats), imported on
    first use: `import vrom` loads no numpy and no pack machinery."""
    if name == "AgentMemory":
        from vrom.agent_memory import AgentMemory

        return AgentMemory
    if name == "Pack":
        from vrom.pack import Pack

        return Pack
    if name == "UnverifiedPackWarning":
        from vrom.packs.signing import UnverifiedPackWarning

        return UnverifiedPackWarning
    if name == "RegistryEntry":
        from vrom.packs.manifest import RegistryEntry

        return RegistryEntry
    if name == "StorageEstimate":
        from vrom.packs.cache_folders import StorageEstimate

        return StorageEstimate
    if name in ("VectorDB", "Neighbor", "VectorDBStats"):
        from vrom import vectordb

        return getattr(vectordb, name)
    raise AttributeError(f"module 'vrom' has no attribute {name!r}")
