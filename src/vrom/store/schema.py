"""The SQLite store's named schema migrations (`vrom.store.migration`), and its consistency checks.

``m00N_...`` brings a store from version N-1 to N; `vrom.store.sqlite_database.Database` runs
the ones a store lacks in one transaction together with the ``schema_version`` update in
``meta``, so a crash leaves the store at its old version or the new, never between.
"""

from __future__ import annotations

import sqlite3

from vrom.store.migration import Migration, checked

FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"


def _chunk_strategy_column(conn: sqlite3.Connection) -> None:
    """Give the notes of a store made by the first vrom (whose schema 1 had no
    ``documents.chunk_strategy``) an empty strategy, which no chunker has: the next index
    chunks them again and records the strategy, as for a store of another strategy."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(documents)")}
    if "chunk_strategy" not in columns:
        conn.execute("ALTER TABLE documents ADD COLUMN chunk_strategy TEXT NOT NULL DEFAULT ''")


def _change_log(vectors: str, key: str, log: str) -> str:
    """Return the DDL of ``log``, the table of ``vectors``' changes, and of the triggers that
    add the ``key`` of each row added, removed or replaced to it."""
    return f"""
    CREATE TABLE {log} (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        {key} INTEGER NOT NULL
    );
    CREATE TRIGGER {vectors}_added AFTER INSERT ON {vectors}
        BEGIN INSERT INTO {log}({key}) VALUES (new.{key}); END;
    CREATE TRIGGER {vectors}_removed AFTER DELETE ON {vectors}
        BEGIN INSERT INTO {log}({key}) VALUES (old.{key}); END;
    CREATE TRIGGER {vectors}_replaced AFTER UPDATE ON {vectors}
        BEGIN INSERT INTO {log}({key}) VALUES (new.{key}); END;
    """


def _field_values_view(nested: str) -> str:
    """Return the DDL of the view of each document's scalar frontmatter values (a list field's
    items one by one), and those the ``UNION ALL`` parts ``nested`` add."""
    return f"""
    CREATE VIEW field_values AS
        SELECT document_id, key,
            CASE type WHEN 'text' THEN 'text' WHEN 'integer' THEN 'number'
                WHEN 'real' THEN 'number' ELSE 'bool' END AS kind,
            CASE type WHEN 'true' THEN 1 WHEN 'false' THEN 0 ELSE atom END AS value
        FROM (
            SELECT d.id AS document_id, f.key AS key, f.type AS type, f.atom AS atom
            FROM documents d, json_each(d.frontmatter) f
            WHERE f.type NOT IN ('object', 'array', 'null')
            UNION ALL
            SELECT d.id, f.key, e.type, e.atom
            FROM documents d, json_each(d.frontmatter) f, json_each(f.value) e
            WHERE f.type = 'array' AND e.type NOT IN ('object', 'array', 'null'){nested}
        )"""


MIGRATIONS: tuple[Migration, ...] = checked(
    # 1: notes, chunks, links, tags, keyword index
    Migration(
        "m001_notes",
        f"""
    CREATE TABLE IF NOT EXISTS meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    CREATE TABLE documents (
        id                    INTEGER PRIMARY KEY AUTOINCREMENT,
        path                  TEXT NOT NULL UNIQUE,
        path_key              TEXT NOT NULL,
        name_key              TEXT NOT NULL,
        title                 TEXT NOT NULL,
        frontmatter           TEXT NOT NULL DEFAULT '{{}}',
        content_hash          TEXT NOT NULL,
        mtime                 REAL NOT NULL,
        size                  INTEGER NOT NULL,
        human_relevance_score REAL NOT NULL,
        chunk_count           INTEGER NOT NULL,
        chunk_strategy        TEXT NOT NULL,
        indexed_at            REAL NOT NULL
    );
    CREATE INDEX documents_path_key ON documents(path_key);
    CREATE INDEX documents_name_key ON documents(name_key);
    CREATE TABLE chunks (
        id           INTEGER PRIMARY KEY AUTOINCREMENT,
        document_id  INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
        position     INTEGER NOT NULL,
        heading_path TEXT NOT NULL,
        text         TEXT NOT NULL,
        char_start   INTEGER NOT NULL,
        char_end     INTEGER NOT NULL,
        prev_id      INTEGER,
        next_id      INTEGER,
        content_hash TEXT NOT NULL,
        metadata     TEXT NOT NULL DEFAULT '{{}}',
        UNIQUE (document_id, position)
    );
    CREATE INDEX chunks_content_hash ON chunks(content_hash);
    CREATE TABLE links (
        document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
        kind        TEXT NOT NULL CHECK (kind IN ('wikilink', 'embed', 'markdown')),
        target      TEXT NOT NULL,
        target_key  TEXT NOT NULL,
        heading     TEXT,
        alias       TEXT,
        position    INTEGER NOT NULL
    );
    CREATE INDEX links_document ON links(document_id);
    CREATE INDEX links_target_key ON links(target_key);
    CREATE TABLE tags (
        document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
        tag         TEXT NOT NULL,
        PRIMARY KEY (document_id, tag)
    ) WITHOUT ROWID;
    CREATE INDEX tags_tag ON tags(tag);
    CREATE VIRTUAL TABLE chunks_fts USING fts5(
        title, heading_path, body, tokenize = '{FTS_TOKENIZER}'
    );
    """,
    ),
    # 2: one embedding per chunk (float32 bytes); meta holds the embedder's fingerprint (and
    # the first stores' notes get the chunk strategy column 1 has had since)
    Migration(
        "m002_vectors",
        """
    CREATE TABLE vectors (
        chunk_id INTEGER PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
        data     BLOB NOT NULL
    );
    """,
        then=_chunk_strategy_column,
    ),
    # 3: a log of the chunks whose vector was added, replaced or removed, so an in-memory or
    # cached vector index catches up with a few changes instead of being rebuilt. Triggers keep
    # it, so no write path can forget to; old entries are pruned (a reader that fell further
    # behind rebuilds).
    Migration(
        "m003_vector_changes",
        _change_log("vectors", "chunk_id", "vector_changes"),
    ),
    # 4: the scalar values of each document's frontmatter/metadata (a list field's items one by
    # one), indexed, so a `where` filter is a few index lookups instead of parsing the JSON of
    # every document. ``kind`` keeps JSON's types apart (true is not 1, "5" is not 5). Triggers
    # keep it in step with ``documents.frontmatter``; existing stores are filled here.
    Migration(
        "m004_fields",
        """
    CREATE TABLE fields (
        key         TEXT NOT NULL,
        kind        TEXT NOT NULL CHECK (kind IN ('text', 'number', 'bool')),
        value       NOT NULL,
        document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
        PRIMARY KEY (key, kind, value, document_id)
    ) WITHOUT ROWID;
    CREATE INDEX fields_document ON fields(document_id);
    """
        + _field_values_view("")
        + """;
    INSERT OR IGNORE INTO fields(key, kind, value, document_id)
        SELECT key, kind, value, document_id FROM field_values;
    CREATE TRIGGER documents_fields_added AFTER INSERT ON documents BEGIN
        INSERT OR IGNORE INTO fields(key, kind, value, document_id)
        SELECT key, kind, value, document_id FROM field_values WHERE document_id = new.id;
    END;
    CREATE TRIGGER documents_fields_changed AFTER UPDATE OF frontmatter ON documents BEGIN
        DELETE FROM fields WHERE document_id = new.id;
        INSERT OR IGNORE INTO fields(key, kind, value, document_id)
        SELECT key, kind, value, document_id FROM field_values WHERE document_id = new.id;
    END;
    CREATE TRIGGER documents_fields_removed AFTER DELETE ON documents BEGIN
        DELETE FROM fields WHERE document_id = old.id;
    END;
    """,
    ),
    # 5: agent memories, searched like chunks: a keyword index over title, content and tags, and
    # one float32 vector each (the embedder's fingerprint is in meta under
    # ``memory_embedding_fingerprint``). The keyword index names its memory in an unindexed
    # column rather than by rowid, since VACUUM may renumber the rowids of a table whose key is
    # text. The store writes that index itself (CJK text is segmented first); a trigger removes
    # a memory's entry with it.
    Migration(
        "m005_memories",
        f"""
    CREATE TABLE memories (
        id            TEXT PRIMARY KEY,
        created_unix  REAL NOT NULL,
        updated_unix  REAL NOT NULL,
        project       TEXT,
        type          TEXT NOT NULL,
        title         TEXT NOT NULL,
        content       TEXT NOT NULL,
        tags          TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(tags)),
        related       TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(related)),
        source        TEXT,
        status        TEXT NOT NULL DEFAULT 'active'
                      CHECK (status IN ('active', 'archived', 'superseded')),
        superseded_by TEXT REFERENCES memories(id),
        CHECK ((status = 'superseded') = (superseded_by IS NOT NULL))
    );
    CREATE INDEX memories_project ON memories(project);
    CREATE INDEX memories_status ON memories(status);
    CREATE INDEX memories_type ON memories(type);
    CREATE INDEX memories_created ON memories(created_unix);
    CREATE VIRTUAL TABLE memories_fts USING fts5(
        memory_id UNINDEXED, title, content, tags, tokenize = '{FTS_TOKENIZER}'
    );
    CREATE TRIGGER memories_removed AFTER DELETE ON memories BEGIN
        DELETE FROM memories_fts WHERE memory_id = old.id;
    END;
    CREATE TABLE memory_vectors (
        memory_id TEXT PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,
        data      BLOB NOT NULL
    );
    """,
    ),
    # 6: memory vectors are searched by the same vector indexes as chunk vectors, which key
    # rows by integer and catch up by replaying a change log: each memory gets an integer
    # ``key`` (unique, never reused while the memory exists), its vector is stored under it,
    # and triggers log every change as for chunks. ``chunks.metadata`` goes: it was always
    # '{}' (a collection document's metadata lives on the document).
    Migration(
        "m006_memory_vector_keys",
        """
    ALTER TABLE chunks DROP COLUMN metadata;
    ALTER TABLE memories ADD COLUMN key INTEGER;
    UPDATE memories SET key = rowid;
    CREATE UNIQUE INDEX memories_key ON memories(key);
    CREATE TABLE memory_vectors_by_key (
        key  INTEGER PRIMARY KEY REFERENCES memories(key) ON DELETE CASCADE,
        data BLOB NOT NULL
    );
    INSERT INTO memory_vectors_by_key(key, data)
        SELECT m.key, v.data FROM memory_vectors v JOIN memories m ON m.id = v.memory_id;
    DROP TABLE memory_vectors;
    ALTER TABLE memory_vectors_by_key RENAME TO memory_vectors;
    """
        + _change_log("memory_vectors", "key", "memory_vector_changes"),
    ),
    # 7: a `where` reaches one level into frontmatter (OKF's ``generated.by``,
    # ``verified.at``, ``sources.resource``): the members of a mapping, and of the mappings in
    # a list, are fields named ``key.member`` (their list items one by one, as for a list
    # field). The triggers read the view by name, so they follow it. A vault note whose
    # ``status`` is deprecated or superseded gets the halved human-relevance score indexing now
    # gives it (`vrom.ingest.relevance`), so a store indexed before ranks it the same.
    Migration(
        "m007_nested_fields",
        "DROP VIEW field_values;"
        + _field_values_view(
            """
            UNION ALL
            SELECT d.id, f.key || '.' || m.key, m.type, m.atom
            FROM documents d, json_each(d.frontmatter) f, json_each(f.value) m
            WHERE f.type = 'object' AND m.type NOT IN ('object', 'array', 'null')
            UNION ALL
            SELECT d.id, f.key || '.' || m.key, e.type, e.atom
            FROM documents d, json_each(d.frontmatter) f, json_each(f.value) m,
                json_each(m.value) e
            WHERE f.type = 'object' AND m.type = 'array'
                AND e.type NOT IN ('object', 'array', 'null')
            UNION ALL
            SELECT d.id, f.key || '.' || m.key, m.type, m.atom
            FROM documents d, json_each(d.frontmatter) f, json_each(f.value) i,
                json_each(i.value) m
            WHERE f.type = 'array' AND i.type = 'object'
                AND m.type NOT IN ('object', 'array', 'null')"""
        )
        + """;
    DELETE FROM fields;
    INSERT OR IGNORE INTO fields(key, kind, value, document_id)
        SELECT key, kind, value, document_id FROM field_values;
    UPDATE documents SET human_relevance_score = human_relevance_score * 0.5
        WHERE lower(trim(json_extract(frontmatter, '$.status'))) IN ('deprecated', 'superseded')
            AND EXISTS (SELECT 1 FROM meta WHERE key = 'vault_root');
    """,
    ),
    # 8: the whole text of a document the store is the only copy of (a collection's; a vault's
    # notes live in their files), as it was added. Such a document's chunks keep no text of
    # their own (``chunks.text`` is ''): a chunk's text is the slice ``char_start:char_end`` of
    # its document's, so a long document is stored once instead of as overlapping chunks.
    Migration(
        "m008_document_texts",
        """
    CREATE TABLE document_texts (
        document_id INTEGER PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
        text        TEXT NOT NULL
    );
    """,
    ),
    # 9: the hash of the text each vector was embedded from (its chunk's text with the title,
    # heading path, date and turns the recipe puts before it). A vector is reused for another
    # chunk, or copied by a sync, only for the same input: reused by the chunk's text alone,
    # a note with another's body, or renamed, kept a vector embedded with another title.
    # Vectors stored before have none (NULL) and serve their own chunk only.
    Migration(
        "m009_vector_input_hash",
        """
    ALTER TABLE vectors ADD COLUMN input_hash TEXT;
    CREATE INDEX vectors_input_hash ON vectors(input_hash) WHERE input_hash IS NOT NULL;
    """,
    ),
    # 10: a document's fields are written by the store with the document
    # (`vrom.store.sqlite_documents.field_rows`, the rows of ``field_values`` in its order), not
    # by triggers reading the view: its five JSON scans of the frontmatter were most of the cost
    # of writing a document. The view stays, the consistency check compares the two, and the
    # trigger deleting a document's fields with it stays.
    Migration(
        "m010_fields_written_by_the_store",
        """
    DROP TRIGGER IF EXISTS documents_fields_added;
    DROP TRIGGER IF EXISTS documents_fields_changed;
    """,
    ),
)

SCHEMA_VERSION = MIGRATIONS[-1].version
READABLE_SCHEMAS = range(5, SCHEMA_VERSION + 1)
"""Schemas a store opened read-only (a knowledge pack) may have: 6 only dropped what packs never
read (an always-empty chunk column) and changed memory tables, which packs do not use; 7 only
added nested frontmatter fields, which a `where` on an older pack does not find; before 8 every
chunk keeps its own text (`vrom.store.sqlite_rows.chunk_columns` reads either); 9 only added
what a writer reuses vectors by; 10 only dropped the triggers writing fields."""

# What a sound store satisfies beyond PRAGMA integrity_check and `vrom.store.sql_store.CHECKS`:
# label -> SQL counting violations.
CONSISTENCY_CHECKS: dict[str, str] = {
    "chunks without a note": "SELECT count(*) FROM chunks c WHERE NOT EXISTS"
    " (SELECT 1 FROM documents d WHERE d.id = c.document_id)",
    "chunks missing from the keyword index": "SELECT count(*) FROM chunks c WHERE NOT EXISTS"
    " (SELECT 1 FROM chunks_fts f WHERE f.rowid = c.id)",
    "keyword index rows without a chunk": "SELECT count(*) FROM chunks_fts f WHERE NOT EXISTS"
    " (SELECT 1 FROM chunks c WHERE c.id = f.rowid)",
    "links without a note": "SELECT count(*) FROM links l WHERE NOT EXISTS"
    " (SELECT 1 FROM documents d WHERE d.id = l.document_id)",
    "tags without a note": "SELECT count(*) FROM tags t WHERE NOT EXISTS"
    " (SELECT 1 FROM documents d WHERE d.id = t.document_id)",
    "field values out of step with the notes' frontmatter": "SELECT (SELECT count(*) FROM"
    " (SELECT key, kind, value, document_id FROM field_values EXCEPT"
    " SELECT key, kind, value, document_id FROM fields)) + (SELECT count(*) FROM"
    " (SELECT key, kind, value, document_id FROM fields EXCEPT"
    " SELECT key, kind, value, document_id FROM field_values))",
    "chunks whose text is in no document text": "SELECT count(*) FROM chunks c WHERE c.text = ''"
    " AND NOT EXISTS (SELECT 1 FROM document_texts t WHERE t.document_id = c.document_id)",
    "document texts without a document": "SELECT count(*) FROM document_texts t WHERE NOT EXISTS"
    " (SELECT 1 FROM documents d WHERE d.id = t.document_id)",
    "vectors without a chunk": "SELECT count(*) FROM vectors v WHERE NOT EXISTS"
    " (SELECT 1 FROM chunks c WHERE c.id = v.chunk_id)",
    # NOT IN builds one temporary index, where NOT EXISTS would scan the keyword index per row
    "memories missing from the memory keyword index": "SELECT count(*) FROM memories"
    " WHERE id NOT IN (SELECT memory_id FROM memories_fts)",
    "memory keyword index rows without a memory": "SELECT count(*) FROM memories_fts"
    " WHERE memory_id NOT IN (SELECT id FROM memories)",
    "memories indexed more than once": "SELECT count(*) - count(DISTINCT memory_id)"
    " FROM memories_fts",
    "memory vectors without a memory": "SELECT count(*) FROM memory_vectors"
    " WHERE key NOT IN (SELECT key FROM memories WHERE key IS NOT NULL)",
    "memories without a key": "SELECT count(*) FROM memories WHERE key IS NULL",
}
