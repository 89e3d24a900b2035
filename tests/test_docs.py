"""The README and the reference pages cannot drift: their commands and flags exist, their code
runs, their links resolve, and the README's test command is CI's.

The README is the front page (what vrom is, install, the quick start, the test command, one
example per face); the reference is docs/cli.md (every command), docs/python.md (the Python
API) and docs/mcp.md (the MCP server), each checked here the way the README is."""

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
DOCS = REPO / "docs"
REFERENCE = ("cli.md", "python.md", "mcp.md")


def _page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def _block_after(marker: str, text: str = README, where: str = "README") -> str:
    match = re.search(rf"<!-- {marker} -->\n```\w*\n(.*?)```", text, re.DOTALL)
    assert match, f"{where} has no code block after <!-- {marker} -->"
    return match.group(1).strip()


def _bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, re.DOTALL)


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


def _run_python_block(code: str, where: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, where, "exec"), {})
    return out.getvalue()


def test_collection_example_runs() -> None:
    code = _block_after("collection-example", _page("python.md"), "docs/python.md")
    lines = _run_python_block(code, "docs/python.md").splitlines()
    assert lines[0].startswith("leave ") and "25 days" in lines[0]
    assert len(lines) == 2, "the filter kept only the hr document"
    assert '"id": "bikes"' in lines[1], "the tool found the bike racks by meaning"


