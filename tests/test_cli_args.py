"""How the CLI turns its filter flags into a ``where`` mapping."""

from __future__ import annotations

import pytest

from vrom import ValidationError
from vrom.cli.vault_commands import _parse_where


def test_where_values_are_read_as_json_scalars_or_strings() -> None:
    where = _parse_where(["n=3", "ok=true", "name=Ana", 'version="1.0"', "list=[1]"], None, [])
    assert where == {"n": 3, "ok": True, "name": "Ana", "version": "1.0", "list": "[1]"}


def test_tag_flags_add_to_where_tags_instead_of_replacing_them() -> None:
    where = _parse_where(["tags=infra", "tag=ops"], None, ["project/beacon"])
    assert list(where) == ["tags"]
    assert sorted(where["tags"]) == ["infra", "ops", "project/beacon"]


def test_path_given_twice_must_agree() -> None:
    assert _parse_where(["path=a/"], "a/", []) == {"path": "a/"}
    with pytest.raises(ValidationError, match="path prefix once"):
        _parse_where(["path=a/"], "b/", [])


@pytest.mark.parametrize("item", ["novalue", "=x", " =x"])
def test_malformed_where_items_are_validation_errors(item: str) -> None:
    with pytest.raises(ValidationError, match="KEY=VALUE"):
        _parse_where([item], None, [])
