"""The human-relevance prior of a note."""

from __future__ import annotations

import pytest

from vrom.ingest.relevance import human_relevance_score


@pytest.mark.parametrize(
    ("frontmatter", "path", "expected"),
    [
        ({}, "notes/a.md", 0.5),
        ({"human_relevance_score": 0.8}, "system/a.md", 0.8),
        ({"human_relevance": "0.3"}, "a.md", 0.3),
        ({"human_score": 7}, "a.md", 1.0),
        ({"human_score": -2}, "a.md", 0.0),
        ({"human_relevance_score": "high", "audience": "human"}, "a.md", 0.9),
        ({"human_relevance_score": True}, "a.md", 0.5),
        ({"human_relevance_score": float("nan")}, "a.md", 0.5),
        ({"audience": "Human"}, "system/a.md", 0.9),
        ({"audience": "system"}, "a.md", 0.1),
        ({"system_only": True}, "a.md", 0.1),
        ({"system_only": "yes"}, "a.md", 0.1),
        ({"system_only": False}, "system/a.md", 0.25),
        ({}, "system/deep/a.md", 0.25),
        ({}, "notes/system/a.md", 0.5),
        ({"status": "deprecated"}, "a.md", 0.25),
        ({"status": "Superseded", "audience": "human"}, "a.md", 0.45),
        ({"status": "draft"}, "a.md", 0.5),
    ],
)
def test_human_relevance_score(frontmatter: dict[str, object], path: str, expected: float) -> None:
    assert human_relevance_score(frontmatter, path) == expected
