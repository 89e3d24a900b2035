"""The README cannot drift: its commands run, its flags exist, its test command is CI's."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vrom.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")


def _block_after(marker: str) -> str:
    match = re.search(rf"<!-- {marker} -->\n```\w*\n(.*?)```", README, re.DOTALL)
    assert match, f"README has no code block after <!-- {marker} -->"
    return match.group(1).strip()


GLOBAL_OPTIONS = (
    "--state-dir",
    "--embedder",
    "--vault",
    "--db",
    "--database-url",
    "--namespace",
    "--json",
)


def test_global_options_exist() -> None:
    help_text = build_parser().format_help()
    for option in GLOBAL_OPTIONS:
        assert option in help_text


def _subcommands() -> dict[str, object]:
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return dict(action.choices)  # type: ignore[arg-type]


def test_quickstart_runs_as_written(tmp_path: Path) -> None:
    command = _block_after("quickstart")
    install, _, rest = command.partition(" && ")
    assert install == "pip install .", "the quick start starts by installing the project"
    assert shutil.which("vrom"), "the vrom console script is installed"
    env = {**os.environ, "VROM_STATE_DIR": str(tmp_path / "state")}
    env.pop("VROM_VAULT", None)
    env.pop("VROM_EMBEDDER", None)  # as a user runs it: with the real default model
    result = subprocess.run(
        ["bash", "-c", rest], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "indexed 7 notes" in result.stdout and "chunks embedded" in result.stdout
    assert "Projects/Project Atlas.md" in result.stdout


def test_ci_runs_exactly_the_readme_test_command() -> None:
    command = _block_after("test-command")
    ci_lines = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    assert command in ci_lines


def test_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code = _block_after("python-example")
    monkeypatch.delenv("VROM_EMBEDDER")  # the real default model, as a user runs it
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("VROM_STATE_DIR", str(tmp_path / "state"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    printed = out.getvalue()
    assert "7 notes" in printed
    assert "Projects/Project Atlas.md" in printed
    assert "Sources:" in printed


def test_collection_example_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    code = _block_after("collection-example")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("leave ") and "25 days" in lines[0]
    assert len(lines) == 2, "the filter kept only the hr document"
    assert '"id": "bikes"' in lines[1], "the tool found the bike racks by meaning"


def test_every_readme_command_and_flag_exists() -> None:
    subcommands = _subcommands()
    used: set[str] = set()
    for block in re.findall(r"```bash\n(.*?)```", README, re.DOTALL):
        for line in block.splitlines():
            for segment in line.split("&&"):
                words = shlex.split(segment.split("#", 1)[0])
                if not words or words[0] != "vrom":
                    continue
                rest = words[1:]
                while rest and rest[0] in GLOBAL_OPTIONS:  # options before the command
                    rest = rest[1:] if rest[0] == "--json" else rest[2:]
                name = rest[0]
                assert name in subcommands, f"README uses unknown command 'vrom {name}'"
                used.add(name)
                help_text = subcommands[name].format_help()  # type: ignore[attr-defined]
                for flag in (w.split("=")[0] for w in rest[1:] if w.startswith("--")):
                    assert flag in help_text, f"vrom {name} has no {flag}"
    assert used == set(subcommands), f"commands missing from the README: {set(subcommands) - used}"


def test_every_readme_benchmark_script_and_flag_exists() -> None:
    scripts: dict[str, set[str]] = {}
    for block in re.findall(r"```bash\n(.*?)```", README, re.DOTALL):
        for line in block.splitlines():
            words = shlex.split(line.split("#", 1)[0])
            if len(words) >= 2 and words[0] == "python" and words[1].startswith("bench/"):
                scripts.setdefault(words[1], set()).update(w for w in words if w.startswith("--"))
    peers = ("keyword_peers", "vector_engines", "hybrid_peers", "vault_indexing")
    assert {f"bench/{name}.py" for name in peers} <= set(scripts), scripts
    for script, flags in scripts.items():
        assert (REPO / script).is_file(), f"README names {script}, which does not exist"
        shown = subprocess.run(
            [sys.executable, str(REPO / script), "--help"], capture_output=True, text=True
        )
        assert shown.returncode == 0, shown.stderr
        for flag in flags:
            assert flag in shown.stdout, f"{script} has no {flag}"


def test_every_command_has_help_text() -> None:
    for name, parser in _subcommands().items():
        assert parser.description, f"vrom {name} has no description"  # type: ignore[attr-defined]


def test_the_readme_lists_exactly_the_mcp_tools_served(tmp_path: Path) -> None:
    """The README's table of tools names each tool the server lists, and no other: one set of
    names (the memory tools are vault_remember, vault_recall, vault_memory_stats and
    vault_memory_archive, with no memory_* aliases)."""
    pytest.importorskip("mcp")
    import asyncio

    from mcp import Client

    from vrom.server.app import build_server
    from vrom.server.state import ServerState

    table = re.search(r"<!-- mcp-tools -->\n((?:\|.*\n)+)", README)
    assert table, "the README's MCP section has no table of tools after <!-- mcp-tools -->"
    first_column = [row.split("|")[1] for row in table.group(1).splitlines()[2:]]
    named = {name for cell in first_column for name in re.findall(r"`(\w+)`", cell)}
    (tmp_path / "vault").mkdir()
    state = ServerState(tmp_path / "vault", embedder="none", watch=False)
    served: set[str] = set()

    async def main() -> None:
        async with Client(build_server(state), mode="legacy") as client:
            served.update(tool.name for tool in (await client.list_tools()).tools)

    try:
        asyncio.run(main())
    finally:
        state.close()
    assert named == served, (
        f"listed, not served: {named - served}; served, not listed: {served - named}"
    )


@pytest.mark.data
def test_the_readme_eval_example_runs_on_data_that_exists(tmp_path: Path) -> None:
    line = next(
        line.split("  #", 1)[0] for line in README.splitlines() if line.startswith("vrom eval ")
    )
    words = shlex.split(line)
    dataset = REPO / words[2]
    if not dataset.is_dir():
        pytest.skip(f"{words[2]} is not here (the shared evaluation data sits beside the repo)")
    env = {**os.environ, "VROM_STATE_DIR": str(tmp_path / "state")}
    result = subprocess.run(
        [shutil.which("vrom") or "vrom", *words[1:]],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    (keyword,) = report["results"]
    assert keyword["mode"] == "keyword" and keyword["queries"] == 100
    assert 0.0 < keyword["ndcg"] <= 1.0 and report["index"]["documents"] > 1000


def test_issue27_item6_the_readme_states_the_mcp_reply_bounds_the_server_keeps() -> None:
    pytest.importorskip("mcp")
    from vrom.server import bounds

    stated = re.search(r"^- Reply size: (.*?)(?=^- )", README, re.S | re.M)
    assert stated, "the README's MCP section says nothing about how big a reply may get"
    text = " ".join(stated.group(1).split())
    for name in ("REPLY_CHARS", "BODY_CHARS", "PAGE_ITEMS", "MAX_PAGE_ITEMS", "CONTEXT_TOKENS"):
        value = getattr(bounds, name)
        assert f"{value:,}" in text, f"the README's reply size does not say {name} = {value:,}"


CONFIGURATION = REPO / "docs" / "configuration.md"


def _variables_table() -> str:
    """Return the table of docs/configuration.md as `vrom.settings.VARIABLES` makes it."""
    from vrom.settings import VARIABLES

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    rows = ["| Variable | Default (unset) | What it does |", "| --- | --- | --- |"]
    rows += [f"| `{v.name}` | {cell(v.default)} | {cell(v.meaning)} |" for v in VARIABLES]
    return "\n".join(rows)


def test_settings_once_the_configuration_page_lists_every_variable_with_its_default() -> None:
    """Issue 28 item 6: docs/configuration.md's table is `VARIABLES`, which names every
    `Settings` field once, and every ``VROM_*`` name the source spells is among them."""
    import dataclasses

    from vrom.settings import DEFAULT_EMBEDDER_SPEC, VARIABLES, Settings

    page = CONFIGURATION.read_text(encoding="utf-8")
    match = re.search(r"<!-- variables:[^>]*-->\n(.*?)\n<!-- /variables -->", page, re.DOTALL)
    assert match, "docs/configuration.md has no <!-- variables --> table"
    expected = _variables_table()
    assert match.group(1) == expected, f"regenerate the table of {CONFIGURATION}:\n{expected}"
    fields = [field.name for field in dataclasses.fields(Settings)]
    assert sorted(v.field for v in VARIABLES) == sorted(fields), "one variable per field"
    assert DEFAULT_EMBEDDER_SPEC in next(v.default for v in VARIABLES if v.field == "embedder")
    spelled = set()
    for path in (REPO / "src" / "vrom").rglob("*.py"):
        spelled |= set(re.findall(r"\bVROM_[A-Z_]+[A-Z]\b", path.read_text(encoding="utf-8")))
    assert spelled <= {v.name for v in VARIABLES}, "a variable the page does not list"


def test_the_configuration_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = CONFIGURATION.read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", page, re.DOTALL)
    assert code, "docs/configuration.md has a Python example"
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "notes").mkdir()
    state = tmp_path / "state"
    monkeypatch.setenv("VROM_STATE_DIR", str(tmp_path / "not-this-one"))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(code.group(1).replace("/tmp/vrom-state", str(state)), {})
    assert printed.getvalue().startswith(str(state))
