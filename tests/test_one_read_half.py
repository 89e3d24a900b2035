"""Issue 28 item 1, one read half: a search validates once, reads the store's state (vector
generation and keyword version) once and ranks in one snapshot, on both backends.

Statements are counted as the database sees them: on SQLite with the connection's trace
callback (FTS5's own inner statements, shown with a leading ``--``, are left out), on
PostgreSQL at the driver's cursors.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from postgres_server import StoreSpot
from vrom_cli import run_vrom

from vrom import Embedder, SearchReport, Vault
from vrom.memories import Memories

EXAMPLE_VAULT = Path(__file__).resolve().parents[1] / "examples" / "vault"
QUERY = "network switch"
COUNTING = re.compile(r"SELECT count\(\*\) FROM (vectors|chunks)\b")


@contextmanager
def sqlite_statements(vault: Vault) -> Iterator[list[str]]:
    """Collect the SQL statements the vault's SQLite connection runs inside the block."""
    statements: list[str] = []
    conn = vault.store._db.conn  # type: ignore[attr-defined]

    def trace(sql: str) -> None:
        if not sql.startswith("--"):
            statements.append(" ".join(sql.split()))

    conn.set_trace_callback(trace)
    try:
        yield statements
    finally:
        conn.set_trace_callback(None)


