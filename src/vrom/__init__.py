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
from vrom.memories import Memory, MemoryHit
from vrom.results import (
    BackendInfo,
    Context,
    Hit,
    IndexSummary,
    IndexWarning,
    Link,
    MountStatus,
    Note,
    NoteRef,
    Related,
    SearchResult,
    SharedTags,
    SimilarNote,
    VaultStats,
    to_jsonable,
)
from vrom.search.context import format_context
from vrom.tools import SearchTool, ToolResult
from vrom.vault import Vault

__version__ = "0.1.0"

__all__ = [
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
    "NotFoundError",
    "Note",
    "NoteRef",
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


def __getattr__(name: str) -> object:
    """Return AgentMemory, VromCache, UnverifiedPackWarning or VectorDB, imported on first use:
    `import vrom` loads no numpy."""
    if name == "AgentMemory":
        from vrom.agent_memory import AgentMemory

        return AgentMemory
    if name == "VromCache":
        from vrom.packs.cache import VromCache

        return VromCache
    if name == "UnverifiedPackWarning":
        from vrom.packs.signing import UnverifiedPackWarning

        return UnverifiedPackWarning
    if name == "VectorDB":
        from vrom.vectordb import VectorDB

        return VectorDB
    raise AttributeError(f"module 'vrom' has no attribute {name!r}")
