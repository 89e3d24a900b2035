"""The human-relevance prior of a note: how much a person (rather than a system) wrote it for."""

from __future__ import annotations

from typing import Any

from vrom.ingest.okf import DEMOTION, is_demoted

EXPLICIT_KEYS = ("human_relevance_score", "human_relevance", "human_score")
DEFAULT_SCORE = 0.5


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"true", "yes", "1", "on"}
    return value is True or (isinstance(value, (int, float)) and value == 1)


def human_relevance_score(frontmatter: dict[str, Any], path: str) -> float:
    """Return the note's human-relevance score in [0, 1].

    An explicit frontmatter ``human_relevance_score`` / ``human_relevance`` / ``human_score``
    wins (clamped); then ``audience: human`` → 0.9; ``audience: system`` or ``system_only: true``
    → 0.1; a path under ``system/`` → 0.25; otherwise 0.5. A note whose ``status`` says it is no
    longer current (``deprecated``, OKF's word, or ``superseded``) then gets half that score
    (`vrom.ingest.okf.DEMOTION`): 0.5 → 0.25, which turns its prior factor from 1.0 into 0.875,
    so it ranks below a current note that matches as well, in every mode the prior applies to.
    """
    score = _score(frontmatter, path)
    return score * DEMOTION if is_demoted(frontmatter) else score


def _score(frontmatter: dict[str, Any], path: str) -> float:
    for key in EXPLICIT_KEYS:
        value = frontmatter.get(key)
        if isinstance(value, bool) or value is None:
            continue
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):  # OverflowError: an int no float holds
            continue
        if number != number:  # NaN
            continue
        return min(1.0, max(0.0, number))
    audience = frontmatter.get("audience")
    if isinstance(audience, str) and audience.strip().lower() == "human":
        return 0.9
    if (isinstance(audience, str) and audience.strip().lower() == "system") or _truthy(
        frontmatter.get("system_only")
    ):
        return 0.1
    if path.startswith("system/"):
        return 0.25
    return DEFAULT_SCORE
