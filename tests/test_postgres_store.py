"""What only the PostgreSQL store has: the same answers as SQLite for a whole vault, backend
facts with the password masked, namespaces, several writers, and faults (an unreachable
server, a server killed mid-index, no pgvector, another schema or model, a missing driver).

Against a real PostgreSQL 18 with pgvector (`postgres_url`, one server per session); the test
that kills its server starts one of its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
import vaultgen
from postgres_server import (
    kill_server,
    namespace_for,
    open_vault,
    restart_server,
    start_server,
)

from vrom import Collection, Embedder, ModelError, StorageError, Vault, to_jsonable
from vrom.errors import NotFoundError
from vrom.store import ChunkRecord, DocumentRecord, mask_url, open_store
from vrom.store.postgres_migrations import SCHEMA_VERSION

NOTES = {
    "Cats.md": "---\ntags: [pets]\nstatus: active\n---\n# Cats\n## Sleep\n"
    "The cat sleeps on the warm windowsill all afternoon.\n\n## Food\n"
    "Cats eat fish and chicken, twice a day. See [[Dogs]].\n",
    "Dogs.md": "---\ntags: [pets]\n---\n# Dogs\nThe dog fetches the ball in the park every"
    " morning.\n",
    "Taxes.md": "---\ntags: [finance]\ndue: 2026-04-15\n---\n# Taxes\n"
    "File the quarterly tax return before the deadline.\n",
    "Budget.md": "---\ntags: [finance]\n---\n# Budget\nThe yearly budget plan lists every"
    " expense, and the tax reserve.\n",
    "work/Standup.md": "# Standup\nThe standup meeting is at nine every morning in the park.\n",
    "日本/旅行.md": "# 旅行\n東京タワーに行きました。京都も楽しかった。\n",
}
QUERIES = ("warm windowsill", "tax deadline", "morning park", "京都", "cat -fish", '"budget plan"')


@pytest.fixture
def namespace(request: pytest.FixtureRequest) -> str:
    return namespace_for(request.node.name)


def _with_password(url: str, password: str) -> str:
    """Return the session URL with a password (the test server trusts local logins, so any
    password connects: what matters is where it shows)."""
    return url.replace("postgres:@", f"postgres:{password}@", 1)


def _provenance(hit: Any) -> tuple[Any, ...]:
    return (
        hit.path,
        hit.heading_path,
        hit.char_start,
        hit.char_end,
        hit.content_hash,
        hit.text,
        dict(hit.metadata),
    )


def _by_score(hits: list[Any]) -> dict[float, list[tuple[Any, ...]]]:
    """Return the hits' provenance and context grouped by score (ties sorted), but for the
    last score: which of several equal hits make the cut is arbitrary on either backend."""
    groups: dict[float, list[tuple[Any, ...]]] = {}
    for hit in hits:
        groups.setdefault(round(hit.score, 5), []).append((*_provenance(hit), hit.context_text))
    if hits:
        groups.pop(round(hits[-1].score, 5))
    return {score: sorted(group, key=repr) for score, group in groups.items()}


@pytest.fixture
def twin_vaults(
    write_vault: Any, tmp_path: Path, postgres_url: str, namespace: str
) -> Iterator[tuple[Vault, Vault]]:
    """The same vault indexed into SQLite and into a PostgreSQL namespace (fake model)."""
    root = write_vault(NOTES)
    on_sqlite = Vault.open(root, tmp_path / "state", embedder=Embedder.fake(16))
    on_postgres = open_vault(root, open_store(postgres_url, namespace=namespace), Embedder.fake(16))
    try:
        for vault in (on_sqlite, on_postgres):
            summary = vault.index()
            assert summary.embedded == summary.chunks > len(NOTES)
        yield on_sqlite, on_postgres
    finally:
        on_sqlite.close()
        on_postgres.close()


def test_a_vault_on_postgres_answers_as_on_sqlite(twin_vaults: tuple[Vault, Vault]) -> None:
    on_sqlite, on_postgres = twin_vaults
    assert on_postgres.stats().notes == on_sqlite.stats().notes == len(NOTES)
    assert on_postgres.stats().chunks == on_sqlite.stats().chunks
    for query in QUERIES:
        for mode in ("keyword", "vector", "hybrid", "rerank"):
            mine = on_postgres.search(query, mode=mode, k=3, expand_context=True)
            theirs = on_sqlite.search(query, mode=mode, k=3, expand_context=True)
            assert [set(to_jsonable(h)) for h in mine] == [set(to_jsonable(h)) for h in theirs]
            assert [h.score_kind for h in mine] == [h.score_kind for h in theirs]
            if mode == "vector":  # the same vectors: the same neighbours and scores
                assert [h.score for h in mine] == pytest.approx([h.score for h in theirs], abs=1e-5)
                assert _by_score(mine) == _by_score(theirs), "equal scores may come in any order"
            else:  # two ranking functions: the same best hit, with the same provenance
                assert mine and _provenance(mine[0]) == _provenance(theirs[0]), (query, mode)
    assert {h.path for h in on_postgres.search("the", mode="vector", k=5, tags=["finance"])} == {
        "Taxes.md",
        "Budget.md",
    }
    assert {
        h.path for h in on_postgres.search("tax", k=5, where={"due": {"$lt": "2026-05-01"}})
    } == {"Taxes.md"}
    related, expected = on_postgres.related("Cats.md"), on_sqlite.related("Cats.md")
    assert to_jsonable(related) == to_jsonable(expected)
    for vault in (on_sqlite, on_postgres):
        vault.memories.remember("Deploys", "Deploys go through the CI pipeline.", tags=["ops"])
        vault.memories.remember("Coffee", "The user drinks espresso in the morning.")
    mine_recall = [h.memory.title for h in on_postgres.memories.recall("espresso morning")]
    assert mine_recall == [h.memory.title for h in on_sqlite.memories.recall("espresso morning")]
    assert on_postgres.store.integrity_problems() == []


def test_backend_info_names_the_server_and_masks_the_password(
    write_vault: Any, postgres_url: str, namespace: str
) -> None:
    url = _with_password(postgres_url, "s3cret-pw")
    vault = open_vault(write_vault(NOTES), open_store(url, namespace=namespace), Embedder.fake(16))
    try:
        vault.index()
        info = vault.backend_info()
        assert info.backend == "postgresql" and info.schema_version == SCHEMA_VERSION
        assert info.details["server_version"].startswith("18")
        assert info.details["pgvector_version"].startswith("0.8")
        assert info.details["vector_index"] == "pgvector-hnsw"
        assert info.details["url"] == mask_url(url) and "***" in info.details["url"]
        assert info.details["namespace"] == namespace
        assert info.vector_mode == "pgvector-exact", "below the HNSW threshold: exact"
        assert info.vector_index["connectivity"] == 16
        shown = json.dumps(to_jsonable(info)) + vault.store.location + repr(vault.stats())
        assert "s3cret-pw" not in shown
    finally:
        vault.close()
    hnsw = open_vault(
        write_vault(NOTES),
        open_store(url, namespace=namespace),
        Embedder.fake(16),
        hnsw_threshold=1,
    )
    try:
        assert hnsw.backend_info().vector_mode == "pgvector-hnsw"
        assert hnsw.search("tax deadline", mode="vector", k=1)[0].path == "Taxes.md"
    finally:
        hnsw.close()


def test_mask_url_hides_every_password() -> None:
    assert mask_url("postgresql://me:hunter2@db:5432/x") == "postgresql://me:***@db:5432/x"
    assert mask_url("postgres://me@db/x?password=hunter2&sslmode=require") == (
        "postgres://me@db/x?password=***&sslmode=require"
    )
    assert mask_url("postgresql://db/x") == "postgresql://db/x"
    assert "hunter2" not in mask_url("postgresql://me:hunter2@db:notaport/x")


@pytest.mark.parametrize(
    "namespace_name",
    ["x'; DROP TABLE documents; --", 'quote"d; DROP SCHEMA vrom CASCADE; --', "ünï 東京 \\ %_"],
)
def test_a_namespace_is_data_never_sql(postgres_url: str, namespace_name: str) -> None:
    name = namespace_for("ns") + " " + namespace_name
    store = open_store(postgres_url, namespace=name)
    neighbour = open_store(postgres_url, namespace=namespace_for("neighbour"))
    try:
        document = DocumentRecord("a.md", "a", "a", "A", {}, "h", 1.0, 1, 0.5, "s")
        store.documents.put(document, [ChunkRecord(0, "", "alpha", 0, 5, "c")], [], [])
        assert neighbour.documents.count() == 0, "namespaces are kept apart"
        assert store.describe()["details"]["namespace"] == name
    finally:
        store.close()
        neighbour.close()
    again = open_store(postgres_url, namespace=name, create=False)
    try:
        assert list(again.documents.states()) == ["a.md"]
    finally:
        again.close()
    with psycopg.connect(postgres_url) as conn:
        names = [row[0] for row in conn.execute("SELECT name FROM vrom.namespaces")]
    assert name in names


def test_a_missing_namespace_is_not_created_without_create(postgres_url: str) -> None:
    with pytest.raises(NotFoundError, match="no vrom namespace"):
        open_store(postgres_url, namespace=namespace_for("absent"), create=False)


def test_writers_take_turns_and_readers_are_never_blocked(
    postgres_url: str, namespace: str
) -> None:
    stores = [open_store(postgres_url, namespace=namespace) for _ in range(3)]
    try:

        def bump(store: Any) -> None:
            for _ in range(15):
                with store.transaction():
                    value = int(store.get_meta("counter") or 0)
                    store.set_meta("counter", str(value + 1))

        threads = [threading.Thread(target=bump, args=(s,)) for s in stores]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert stores[0].get_meta("counter") == "45", "no increment was lost"

        holding, release, seen = threading.Event(), threading.Event(), []

        def write_and_wait() -> None:
            with stores[1].transaction():
                document = DocumentRecord("w.md", "w", "w", "W", {}, "h", 1.0, 1, 0.5, "s")
                stores[1].documents.put(document, [], [], [])
                holding.set()
                release.wait(30)

        writer = threading.Thread(target=write_and_wait)
        writer.start()
        assert holding.wait(30)
        seen.append(stores[2].documents.count())  # the writer still holds its lock
        release.set()
        writer.join()
        assert seen == [0], "the reader saw the last committed state, without waiting"
        assert stores[2].documents.count() == 1
    finally:
        for store in stores:
            store.close()


def test_an_unreachable_server_is_one_line_naming_it() -> None:
    for url, where in (
        ("postgresql://me:s3cret@127.0.0.1:1/vrom", "127.0.0.1:1"),
        ("postgresql://me:s3cret@/vrom?host=/nonexistent/socket-dir", "/nonexistent/socket-dir"),
    ):
        with pytest.raises(StorageError) as caught:
            open_store(url)
        message = str(caught.value)
        assert where in message and "cannot reach PostgreSQL" in message
        assert "s3cret" not in message and "\n" not in message


def test_a_missing_pgvector_says_what_to_run(postgres_url: str) -> None:
    """A database where this user may not create the extension (as when pgvector is not
    installed): the error says how to enable it."""
    database = f"novector_{namespace_for('db').split()[-1]}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("DROP ROLE IF EXISTS vrom_plain")
        admin.execute("CREATE ROLE vrom_plain LOGIN")
        admin.execute(f"CREATE DATABASE {database}")
    try:
        parts = urlsplit(postgres_url)
        url = f"postgresql://vrom_plain:pw@/{database}?{parts.query}"
        with pytest.raises(StorageError, match=r"CREATE EXTENSION vector") as caught:
            open_store(url)
        assert "pgvector" in str(caught.value) and "pw@" not in str(caught.value)
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {database}")
            admin.execute("DROP ROLE vrom_plain")


def test_another_schema_version_is_refused(postgres_url: str, namespace: str) -> None:
    open_store(postgres_url, namespace=namespace).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        (number,) = conn.execute(
            "SELECT id FROM vrom.namespaces WHERE name = %s", (namespace,)
        ).fetchone()  # type: ignore[misc]
        conn.execute(f"UPDATE vrom_ns_{number}.meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(
        StorageError,
        match=r"schema version 99, newer than this vrom understands \(3\): upgrade vrom",
    ):
        open_store(postgres_url, namespace=namespace)


def test_another_model_is_refused_until_rebuilt(
    write_vault: Any, postgres_url: str, namespace: str
) -> None:
    root = write_vault(NOTES)
    with open_vault(root, open_store(postgres_url, namespace=namespace), Embedder.fake(16)) as v:
        v.index()
    with open_vault(
        root, open_store(postgres_url, namespace=namespace), Embedder.fake(32)
    ) as other:
        with pytest.raises(ModelError, match=r"\(16 d\).*\(32 d\).*--rebuild"):
            other.search("cat", mode="vector")
        assert other.embed(rebuild=True) == other.stats().chunks
        assert other.search("warm windowsill cat", mode="vector")[0].path == "Cats.md"


def test_a_server_killed_mid_index_and_restarted_loses_and_doubles_nothing(
    tmp_path: Path,
) -> None:
    root = tmp_path / "big-vault"
    paths = vaultgen.generate_vault(root, 120, seed=5)
    server = start_server(tmp_path / "pg" / "data")
    try:
        url = server.get_uri()
        store = open_store(url)
        vault = open_vault(root, store, Embedder.fake(16))

        def kill_midway(done: int, total: int, path: str) -> None:
            if done == total // 2:
                kill_server(server)

        with pytest.raises(StorageError) as caught:
            vault.index(kill_midway)
        assert "cannot reach PostgreSQL" in str(caught.value), caught.value
        assert "\n" not in str(caught.value)
        vault.close()

        restart_server(server)
        with open_vault(root, open_store(url), Embedder.fake(16)) as again:
            again.index()
            stored = again.store.documents.states()
            assert sorted(stored) == sorted(paths)
            counts = again.store.counts()
        reference = Vault.open(root, tmp_path / "sqlite-state", embedder=None)
        try:
            reference.index()
            assert counts.chunks == reference.store.counts().chunks, "no chunk twice, none lost"
            assert counts.links == reference.store.counts().links
        finally:
            reference.close()
        with open_vault(root, open_store(url), Embedder.fake(16)) as check:
            assert check.store.integrity_problems() == []
            assert check.store.vectors.count() == counts.chunks
    finally:
        server.cleanup()


def _hnsw_indexes(url: str, namespace: str) -> list[str]:
    """Return the definitions of the HNSW indexes on a namespace's chunk vectors."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT id FROM vrom.namespaces WHERE name = %s", (namespace,)
        ).fetchone()
        assert row is not None
        return [
            found[0]
            for found in conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND tablename = 'vectors'"
                " AND indexdef LIKE '%%USING hnsw%%'",
                (f"vrom_ns_{row[0]}",),
            )
        ]


