"""The excerpt a hit carries: the faster `excerpt` returns exactly what the first one did.

`_reference_excerpt` is the implementation `excerpt` replaced, kept verbatim as the reference:
every generated text and query must give the same characters from both.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from vrom.search.excerpt import EXCERPT_CHARS, MATCHES_PER_WORD, _stems, excerpt


def _reference_excerpt(text: str, words: Sequence[str], width: int = EXCERPT_CHARS) -> str:
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
    window: dict[int, int] = {}
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


# Words of every kind the excerpt treats apart: short and long (stemmed), prefixes of each other,
# digits, non-ASCII (never stemmed), and letters whose lower case has another length (İ).
WORDS = """
    cell cells cellular intracellular cancer cancers tumour tumours patient patients therapy
    therapeutic gene genes genetic a an of the to 0 1 5 42 2024 covid-19 naïve café straße
    STRASSE İstanbul ΣΟΦΙΑ σοφία 東京 タワー 서울 x y z ab abc abcdef abcdefgh
"""
VOCABULARY = WORDS.split()
# Whitespace of every kind `str.split` knows, runs of it, and look-alikes it does not split on.
SEPARATORS = (
    [" "] * 30
    + ["\n"] * 6
    + ["\n\n", "  ", "\t", " \n", "\n \n", "\r\n", "\u00a0", "\u2003", "\u3000", "\x1c", "\x85"]
    + ["\u200b", "\xad"]  # zero-width space and soft hyphen: not whitespace, not printable
)


def _text(rng: random.Random) -> str:
    size = rng.choice([3, 20, 40, 45, 50, 55, 60, 200, 600])
    parts = [rng.choice(["", " ", "\n", "\t"])]
    for _ in range(size):
        parts += [rng.choice(VOCABULARY), rng.choice(SEPARATORS)]
    return "".join(parts)


def _words(rng: random.Random, text: str) -> list[str]:
    known = text.split() or ["x"]
    words = [rng.choice(known) for _ in range(rng.randint(0, 6))]
    words += [rng.choice(VOCABULARY) for _ in range(rng.randint(0, 4))]
    words += rng.sample(["", " ", "missing", "zzz", "cel", "the cells"], rng.randint(0, 2))
    return words


def test_excerpt_matches_the_reference_on_generated_texts_and_queries() -> None:
    rng = random.Random(20260)  # a fixed seed: every run checks the same 6,000 cases
    for _ in range(6_000):
        text = _text(rng)
        words = _words(rng, text)
        width = rng.choice([EXCERPT_CHARS, EXCERPT_CHARS, 40, 120])
        assert excerpt(text, words, width) == _reference_excerpt(text, words, width), (
            text,
            words,
            width,
        )


def test_excerpt_matches_the_reference_where_a_word_recurs_past_the_matches_kept() -> None:
    # more than MATCHES_PER_WORD occurrences: the densest window is among the first ones kept
    text = "cell " * 40 + "filler " * 60 + "cell gene " * 40 + "gene tumour " * 5
    for words in (["cell"], ["cell", "gene"], ["gene", "tumour"], ["cell", "gene", "tumour"]):
        assert excerpt(text, words) == _reference_excerpt(text, words)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from([*"abcİσ東 \n\t\u00a0\x1c\u200b.", "cell", "gene", "\n\n"]),
        max_size=300,
    ).map("".join),
    st.lists(st.sampled_from(["a", "ab", "cell", "cells", "gene", "σ", "İ", "東", " ", ""])),
)
def test_excerpt_matches_the_reference_on_any_text(text: str, words: list[str]) -> None:
    for width in (EXCERPT_CHARS, 30):
        assert excerpt(text, words, width) == _reference_excerpt(text, words, width)
