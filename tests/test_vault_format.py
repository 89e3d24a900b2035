"""`Vault.check_format` / `Vault.enrich_format` on vaults built in tmp_path, and MCP's
``vault_format`` over the same through the SDK's in-memory client."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from vrom import NotFoundError, ValidationError, Vault

NOTES: dict[str, str | bytes] = {
    "index.md": "# Projects\n\n* [Atlas](Atlas.md) - The network map.\n",
    "Atlas.md": "---\nstatus: active\nowner: ana\nreview: {by: bo, due: 2026-01-01}\n---\n"
    "# Atlas\n\nAtlas maps every office switch. It runs nightly.\n\n#infra\n",
    "tables/orders.md": "---\ntype: BigQuery Table\ntitle: Orders\ndescription: One row per"
    " order.\ntags: [sales]\ngenerated: {by: human:ana, at: 2026-06-30T14:00:00Z}\n---\n# Schema\n",
    "tables/customers.md": "# Customers\r\n\r\nOne row per customer.\r\n",
    "tables/broken.md": "---\ntype: BigQuery Table\ntitle: [unclosed\n---\n# Broken\n",
    "log.md": "# History\n\n## 2026-07-01\n- Added orders.\n\n## First week\n- Began.\n",
    "binary.md": b"\x00\x01\x02",
}


@pytest.fixture
def vault(write_vault: Callable[[dict[str, str | bytes]], Path], tmp_path: Path) -> Vault:
    root = write_vault(NOTES)
    opened = Vault.open(root, tmp_path / "state", embedder=None)
    opened.index()
    return opened


def _digests(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*.md")
    }


def test_a_check_reports_each_notes_format_and_problems_and_writes_nothing(vault: Vault) -> None:
    before = _digests(vault.root)
    report = vault.check_format()
    assert _digests(vault.root) == before
    by_path = {note.path: note for note in report.notes}
    assert {path: note.format for path, note in by_path.items()} == {
        "Atlas.md": "obsidian",
        "binary.md": "markdown",
        "index.md": "okf_index",
        "log.md": "okf_log",
        "tables/broken.md": "obsidian",
        "tables/customers.md": "markdown",
        "tables/orders.md": "okf_concept",
    }
    assert [i.code for i in by_path["Atlas.md"].errors] == ["missing_type"]
    assert [i.code for i in by_path["binary.md"].errors] == ["not_text"]
    assert [i.code for i in by_path["tables/broken.md"].errors] == ["bad_frontmatter"]
    assert [i.code for i in by_path["tables/customers.md"].errors] == ["no_frontmatter"]
    assert [i.code for i in by_path["log.md"].errors] == ["bad_log_date"]
    assert by_path["tables/orders.md"].errors == by_path["index.md"].errors == ()
    assert report.formats == {
        "okf_concept": 1,
        "okf_index": 1,
        "okf_log": 1,
        "obsidian": 2,
        "markdown": 2,
    }
    assert (report.errors, report.action, report.scope, report.okf_version) == (
        5,
        "check",
        "",
        "0.2",
    )
    assert all(note.enrichment == () for note in report.notes)


def test_a_scope_is_a_folder_or_one_note(vault: Vault) -> None:
    folder = vault.check_format("tables")
    assert folder.scope == "tables"
    assert [n.path for n in folder.notes] == [
        "tables/broken.md",
        "tables/customers.md",
        "tables/orders.md",
    ]
    for name in ("tables/orders.md", "tables/orders", "./tables/orders.md"):
        (note,) = vault.check_format(name).notes
        assert note.path == "tables/orders.md"
    assert len(vault.check_format(".").notes) == len(vault.check_format().notes) == 7
    with pytest.raises(NotFoundError, match="no note or folder 'nope'"):
        vault.check_format("nope")
    with pytest.raises(ValidationError) as outside:
        vault.check_format("../elsewhere")
    assert outside.value.code == "path_outside_vault"
    (vault.root / "data.csv").write_text("a,b\n")
    with pytest.raises(ValidationError) as not_a_note:
        vault.check_format("data.csv")
    assert not_a_note.value.code == "not_a_note"


def test_enrich_suggests_without_writing_until_asked(vault: Vault) -> None:
    before = _digests(vault.root)
    report = vault.enrich_format()
    assert _digests(vault.root) == before and not report.applied and report.enriched == 0
    fields = {
        note.path: {e.field: (e.value, e.source) for e in note.enrichment} for note in report.notes
    }
    assert fields["Atlas.md"]["type"] == ("Projects", "index.md section")
    assert fields["Atlas.md"]["title"] == ("Atlas", "first heading")
    assert fields["Atlas.md"]["tags"] == (["infra"], "inline tags")
    assert fields["tables/customers.md"]["type"] == ("BigQuery Table", "sibling concepts")
    assert fields["tables/customers.md"]["description"] == (
        "One row per customer.",
        "first paragraph",
    )
    assert "timestamp" not in fields["tables/orders.md"], "generated is there"
    assert fields["tables/broken.md"] == fields["index.md"] == fields["log.md"] == {}
    assert report.enrichable == 2


def test_applied_enrichment_merges_keeps_the_body_and_reindexes(vault: Vault) -> None:
    atlas = vault.root / "Atlas.md"
    customers = vault.root / "tables" / "customers.md"
    body = atlas.read_text().split("---\n", 2)[2]
    crlf_body = customers.read_bytes()
    untouched = {p: _digests(vault.root)[p] for p in ("tables/orders.md", "tables/broken.md")}
    report = vault.enrich_format(apply=True)
    assert report.applied and report.enriched == 2
    written = vault.get_note("Atlas.md").frontmatter
    assert written["status"] == "active" and written["owner"] == "ana", "unknown fields kept"
    assert written["review"] == {"by": "bo", "due": "2026-01-01"}
    assert written["type"] == "Projects" and written["tags"] == ["infra"]
    assert atlas.read_text().endswith(body), "the body is kept byte for byte"
    assert customers.read_bytes().endswith(crlf_body), "line endings too"
    assert {p: _digests(vault.root)[p] for p in untouched} == untouched
    by_path = {note.path: note for note in report.notes}
    assert by_path["Atlas.md"].format == "okf_concept" and by_path["Atlas.md"].enriched
    assert by_path["Atlas.md"].errors == (), "the report checks the note as written"
    assert [i.code for i in by_path["tables/broken.md"].errors] == ["bad_frontmatter"]
    hits = vault.search("switch", mode="keyword", where={"type": "Projects"})
    assert [hit.path for hit in hits] == ["Atlas.md"], "re-indexed at once"
    again = vault.enrich_format(apply=True)
    assert again.enriched == 0 and again.enrichable == 0


def test_a_note_that_cannot_be_written_is_reported_and_the_others_are_enriched(
    vault: Vault,
) -> None:
    (vault.root / "tables" / "mirror.md").symlink_to(vault.root / "tables" / "customers.md")
    report = vault.enrich_format("tables", apply=True)
    by_path = {note.path: note for note in report.notes}
    mirror = by_path["tables/mirror.md"]
    assert not mirror.enriched and [i.code for i in mirror.warnings] == ["not_enriched"]
    assert "symlink" in mirror.warnings[0].message
    assert by_path["tables/customers.md"].enriched
    assert report.enriched == 1 and report.enrichable == 2


# -- MCP ---------------------------------------------------------------------------------------

mcp = pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from vrom.server.app import build_server  # noqa: E402
from vrom.server.state import ServerState  # noqa: E402


def _call(root: Path, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    state = ServerState(root, embedder="none", watch=False)
    state.open_explicit()
    replies: list[Any] = []

    async def main() -> None:
        async with Client(build_server(state), mode="legacy") as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            replies.append(tools["vault_format"])
            for name, arguments in calls:
                replies.append(await client.call_tool(name, arguments))

    try:
        asyncio.run(main())
    finally:
        state.close()
    return replies


def test_vault_format_over_mcp_checks_and_enriches(
    write_vault: Callable[[dict[str, str | bytes]], Path],
) -> None:
    root = write_vault(NOTES)
    tool, check, enrich, applied, refused, outside = _call(
        root,
        [
            ("vault_format", {}),
            ("vault_format", {"action": "enrich", "path": "tables"}),
            ("vault_format", {"action": "enrich", "path": "Atlas.md", "apply": True}),
            ("vault_format", {"action": "check", "apply": True}),
            ("vault_format", {"path": "../x"}),
        ],
    )
    assert set(tool.input_schema["properties"]) == {"path", "action", "apply", "offset", "limit"}
    assert not tool.annotations.read_only_hint and tool.annotations.destructive_hint  # apply writes
    data = check.structured_content
    assert not check.is_error and data["action"] == "check" and data["errors"] == 5
    paths = {note["path"]: note for note in data["notes"]}
    assert paths["tables/orders.md"] == {
        "path": "tables/orders.md",
        "format": "okf_concept",
        "enriched": False,
    }, "empty lists are left out"
    assert paths["log.md"]["errors"][0]["code"] == "bad_log_date"
    text = check.content[0].text
    assert text.startswith("7 notes checked against OKF v0.2") and "5 errors" in text
    assert "log.md (okf_log): error bad_log_date: line 6" in text
    suggested = enrich.structured_content
    assert suggested["enrichable"] == 1 and not suggested["applied"]
    assert "apply: true writes it" in enrich.content[0].text
    assert (root / "Atlas.md").read_text().startswith("---\nstatus: active\n")
    done = applied.structured_content
    assert done["enriched"] == 1 and done["notes"][0]["format"] == "okf_concept"
    assert "type: Projects" in (root / "Atlas.md").read_text()
    assert refused.is_error and "action 'enrich'" in refused.content[0].text
    assert outside.is_error and "outside the vault" in outside.content[0].text
    assert os.path.exists(root / "tables" / "customers.md")
