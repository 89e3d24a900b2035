"""The user guide cannot drift: its commands and flags exist, its Python runs, its links resolve."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from vrom.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "guide.md"
TEXT = GUIDE.read_text(encoding="utf-8")
TOP_LEVEL_WITH_VALUE = {"--state-dir", "--embedder"}


def _subcommand_help() -> dict[str, str]:
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return {name: sub.format_help() for name, sub in action.choices.items()}  # type: ignore[union-attr]


def test_every_guide_command_and_flag_exists() -> None:
    helps = _subcommand_help()
    checked = 0
    for block in re.findall(r"```bash\n(.*?)```", TEXT, re.DOTALL):
        for line in block.splitlines():
            words = shlex.split(line.split("  #", 1)[0])
            if not words or words[0] != "vrom":
                continue
            rest = words[1:]
            while rest and rest[0] in TOP_LEVEL_WITH_VALUE:
                rest = rest[2:]
            name = rest[0]
            assert name in helps, f"the guide uses unknown command 'vrom {name}'"
            help_text = helps[name]
            if name == "pack":  # its actions are listed in its help
                assert rest[1] in help_text, f"vrom pack has no {rest[1]}"
            for flag in (w.split("=")[0] for w in rest[1:] if w.startswith("--")):
                assert flag in help_text, f"vrom {name} has no {flag}"
            checked += 1
    assert checked >= 10


def test_the_guide_python_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (code,) = re.findall(r"```python\n(.*?)```", TEXT, re.DOTALL)
    monkeypatch.setenv("HOME", str(tmp_path))  # its storage is under ~
    monkeypatch.delenv("VROM_EMBEDDER", raising=False)  # the real default model, as a user has
    namespace: dict[str, object] = {}
    exec(compile(code, str(GUIDE), "exec"), namespace)
    hits = namespace["hits"]
    assert [hit.id for hit in hits] == ["leave"]  # type: ignore[attr-defined]
    namespace["docs"].close()  # type: ignore[attr-defined]
    assert list((tmp_path / ".local" / "share" / "my-agent").glob("handbook.db"))


def test_the_guide_links_resolve() -> None:
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", TEXT):
        if target.startswith("http"):
            continue
        assert (GUIDE.parent / target).exists(), f"the guide links to {target}, which is missing"
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "(docs/guide.md)" in readme, "the README links to the guide"


def test_the_guide_and_the_mode_help_say_hybrid_fuses_normalised_scores_not_ranks() -> None:
    helps = _subcommand_help()
    mode_help = " ".join(helps["search"].split())
    assert "hybrid (normalised keyword and vector scores fused)" in mode_help
    assert "rank fusion" not in mode_help and "by rank" not in TEXT