def _best(hits: Any) -> list[str]:
    """Return the ids of the hits that score as well as the first."""
    return [hit.id for hit in hits if hit.score > hits[0].score - 1e-6]


def test_a_collection_s_first_add_leaves_its_vector_index_built(postgres_url: str) -> None:
    # a first add writes its vectors, then builds the index once (not row by row): it must be
    # there after, and after a first add into a table every document has left
    words = ("harbour", "orchard", "glacier", "lantern", "meadow", "quarry", "violin", "walnut")
    kinds = ("copper", "saffron", "thistle", "basalt", "juniper")
    docs = [
        {"id": f"d{i}", "text": f"the {words[i % 8]} by the {kinds[i // 8]}"} for i in range(40)
    ]
    namespace = f"first-add-{uuid.uuid4().hex[:8]}"
    with Collection.open(namespace, embedder=Embedder.fake(64), storage=postgres_url) as c:
        assert c.add(docs[:30]) == 30
        assert len(_hnsw_indexes(postgres_url, namespace)) == 1
        assert c.add(docs[30:]) == 40
        assert len(_hnsw_indexes(postgres_url, namespace)) == 1
        for doc in docs[::7]:  # found by its own vector (hashed words may collide: ties)
            assert doc["id"] in _best(c.search(doc["text"], k=5, mode="vector"))
        for doc in docs:
            assert c.remove(doc["id"])
        assert c.add(docs[:5]) == 5
        assert len(_hnsw_indexes(postgres_url, namespace)) == 1
        assert "d3" in _best(c.search(docs[3]["text"], k=5, mode="vector"))


