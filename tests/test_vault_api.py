"""The Vault facade: notes, related notes, context, stats, and choosing which vault to open."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vrom import NotFoundError, StorageError, ValidationError, Vault, to_jsonable
from vrom.search.context import estimate_tokens
from vrom.settings import Settings

NOTES = {
    "Home.md": (
        "---\ntitle: Home page\ntags: [hub, team]\nowner: Ana\n---\n"
        "# Home\nLinks: [[Projects/Atlas|Atlas]], [[Atlas#Goals]], ![[Diagram]], "
        "[[Missing note]], [beacon](Projects/Beacon.md), [[#Home]].\n## Later\nMore text.\n"
    ),
    "Projects/Atlas.md": "---\ntags: [team, project]\n---\n# Atlas\n## Goals\nMap the network.\n",
    "Projects/Beacon.md": "---\ntags: [project]\n---\n# Beacon\nSee [[Atlas]] and [[Home]].\n",
    "Archive/Atlas.md": "# Old Atlas\nAn older note with the same name; [[Home]] too.\n",
    "Diagram.md": "# Diagram\n" + "network diagram words " * 40 + "\n",
}


@pytest.fixture
def vault(write_vault, open_vault) -> Vault:
    v: Vault = open_vault(write_vault(NOTES))
    v.index()
    return v


def test_get_note_by_path_name_id_and_absolute_path(vault: Vault) -> None:
    note = vault.get_note("Home.md")
    assert note.title == "Home page"
    assert note.frontmatter["owner"] == "Ana"
    assert note.tags == ["hub", "team"]
    assert note.headings == ["Home", "Later"]
    assert note.body.startswith("# Home\n")
    assert vault.get_note("home").note_id == note.note_id
    assert vault.get_note(note.note_id).path == "Home.md"
    assert vault.get_note(str(note.note_id)).path == "Home.md"
    assert vault.get_note(str(vault.root / "Home.md")).path == "Home.md"
    assert vault.get_note("Projects/Atlas").path == "Projects/Atlas.md"
    for missing in ("Nope", 9999, "../Home.md", "¹", "9" * 30):
        with pytest.raises((NotFoundError, ValidationError)):
            vault.get_note(missing)


def test_links_resolve_like_obsidian(vault: Vault) -> None:
    links = vault.get_note("Home").links
    assert [(link.kind, link.target, link.resolved_path) for link in links] == [
        ("wikilink", "Projects/Atlas", "Projects/Atlas.md"),
        ("wikilink", "Atlas", "Archive/Atlas.md"),
        ("embed", "Diagram", "Diagram.md"),
        ("wikilink", "Missing note", None),
        ("markdown", "Projects/Beacon.md", "Projects/Beacon.md"),
        ("wikilink", "", "Home.md"),
    ]
    assert links[0].alias == "Atlas" and links[1].heading == "Goals"
    # from inside Projects/, a bare [[Atlas]] means the note in the same folder
    beacon_links = vault.get_note("Projects/Beacon").links
    assert beacon_links[0].resolved_path == "Projects/Atlas.md"


def test_related_lists_links_backlinks_and_shared_tags(vault: Vault) -> None:
    related = vault.related("Projects/Atlas")
    assert related.note.path == "Projects/Atlas.md"
    assert [ref.path for ref in related.backlinks] == ["Home.md", "Projects/Beacon.md"]
    shared = {s.note.path: list(s.tags) for s in related.shared_tags}
    assert shared == {"Home.md": ["team"], "Projects/Beacon.md": ["project"]}
    archive = vault.related("Archive/Atlas")
    assert [ref.path for ref in archive.backlinks] == ["Home.md"]
    home = vault.related("Home")
    assert {ref.path for ref in home.backlinks} == {"Projects/Beacon.md", "Archive/Atlas.md"}


def test_context_fits_the_budget_and_cites_sources(vault: Vault) -> None:
    context = vault.context("network", max_tokens=400)
    assert context.tokens <= 400 and context.tokens == estimate_tokens(context.text)
    assert context.sources and "Sources:" in context.text
    for number, hit in enumerate(context.sources, start=1):
        assert f"[{number}] {hit.path}" in context.text
    tight = vault.context("network diagram", max_tokens=60)
    assert tight.tokens <= 60 and len(tight.sources) == 1 and "…" in tight.text
    assert vault.context("zzzunknown", max_tokens=100).text == ""
    with pytest.raises(ValidationError):
        vault.context("network", max_tokens=10)


def test_context_too_small_for_any_passage_is_an_error(write_vault, open_vault) -> None:
    folder = "A folder with a rather long name/and another long folder inside it"
    vault = open_vault(write_vault({f"{folder}/A long note title.md": "budgetword " * 50}))
    vault.index()
    with pytest.raises(ValidationError, match="cannot hold one passage"):
        vault.context("budgetword", max_tokens=50)
    assert vault.context("budgetword", max_tokens=200).sources


def test_stats_and_backend_info(vault: Vault) -> None:
    stats = vault.stats()
    assert (stats.notes, stats.unresolved_links) == (5, 1)
    assert stats.links == 9 and stats.tags == 3
    assert stats.store_bytes > 0 and stats.last_indexed_unix is not None
    info = vault.backend_info()
    assert info.backend == "sqlite" and info.schema_version >= 1
    assert any("trigram" in t or "bigram" in t for t in info.fts_tokenizers)
    assert info.details["journal_mode"] == "wal"


def test_results_are_json_ready(vault: Vault) -> None:
    payload = to_jsonable(
        [vault.search("network"), vault.get_note("Home"), vault.related("Home"), vault.stats()]
    )
    json.dumps(payload)
    # a search is a SearchReport: its JSON form is the report (hits under "results")
    assert payload[0]["results"][0]["path"] == "Diagram.md"
    assert payload[0]["mode"] == "keyword", "the suite's vaults have no embedder (conftest)"
    assert {"fallback", "vectors", "chunks"} <= payload[0].keys()


def test_open_store_by_file(vault: Vault) -> None:
    other = Vault.open_store(vault.store.location)
    assert other.root == vault.root
    assert other.search("network")[0].path == "Diagram.md"
    other.close()
    with pytest.raises(StorageError, match="closed"):
        other.search("network")


def test_open_default_finds_env_cwd_or_last_vault(
    vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with Vault.open_default(cwd=vault.root / "Projects") as found:
        assert found.root == vault.root
    with Vault.open_default(cwd=elsewhere) as found:  # the vault indexed last
        assert found.root == vault.root
    monkeypatch.setenv("VROM_VAULT", str(elsewhere))
    with pytest.raises(NotFoundError, match="not indexed yet"):
        Vault.open_default(cwd=vault.root)
    with Vault.open(elsewhere) as other:
        other.index()
    with Vault.open_default(cwd=vault.root) as found:
        assert found.root == elsewhere.resolve()
    monkeypatch.delenv("VROM_VAULT")
    with pytest.raises(NotFoundError, match="vrom index"):
        Vault.open_default(state_dir=tmp_path / "empty-state", cwd=elsewhere)


def test_vault_root_names_the_vault_as_vrom_vault_does(
    vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``VAULT_ROOT`` (the name client configs use) means what ``VROM_VAULT`` means; set both,
    they must agree; set but empty, it is refused (it would mean the current folder)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("VAULT_ROOT", str(vault.root))
    assert Settings.from_environment().vault_variable() == ("VAULT_ROOT", str(vault.root))
    with Vault.open_default(cwd=elsewhere) as found:
        assert found.root == vault.root
    monkeypatch.setenv("VROM_VAULT", f"{vault.root}/Projects/..")  # the same folder
    assert Settings.from_environment().vault_variable() == (
        "VROM_VAULT",
        f"{vault.root}/Projects/..",
    )
    monkeypatch.setenv("VROM_VAULT", str(elsewhere))
    with pytest.raises(ValidationError, match=r"\$VROM_VAULT .* and \$VAULT_ROOT .* different"):
        Vault.open_default(cwd=vault.root)
    monkeypatch.setenv("VROM_VAULT", "")  # empty: unset, as ever
    monkeypatch.setenv("VAULT_ROOT", str(tmp_path / "gone"))
    with pytest.raises(NotFoundError, match=r"^\$VAULT_ROOT: vault folder .*gone' does not exist"):
        Vault.open_default(cwd=vault.root)
    for empty in ("", "  "):
        monkeypatch.setenv("VAULT_ROOT", empty)
        with pytest.raises(ValidationError, match=r"\$VAULT_ROOT is set but empty"):
            Vault.open_default(cwd=vault.root)
    monkeypatch.delenv("VAULT_ROOT")
    assert Settings.from_environment().vault_variable() is None
