"""The PostgreSQL store's schema: a registry of namespaces, and one schema of tables per namespace.

Many vaults and collections share one database. Each lives in a *namespace*: a name (any text,
kept as data in ``vrom.namespaces``) mapped to a PostgreSQL schema ``vrom_ns_<number>``, so a
namespace's name never becomes SQL. The tables mirror the SQLite store's (`vrom.store.schema`):
documents, chunks (with a weighted ``tsvector`` for keyword search), links, tags, metadata
fields, vectors (the stored bytes, plus a pgvector copy an HNSW index searches), memories and
a meta table holding the schema version, the model fingerprint and the chunk strategy. Named
migrations make them (`vrom.store.postgres_migrations`).

Text columns that are sorted or compared are ``COLLATE "C"``: paths, tags and ids order by
code point, as in SQLite and Python, whatever the database's locale.
"""

from __future__ import annotations

REGISTRY_SCHEMA = "vrom"
NAMESPACE_SCHEMA_PREFIX = "vrom_ns_"
TEXT_SEARCH_CONFIG = "vrom.english"
"""English stemming (Snowball) without a stop word list: every word is searchable, as with
SQLite's ``porter unicode61`` (``the`` is a word there too)."""
LOCK_CLASS = 0x76726F6D
"""The first key of vrom's advisory locks ('vrom'); the second is the namespace's number."""
REGISTRY_LOCK = 0
"""The second key of the lock that serialises creating the registry and namespaces."""

HNSW_M = 16
"""pgvector's HNSW ``m``: links per node, the same as the usearch graph's connectivity."""
HNSW_EF_CONSTRUCTION = 128
"""pgvector's HNSW ``ef_construction``: the same as the usearch graph's expansion on add."""
HNSW_EF_SEARCH = 128
"""The candidate list of an HNSW search unless a search asks for more: the same breadth as the
SQLite store's graph (`vrom.index.hnsw.EXPANSION_SEARCH`)."""
HNSW_MAX_EF_SEARCH = 1000
"""pgvector's largest ``hnsw.ef_search``."""

BOOTSTRAP = f"""
CREATE SCHEMA IF NOT EXISTS {REGISTRY_SCHEMA};
CREATE TABLE IF NOT EXISTS {REGISTRY_SCHEMA}.namespaces (
    id           serial PRIMARY KEY,
    name         text COLLATE "C" NOT NULL UNIQUE,
    created_unix double precision NOT NULL
);
"""

TEXT_SEARCH = f"""
CREATE TEXT SEARCH DICTIONARY {REGISTRY_SCHEMA}.english_stem (
    TEMPLATE = pg_catalog.snowball, LANGUAGE = english
);
CREATE TEXT SEARCH CONFIGURATION {TEXT_SEARCH_CONFIG} (COPY = pg_catalog.simple);
ALTER TEXT SEARCH CONFIGURATION {TEXT_SEARCH_CONFIG}
    ALTER MAPPING FOR asciiword, asciihword, hword_asciipart, word, hword, hword_part
    WITH {REGISTRY_SCHEMA}.english_stem;
"""

# What a sound namespace satisfies beyond `vrom.store.sql_store.CHECKS` (foreign keys hold the
# rest): label -> SQL counting violations.
CONSISTENCY_CHECKS: dict[str, str] = {
    "chunks whose text is in no document text": "SELECT count(*) FROM chunks c WHERE c.text = ''"
    " AND c.char_end > c.char_start AND NOT EXISTS"
    " (SELECT 1 FROM document_texts t WHERE t.document_id = c.document_id)",
    "vectors of another size than the others": "SELECT count(*) FROM vectors"
    " WHERE vector_dims(embedding) != (SELECT vector_dims(embedding) FROM vectors LIMIT 1)",
}
