"""OKF-aware search: ``where`` on OKF frontmatter (type, status, sources, generated/verified,
dates), deprecated or superseded notes ranked below current ones in the one search core, and hits
whose ``stale_after`` has passed marked stale, in the Python API, the CLI and MCP."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from vrom_cli import run_vrom

from vrom import Collection, Embedder, ValidationError, Vault
from vrom.store import open_store
from vrom.store.schema import MIGRATIONS

WriteVault = Callable[[dict[str, str | bytes]], Path]

BODY = "# Gross margin\n\nGross margin is revenue minus the cost of goods sold.\n"

CONCEPTS: dict[str, str | bytes] = {
    # written first, so it holds the lower chunk id: without the demotion it wins every tie
    "metrics/a-legacy.md": "---\ntype: Metric\nstatus: deprecated\n---\n" + BODY,
    "metrics/b-current.md": "---\ntype: Metric\nstatus: stable\n---\n" + BODY,
    "tables/orders.md": """---
type: BigQuery Table
status: stable
stale_after: 2000-01-01T00:00:00Z
generated: { by: reference_agent/gemini-2.5-pro, at: 2026-06-30T14:00:00Z }
verified: { by: human:kliu, at: 2026-07-01T16:00:00+02:00 }
sources:
  - id: warehouse-schema
    resource: https://wiki.example/warehouse
  - id: revenue-policy
    resource: policies/revenue.md
---
# Orders

One row per customer order, with its revenue.
""",
    "policies/revenue.md": """---
type: Policy
stale_after: 2999-01-01
generated: { by: human:jsmith, at: 2026-01-05T10:00:00Z }
verified:
  - { by: process:nightly, at: 2026-06-15T09:00:00Z }
  - { by: human:jsmith, at: 2026-06-16T09:00:00Z }
---
# Revenue policy

Revenue is recognized on delivery of an order.
""",
    "policies/old-revenue.md": """---
type: Policy
status: Superseded
stale_after: 2001-02-03
---
# Old revenue policy

