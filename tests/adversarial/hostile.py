"""Hostile notes and names shared by the adversarial suite (issue 15)."""

from __future__ import annotations

import os
from pathlib import Path

GOOD_NOTES = {
    f"good/note-{i:02d}.md": f"---\ntitle: Good {i}\ntags: [fine]\n---\n# Good {i}\n\nkiwi{i} orchard\n"
    for i in range(12)
}


def alias_bomb(levels: int = 7, width: int = 9) -> str:
    """Return a note whose frontmatter is ``levels`` lists of ``width`` aliases of the one before
    (7 × 9: 348 bytes that name 9**7 = 4.8 million values)."""
    lines = ["---", f"l0: &l0 [{','.join(['lol'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{','.join([f'*l{i - 1}'] * width)}]")
    return "\n".join([*lines, "---", "# Bomb", "", "body text"]) + "\n"


HOSTILE_NOTES = {
    "inf.md": "---\nx: .inf\ny: -.inf\n---\n# Inf\n\nfrontmatter with infinities\n",
    "nan.md": "---\nx: .nan\n---\n# NaN\n\nfrontmatter with nan\n",
    "huge-int.md": f"---\nn: {'9' * 4000}\nhuman_relevance_score: {'9' * 400}\n---\nhuge\n",
    "too-many-digits.md": f"---\nn: {'9' * 5000}\n---\nover the digit limit\n",
    "odd-types.md": "---\nb: !!binary aGk=\ns: !!set {a}\nd: 2026-13-45\n---\nbad date\n",
    "bomb.md": alias_bomb(),
    "self.md": "---\na: &a [*a]\n---\nrecursive alias\n",
    "deep.md": "---\nx: " + "[" * 500 + "]" * 500 + "\n---\ndeep\n",
    "tag.md": "---\nx: !!python/object:os.system ls\n---\nunsafe tag\n",
    "surrogate.md": '---\nx: "\\udce9"\n---\nsurrogate escape\n',
}

UNBUILDABLE_NOTES = {  # issue 26, item 4: values YAML parses but cannot build
    "not-a-date.md": "---\nd: !!timestamp not-a-date\ntitle: Not a date\n---\n# Body\n",
    "feb-30.md": "---\nd: 2023-02-30\ntype: concept\ntitle: February\n---\nthirtieth\n",
    "digits.md": f"---\nn: {'9' * 4301}\ntitle: Digits\n---\nmany digits\n",
    "hex.md": f"---\nh: 0x{'f' * 4000}\ntitle: Hex\n---\na hex integer of 4,817 digits\n",
}
UNBUILDABLE_FRONTMATTER = {  # what each note's frontmatter is, the value kept as its text
    "not-a-date.md": {"d": "not-a-date", "title": "Not a date"},
    "feb-30.md": {"d": "2023-02-30", "type": "concept", "title": "February"},
    "digits.md": {"n": "9" * 4301, "title": "Digits"},
    "hex.md": {"h": "0x" + "f" * 4000, "title": "Hex"},
}


def make_file(folder: Path, name: bytes, content: bytes = b"# Hostile\n\nbody\n") -> bool:
    """Create ``folder/name`` from raw bytes; False where the file system refuses the name."""
    try:
        fd = os.open(os.path.join(os.fsencode(folder), name), os.O_CREAT | os.O_WRONLY, 0o644)
    except (OSError, ValueError):
        return False
    with os.fdopen(fd, "wb") as file:
        file.write(content)
    return True


def tag_storm(distinct: int = 40_000) -> str:
    """Return a note of ``distinct`` inline tags, each written twice (upper case the second
    time, so de-duplication must read it): ``#t0 ... #T0 ...``, about 620 KB at 40,000 tags."""
    tags = [f"#t{i}" for i in range(distinct)]
    return "# Tag storm\n\n" + " ".join(tags) + "\n\n" + " ".join(t.upper() for t in tags) + "\n"
