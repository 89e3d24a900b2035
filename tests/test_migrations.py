"""Named migrations on both backends: a store of any schema version that shipped opens upgraded
to the current one, with its data and the schema a new store has; two processes opening an old
store at once upgrade it once; a newer schema is refused (tests/test_store.py,
tests/test_postgres_store.py).

The old stores are fixtures written by the vrom that shipped them
(tests/fixtures/make_old_stores.py: ``git archive REV src``, then ``pg_dump`` or ``iterdump``).
PostgreSQL's schema 1 shipped twice: 0fed84a, the first, kept metadata numbers as ``double
precision``; 1385164, the last before schema 2, as ``numeric``. So did SQLite's: 1e81c1b's had
no ``documents.chunk_strategy``, 676b3c9's is what `m001_notes` makes.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fixtures.make_old_stores import MEMORY, NOTES
from postgres_server import namespace_for, open_vault
from psycopg import sql

import vrom
from vrom import Embedder
from vrom.memories import Memories
from vrom.store import open_store, postgres_migrations, schema
from vrom.store.migration import Migration, checked
from vrom.store.postgres_schema import LOCK_CLASS

FIXTURES = Path(__file__).parent / "fixtures"
SHIPPED_SCHEMA_1 = ("0fed84a", "1385164")
BIG = 9007199254740993
"""A frontmatter number ``double precision`` cannot hold (2**53 + 1)."""


@pytest.fixture
def namespace(request: pytest.FixtureRequest) -> str:
    return namespace_for(request.node.name)


def write_notes(root: Path) -> Path:
    for name, text in NOTES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def namespace_number(url: str, namespace: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT id FROM vrom.namespaces WHERE name = %s", (namespace,))
        number = row.fetchone()
        assert number is not None
        return int(number[0])


def load_old_namespace(url: str, namespace: str, rev: str) -> int:
    """Put the namespace the vrom of ``rev`` wrote (its fixture) under ``namespace``; return its
    number."""
    open_store(url, namespace=namespace).close()  # the registry, and a number for the namespace
    number = namespace_number(url, namespace)
    dump = (FIXTURES / f"postgres_schema1_{rev}.sql").read_text(encoding="utf-8")
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(f"vrom_ns_{number}")))
        conn.execute(re.sub(r"\bvrom_ns_\d+\b", f"vrom_ns_{number}", dump).encode())
    return number


def stored_version(url: str, number: int) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            sql.SQL("SELECT value FROM {}.meta WHERE key = 'schema_version'").format(
                sql.Identifier(f"vrom_ns_{number}")
            )
        ).fetchone()
        assert row is not None
        return int(row[0])


def postgres_catalog(url: str, number: int) -> dict[str, list[tuple[Any, ...]]]:
    """Return a namespace's tables, columns, indexes and constraints, its schema's name taken
    out, so two namespaces compare."""
    schema = f"vrom_ns_{number}"
    with psycopg.connect(url, autocommit=True) as conn:
        columns = conn.execute(
            "SELECT c.relname, c.relkind, a.attname, format_type(a.atttypid, a.atttypmod),"
            " a.attnotnull, pg_get_expr(d.adbin, d.adrelid), co.collname"
            " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
            " LEFT JOIN pg_collation co ON co.oid = a.attcollation AND co.collname != 'default'"
            " WHERE n.nspname = %s AND a.attnum > 0 AND NOT a.attisdropped"
            " AND c.relkind IN ('r', 'S') ORDER BY c.relname, a.attnum",
            (schema,),
        ).fetchall()
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s ORDER BY 1",
            (schema,),
        ).fetchall()
        constraints = conn.execute(
            "SELECT c.relname, k.conname, pg_get_constraintdef(k.oid) FROM pg_constraint k"
            " JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s ORDER BY 1, 2",
            (schema,),
        ).fetchall()
    found = {"columns": columns, "indexes": indexes, "constraints": constraints}
    return {
        part: [tuple(str(v).replace(schema, "NS") for v in row) for row in rows]
        for part, rows in found.items()
    }


@pytest.mark.parametrize("rev", SHIPPED_SCHEMA_1)
def test_a_postgres_namespace_of_every_shipped_schema_is_upgraded(
    rev: str, postgres_url: str, namespace: str, tmp_path: Path
) -> None:
    """A namespace written by each vrom that shipped PostgreSQL schema 1 opens at the current
    schema with its notes, vectors and memories: keyword, vector and filtered search find the
    notes, recall finds the memory, its numbers filter exactly, and it stays sound as it grows."""
    number = load_old_namespace(postgres_url, namespace, rev)
    root = write_notes(tmp_path / "vault")
    with open_vault(root, open_store(postgres_url, namespace=namespace), Embedder.fake(16)) as v:
        assert stored_version(postgres_url, number) == postgres_migrations.SCHEMA_VERSION == 3
        assert v.store.integrity_problems() == []
        assert {h.path for h in v.search("kelp", k=10, mode="keyword")} == set(NOTES)
        nearest = v.search("Otters sleep floating on kelp beds, holding paws", mode="vector")
        assert nearest[0].path == "otters.md"
        assert [h.path for h in v.search("kelp", k=5, where={"rank": BIG})] == ["otters.md"]
        assert v.search("kelp", k=5, where={"rank": BIG - 1}) == [], "numbers exact (numeric)"
        assert {h.path for h in v.search("kelp", where={"source.by": "diver"})} == {"Kelp.md"}
        assert [m.memory.title for m in Memories(v.corpus).recall("wrap sleep")] == [MEMORY[0]]
        (root / "seals.md").write_text("# Seals\n\nSeals haul out near the kelp.\n")
        assert v.index().added == 1
        Memories(v.corpus).remember("Seal habits", "Seals rest on rocks.", source="chat-1")
        assert v.search("seals haul", k=1, mode="hybrid")[0].path == "seals.md"
        assert v.store.integrity_problems() == []


@pytest.mark.parametrize("rev", SHIPPED_SCHEMA_1)
def test_an_upgraded_postgres_namespace_has_the_tables_of_a_new_one(
    rev: str, postgres_url: str, namespace: str, tmp_path: Path
) -> None:
    """Upgrading builds what creating builds: the same columns (types, collations, defaults),
    indexes and constraints as a namespace today's vrom makes and fills with the same notes."""
    old = load_old_namespace(postgres_url, namespace, rev)
    root = write_notes(tmp_path / "vault")
    open_store(postgres_url, namespace=namespace).close()
    with open_vault(
        root, open_store(postgres_url, namespace=f"{namespace} new"), Embedder.fake(16)
    ) as fresh:
        fresh.index()
        Memories(fresh.corpus).remember(*MEMORY, project="sea", source="chat-1")
        assert Memories(fresh.corpus).recall("wrap sleep")
    new = namespace_number(postgres_url, f"{namespace} new")
    assert postgres_catalog(postgres_url, old) == postgres_catalog(postgres_url, new)


