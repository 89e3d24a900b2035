"""The store: the source of truth for documents, chunks, links, tags, vectors and memories.

Everything above this package talks to the roles in `vrom.store.roles` over the records in
`vrom.store.records`, and opens a store with `open_store`; nothing outside this package names a
backend class or runs SQL, so the PostgreSQL + pgvector backend sits beside SQLite without
changing the engines or the SDK. A store never imports from the layers above it.
"""

from vrom.filters import Condition
from vrom.store.factory import Location, database_file, open_store
from vrom.store.records import (
    MEMORY_FIELDS,
    MEMORY_STATUSES,
    MOST_FAILING,
    VECTOR_ENCODING_META_KEY,
    ChunkRecord,
    DocumentRecord,
    DocumentState,
    DocumentWrite,
    KeywordPostings,
    KeywordQuery,
    KeywordRow,
    LinkRecord,
    MemoryFilter,
    MemoryHead,
    MemoryKeywordCopy,
    MemoryKeywordRow,
    MemoryRecord,
    RankedMatches,
    Sidecar,
    StoredChunk,
    StoredDocument,
    StoreState,
    VectorChanges,
    Where,
    failing_windows,
)
from vrom.store.roles import (
    DocumentStore,
    KeywordPostingsSource,
    MemoryStore,
    NearestVectors,
    Store,
    VectorSource,
    VectorStore,
)
from vrom.store.storable import check_document, unstorable
from vrom.store.urls import is_server_url, is_url, mask_url

__all__ = [
    "MEMORY_FIELDS",
    "MEMORY_STATUSES",
    "MOST_FAILING",
    "VECTOR_ENCODING_META_KEY",
    "ChunkRecord",
    "Condition",
    "DocumentRecord",
    "DocumentState",
    "DocumentStore",
    "DocumentWrite",
    "KeywordPostings",
    "KeywordPostingsSource",
    "KeywordQuery",
    "KeywordRow",
    "LinkRecord",
    "Location",
    "MemoryFilter",
    "MemoryHead",
    "MemoryKeywordCopy",
    "MemoryKeywordRow",
    "MemoryRecord",
    "MemoryStore",
    "NearestVectors",
    "RankedMatches",
    "Sidecar",
    "Store",
    "StoreState",
    "StoredChunk",
    "StoredDocument",
    "VectorChanges",
    "VectorSource",
    "VectorStore",
    "Where",
    "check_document",
    "database_file",
    "failing_windows",
    "is_server_url",
    "is_url",
    "mask_url",
    "open_store",
    "unstorable",
]
