"""The PostgreSQL store's schema: a registry of namespaces, and one schema of tables per namespace.

Many vaults and collections share one database. Each lives in a *namespace*: a name (any text,
kept as data in ``vrom.namespaces``) mapped to a PostgreSQL schema ``vrom_ns_<number>``, so a
namespace's name never becomes SQL. The tables mirror the SQLite store's (`vrom.store.schema`):
documents, chunks (with a weighted ``tsvector`` for keyword search), links, tags, metadata
fields, vectors (the stored bytes, plus a pgvector copy an HNSW index searches), memories and
a meta table holding the schema version, the model fingerprint and the chunk strategy.

Text columns that are sorted or compared are ``COLLATE "C"``: paths, tags and ids order by
code point, as in SQLite and Python, whatever the database's locale.
"""

from __future__ import annotations

from collections.abc import Iterator

SCHEMA_VERSION = 2
"""The version of a namespace's tables this vrom writes; an older one is brought up to it
(`MIGRATIONS`), a newer one refused."""

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

TABLES = """
CREATE TABLE meta (
    key   text COLLATE "C" PRIMARY KEY,
    value text NOT NULL
);
CREATE SEQUENCE documents_id_seq;
CREATE SEQUENCE chunks_id_seq;
CREATE TABLE documents (
    id                    bigint PRIMARY KEY,
    path                  text COLLATE "C" NOT NULL UNIQUE,
    path_key              text COLLATE "C" NOT NULL,
    name_key              text COLLATE "C" NOT NULL,
    title                 text NOT NULL,
    frontmatter           text NOT NULL DEFAULT '{}',
    content_hash          text NOT NULL,
    mtime                 double precision NOT NULL,
    size                  bigint NOT NULL,
    human_relevance_score double precision NOT NULL,
    chunk_count           integer NOT NULL,
    chunk_strategy        text NOT NULL,
    indexed_at            double precision NOT NULL
);
CREATE INDEX documents_by_path_key ON documents(path_key);
CREATE INDEX documents_by_name_key ON documents(name_key);
CREATE TABLE document_texts (
    document_id bigint PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
    text        text NOT NULL
);
CREATE TABLE chunks (
    id           bigint PRIMARY KEY,
    document_id  bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    position     integer NOT NULL,
    heading_path text NOT NULL,
    text         text NOT NULL,
    char_start   integer NOT NULL,
    char_end     integer NOT NULL,
    prev_id      bigint,
    next_id      bigint,
    content_hash text NOT NULL,
    search       tsvector NOT NULL,
    UNIQUE (document_id, position)
);
CREATE INDEX chunks_content_hash ON chunks(content_hash);
CREATE INDEX chunks_search ON chunks USING gin(search);
CREATE TABLE links (
    document_id bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    kind        text NOT NULL CHECK (kind IN ('wikilink', 'embed', 'markdown')),
    target      text NOT NULL,
    target_key  text COLLATE "C" NOT NULL,
    heading     text,
    alias       text,
    position    integer NOT NULL
);
CREATE INDEX links_document ON links(document_id);
CREATE INDEX links_target_key ON links(target_key);
CREATE TABLE tags (
    document_id bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    tag         text COLLATE "C" NOT NULL,
    PRIMARY KEY (document_id, tag)
);
CREATE INDEX tags_tag ON tags(tag);
CREATE TABLE fields (
    document_id  bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    key          text COLLATE "C" NOT NULL,
    kind         text NOT NULL CHECK (kind IN ('text', 'number', 'bool')),
    text_value   text COLLATE "C",
    number_value numeric,
    instant      double precision
);
CREATE INDEX fields_text ON fields(key, kind, text_value);
CREATE INDEX fields_number ON fields(key, kind, number_value);
CREATE INDEX fields_instant ON fields(key, instant) WHERE instant IS NOT NULL;
CREATE INDEX fields_document ON fields(document_id);
CREATE TABLE vectors (
    chunk_id   bigint PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    data       bytea NOT NULL,
    embedding  vector NOT NULL,
    input_hash text
);
CREATE INDEX vectors_input_hash ON vectors(input_hash) WHERE input_hash IS NOT NULL;
CREATE TABLE vector_changes (
    seq bigint PRIMARY KEY,
    key bigint NOT NULL
);
CREATE TABLE memories (
    id            text COLLATE "C" PRIMARY KEY,
    key           bigint NOT NULL UNIQUE,
    created_unix  double precision NOT NULL,
    updated_unix  double precision NOT NULL,
    project       text COLLATE "C",
    type          text COLLATE "C" NOT NULL,
    title         text NOT NULL,
    content       text NOT NULL,
    tags          text NOT NULL DEFAULT '[]',
    related       text NOT NULL DEFAULT '[]',
    source        text,
    status        text COLLATE "C" NOT NULL DEFAULT 'active'
                  CHECK (status IN ('active', 'archived', 'superseded')),
    superseded_by text COLLATE "C" REFERENCES memories(id),
    search        tsvector NOT NULL,
    CHECK ((status = 'superseded') = (superseded_by IS NOT NULL))
);
CREATE INDEX memories_project ON memories(project);
CREATE INDEX memories_status ON memories(status);
CREATE INDEX memories_type ON memories(type);
CREATE INDEX memories_created ON memories(created_unix);
CREATE INDEX memories_search ON memories USING gin(search);
CREATE TABLE memory_vectors (
    key       bigint PRIMARY KEY REFERENCES memories(key) ON DELETE CASCADE,
    data      bytea NOT NULL,
    embedding vector NOT NULL
);
CREATE TABLE memory_vector_changes (
    seq bigint PRIMARY KEY,
    key bigint NOT NULL
);
"""