@contextmanager
def postgres_statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Collect the SQL statements sent through psycopg's cursors inside the block."""
    import psycopg

    statements: list[str] = []
    execute = psycopg.Cursor.execute

    def counted(self: psycopg.Cursor[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        text = query if isinstance(query, str) else getattr(query, "as_string", lambda _: "")(self)
        params = args[0] if args else kwargs.get("params")
        statements.append(" ".join(str(text).split()) + f" {params!r}")  # keys are parameters
        return execute(self, query, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(psycopg.Cursor, "execute", counted)
        yield statements


def warm(search: Callable[[], object]) -> None:
    for _ in range(3):
        search()


@pytest.fixture
def example_vault(tmp_path: Path) -> Iterator[Vault]:
    vault = Vault.open(EXAMPLE_VAULT, state_dir=tmp_path / "state", embedder=Embedder.fake())
    vault.index()
    yield vault
    vault.close()


def test_one_read_half_a_warm_hybrid_search_issues_at_most_six_statements(
    example_vault: Vault,
) -> None:
    def search() -> object:
        return example_vault.corpus.search_report(QUERY, 10)

    warm(search)
    with sqlite_statements(example_vault) as statements:
        report = search()
    assert report.mode == "hybrid" and report.results  # type: ignore[attr-defined]
    assert len(statements) <= 6, statements
    assert statements.count("BEGIN") == 1, statements  # one snapshot
    # the vector generation and the keyword version: read once, in one statement
    assert sum("vector_generation" in s for s in statements) == 1, statements
    assert sum("chunks_fts_data" in s for s in statements) == 1, statements


def test_one_read_half_a_warm_vault_search_reads_one_store_state(example_vault: Vault) -> None:
    """The vault adds no read to the core's: what tells whether each hit's note is still as
    indexed (its size, time and hash) comes with the hit's own row, in the search's snapshot."""

    def search() -> SearchReport:
        return example_vault.search(QUERY, 10, fallback=True)

    warm(search)
    with sqlite_statements(example_vault) as statements:
        report = search()
    assert report and all(hit.fresh is True for hit in report), "each note's state was read"
    assert len(statements) <= 6, statements
    assert statements.count("BEGIN") == 1, statements
    assert sum("vector_generation" in s for s in statements) == 1, statements


def test_one_read_half_a_warm_memory_recall_reads_one_store_state(example_vault: Vault) -> None:
    memories = example_vault.memories
    for n in range(5):
        memories.remember(f"memory {n}", f"the {QUERY} in rack {n}", project="lab")

    def recall() -> object:
        return memories.recall(QUERY, 3)

    warm(recall)
    with sqlite_statements(example_vault) as statements:
        found = recall()
    assert found
    assert len(statements) <= 6, statements
    assert statements.count("BEGIN") == 1, statements
    assert sum("memory_vector_generation" in s for s in statements) == 1, statements
    assert sum("max(key)" in s for s in statements) == 1, statements


def test_one_read_half_postgresql_reads_one_store_state(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from postgres_server import namespace_for
    from postgres_server import open_vault as open_postgres_vault

    spot = StoreSpot("postgresql", postgres_url, namespace_for("read-half"))
    vault = open_postgres_vault(EXAMPLE_VAULT, spot.open(create=True), Embedder.fake())
    try:
        vault.index()
        memories = Memories(vault.corpus)
        memories.remember("rack", f"the {QUERY} in the rack", project="lab")
        searches = {
            "hybrid search": lambda: vault.corpus.search_report(QUERY, 10),
            "vault search": lambda: vault.search(QUERY, 10, per_note=True),
            "keyword search": lambda: vault.search(QUERY, 10, mode="keyword"),
            "memory recall": lambda: memories.recall(QUERY, 3),
        }
        for name, search in searches.items():
            warm(search)
            with postgres_statements(monkeypatch) as statements:
                search()
            generation = "memory_vector_generation" if "memory" in name else "vector_generation"
            reads = [s for s in statements if f"'{generation}'" in s]
            assert len(reads) == 1, (name, statements)
            # a report's coverage (vectors of chunks) is kept until a write moves the state
            assert not [s for s in statements if COUNTING.search(s)], (name, statements)
        vault.store.documents.delete(vault.store.documents.state("Welcome.md").document_id)  # type: ignore[union-attr]
        with postgres_statements(monkeypatch) as statements:
            report = vault.search(QUERY, 10)
        assert report.chunks < 16 and any(COUNTING.search(s) for s in statements), "counted again"
    finally:
        vault.close()


def test_one_read_half_search_report_is_a_sequence_of_hits(example_vault: Vault) -> None:
    report = example_vault.search(QUERY, 3, fallback=True)
    assert len(report) == len(report.results) > 0
    assert report[0] is report.results[0]
    assert list(report) == list(report.results)
    assert list(report[:2]) == list(report.results[:2])


def test_surface_hybrid_search_and_mode_rerank_say_they_run_rerank(
    write_vault: Callable[[dict[str, str | bytes]], Path], tmp_path: Path
) -> None:
    """Issue 28 item 7: `vrom hybrid-search` runs mode rerank; its help and its output say so,
    and so does `vrom search --mode rerank`, while stdout stays what scripts read."""
    root = write_vault({"Switch.md": f"# Switch\n\nThe {QUERY} in the rack.\n"})

    def vrom(*args: str) -> subprocess.CompletedProcess[str]:
        done = run_vrom(tmp_path / "cli-state", *args, embedder="fake")
        assert done.returncode == 0, done.stderr
        return done

    assert "mode rerank" in " ".join(vrom("hybrid-search", "--help").stdout.split())
    assert "what hybrid-search runs" in " ".join(vrom("search", "--help").stdout.split())
    vrom("index", str(root), "--quiet")
    for command in (["hybrid-search"], ["search", "--mode", "rerank"]):
        text = vrom(*command, QUERY, "--vault", str(root))
        assert text.stdout.startswith("1. Switch.md"), command
        assert "mode rerank" in text.stderr, command
        report = json.loads(vrom(*command, QUERY, "--json", "--vault", str(root)).stdout)
        assert report["mode"] == "rerank", command


def test_one_read_half_a_report_equals_a_list_of_the_same_hits(example_vault: Vault) -> None:
    """`SearchReport` is what `Vault.search` returns; code written for a list keeps working."""
    report = example_vault.search(QUERY, 3)
    assert report == list(report.results) and report == tuple(report.results)
    assert report != list(report.results)[:1] and report != [] and report != "hits"
    assert example_vault.search("zzzunknownword", mode="keyword") == []
    again = example_vault.search(QUERY, 3)
    assert again == report and again.with_hits([]) != report
    assert again.with_hits(report[:1]) == report[:1]


def test_one_read_half_memories_search_is_recall_as_hits(example_vault: Vault) -> None:
    """Memories stand on the read half: `search` is `recall`'s ranking, each memory a `Hit`."""
    memories = example_vault.memories
    made = [
        memories.remember(f"rack {n}", f"the {QUERY} in rack {n}", project="lab", tags=["net"])
        for n in range(3)
    ]
    memories.remember("coffee", "the espresso machine", project="kitchen")
    recalled = memories.recall(QUERY, 3, project="lab")
    report = memories.search(QUERY, 3, project="lab")
    assert isinstance(report, SearchReport) and report.mode == "hybrid"
    assert [hit.id for hit in report] == [found.memory.id for found in recalled]
    assert [hit.score for hit in report] == [found.score for found in recalled]
    assert (report.vectors, report.chunks) == (4, 4)
    first = report[0]
    memory = next(m for m in made if m.id == first.id)
    assert (first.path, first.chunk_id, first.title, first.text) == (
        memory.id,
        0,
        memory.title,
        memory.content,
    )
    assert first.metadata["project"] == "lab" and first.metadata["tags"] == ["net"]
    assert memories.search(QUERY, 3, where={"project": "kitchen"}, mode="keyword") == []
    context = memories.context(QUERY, max_tokens=500, project="lab")
    assert context.sources and context.sources[0].id == first.id and QUERY in context.text