OPENER = """
import sys
from vrom.store import open_store
store = open_store(sys.argv[1], namespace=sys.argv[2])
print(store.get_meta("schema_version"))
store.close()
"""


def test_two_processes_opening_an_old_postgres_namespace_upgrade_it_once(
    postgres_url: str, namespace: str
) -> None:
    """Two processes opening a schema 1 namespace at once both wait for its write lock (a
    writer holds it here); once it is free, one upgrades and the other finds schema 2 (a second
    upgrade would fail: its column exists), and both open it."""
    number = load_old_namespace(postgres_url, namespace, "1385164")
    source = str(Path(vrom.__file__).parents[1])
    with psycopg.connect(postgres_url, autocommit=True) as writer:
        writer.execute("SELECT pg_advisory_lock(%s, %s)", (LOCK_CLASS, number))
        openers = [
            subprocess.Popen(
                [sys.executable, "-c", OPENER, postgres_url, namespace],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={"PYTHONPATH": source, "PATH": "/usr/bin:/bin"},
            )
            for _ in range(2)
        ]
        try:
            waiting = 0
            deadline = time.monotonic() + 120
            while waiting < 2 and time.monotonic() < deadline:
                if any(p.poll() is not None for p in openers):
                    break  # one finished without waiting for the lock
                row = writer.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                    " AND classid = %s AND objid = %s",
                    (LOCK_CLASS, number),
                ).fetchone()
                waiting = int(row[0]) if row else 0
                time.sleep(0.05)
            assert waiting == 2, "both openers wait for the namespace's write lock"
            assert stored_version(postgres_url, number) == 1
        finally:
            writer.execute("SELECT pg_advisory_unlock(%s, %s)", (LOCK_CLASS, number))
            results = [p.communicate(timeout=120) for p in openers]
    assert [(p.returncode, out.strip()) for p, (out, _) in zip(openers, results, strict=True)] == [
        (0, "3"),
        (0, "3"),
    ], [err for _, err in results]
    assert stored_version(postgres_url, number) == 3


