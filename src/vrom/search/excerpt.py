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


def _collapsed(text: str) -> str:
    """Return ``text`` with each run of whitespace one space, and none at either end."""
    # Splitting and joining would cost most of an excerpt's time; most chunks need less.
    # Replacing a run of whitespace by a space keeps every run a run, so when no whitespace is
    # left but single spaces inside (every other whitespace character is unprintable), that is
    # the collapsed text.
    spaced = text.replace("\n\n", " ").replace("\n", " ") if "\n" in text else text
    if spaced.isprintable() and "  " not in spaced and spaced[:1] != " " and spaced[-1:] != " ":
        return spaced
    return " ".join(text.split())


def excerpt(text: str, words: Sequence[str], width: int = EXCERPT_CHARS) -> str:
    """Return at most ``width`` characters of ``text`` (plus ellipses) around the query words.

    The window is the one covering the most distinct words; whitespace is collapsed.
    """
    flat = _collapsed(text)
    if len(flat) <= width:
        return flat
    lowered = flat.lower()
    stems = _stems(tuple(words))
    find = lowered.find  # looked up once: it runs for every word
    firsts = [(at, index) for index, stem in enumerate(stems) if (at := find(stem)) != -1]
    best_start, best_count = 0, len(firsts)
    if firsts:
        best_start = min(firsts)[0]
    if len(firsts) > 1 and max(firsts)[0] >= best_start + width:
        # the words found do not all fit the window at the first: find the densest one
        hits: list[tuple[int, int]] = []  # (position, word index)
        add = hits.append
        for at, index in firsts:
            add((at, index))
            for _ in range(MATCHES_PER_WORD - 1):
                at = find(stems[index], at + 1)
                if at == -1:
                    break
                add((at, index))
        hits.sort()
        best_count = 0
        inside = [0] * len(stems)  # word index -> its hits in [position, position + width)
        distinct, right, total = 0, 0, len(hits)
        for position, word in hits:
            while right < total and hits[right][0] < position + width:
                if not inside[hits[right][1]]:
                    distinct += 1
                inside[hits[right][1]] += 1
                right += 1
            if distinct > best_count:
                best_start, best_count = position, distinct
            if best_count == len(firsts) or right == total:
                break  # no later window holds more words: all are in, or windows only shrink
            inside[word] -= 1
            if not inside[word]:
                distinct -= 1
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
