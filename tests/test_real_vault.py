"""The core on a real vault (../shared/data/vault/obsidian-hub); skipped when the data is absent."""

from __future__ import annotations

from pathlib import Path

import pytest

from vrom import Vault

HUB = Path(__file__).resolve().parents[2] / "shared" / "data" / "vault" / "obsidian-hub"

pytestmark = [
    pytest.mark.data,
    pytest.mark.skipif(not HUB.is_dir(), reason=f"no real vault at {HUB}"),
]


def test_obsidian_hub_indexes_whole_and_searches(tmp_path: Path) -> None:
    expected = [
        p
        for p in HUB.rglob("*")
        if p.suffix in (".md", ".markdown")
        and not any(part.startswith(".") for part in p.relative_to(HUB).parts)
    ]
    with Vault.open(HUB, tmp_path / "state") as vault:
        summary = vault.index()
        assert summary.notes + summary.skipped == len(expected)
        assert summary.notes > 6000 and summary.chunks > summary.notes
        assert all("malformed frontmatter" in w.reason for w in summary.warnings)
        assert vault.store.integrity_problems() == []

        again = vault.index()
        assert (again.unchanged, again.added, again.changed, again.removed) == (
            summary.notes,
            0,
            0,
            0,
        )

        found = 0
        paths = sorted(vault.store.documents.states())[::200]
        for path in paths:
            note = vault.get_note(path)
            found += any(hit.path == path for hit in vault.search(note.title, k=10))
        assert found >= 0.9 * len(paths), f"only {found} of {len(paths)} titles found their note"

        stats = vault.stats()
        assert stats.links > 10_000 and stats.unresolved_links < stats.links / 10