def sqlite_schema(path: Path) -> list[tuple[str, str, str, str | None]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
        ).fetchall()
    finally:
        conn.close()


def test_a_sqlite_store_upgraded_from_schema_1_has_the_schema_of_a_new_one(
    tmp_path: Path,
) -> None:
    """A store the vrom of 676b3c9 wrote (schema 1 as `m001_notes` makes it), upgraded through every named migration, has the sqlite_master of a store created today,
    and its notes are found and it stays sound as it grows."""
    old = tmp_path / "old.db"
    raw = sqlite3.connect(old)
    raw.executescript((FIXTURES / "sqlite_schema1_676b3c9.sql").read_text(encoding="utf-8"))
    raw.close()
    assert sqlite_schema(old) != sqlite_schema(open_closed(tmp_path / "new.db"))
    root = write_notes(tmp_path / "vault")
    with open_vault(root, open_store(old)) as vault:
        assert vault.store.get_meta("schema_version") == str(schema.SCHEMA_VERSION) == "10"
        assert vault.store.integrity_problems() == []
        assert {h.path for h in vault.search("kelp", k=10, mode="keyword")} == set(NOTES)
        (root / "seals.md").write_text("# Seals\n\nSeals haul out near the kelp.\n")
        assert vault.index().added == 1
        assert vault.search("seals haul", k=1)[0].path == "seals.md"
        assert vault.store.integrity_problems() == []
    assert sqlite_schema(old) == sqlite_schema(tmp_path / "new.db")


def test_a_sqlite_store_of_the_first_schema_1_is_upgraded(tmp_path: Path) -> None:
    """The first vrom (1e81c1b) wrote a schema 1 without ``documents.chunk_strategy``; it opens
    at schema 10 with its notes found, and its next index chunks them again (their strategy is
    unknown); every table, index, trigger and view but that one table's text is a new store's."""
    old = tmp_path / "old.db"
    raw = sqlite3.connect(old)
    raw.executescript((FIXTURES / "sqlite_schema1_1e81c1b.sql").read_text(encoding="utf-8"))
    raw.close()
    root = write_notes(tmp_path / "vault")
    with open_vault(root, open_store(old)) as vault:
        assert vault.store.get_meta("schema_version") == "10"
        assert {h.path for h in vault.search("kelp", k=10, mode="keyword")} == set(NOTES)
        assert vault.index().changed == len(NOTES)
        assert vault.index().unchanged == len(NOTES)
        assert vault.store.integrity_problems() == []
    fresh = sqlite_schema(open_closed(tmp_path / "new.db"))
    upgraded = sqlite_schema(old)
    assert [r for r in upgraded if r[1] != "documents"] == [r for r in fresh if r[1] != "documents"]
    assert columns(old, "documents") == columns(tmp_path / "new.db", "documents")


def columns(path: Path, table: str) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    finally:
        conn.close()


def open_closed(path: Path) -> Path:
    """Create a store at ``path`` with today's vrom; return the path."""
    open_store(path).close()
    return path


def test_the_migrations_are_named_and_listed_in_order() -> None:
    """Each backend lists its migrations once, ``m001_...`` first, each number once."""
    assert [m.name for m in schema.MIGRATIONS] == [
        "m001_notes",
        "m002_vectors",
        "m003_vector_changes",
        "m004_fields",
        "m005_memories",
        "m006_memory_vector_keys",
        "m007_nested_fields",
        "m008_document_texts",
        "m009_vector_input_hash",
        "m010_fields_written_by_the_store",
    ]
    assert schema.SCHEMA_VERSION == 10
    assert [m.name for m in postgres_migrations.MIGRATIONS] == [
        "m001_namespace_tables",
        "m002_vector_input_hash",
        "m003_memory_status_writes",
    ]
    with pytest.raises(ValueError, match="m003_x is listed at place 2"):
        checked(Migration("m001_a", ""), Migration("m003_x", ""))
    with pytest.raises(ValueError, match="named m<3 digits>"):
        checked(Migration("add_things", ""))
