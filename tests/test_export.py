"""The analytics sidecar: a vault exported for DuckDB, read back by DuckDB, equals the store.

Each test builds a small vault with the fake embedder, exports it as Parquet and as a DuckDB
file, and reads the export with DuckDB's own SQL: row counts, a join of chunks to notes, link
targets, vectors and the three queries of docs/analytics.md are checked against what the store
and the Python API say. An incremental export must equal a full one of the same store.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Iterator
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from vrom_cli import run_vrom

from vrom import Embedder, StorageError, ValidationError, Vault
from vrom.cli import main
from vrom.index.codec import decode

duckdb = pytest.importorskip("duckdb")

REPO = Path(__file__).resolve().parents[1]
DOCS = (REPO / "docs" / "analytics.md").read_text(encoding="utf-8")
TABLES = ("notes", "chunks", "links", "tags", "fields", "memories", "vectors")
TIMEOUT = 60

NOTES = {
    "Home.md": "---\ntags: [hub]\nstatus: active\nrank: 3\n---\n# Home\n\n"
    "Start at [[Projects/Atlas]] or [[Beacon|the beacon]]. See [[Nowhere]].\n\n"
    "## Later\n\n" + "Long words about the garden and its paths. " * 40 + "\n",
    "Projects/Atlas.md": "---\ntags: [project, maps]\ndone: false\n---\n# Atlas\n\n"
    "Maps of the valley #maps #project/atlas. Back to [[Home]] and [[Beacon#Setup]].\n",
    "Projects/Beacon.md": "# Beacon\n\nA local beacon note #project. ![[Diagram]]\n",
    "Beacon.md": "---\naliases: [signal]\nweights: {a: 1, b: [2, 3]}\n---\n# Beacon\n\n"
    "## Setup\n\nLight it #maps #hub. [docs](Projects/Atlas.md)\n",
    "Archive/Diagram.md": "# Diagram\n\nNothing links out of here. #hub #project\n",
    "Loose.md": "# Loose\n\nAn orphan that links to [[Home]] and [[Other/Thing]].\n",
    # names in several folders: a link resolves to the exact path, then one in its own folder,
    # then the shortest path; a key with a / also matches the end of a longer path
    "A/Topic.md": "# Topic A\n\nIn A.\n",
    "B/Topic.md": "# Topic B\n\nIn B.\n",
    "B/Other.md": "# Other\n\n[[Topic]], [[a/topic]], [[Atlas]] and [[projects/atlas]].\n",
    "Deep/Projects/Atlas.md": "# Deep atlas\n\n[[Topic]] from deep down.\n",
    "X/Other/Thing.md": "# Thing\n\nFound by the end of its path.\n",
}
N = len(NOTES)


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.fixture
def vault(tmp_path: Path) -> Iterator[Vault]:
    root = tmp_path / "vault"
    write(root, NOTES)
    opened = Vault.open(root, tmp_path / "state", embedder=Embedder.fake(16))
    opened.index()
    opened.memories.remember("Decision", "Keep maps in Atlas.", tags=["maps"], project="atlas")
    opened.memories.remember("Habit", "Review the beacon weekly.", type="preference")
    yield opened
    opened.close()


def connect(out: Path, fmt: str) -> Any:
    """Return a DuckDB connection where each export table is a view of that name."""
    if fmt == "duckdb":
        return duckdb.connect(str(out), read_only=True)
    con = duckdb.connect()
    for table in TABLES:
        if (out / f"{table}.parquet").exists():
            con.execute(f"CREATE VIEW {table} AS SELECT * FROM '{out}/{table}.parquet'")
    return con


def table_rows(con: Any, table: str) -> list[tuple[Any, ...]]:
    """Return every row of a table, sorted, lists as tuples (vectors compared exactly)."""
    rows = con.execute(f"SELECT * FROM {table}").fetchall()
    frozen = [tuple(tuple(v) if isinstance(v, list) else v for v in row) for row in rows]
    return sorted(frozen, key=repr)


def export_contents(out: Path, fmt: str) -> dict[str, list[tuple[Any, ...]]]:
    con = connect(out, fmt)
    try:
        names = {row[0] for row in con.execute("SHOW TABLES").fetchall()}
        return {table: table_rows(con, table) for table in TABLES if table in names}
    finally:
        con.close()


# -- the export equals the store -----------------------------------------------------------


@pytest.mark.parametrize("fmt", ["parquet", "duckdb"])
def test_the_export_read_back_by_duckdb_equals_the_store(
    vault: Vault, tmp_path: Path, fmt: str
) -> None:
    out = tmp_path / ("export" if fmt == "parquet" else "vault.duckdb")
    summary = vault.export(out, fmt, vectors=True)
    store = vault.store
    counts = store.counts()
    notes = [vault.get_note(ref.path) for ref in vault.notes(limit=100)]
    assert (summary.notes, summary.added, summary.incremental) == (N, N, False)
    assert summary.tables == {
        "notes": counts.documents,
        "chunks": counts.chunks,
        "links": counts.links,
        "tags": sum(len(n.tags) for n in notes),
        "fields": sum(len(n.frontmatter) for n in notes),
        "memories": 2,
        "vectors": counts.vectors,
    }
    assert counts.vectors == counts.chunks > counts.documents

    con = connect(out, fmt)
    for table, rows in summary.tables.items():
        assert con.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == rows, table
    assert con.execute("SELECT count(DISTINCT tag) FROM tags").fetchone()[0] == counts.tags

    # one join: each note's chunks, from the export, are the store's (ids, offsets, hashes)
    joined = con.execute(
        "SELECT n.path, c.chunk_id, c.position, c.heading_path, c.char_start, c.char_end,"
        " c.content_hash, c.text FROM chunks c JOIN notes n ON n.note_id = c.note_id"
        " ORDER BY n.path, c.position"
    ).fetchall()
    expected = [
        (
            note.path,
            c.chunk_id,
            c.position,
            c.heading_path,
            c.char_start,
            c.char_end,
            c.content_hash,
            c.text,
        )
        for note in sorted(notes, key=lambda n: n.path)
        for c in store.documents.chunks_of(note.note_id)
    ]
    assert joined == expected

    exported_notes = {
        row[0]: row[1:]
        for row in con.execute(
            "SELECT path, note_id, title, content_hash, modified_unix, frontmatter FROM notes"
        ).fetchall()
    }
    assert exported_notes == {
        n.path: (n.note_id, n.title, n.content_hash, n.modified_unix, json.dumps(n.frontmatter))
        for n in notes
    }
    fields = con.execute("SELECT path, key, value, value_type FROM fields").fetchall()
    assert sorted((p, k, json.loads(v)) for p, k, v, _ in fields) == sorted(
        (n.path, k, v) for n in notes for k, v in n.frontmatter.items()
    )
    assert {(k, t) for _, k, _, t in fields} >= {("rank", "number"), ("done", "bool")}

    # links: each resolved as vrom resolves it (get_note's links), unresolved as NULL
    links = con.execute(
        "SELECT source_path, kind, target, heading, alias, resolved_path FROM links"
        " ORDER BY source_path, position"
    ).fetchall()
    assert links == [
        (n.path, link.kind, link.target, link.heading, link.alias, link.resolved_path)
        for n in sorted(notes, key=lambda n: n.path)
        for link in n.links
    ]
    assert ("Home.md", "wikilink", "Nowhere", None, None, None) in links
    assert ("Home.md", "wikilink", "Beacon", None, "the beacon", "Beacon.md") in links
    assert [link[-1] for link in links if link[0] == "B/Other.md"] == [
        "B/Topic.md",
        "A/Topic.md",
        "Projects/Atlas.md",
        "Projects/Atlas.md",
    ]
    assert ("Loose.md", "wikilink", "Other/Thing", None, None, "X/Other/Thing.md") in links
    assert ("Deep/Projects/Atlas.md", "wikilink", "Topic", None, None, "A/Topic.md") in links

    tags = con.execute("SELECT path, tag FROM tags ORDER BY path, tag").fetchall()
    assert tags == sorted((n.path, t) for n in notes for t in n.tags)

    memories = con.execute("SELECT id, title, tags, project, type FROM memories").fetchall()
    assert sorted(memories) == sorted(
        (m.id, m.title, list(m.tags), m.project, m.type) for m in vault.memories.list()
    )

    vectors = con.execute("SELECT chunk_id, fingerprint, vector FROM vectors").fetchall()
    con.close()
    fingerprint = Embedder.fake(16).fingerprint.digest()
    assert {row[1] for row in vectors} == {fingerprint}
    stored = dict(store.vectors.rows())
    assert sorted(row[0] for row in vectors) == sorted(stored)
    for chunk_id, _, vector in vectors:  # float32 as stored, bit for bit
        assert np.array_equal(
            np.asarray(vector, dtype=np.float32), decode([stored[chunk_id]], "float32")[0]
        )


def test_int8_vectors_are_exported_decoded(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    write(root, NOTES)
    with Vault.open(
        root, tmp_path / "state", embedder=Embedder.fake(16), vector_encoding="int8"
    ) as vault:
        vault.index()
        vault.export(tmp_path / "v.duckdb", vectors=True)
        stored = dict(vault.store.vectors.rows())
    con = duckdb.connect(str(tmp_path / "v.duckdb"), read_only=True)
    rows = con.execute("SELECT chunk_id, vector FROM vectors").fetchall()
    con.close()
    assert len(rows) == len(stored)
    for chunk_id, vector in rows:
        assert np.array_equal(
            np.asarray(vector, dtype=np.float32), decode([stored[chunk_id]], "int8")[0]
        )


# -- the documented queries --------------------------------------------------------------


def documented_query(name: str) -> str:
    match = re.search(rf"<!-- query: {name} -->\n```sql\n(.*?)```", DOCS, re.DOTALL)
    assert match, f"docs/analytics.md has no query {name}"
    return match.group(1)


def test_the_documented_queries_answer_as_vrom_does(
    vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = {
        "Hub2.md": "# Hub two\n\n[[Home]] [[Beacon]] [[Atlas]] [[Atlas]] #hub #maps\n",
        "Tagged.md": "# Tagged\n\n#hub #maps #project [[Loose]]\n",
    }
    write(vault.root, extra)
    vault.index()
    monkeypatch.chdir(tmp_path)  # the queries name 'export/…' from the folder holding it
    vault.export("export")
    refs = vault.notes(limit=100)
    related = {ref.path: vault.related(ref.path) for ref in refs}
    tags = {ref.path: vault.get_note(ref.path).tags for ref in refs}

    orphans = duckdb.sql(documented_query("orphan-notes")).fetchall()
    assert orphans == [
        (path, r.note.title) for path, r in sorted(related.items()) if not r.backlinks
    ]
    assert 0 < len(orphans) < len(refs)

    most = duckdb.sql(documented_query("most-linked")).fetchall()
    linked = sorted(
        ((path, len(r.backlinks)) for path, r in related.items() if r.backlinks),
        key=lambda item: (-item[1], item[0]),
    )
    assert most == linked[:10]
    assert most[0][1] >= 3

    pairs = duckdb.sql(documented_query("tag-pairs")).fetchall()
    together = Counter(pair for note_tags in tags.values() for pair in combinations(note_tags, 2))
    expected = sorted(
        ((a, b, n) for (a, b), n in together.items()), key=lambda item: (-item[2], item[0], item[1])
    )
    assert pairs == expected[:10]
    assert pairs[0][2] >= 2


# -- incremental exports -------------------------------------------------------------------


def change_vault(vault: Vault) -> None:
    """Change one note, add one (that Home's unresolved link now finds), remove one (a link
    target), touch one without changing it, and re-index."""
    root = vault.root
    (root / "Projects/Beacon.md").write_text("# Beacon\n\nRewritten beacon #project.\n")
    (root / "Nowhere.md").write_text("# Nowhere\n\nNow somewhere. [[Loose]] #hub\n")
    (root / "Archive/Diagram.md").unlink()
    touched = root / "Loose.md"
    os.utime(touched, (touched.stat().st_atime, touched.stat().st_mtime + 10))
    vault.index()


@pytest.mark.parametrize("fmt", ["parquet", "duckdb"])
def test_an_incremental_export_reads_only_what_changed_and_equals_a_full_one(
    vault: Vault, tmp_path: Path, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / ("export" if fmt == "parquet" else "vault.duckdb")
    vault.export(out, fmt, vectors=True)
    again = vault.export(out, fmt, vectors=True)
    assert (again.incremental, again.unchanged, again.changed, again.added) == (True, N, 0, 0)

    change_vault(vault)
    read: list[int] = []
    chunks_of = vault.store.documents.chunks_of
    monkeypatch.setattr(
        vault.store.documents, "chunks_of", lambda doc_id: read.append(doc_id) or chunks_of(doc_id)
    )
    summary = vault.export(out, fmt, vectors=True)
    monkeypatch.undo()
    assert (summary.changed, summary.added, summary.removed, summary.unchanged) == (1, 1, 1, N - 2)
    assert summary.incremental and summary.note is None
    beacon, nowhere = (vault.get_note(p).note_id for p in ("Projects/Beacon.md", "Nowhere.md"))
    assert sorted(read) == sorted([beacon, nowhere])

    fresh = tmp_path / ("fresh" if fmt == "parquet" else "fresh.duckdb")
    full = vault.export(fresh, fmt, vectors=True)
    assert full.tables == summary.tables and not full.incremental
    assert export_contents(out, fmt) == export_contents(fresh, fmt)
    resolved = connect(out, fmt).execute(
        "SELECT resolved_path FROM links WHERE source_path = 'Home.md' AND target = 'Nowhere'"
    )
    assert resolved.fetchall() == [("Nowhere.md",)]


def test_notes_rewritten_with_the_same_content_are_exported_again(
    vault: Vault, tmp_path: Path
) -> None:
    out = tmp_path / "export"
    vault.export(out, vectors=True)
    vault.index(force=True)  # same text, new chunk ids
    summary = vault.export(out, vectors=True)
    assert (summary.changed, summary.unchanged, summary.incremental) == (N, 0, True)
    vault.export(tmp_path / "fresh", vectors=True)
    assert export_contents(out, "parquet") == export_contents(tmp_path / "fresh", "parquet")


def test_vectors_come_and_go_with_the_flag(vault: Vault, tmp_path: Path) -> None:
    out = tmp_path / "v.duckdb"
    assert "vectors" not in vault.export(out).tables
    with_vectors = vault.export(out, vectors=True)
    assert with_vectors.tables["vectors"] == vault.store.counts().vectors
    assert with_vectors.incremental
    assert "vectors" in export_contents(out, "duckdb")
    vault.export(out)
    assert "vectors" not in export_contents(out, "duckdb")
    parquet = tmp_path / "export"
    vault.export(parquet, vectors=True)
    assert (parquet / "vectors.parquet").is_file()
    vault.export(parquet)
    assert not (parquet / "vectors.parquet").exists()


def test_a_parquet_file_changed_since_means_a_full_export(vault: Vault, tmp_path: Path) -> None:
    out = tmp_path / "export"
    vault.export(out)
    (out / "tags.parquet").unlink()
    summary = vault.export(out)
    assert not summary.incremental and "tags.parquet is missing" in (summary.note or "")
    assert summary.tables == vault.export(tmp_path / "fresh").tables
    assert vault.export(out).incremental


@pytest.mark.parametrize("fmt", ["parquet", "duckdb"])
def test_an_export_that_fails_midway_leaves_the_last_one_as_it_was(
    vault: Vault, tmp_path: Path, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / ("export" if fmt == "parquet" else "vault.duckdb")
    vault.export(out, fmt, vectors=True)
    before = export_contents(out, fmt)
    change_vault(vault)

    def broken(*args: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr("vrom.export.vector_lines", broken)  # after every other table is loaded
    with pytest.raises(RuntimeError, match="disk on fire"):
        vault.export(out, fmt, vectors=True)
    assert export_contents(out, fmt) == before
    assert not list(tmp_path.glob("**/.*.tmp"))
    new = tmp_path / "new.duckdb"
    with pytest.raises(RuntimeError, match="disk on fire"):
        vault.export(new, vectors=True)
    assert not new.exists()
    monkeypatch.undo()
    assert vault.export(out, fmt, vectors=True).changed == 1


# -- refusals ------------------------------------------------------------------------------


def test_what_is_not_an_export_of_this_vault_is_never_overwritten(
    vault: Vault, tmp_path: Path
) -> None:
    other_db = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other_db))
    con.execute("CREATE TABLE mine AS SELECT 42 AS answer")
    con.close()
    with pytest.raises(ValidationError, match="holds no vrom export"):
        vault.export(other_db)
    con = duckdb.connect(str(other_db), read_only=True)
    assert con.execute("SELECT * FROM mine").fetchall() == [(42,)]
    con.close()

    text = tmp_path / "notes.db"
    text.write_text("not a database")
    with pytest.raises(StorageError, match="is not a DuckDB database"):
        vault.export(text)
    assert text.read_text() == "not a database"

    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    with pytest.raises(ValidationError, match="holds no vrom export"):
        vault.export(folder)
    with pytest.raises(ValidationError, match="is a folder"):
        vault.export(folder, "duckdb")
    assert [p.name for p in folder.iterdir()] == ["keep.txt"]

    elsewhere = tmp_path / "elsewhere"
    write(elsewhere, {"Other.md": "# Other\n"})
    with Vault.open(elsewhere, tmp_path / "state", embedder=None) as other:
        other.index()
        other.export(tmp_path / "theirs")
        with pytest.raises(ValidationError, match="holds an export of"):
            vault.export(tmp_path / "theirs")
        replaced = vault.export(tmp_path / "theirs", full=True)
    assert replaced.notes == N and not replaced.incremental


def test_without_duckdb_the_error_names_the_extra(
    vault: Vault,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(sys.modules, "duckdb", None)
    with pytest.raises(StorageError, match=re.escape("pip install 'vrom[analytics]'")):
        vault.export(tmp_path / "export")
    assert not (tmp_path / "export").exists()
    code = main(["export", str(tmp_path / "export"), "--vault", str(vault.root)])
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("vrom: error: ") and err.count("\n") == 1 and "analytics" in err


# -- the CLI, and DuckDB without vrom ------------------------------------------------------


def test_the_cli_exports_and_plain_duckdb_reads_it_without_vrom(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    write(root, NOTES)
    state = tmp_path / "state"

    def vrom(*args: str) -> subprocess.CompletedProcess[str]:
        done = run_vrom(state, *args, embedder="fake:16", cwd=tmp_path, timeout=TIMEOUT)
        assert done.returncode == 0, done.stderr
        return done

    vrom("index", str(root), "--quiet")
    first = vrom("export", "out", "--vault", str(root), "--vectors")
    assert first.stdout.startswith(
        f"exported {N} notes to out (parquet, full): 0 changed, {N} added,"
    )
    write(root, {"Loose.md": "# Loose\n\nChanged.\n"})
    vrom("index", str(root), "--quiet")
    second = json.loads(vrom("export", "out", "--vault", str(root), "--vectors", "--json").stdout)
    assert (second["changed"], second["unchanged"], second["incremental"]) == (1, N - 1, True)
    store = json.loads(vrom("stats", "--vault", str(root), "--json").stdout)["store_path"]
    by_db = json.loads(vrom("--json", "export", "db.duckdb", "--db", store).stdout)
    assert (by_db["format"], by_db["tables"]["notes"]) == ("duckdb", N)

    # a Python that cannot import vrom: isolated (-I), without site (-S), from another folder,
    # given only the folder DuckDB is installed in
    site = str(Path(duckdb.__file__).resolve().parents[1])
    script = textwrap.dedent(
        f"""
        import importlib.util, json, sys
        sys.path.append({site!r})
        assert importlib.util.find_spec("vrom") is None, "vrom is importable"
        import duckdb
        out = {str(tmp_path / "out")!r}
        parquet = duckdb.sql(
            f"SELECT count(*), count(DISTINCT c.note_id) FROM '{{out}}/chunks.parquet' c"
            f" JOIN '{{out}}/notes.parquet' n USING (note_id)"
        ).fetchall()[0]
        db = duckdb.connect({str(tmp_path / "db.duckdb")!r}, read_only=True)
        manifest = dict(db.execute("SELECT key, value FROM manifest").fetchall())
        notes = db.execute("SELECT count(*) FROM notes").fetchone()[0]
        dims = duckdb.sql(f"SELECT DISTINCT len(vector) FROM '{{out}}/vectors.parquet'").fetchall()
        print(json.dumps([list(parquet), notes, json.loads(manifest["source"]), dims]))
        """
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", script],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env={"PATH": os.environ.get("PATH", "")},
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    chunks, notes, source, dims = json.loads(done.stdout)
    with Vault.open(root, state, embedder=None, create=False) as vault:
        counts = vault.store.counts()
    assert chunks == [counts.chunks, counts.documents]
    assert (notes, source, dims) == (N, str(root.resolve()), [[16]])


def test_the_export_benchmark_runs_on_the_example_vault(tmp_path: Path) -> None:
    out = tmp_path / "export_speed.json"
    example = str(REPO / "examples" / "vault")
    bench = str(REPO / "bench" / "export_speed.py")
    done = subprocess.run(
        [
            sys.executable,
            bench,
            "--vault",
            example,
            "--sample",
            "7",
            "--vectors",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    numbers = json.loads(out.read_text())
    assert (numbers["copied"], numbers["notes"], numbers["vectors"]) == (7, 7, True)
    for fmt, notes in (("parquet", 8), ("duckdb", 9)):  # each pass adds a note
        incremental = numbers[fmt]["incremental"]
        assert incremental["incremental"] and (incremental["changed"], incremental["added"]) == (
            3,
            1,
        )
        assert numbers[fmt]["full"]["tables"] == incremental["tables"]
        assert numbers[fmt]["full"]["tables"]["notes"] == notes
