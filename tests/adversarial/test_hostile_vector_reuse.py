"""Hostile edits for vector reuse: a vault built so that chunks share their text while what they
are embedded from differs (one body under many titles, notes swapping names, a section moved
under another heading, a note turned into a copy of another), indexed in rounds and synced both
ways. After every round each store's vectors must be a clean index's, chunk by chunk: a vector
is reused or copied only for the very same embedded input (issue 26 items 1 and 2).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vrom import Embedder, Vault
from vrom.store import Store, open_store

BODIES = (
    "The quarterly backup rotation moves tapes offsite every Friday afternoon.",
    "Each tape is labelled with the week number and the server it came from.",
    "Repotted the basil on the windowsill and watered the ferns.",
)
TITLES = ("Tape storage", "Volcano eruptions", "Garden pests", "")
HEADINGS = ("Plan", "Labels", "")
NAMES = ("a.md", "b.md", "Sub/c.md", "Sub/d.md", "e.md")

Note = tuple[int, int, int, bool]  # body, title, heading of its section, title as an H1


def note_text(body: int, title: int, heading: int, as_h1: bool) -> str:
    """A note whose chunks share their text with any note of the same body."""
    name, section = TITLES[title], HEADINGS[heading]
    head = (f"# {name}\n\n" if as_h1 else f"---\ntitle: {name}\n---\n") if name else ""
    text = f"{head}{BODIES[body]}\n"
    if section:
        text += f"\n## {section}\n\n{BODIES[(body + 1) % len(BODIES)]}\n"
    return text


NOTE = st.tuples(
    st.integers(0, len(BODIES) - 1),
    st.integers(0, len(TITLES) - 1),
    st.integers(0, len(HEADINGS) - 1),
    st.booleans(),
)
VAULT = st.dictionaries(st.sampled_from(NAMES), NOTE, min_size=1)


def write_vault(root: Path, notes: dict[str, Note]) -> None:
    """Make ``root`` hold exactly these notes."""
    for path in root.rglob("*.md"):
        path.unlink()
    for rel, note in notes.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(note_text(*note), encoding="utf-8")


def swapped(notes: dict[str, Note]) -> dict[str, Note]:
    """The same notes under each other's names (a rotation of the paths)."""
    paths = sorted(notes)
    return {paths[i - 1]: notes[path] for i, path in enumerate(paths)}


def vectors_by_place(store: Store) -> dict[tuple[str, int], bytes | None]:
    found: dict[tuple[str, int], bytes | None] = {}
    for path, state in store.documents.states().items():
        chunks = store.documents.chunks_of(state.document_id)
        vectors = store.vectors.of([c.chunk_id for c in chunks])
        found.update({(path, c.position): vectors.get(c.chunk_id) for c in chunks})
    return found


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(rounds=st.lists(VAULT, min_size=1, max_size=3), swap=st.booleans())
def test_no_store_holds_a_vector_made_from_another_input(
    tmp_path_factory: pytest.TempPathFactory, rounds: list[dict[str, Note]], swap: bool
) -> None:
    base = tmp_path_factory.mktemp("reuse")
    root = base / "notes"
    root.mkdir()
    fake = Embedder.fake(16)
    shared = f"sqlite:///{base / 'shared.db'}"
    with Vault.open(root, base / "state", embedder=fake, local=True) as vault:
        for number, notes in enumerate(rounds):
            write_vault(root, notes)
            vault.index()
            if swap:  # the same notes, each under another's name
                write_vault(root, swapped(notes))
                vault.index()
            clean_root = base / f"clean-{number}"
            shutil.copytree(root, clean_root)
            with Vault.open(clean_root, base / f"clean-state-{number}", embedder=fake) as clean:
                clean.index()
                expected = vectors_by_place(clean.store)
            assert vectors_by_place(vault.store) == expected, "incremental index"
            vault.sync_to(shared)
            copy = open_store(shared)
            try:
                assert vectors_by_place(copy) == expected, "synced copy"
            finally:
                copy.close()
    back = base / "back"
    shutil.copytree(root, back)
    with Vault.open(back, base / "state-back", embedder=fake, local=True) as here:
        here.sync_from(shared)
        assert vectors_by_place(here.store) == expected, "synced back"