Revenue was recognized on each order when it was paid.
""",
}


@pytest.fixture
def vault(write_vault: WriteVault, tmp_path: Path) -> Vault:
    opened = Vault.open(write_vault(CONCEPTS), tmp_path / "state", embedder=Embedder.fake(16))
    opened.index()
    return opened


def _paths(vault: Vault, query: str, where: dict[str, Any], mode: str = "keyword") -> set[str]:
    return {hit.path for hit in vault.search(query, k=20, where=where, mode=mode)}


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_a_deprecated_concept_ranks_below_a_current_one_with_the_same_text(
    vault: Vault, mode: str
) -> None:
    hits = vault.search("gross margin revenue", k=2, mode=mode, path="metrics/")
    assert [hit.path for hit in hits] == ["metrics/b-current.md", "metrics/a-legacy.md"]
    current, legacy = hits
    assert (current.human_relevance_score, legacy.human_relevance_score) == (0.5, 0.25)
    assert (current.scores["prior"], legacy.scores["prior"]) == (1.0, 0.875)
    # the same text ranks the same in each retriever (the tie going to the lower chunk id, the
    # legacy note's): the prior alone puts the current note first
    text_part = "bm25" if mode == "keyword" else "fused"
    assert legacy.scores[text_part] >= current.scores[text_part]


def test_superseded_is_demoted_too_and_vector_search_stays_pure_similarity(vault: Vault) -> None:
    assert vault.get_note("policies/old-revenue.md").human_relevance_score == 0.25
    by_meaning = vault.search("gross margin revenue", k=2, mode="vector", where={"type": "Metric"})
    assert by_meaning[0].score == by_meaning[1].score, "no prior in vector mode"


def test_where_reads_okf_frontmatter(vault: Vault) -> None:
    assert _paths(vault, "revenue", {"type": "Policy"}) == {
        "policies/revenue.md",
        "policies/old-revenue.md",
    }
    assert _paths(vault, "revenue", {"status": {"$ne": "Superseded"}}) == {
        "metrics/a-legacy.md",
        "metrics/b-current.md",
        "tables/orders.md",
        "policies/revenue.md",
    }
    assert _paths(vault, "revenue", {"sources.resource": "policies/revenue.md"}) == {
        "tables/orders.md"
    }
    assert _paths(vault, "revenue", {"sources.id": {"$in": ["revenue-policy", "x"]}}) == {
        "tables/orders.md"
    }
    assert _paths(vault, "revenue", {"generated.by": "human:jsmith"}) == {"policies/revenue.md"}
    # a bare verified mapping and a list of them are read alike
    assert _paths(vault, "revenue", {"verified.by": "human:kliu"}) == {"tables/orders.md"}
    assert _paths(vault, "revenue", {"verified.by": "process:nightly"}) == {"policies/revenue.md"}


def test_where_compares_dates_as_instants(vault: Vault) -> None:
    assert _paths(vault, "revenue", {"stale_after": {"$lt": "2026-01-01"}}) == {
        "tables/orders.md",
        "policies/old-revenue.md",
    }
    assert _paths(vault, "revenue", {"stale_after": {"$gte": "2999-01-01T00:00:00Z"}}) == {
        "policies/revenue.md"
    }, "a date is its midnight UTC"
    # 2026-07-01T16:00:00+02:00 is 14:00 UTC: after 13:59Z, not after 14:00Z
    assert _paths(vault, "revenue", {"verified.at": {"$gt": "2026-07-01T13:59:00Z"}}) == {
        "tables/orders.md"
    }
    assert _paths(vault, "revenue", {"verified.at": {"$gt": "2026-07-01T14:00:00Z"}}) == set()
    assert _paths(
        vault, "revenue", {"generated.at": {"$gte": "2026-06-30", "$lt": "2026-07-01"}}
    ) == {"tables/orders.md"}
    with pytest.raises(ValidationError, match="ISO 8601 date"):
        vault.search("revenue", where={"stale_after": {"$lt": "next year"}})


def test_a_collection_filters_nested_metadata_and_dates_the_same_way() -> None:
    docs = Collection.open("okf", embedder=None, storage=None)
    docs.add(
        [
            {"id": "a", "text": "revenue policy", "metadata": {"owner": {"team": "finance"}}},
            {"id": "b", "text": "revenue table", "metadata": {"reviewed": "2026-03-01"}},
        ]
    )
    assert [h.id for h in docs.search("revenue", where={"owner.team": "finance"})] == ["a"]
    later = docs.search("revenue", where={"reviewed": {"$gt": "2026-02-28T23:00:00-02:00"}})
    assert [h.id for h in later] == []
    assert [h.id for h in docs.search("revenue", where={"reviewed": {"$gt": "2026-02-28"}})] == [
        "b"
    ]
    docs.close()


def test_hits_past_their_stale_after_say_so(vault: Vault) -> None:
    hits = {hit.path: hit for hit in vault.search("revenue", k=20, mode="keyword")}
    orders, policy, old = (
        hits["tables/orders.md"],
        hits["policies/revenue.md"],
        hits["policies/old-revenue.md"],
    )
    assert (orders.stale, orders.stale_after) == (True, "2000-01-01T00:00:00+00:00")
    assert (old.stale, old.stale_after) == (True, "2001-02-03T00:00:00+00:00")
    assert (policy.stale, policy.stale_after) == (False, "2999-01-01T00:00:00+00:00")
    current = hits["metrics/b-current.md"]
    assert (current.stale, current.stale_after) == (False, None)


def test_the_cli_hit_line_and_the_mcp_reply_say_a_hit_is_stale(
    write_vault: WriteVault, tmp_path: Path
) -> None:
    root = write_vault(CONCEPTS)
    state = tmp_path / "cli-state"

    def vrom(*args: str) -> str:
        done = run_vrom(state, *args, embedder="fake:16")
        assert done.returncode == 0, done.stderr
        return done.stdout

    vrom("index", str(root))
    text = vrom("--vault", str(root), "search", "order revenue", "-k", "2", "--mode", "keyword")
    lines = text.splitlines()
    assert lines[0].startswith("1. tables/orders.md › Orders")
    assert lines[2].endswith(" · stale since 2000-01-01T00:00:00+00:00")
    assert lines[3].startswith("2. policies/revenue.md") and "stale" not in lines[5]
    hits = json.loads(vrom("--vault", str(root), "--json", "search", "order", "--mode", "keyword"))
    assert hits["results"][0]["stale"] is True

    pytest.importorskip("mcp")
    from mcp import Client

    from vrom.server.app import build_server
    from vrom.server.state import ServerState

    server_state = ServerState(root, embedder="fake:16", watch=False, state_dir=state)
    server_state.open_explicit()
    replies: list[Any] = []

    async def main() -> None:
        async with Client(build_server(server_state), mode="legacy") as client:
            replies.append(
                await client.call_tool(
                    "vault_search", {"query": "order revenue", "mode": "keyword", "k": 2}
                )
            )

    try:
        asyncio.run(main())
    finally:
        server_state.close()
    (reply,) = replies
    first, second = reply.structured_content["results"]
    assert (first["stale"], first["stale_after"]) == (True, "2000-01-01T00:00:00+00:00")
    assert second["stale"] is False
    summary = reply.content[0].text.splitlines()
    assert "stale since 2000-01-01T00:00:00+00:00" in summary[1]
    assert "stale" not in summary[2]


def test_migration_7_adds_nested_fields_and_demotes_deprecated_notes(tmp_path: Path) -> None:
    for kind, store_meta in (("vault", [("vault_root", "/notes")]), ("collection", [])):
        path = tmp_path / f"{kind}.db"
        raw = sqlite3.connect(path)
        for migration in MIGRATIONS[:6]:
            raw.executescript(migration.script)
        raw.executemany(
            "INSERT INTO meta(key, value) VALUES (?, ?)", [("schema_version", "6"), *store_meta]
        )
        for number, (status, score) in enumerate([("Deprecated ", 0.9), ("stable", 0.5)]):
            frontmatter = {"status": status, "generated": {"by": "human:ana"}}
            raw.execute(
                "INSERT INTO documents(path, path_key, name_key, title, frontmatter, content_hash,"
                " mtime, size, human_relevance_score, chunk_count, chunk_strategy, indexed_at)"
                " VALUES (?, ?, ?, '', ?, 'h', 0, 0, ?, 0, 's', 0)",
                (f"n{number}.md", f"n{number}", f"n{number}", json.dumps(frontmatter), score),
            )
        raw.commit()
        raw.close()
        store = open_store(path, create=False)
        try:
            scores = {d.path: d.human_relevance_score for d in store.documents.after_path("", 9)}
            assert store.integrity_problems() == []
        finally:
            store.close()
        demoted = 0.45 if kind == "vault" else 0.9  # a collection has no prior to halve
        assert scores == {"n0.md": demoted, "n1.md": 0.5}
        raw = sqlite3.connect(path)
        nested = raw.execute("SELECT value FROM fields WHERE key = 'generated.by'").fetchall()
        raw.close()
        assert nested == [("human:ana",), ("human:ana",)]
