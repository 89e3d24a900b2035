"""Deterministic generator of realistic Markdown vaults for the slow crash and concurrency tests.

A plain module (not a fixture): the slow tests import it after putting this folder on sys.path.
Every note gets frontmatter, a title heading, nested sections of several paragraphs, wikilinks to
other notes, inline tags and a list, so indexing exercises chunks, links and tags.
"""

from __future__ import annotations

import random
from pathlib import Path

FOLDERS = ("Projects", "Journal", "People", "Guides", "Areas/Ops", "Areas/Research", "Inbox")
COMMON_WORDS = ("network", "switch", "budget", "meeting", "release", "archive", "garden")
STATUSES = ("active", "done", "paused", "draft")
_SYLLABLES = (
    "ka", "lo", "mi", "ren", "tas", "vor", "qui", "bel", "dra", "nox", "pel", "sur", "tin",
    "wal", "zen", "cor", "fi", "gam", "hul", "jun",
)  # fmt: skip


def _vocabulary(rng: random.Random, size: int = 600) -> list[str]:
    words = {"".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))) for _ in range(size)}
    return sorted(words) + list(COMMON_WORDS)


def note_paths(count: int, seed: int) -> list[str]:
    """Return the vault-relative paths of a generated vault of ``count`` notes."""
    rng = random.Random(seed)
    return [f"{rng.choice(FOLDERS)}/Note {i:05d}.md" for i in range(count)]


def _sentence(rng: random.Random, words: list[str]) -> str:
    picked = [rng.choice(words) for _ in range(rng.randint(6, 16))]
    return picked[0].capitalize() + " " + " ".join(picked[1:]) + rng.choice((".", ".", "?", "!"))


def _paragraph(rng: random.Random, words: list[str], names: list[str]) -> str:
    sentences = [_sentence(rng, words) for _ in range(rng.randint(2, 6))]
    if rng.random() < 0.5:
        target = rng.choice(names)
        alias = f"|{rng.choice(words)}" if rng.random() < 0.3 else ""
        sentences.insert(rng.randrange(len(sentences) + 1), f"See [[{target}{alias}]].")
    if rng.random() < 0.3:
        sentences.append(f"#{rng.choice(words)}")
    return " ".join(sentences)


def note_text(rng: random.Random, words: list[str], names: list[str], title: str) -> str:
    """Return one note: frontmatter, a title, sections of paragraphs, links, tags, a list."""
    tags = sorted({rng.choice(words) for _ in range(rng.randint(1, 3))})
    lines = [
        "---",
        f"status: {rng.choice(STATUSES)}",
        f"owner: {rng.choice(words).capitalize()}",
        f"priority: {rng.randint(1, 5)}",
        f"tags: [{', '.join(tags)}]",
        "---",
        f"# {title}",
        "",
        _paragraph(rng, words, names),
        "",
    ]
    for _ in range(rng.randint(2, 4)):
        lines += [f"## {rng.choice(words).capitalize()} {rng.choice(words)}", ""]
        for _ in range(rng.randint(1, 3)):
            lines += [_paragraph(rng, words, names), ""]
        if rng.random() < 0.5:
            lines += [f"### {rng.choice(words).capitalize()}", ""]
            lines += [f"- {_sentence(rng, words)}" for _ in range(rng.randint(2, 5))] + [""]
    return "\n".join(lines)


def generate_vault(root: Path, count: int, seed: int) -> list[str]:
    """Write a vault of ``count`` notes under ``root`` (same seed, same bytes); return its paths."""
    rng = random.Random(seed)
    words = _vocabulary(rng)
    paths = note_paths(count, seed)
    names = [Path(p).stem for p in paths]
    for path, name in zip(paths, names, strict=True):
        file = root / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(note_text(rng, words, names, name), encoding="utf-8")
    return paths


def rewrite_note(root: Path, path: str, rng: random.Random) -> None:
    """Write a note (new, or replacing the old one) with freshly generated text under a new title."""
    words = _vocabulary(random.Random(0))
    names = sorted(p.stem for p in (root / path).parent.glob("*.md")) or ["Elsewhere"]
    title = f"{Path(path).stem} (edited {rng.randrange(10**6)})"
    (root / path).write_text(note_text(rng, words, names, title), encoding="utf-8")