MIGRATIONS: dict[int, str] = {
    # 2: the hash of the text each vector was embedded from, as in the SQLite store's
    # migration 9 (`vrom.store.schema`): a vector is reused, or copied by a sync, only for the
    # same input. Vectors stored before have none and serve their own chunk only.
    2: """
    ALTER TABLE vectors ADD COLUMN input_hash text;
    CREATE INDEX vectors_input_hash ON vectors(input_hash) WHERE input_hash IS NOT NULL;
    """,
}
"""Migration N brings a namespace's tables from version N-1 to N (`TABLES` is the newest)."""

# What a sound namespace satisfies (foreign keys hold the rest): label -> SQL counting violations.
CONSISTENCY_CHECKS: dict[str, str] = {
    "notes whose chunk count is wrong": "SELECT count(*) FROM documents d WHERE d.chunk_count !="
    " (SELECT count(*) FROM chunks c WHERE c.document_id = d.id)",
    "chunks with broken prev/next links": "SELECT count(*) FROM chunks c WHERE"
    " (c.next_id IS NOT NULL AND NOT EXISTS"
    " (SELECT 1 FROM chunks n WHERE n.id = c.next_id AND n.prev_id = c.id))"
    " OR ((c.prev_id IS NULL) != (c.position = 0))",
    "chunks whose text is in no document text": "SELECT count(*) FROM chunks c WHERE c.text = ''"
    " AND c.char_end > c.char_start AND NOT EXISTS"
    " (SELECT 1 FROM document_texts t WHERE t.document_id = c.document_id)",
    "vectors of another size than the others": "SELECT count(*) FROM vectors"
    " WHERE vector_dims(embedding) != (SELECT vector_dims(embedding) FROM vectors LIMIT 1)",
    "superseded memories whose successor is missing": "SELECT count(*) FROM memories"
    " WHERE superseded_by IS NOT NULL AND superseded_by NOT IN (SELECT id FROM memories)",
}


def statements(script: str) -> Iterator[str]:
    """Yield the statements of a script of plain DDL (no ``;`` inside a statement)."""
    for statement in script.split(";"):
        if statement.strip():
            yield statement