def _reference_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder like a clone (its examples/ is the repository's), with the state and the pack
    cache inside tmp_path and the real default model, as a user runs the page's code."""
    cwd = tmp_path / "clone"
    cwd.mkdir()
    (cwd / "examples").symlink_to(REPO / "examples", target_is_directory=True)
    monkeypatch.delenv("VROM_EMBEDDER")
    monkeypatch.setenv("VROM_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("VROM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(cwd)
    return cwd


def test_issue28_item8_every_python_block_of_the_python_page_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each ```python block of docs/python.md runs as written and prints what it says; the
    AgentMemory one mounts the pack the CLI page's own `vrom pack build` and `publish` make."""
    text = _page("python.md")
    blocks = re.findall(r"<!-- ([\w-]+) -->\n```python\n(.*?)```", text, re.DOTALL)
    assert len(blocks) == len(re.findall(r"```python\n", text)), "every block has a marker"
    cwd = _reference_cwd(tmp_path, monkeypatch)
    first_pack_block = next(b for b in _bash_blocks(_page("cli.md")) if "vrom pack build" in b)
    pack_lines = [
        line.split("  #", 1)[0]
        for line in first_pack_block.splitlines()
        if line.startswith(("vrom pack build examples/vault", "vrom pack publish"))
    ]
    assert len(pack_lines) == 2, pack_lines
    for line in pack_lines:
        made = subprocess.run(
            [sys.executable, "-m", "vrom", *shlex.split(line)[1:]],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert made.returncode == 0, made.stderr
    expected = {
        "python-example": ("7 notes", "Projects/Project Atlas.md", "Sources:"),
        "memories-example": ("Deploys · We deploy on Tuesdays", "fused"),
        "collection-example": ("leave ", '"id": "bikes"'),
        "agent-memory-example": ("Project Atlas", "[Source: Projects/Project Atlas.md]"),
    }
    assert {marker for marker, _ in blocks} == set(expected)
    for marker, code in blocks:
        printed = _run_python_block(code, f"docs/python.md ({marker})")
        for words in expected[marker]:
            assert words in printed, f"docs/python.md's {marker} printed no {words!r}: {printed}"


def _command_parser(words: list[str], where: str) -> tuple[str, str]:
    """Return (command, the help text its flags are checked against) for one `vrom ...` line:
    the subcommand's, or its action's (`vrom pack pull`, `vrom memory recall`) when it has some."""
    rest = words[1:]
    while rest and rest[0] in GLOBAL_OPTIONS:  # options before the command
        rest = rest[1:] if rest[0] == "--json" else rest[2:]
    name = rest[0]
    subcommands = _subcommands()
    assert name in subcommands, f"{where} uses unknown command 'vrom {name}'"
    parser = subcommands[name]
    actions = [a for a in parser._actions if a.choices and a.dest != "help"]  # type: ignore[attr-defined]
    nested = next((a.choices for a in actions if isinstance(a.choices, dict)), None)
    if nested is not None and len(rest) > 1 and not rest[1].startswith("-"):
        assert rest[1] in nested, f"{where} uses unknown 'vrom {name} {rest[1]}'"
        parser = nested[rest[1]]
    return name, parser.format_help()  # type: ignore[attr-defined]


def _commands_used(text: str, where: str) -> set[str]:
    """Check every `vrom` command line of the text's bash blocks and its flags; return the
    commands it uses."""
    used: set[str] = set()
    for block in _bash_blocks(text):
        for line in block.splitlines():
            for segment in line.split("&&"):
                words = shlex.split(segment.split("  #", 1)[0])
                if not words or words[0] != "vrom":
                    continue
                name, help_text = _command_parser(words, where)
                used.add(name)
                for flag in (w.split("=")[0] for w in words[1:] if w.startswith("--")):
                    if flag not in GLOBAL_OPTIONS:
                        assert flag in help_text, f"{where}: 'vrom {name}' has no {flag}"
    return used


def test_every_readme_command_and_flag_exists() -> None:
    assert {"index", "search", "mcp", "install"} <= _commands_used(README, "README")


def test_issue28_item8_every_reference_command_and_flag_exists_and_cli_md_has_every_command() -> (
    None
):
    for name in REFERENCE:
        _commands_used(_page(name), f"docs/{name}")
    used = _commands_used(_page("cli.md"), "docs/cli.md")
    missing = set(_subcommands()) - used
    assert not missing, f"commands docs/cli.md does not show: {missing}"


def test_every_benchmark_script_and_flag_exists() -> None:
    """The benchmark commands docs/benchmarks.md lists exist with the flags it gives them."""
    scripts: dict[str, set[str]] = {}
    for text in (README, _page("benchmarks.md")):
        for block in _bash_blocks(text):
            for line in block.splitlines():
                words = shlex.split(line.split("#", 1)[0])
                if len(words) >= 2 and words[0] == "python" and words[1].startswith("bench/"):
                    scripts.setdefault(words[1], set()).update(
                        w.split("=")[0] for w in words if w.startswith("-") and w != "-"
                    )
    peers = ("keyword_peers", "vector_engines", "hybrid_peers", "vault_indexing", "quality")
    assert {f"bench/{name}.py" for name in peers} <= set(scripts), scripts
    for script, flags in scripts.items():
        assert (REPO / script).is_file(), f"the docs name {script}, which does not exist"
        shown = subprocess.run(
            [sys.executable, str(REPO / script), "--help"], capture_output=True, text=True
        )
        assert shown.returncode == 0, shown.stderr
        for flag in flags:
            assert flag in shown.stdout, f"{script} has no {flag}"


def test_every_command_has_help_text() -> None:
    for name, parser in _subcommands().items():
        assert parser.description, f"vrom {name} has no description"  # type: ignore[attr-defined]


def test_the_mcp_page_lists_exactly_the_mcp_tools_served(tmp_path: Path) -> None:
    """docs/mcp.md's table of tools names each tool the server lists, and no other: one set of
    names (the memory tools are vault_remember, vault_recall, vault_memory_stats and
    vault_memory_archive, with no memory_* aliases)."""
    pytest.importorskip("mcp")
    import asyncio

    from mcp import Client

    from vrom.server.app import build_server
    from vrom.server.state import ServerState

    table = re.search(r"<!-- mcp-tools -->\n((?:\|.*\n)+)", _page("mcp.md"))
    assert table, "docs/mcp.md has no table of tools after <!-- mcp-tools -->"
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
    readme_tools = set(re.findall(r"`(vault_\w+)`", README))
    assert readme_tools <= served, f"the README names tools not served: {readme_tools - served}"


@pytest.mark.data
def test_the_eval_example_runs_on_data_that_exists(tmp_path: Path) -> None:
    line = next(
        line.split("  #", 1)[0]
        for line in _page("cli.md").splitlines()
        if line.startswith("vrom eval ")
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


def test_issue27_item6_the_mcp_page_states_the_mcp_reply_bounds_the_server_keeps() -> None:
    pytest.importorskip("mcp")
    from vrom.server import bounds

    stated = re.search(r"^- Reply size: (.*?)(?=^- )", _page("mcp.md"), re.S | re.M)
    assert stated, "docs/mcp.md says nothing about how big a reply may get"
    text = " ".join(stated.group(1).split())
    for name in ("REPLY_CHARS", "BODY_CHARS", "PAGE_ITEMS", "MAX_PAGE_ITEMS", "CONTEXT_TOKENS"):
        value = getattr(bounds, name)
        assert f"{value:,}" in text, f"docs/mcp.md's reply size does not say {name} = {value:,}"


PAGES_OTHERS_WRITE = {"filters.md"}  # issue 28 items 6 and 3


def _anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown text."""
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def test_issue28_item8_the_readme_is_read_in_ten_minutes() -> None:
    """At most 250 lines; what vrom is in its first lines; install, the quick start, the test
    command and one example per face (CLI, MCP, Python); a link to each reference page."""
    lines = README.splitlines()
    assert len(lines) <= 250, f"the README has {len(lines)} lines"
    opening = " ".join(lines[:5])
    assert "vrom is local-first memory for AI agents" in opening
    assert "library" in opening and "command line" in opening and "MCP server" in opening
    for heading in ("## Install", "## Quick start", "## Run the tests", "## The command line"):
        assert f"\n{heading}\n" in README, f"the README has no {heading}"
    assert "\n## The MCP server\n" in README and "\n## The Python API\n" in README
    assert "vrom mcp --vault" in README and "from vrom import Vault" in README
    for page in (*REFERENCE, "configuration.md", "filters.md", "guide.md", "packs.md"):
        assert f"(docs/{page})" in README, f"the README does not link docs/{page}"
    for page in ("postgres.md", "analytics.md", "architecture.md", "benchmarks.md"):
        assert f"(docs/{page})" in README, f"the README does not link docs/{page}"


def test_issue28_item8_every_link_of_the_readme_and_docs_resolves() -> None:
    """Each relative link of the README and of docs/*.md names a file that exists and, with an
    anchor, a heading of it (the two pages other items of issue 28 write may not be here yet)."""
    pages = [REPO / "README.md", *sorted(DOCS.glob("*.md"))]
    checked = 0
    for page in pages:
        text = page.read_text(encoding="utf-8")
        prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
        prose = re.sub(r"`[^`\n]*`", "", prose)
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", prose):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path = (page.parent / target) if target else page
            if not path.exists() and path.name in PAGES_OTHERS_WRITE:
                continue
            assert path.exists(), f"{page.name} links to {target}, which is missing"
            if anchor and path.suffix == ".md":
                heads = _anchors(path.read_text(encoding="utf-8"))
                assert anchor in heads, f"{page.name} links to {target}#{anchor}: no such heading"
            checked += 1
    assert checked >= 30


# Lines of the reference pages' bash blocks the sandbox does not run, each with why and where
# it is run instead; every other line runs as written (`test_issue28_item8_every_command_...`).
NOT_RUN = {
    "pip install": "installs packages: the README's install is what a user runs (test_install.py)",
    "--background": "detaches an embedding process: tests/test_background_embedding.py runs it",
    "vrom eval ": "needs the shared BEIR data: test_the_eval_example_runs_on_data_that_exists",
    "vrom mcp ": "serves until stopped: tests/test_mcp_protocol.py runs it over stdio and HTTP",
    "vrom memory archive mem_0195": "names another store's memory ids: tests/test_cli_memory.py",
    "VROM_DATABASE_URL": "needs a PostgreSQL server: tests/test_sync.py, test_shared_postgres.py",
    "--vault ~/notes   # the MCP": "the MCP server on a shared store: tests/test_shared_postgres.py",
    "vrom sync ": "needs a PostgreSQL server: tests/test_sync.py runs sync both ways",
}
# Lines whose environment the sandbox sets itself: the registry is the folder `vrom pack publish`
# wrote, not the example.org URL the page shows as an example.
SANDBOX_EXPORTS = {"VROM_REGISTRY_URL": "packs/"}
EXIT_CODES = {"vrom format check": (0, 1)}  # a linter: 1 when a note has an error (the example's)


def _runs_as_written(page: str, tmp_path: Path) -> list[str]:
    """Run every line of the page's bash blocks in a sandbox (HOME with ~/notes a copy of the
    example vault, the fake embedder); return the lines left out by `NOT_RUN`."""
    home = tmp_path / "home"
    shutil.copytree(REPO / "examples" / "vault", home / "notes")
    (home / ".local" / "share" / "bash-completion" / "completions").mkdir(parents=True)
    cwd = tmp_path / "clone"
    cwd.mkdir()
    (cwd / "examples").symlink_to(REPO / "examples", target_is_directory=True)
    vrom = shutil.which("vrom")
    assert vrom, "the vrom console script is installed"
    env = {
        **os.environ,
        "HOME": str(home),
        "VROM_STATE_DIR": str(tmp_path / "state"),
        "VROM_CACHE_DIR": str(tmp_path / "cache"),
        "VROM_EMBEDDER": "fake",
        "PATH": f"{Path(vrom).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    left_out: list[str] = []
    for block in _bash_blocks(_page(page)):
        for line in block.splitlines():
            if not line.strip():
                continue
            if any(marker in line for marker in NOT_RUN):
                left_out.append(line)
                continue
            exported = re.match(r"export (\w+)=(.*?)(?:\s+#.*)?$", line)
            if exported:
                name = exported.group(1)
                value = SANDBOX_EXPORTS.get(name)
                if value is None:
                    value = subprocess.run(
                        ["bash", "-c", f'{line}\nprintf %s "${name}"'],
                        cwd=cwd,
                        env=env,
                        capture_output=True,
                        text=True,
                        check=True,
                    ).stdout
                env[name] = value
                continue
            ran = subprocess.run(
                ["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
            )
            allowed = next((c for prefix, c in EXIT_CODES.items() if line.startswith(prefix)), (0,))
            assert ran.returncode in allowed, f"docs/{page}: {line}\n{ran.stdout}\n{ran.stderr}"
            assert "Traceback" not in ran.stderr, f"docs/{page}: {line}\n{ran.stderr}"
    return left_out


@pytest.mark.parametrize("page", ["cli.md", "mcp.md"])
def test_issue28_item8_every_command_of_the_cli_and_mcp_pages_runs(
    page: str, tmp_path: Path
) -> None:
    """Each line of docs/cli.md's and docs/mcp.md's bash blocks runs as written and exits 0,
    but for those `NOT_RUN` names (each with where it is run instead)."""
    pytest.importorskip("mcp")  # vrom install refuses without the MCP SDK, as documented
    left_out = _runs_as_written(page, tmp_path)
    assert all(line.startswith(("vrom", "pip", "export")) for line in left_out), left_out


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
