"""Bounded excerpts: the window of a chunk that holds the most query words."""

from __future__ import annotations

import functools
from collections.abc import Sequence

EXCERPT_CHARS = 280
# the occurrences of each word looked at: enough to find the densest window in a long chunk
MATCHES_PER_WORD = 32


def _stem(word: str) -> str:
    # the keyword index stems words (porter); match the shared beginning of inflected forms
    lowered = word.lower()
    return lowered[:-2] if len(lowered) > 5 and lowered.isascii() else lowered


@functools.lru_cache(maxsize=64)  # one query's words, asked for every hit
def _stems(words: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(_stem(w) for w in words if w.strip()))


def excerpt(text: str, words: Sequence[str], width: int = EXCERPT_CHARS) -> str:
    """Return at most ``width`` characters of ``text`` (plus ellipses) around the query words.

    The window is the one covering the most distinct words; whitespace is collapsed.
    """
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    lowered = flat.lower()
    hits: list[tuple[int, int]] = []
    for index, stem in enumerate(_stems(tuple(words))):
        start = lowered.find(stem)
        for _ in range(MATCHES_PER_WORD):
            if start == -1:
                break
            hits.append((start, index))
            start = lowered.find(stem, start + 1)
    hits.sort()
    best_start, best_count = 0, 0
    window: dict[int, int] = {}  # word index -> hits inside [hits[i], hits[i] + width)
    right = 0
    for position, word in hits:
        while right < len(hits) and hits[right][0] < position + width:
            window[hits[right][1]] = window.get(hits[right][1], 0) + 1
            right += 1
        if len(window) > best_count:
            best_start, best_count = position, len(window)
        window[word] -= 1
        if not window[word]:
            del window[word]
    start = max(0, best_start - width // 4) if best_count else 0
    end = min(len(flat), start + width)
    start = max(0, end - width)
    if start > 0:
        space = flat.find(" ", start, start + 30)
        start = space + 1 if space != -1 else start
    if end < len(flat):
        space = flat.rfind(" ", end - 30, end)
        end = space if space != -1 else end
    return ("…" if start > 0 else "") + flat[start:end].strip() + ("…" if end < len(flat) else "")
