"""The PostgreSQL store's named schema migrations (`vrom.store.migration` runs them).

A namespace's tables (`vrom.store.postgres_schema` describes them) are what ``m001``, ``m002``...
made of them. A new namespace runs every migration; one an older vrom made runs those it lacks,
in one transaction holding the namespace's write lock (`PgDatabase` takes it), so two processes
opening an old namespace at once upgrade it once: the second waits, then finds the new version.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg

from vrom.store.migration import Migration, checked
from vrom.store.postgres_query import field_rows

Connection = psycopg.Connection[Any]


def _exact_numbers(conn: Connection) -> None:
    """Store the numbers of ``where`` filters as ``numeric`` in a namespace made by the first
    PostgreSQL store (its schema 1 kept them as ``double precision``, which rounds integers
    past 2**53 and decimals past 15 digits), read again from each document's metadata."""
    column = conn.execute(
        "SELECT data_type FROM information_schema.columns WHERE table_schema = current_schema()"
        " AND table_name = 'fields' AND column_name = 'number_value'"
    ).fetchone()
    if column is None or column[0] == "numeric":
        return
    conn.execute("ALTER TABLE fields ALTER COLUMN number_value TYPE numeric")
    documents = conn.execute(
        "SELECT id, frontmatter FROM documents d"
        " WHERE EXISTS (SELECT 1 FROM fields f WHERE f.document_id = d.id AND f.kind = 'number')"
    ).fetchall()
    rows = [
        (document_id, *row)
        for document_id, frontmatter in documents
        for row in field_rows(json.loads(frontmatter))
    ]
    conn.execute("DELETE FROM fields WHERE document_id = ANY(%s)", ([d for d, _ in documents],))
    with conn.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO fields(document_id, key, kind, text_value, number_value, instant)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            rows,
        )


MIGRATIONS: tuple[Migration, ...] = checked(
    # a namespace's documents, chunks (a weighted tsvector each), links, tags, metadata fields,
    # vectors (the stored bytes and a pgvector copy), their change log, memories and meta
    Migration(
        "m001_namespace_tables",
        """
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
        chunk_id  bigint PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
        data      bytea NOT NULL,
        embedding vector NOT NULL
    );
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
    """,
    ),
    # the hash of the text each vector was embedded from, as in the SQLite store's
    # m009_vector_input_hash: a vector is reused, or copied by a sync, only for the same input;
    # vectors stored before have none and serve their own chunk only. A namespace of the first
    # schema 1 gets its numbers exact too (`_exact_numbers`).
    Migration(
        "m002_vector_input_hash",
        """
    ALTER TABLE vectors ADD COLUMN input_hash text;
    CREATE INDEX vectors_input_hash ON vectors(input_hash) WHERE input_hash IS NOT NULL;
    """,
        then=_exact_numbers,
    ),
    # recall keeps the keys of memories failing its status filter until a write counts a status
    # write (`vrom.store.sql_memories.SqlMemories.keys_failing`); a vrom from before does not
    # count them, so the version moves on and such a writer refuses the namespace rather than
    # leave another process recalling an archived memory
    Migration(
        "m003_memory_status_writes",
        "INSERT INTO meta(key, value) VALUES ('memory_status_writes', '1') ON CONFLICT DO NOTHING",
    ),
)

HAS_META = "SELECT to_regclass('meta') IS NOT NULL"
"""Whether the namespace first on the search path has its tables (`vrom.store.migration`)."""
SCHEMA_VERSION = MIGRATIONS[-1].version
"""The version of a namespace's tables this vrom writes; an older one is upgraded, a newer one
refused."""