def test_no_vector_index_is_built_in_process_beside_pgvector(postgres_url: str) -> None:
    # the database answers "nearest k": waiting for a graph must not copy every vector out and
    # build one here (a bench did, at 1M chunks: 513 s of CPU and a second copy of each vector)
    namespace = f"native-{uuid.uuid4().hex[:8]}"
    with Collection.open(namespace, embedder=Embedder.fake(64), storage=postgres_url) as c:
        c.add([{"id": f"d{i}", "text": f"note {i} on the {i % 3} shelf"} for i in range(12)])
        assert c.search("note 4", k=3, mode="vector")
        index = c._corpus.index
        assert index.wait_for_graph() is None
        with pytest.raises(TypeError, match="its own vector index"):
            _ = index.current
        assert index.mode().startswith("pgvector")


def test_a_missing_driver_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "from vrom.store import open_store\n"
        "from vrom.errors import StorageError\n"
        "try:\n    open_store('postgresql://me:s3cret@db/x')\n"
        "except StorageError as exc:\n    print(exc)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert "pip install 'vrom[postgres]'" in result.stdout and "s3cret" not in result.stdout


def test_the_postgres_page_example_runs(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    page = (Path(__file__).resolve().parents[1] / "docs" / "postgres.md").read_text()
    code = page.split("```python\n", 1)[1].split("```", 1)[0]
    shown_url = "postgresql://vrom:secret@localhost:5432/vrom"
    assert shown_url in code
    exec(compile(code.replace(shown_url, postgres_url), "docs/postgres.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("[") and printed[0] != "[]", "the keyword search found the note"
    assert printed[1] == mask_url(postgres_url)
