"""Text as the SQLite keyword index sees it: CJK runs cut into overlapping bigrams.

SQLite's unicode61 tokenizer treats a run of Chinese, Japanese or Korean characters without spaces
as one token, so a word inside a sentence could never be found. Before text enters the index (and
before a query term is matched) each such run becomes its character bigrams followed by its last
character — ``東京都`` → ``東京 京都 都`` — so every word of two or more characters is a phrase of
consecutive bigrams, and a single character is a prefix of some token.
"""

from __future__ import annotations

import re

_CJK_RUN = re.compile(
    "[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002ffff]+"
)


def has_cjk(text: str) -> bool:
    """Return True when ``text`` holds Chinese, Japanese or Korean characters."""
    return not text.isascii() and _CJK_RUN.search(text) is not None  # isascii: C speed


def _bigrams(match: re.Match[str]) -> str:
    run = match.group(0)
    grams = [run[i : i + 2] for i in range(len(run) - 1)]
    grams.append(run[-1])
    return " " + " ".join(grams) + " "


def segment(text: str) -> str:
    """Return ``text`` with every CJK run replaced by its bigrams and final character."""
    if not has_cjk(text):
        return text
    return _CJK_RUN.sub(_bigrams, text)


def segment_query_term(term: str) -> tuple[str, bool]:
    """Return (phrase text, is_prefix) for a query term as the index must match it.

    CJK runs become their bigrams only (no trailing character, which would demand a run end);
    a lone CJK character matches as the prefix of a token.
    """
    if not has_cjk(term):
        return term, False
    if len(term) == 1:
        return term, True
    return _CJK_RUN.sub(_query_bigrams, term).strip(), False


def _query_bigrams(match: re.Match[str]) -> str:
    run = match.group(0)
    if len(run) == 1:
        return f" {run} "
    return " " + " ".join(run[i : i + 2] for i in range(len(run) - 1)) + " "
