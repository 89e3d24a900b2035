"""`vrom install`: merge vrom's MCP server into each client's config, safely and idempotently."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import io
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from vrom import NotFoundError, ValidationError
from vrom.cli.global_options import add_global_options
from vrom.cli.setup import add_setup_commands
from vrom.install import CLIENTS, install
from vrom.install.client_configs import default_config_path, find_entry
from vrom.install.opencode_instructions import opencode_instruction_paths
from vrom.install.server_entry import entry_command

WriteVault = Callable[[dict[str, str | bytes]], Path]
SERVERS_KEY = {"opencode": "mcp"}  # every other client keeps servers under "mcpServers"


@pytest.fixture(autouse=True)
def fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point every client's default location into tmp_path (never the real home)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("USERPROFILE", str(home))
    monkeypatch.setenv("APPDATA", str(home / "AppData" / "Roaming"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    return home


@pytest.fixture
def vault(write_vault: WriteVault) -> Path:
    return write_vault({"Atlas.md": "# Atlas\n\nThe network switch sits in rack 2.\n"})


def _servers(client: str, path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    servers: dict[str, Any] = data[SERVERS_KEY.get(client, "mcpServers")]
    return servers


def _backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".bak-*"))


def _run(argv: list[str]) -> tuple[int, str]:
    """Run a setup command through an argparse tree built like the CLI's."""
    parser = argparse.ArgumentParser(prog="vrom")
    add_global_options(parser, top=True)
    add_setup_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    out = io.StringIO()
    code: int = args.handler(args, out)
    return code, out.getvalue()


# -- every client ------------------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_creates_a_missing_file_and_its_folder(client: str, vault: Path, tmp_path: Path) -> None:
    config = tmp_path / "new" / "deeper" / "config.json"
    result = install(client, vault, config=config)

    assert result.changed and result.files[0].created and result.files[0].backup is None
    text = config.read_text(encoding="utf-8")
    assert text.endswith("}\n") and '\n  "' in text  # 2-space indent, final newline
    entry = _servers(client, config)["vrom"]
    command = entry_command(client, entry)
    assert command[0] == os.path.abspath(sys.executable)
    assert command[1:] == ["-m", "vrom", "mcp", "--vault", str(vault.resolve())]
    env = entry["environment" if client == "opencode" else "env"]
    assert env["VROM_STATE_DIR"] == os.environ["VROM_STATE_DIR"]
    assert env["VROM_EMBEDDER"] == "none"  # the embedder in force is pinned (conftest: none)


@pytest.mark.parametrize("client", CLIENTS)
def test_merging_keeps_other_servers_and_unrelated_keys(
    client: str, vault: Path, tmp_path: Path
) -> None:
    key = SERVERS_KEY.get(client, "mcpServers")
    other = (
        {"type": "local", "command": ["npx", "-y", "other"], "enabled": False}
        if client == "opencode"
        else {"command": "npx", "args": ["-y", "other"]}
    )
    env_key = "environment" if client == "opencode" else "env"
    config = tmp_path / "config.json"
    original = {
        "theme": "dark",
        "projects": {"/x": {"allowedTools": ["a"]}},
        key: {
            "other": other,
            "vrom": {"timeout": 90, env_key: {"OPENAI_API_KEY": "sk-test"}},
        },
        "zzz": [1, 2, 3],
    }
    config.write_text(json.dumps(original, indent=4), encoding="utf-8")

    install(client, vault, config=config)

    data = json.loads(config.read_text(encoding="utf-8"))
    assert list(data) == list(original)  # no key lost, order kept
    assert data["theme"] == "dark" and data["zzz"] == [1, 2, 3]
    assert data["projects"] == original["projects"]
    assert data[key]["other"] == other
    ours = data[key]["vrom"]
    assert ours["timeout"] == 90  # what the user added to vrom's own entry stays
    assert ours[env_key]["OPENAI_API_KEY"] == "sk-test"
    assert "VROM_STATE_DIR" in ours[env_key]


@pytest.mark.parametrize("client", CLIENTS)
def test_running_twice_changes_nothing_the_second_time(
    client: str, vault: Path, tmp_path: Path
) -> None:
    config = tmp_path / "config.json"
    config.write_text('{"mcpServers": {}, "mcp": {}, "keep": true}', encoding="utf-8")

    first = install(client, vault, config=config)
    after_first = config.read_bytes()
    extra = {Path(f.path): Path(f.path).read_bytes() for f in first.files[1:]}
    second = install(client, vault, config=config)

    assert first.changed and not second.changed
    assert all(not f.changed and f.backup is None and f.diff == "" for f in second.files)
    assert config.read_bytes() == after_first
    assert {p: p.read_bytes() for p in extra} == extra
    assert len(_backups(config)) == 1


@pytest.mark.parametrize("client", CLIENTS)
def test_a_changed_file_is_backed_up_first(client: str, vault: Path, tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    original = b'{\n  "keep": "me"\n}\n'
    config.write_bytes(original)

    result = install(client, vault, config=config)

    backups = _backups(config)
    assert len(backups) == 1 and backups[0].read_bytes() == original
    assert result.files[0].backup == str(backups[0])
    assert json.loads(config.read_text(encoding="utf-8"))["keep"] == "me"


@pytest.mark.parametrize("client", CLIENTS)
def test_changing_the_vault_updates_the_entry_with_a_new_backup(
    client: str, vault: Path, tmp_path: Path
) -> None:
    config = tmp_path / "config.json"
    install(client, vault, config=config)
    other = tmp_path / "other-vault"
    other.mkdir()

    result = install(client, other, config=config)

    assert result.changed and len(_backups(config)) == 1  # the first run had nothing to back up
    command = entry_command(client, _servers(client, config)["vrom"])
    assert command[-1] == str(other.resolve())


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("problem", ["broken", "array", "servers-not-an-object"])
def test_invalid_json_is_refused_and_the_file_left_alone(
    client: str, problem: str, vault: Path, tmp_path: Path
) -> None:
    key = SERVERS_KEY.get(client, "mcpServers")
    text = {
        "broken": f'{{"{key}": {{',
        "array": "[1, 2]",
        "servers-not-an-object": f'{{"{key}": []}}',
    }[problem]
    config = tmp_path / "config.json"
    config.write_text(text, encoding="utf-8")

    with pytest.raises(ValidationError) as error:
        install(client, vault, config=config)

    assert "\n" not in str(error.value) and str(config) in str(error.value)
    assert config.read_text(encoding="utf-8") == text
    assert _backups(config) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "home", "vault"]


@pytest.mark.parametrize("client", CLIENTS)
def test_dry_run_changes_nothing_and_shows_the_diff(
    client: str, vault: Path, tmp_path: Path
) -> None:
    config = tmp_path / "config.json"
    config.write_text('{"keep": 1}\n', encoding="utf-8")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))

    code, out = _run(
        ["install", client, "--vault", str(vault), "--config", str(config), "--dry-run"]
    )

    assert code == 0
    assert config.read_text(encoding="utf-8") == '{"keep": 1}\n'
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    assert '+    "vrom": {' in out and "dry run: nothing written" in out
    assert str(vault.resolve()) in out


@pytest.mark.parametrize("client", CLIENTS)
def test_the_cli_reports_created_then_up_to_date(client: str, vault: Path, tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    argv = ["install", client, "--vault", str(vault), "--config", str(config)]

    code, first = _run(argv)
    again, second = _run(argv)
    code_json, as_json = _run([*argv, "--json"])

    assert code == again == code_json == 0
    assert f"created 'vrom' in {config}" in first
    assert "already up to date" in second
    result = json.loads(as_json)
    assert result["client"] == client and result["files"][0]["changed"] is False
    assert result["entry"] == _servers(client, config)["vrom"]


@pytest.mark.parametrize("client", CLIENTS)
def test_default_locations_are_under_the_fake_home(
    client: str, vault: Path, fake_home: Path
) -> None:
    result = install(client, vault)
    assert Path(result.config).is_file()
    assert Path(result.config).is_relative_to(fake_home)
    assert find_entry(client, json.loads(Path(result.config).read_text()), "vrom")


# -- locations -------------------------------------------------------------------------------


def test_default_config_paths_per_platform(tmp_path: Path) -> None:
    env = {"HOME": "/h", "APPDATA": r"C:\Users\u\AppData\Roaming", "XDG_CONFIG_HOME": "/x"}
    path = default_config_path
    assert path("claude-desktop", platform="darwin", env=env) == Path(
        "/h/Library/Application Support/Claude/claude_desktop_config.json"
    )
    assert path("claude-desktop", platform="win32", env=env) == (
        Path(env["APPDATA"]) / "Claude" / "claude_desktop_config.json"
    )
    assert path("claude-desktop", platform="linux", env=env) == Path(
        "/x/Claude/claude_desktop_config.json"
    )
    assert path("claude-desktop", platform="linux", env={"HOME": "/h"}) == Path(
        "/h/.config/Claude/claude_desktop_config.json"
    )
    assert path("claude-code", env=env) == Path("/h/.claude.json")
    assert path("claude-code", env={**env, "CLAUDE_CONFIG_DIR": "/c"}) == Path("/c/.claude.json")
    assert path("cursor", env=env) == Path("/h/.cursor/mcp.json")
    assert path("opencode", env=env) == Path("/x/opencode/opencode.json")
    with pytest.raises(ValidationError, match="unknown client"):
        path("vscode", env=env)


def test_opencode_uses_an_existing_jsonc_when_there_is_no_json(fake_home: Path) -> None:
    folder = fake_home / ".config" / "opencode"
    folder.mkdir(parents=True)
    (folder / "opencode.jsonc").write_text("{}", encoding="utf-8")
    assert default_config_path("opencode") == folder / "opencode.jsonc"
    (folder / "opencode.json").write_text("{}", encoding="utf-8")
    assert default_config_path("opencode") == folder / "opencode.json"


def test_a_symlinked_config_stays_a_symlink(vault: Path, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "mcp.json"
    real.parent.mkdir()
    real.write_text('{"mcpServers": {}}', encoding="utf-8")
    link = tmp_path / "mcp.json"
    try:
        link.symlink_to(real)
    except OSError:
        pytest.skip("symlinks are not available here")

    install("cursor", vault, config=link)

    assert link.is_symlink()
    assert "vrom" in _servers("cursor", real)


# -- opencode's instructions ----------------------------------------------------------------


def test_opencode_writes_a_skill_and_an_agents_section(vault: Path, tmp_path: Path) -> None:
    config = tmp_path / "project" / "opencode.json"
    result = install("opencode", vault, config=config)

    agents, skill = opencode_instruction_paths(config)
    assert agents == tmp_path / "project" / "AGENTS.md"
    assert skill == tmp_path / "project" / ".opencode" / "skills" / "vrom" / "SKILL.md"
    assert [f.path for f in result.files] == [str(config), str(agents), str(skill)]
    text = skill.read_text(encoding="utf-8")
    frontmatter = text.split("---\n")[1]
    assert "name: vrom\n" in frontmatter and "description: " in frontmatter
    for tool in ("vault_search", "vault_context", "vault_write", "vault_recall"):
        assert tool in text
    section = agents.read_text(encoding="utf-8")
    assert section.startswith("<!-- vrom:start -->") and section.endswith("<!-- vrom:end -->\n")
    assert json.loads(config.read_text())["$schema"] == "https://opencode.ai/config.json"


def test_the_agents_section_is_replaced_not_duplicated(vault: Path, tmp_path: Path) -> None:
    config = tmp_path / "opencode.json"
    agents = tmp_path / "AGENTS.md"
    agents.write_text(
        "# Project rules\n\nRun the tests.\n\n<!-- vrom:start -->\nold text\n<!-- vrom:end -->\n"
        "\n## More rules\n\nBe kind.\n",
        encoding="utf-8",
    )

    install("opencode", vault, config=config)
    other = tmp_path / "elsewhere"
    other.mkdir()
    install("opencode", other, config=config)

    text = agents.read_text(encoding="utf-8")
    assert text.count("<!-- vrom:start -->") == 1 and text.count("<!-- vrom:end -->") == 1
    assert "old text" not in text and str(vault.resolve()) not in text
    assert str(other.resolve()) in text
    assert text.startswith("# Project rules\n\nRun the tests.\n\n<!-- vrom:start -->")
    assert text.endswith("<!-- vrom:end -->\n\n## More rules\n\nBe kind.\n")


def test_the_agents_section_is_appended_after_existing_text(vault: Path, tmp_path: Path) -> None:
    agents = tmp_path / "AGENTS.md"
    agents.write_text("# Rules\nNo tabs.", encoding="utf-8")
    install("opencode", vault, config=tmp_path / "opencode.json")
    assert agents.read_text(encoding="utf-8").startswith("# Rules\nNo tabs.\n\n<!-- vrom:start -->")


def test_a_broken_agents_section_is_refused(vault: Path, tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("<!-- vrom:start -->\nno end\n", encoding="utf-8")
    with pytest.raises(ValidationError, match="no <!-- vrom:end -->"):
        install("opencode", vault, config=tmp_path / "opencode.json")


def test_global_opencode_config_gets_global_instructions(vault: Path, fake_home: Path) -> None:
    install("opencode", vault)
    folder = fake_home / ".config" / "opencode"
    assert (folder / "AGENTS.md").is_file()
    assert (folder / "skills" / "vrom" / "SKILL.md").is_file()


def test_a_config_inside_dot_opencode_counts_as_the_project(tmp_path: Path) -> None:
    config = tmp_path / "proj" / ".opencode" / "opencode.json"
    agents, skill = opencode_instruction_paths(config, "notes")
    assert agents == tmp_path / "proj" / "AGENTS.md"
    assert skill == tmp_path / "proj" / ".opencode" / "skills" / "notes" / "SKILL.md"


def test_opencode_jsonc_with_comments_is_refused_with_the_entry_to_add(
    vault: Path, tmp_path: Path
) -> None:
    config = tmp_path / "opencode.jsonc"
    text = '{\n  // my servers\n  "mcp": {},\n}\n'
    config.write_text(text, encoding="utf-8")

    with pytest.raises(ValidationError, match="comments") as error:
        install("opencode", vault, config=config)

    assert '"vrom": {"type": "local"' in str(error.value) and "by hand" in str(error.value)
    assert config.read_text(encoding="utf-8") == text
    assert not (tmp_path / "AGENTS.md").exists()


def test_opencode_native_v2_shape_gets_the_entry_under_servers(vault: Path, tmp_path: Path) -> None:
    config = tmp_path / "opencode.json"
    config.write_text('{"mcp": {"servers": {"x": {"type": "remote", "url": "u"}}}}')
    install("opencode", vault, config=config)
    servers = json.loads(config.read_text())["mcp"]["servers"]
    assert set(servers) == {"x", "vrom"} and servers["vrom"]["type"] == "local"


# -- arguments -------------------------------------------------------------------------------


def test_a_custom_name_names_the_entry_the_skill_and_the_section(
    vault: Path, tmp_path: Path
) -> None:
    config = tmp_path / "opencode.json"
    install("opencode", vault, config=config, name="work-notes")
    assert "work-notes" in _servers("opencode", config)
    skill = tmp_path / ".opencode" / "skills" / "work-notes" / "SKILL.md"
    assert "name: work-notes\n" in skill.read_text(encoding="utf-8")
    assert "<!-- work-notes:start -->" in (tmp_path / "AGENTS.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["", "Vrom", "my_vault", "-x", "a--b", "x" * 65])
def test_bad_names_are_refused(name: str, vault: Path, tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="server name"):
        install("cursor", vault, config=tmp_path / "c.json", name=name)


def test_a_missing_vault_is_a_not_found_error(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="does not exist"):
        install("cursor", tmp_path / "nope", config=tmp_path / "c.json")
    assert not (tmp_path / "c.json").exists()


def test_without_vault_the_default_vault_is_used(
    vault: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, open_vault: Any
) -> None:
    open_vault(vault).index()
    monkeypatch.chdir(vault)
    result = install("cursor", config=tmp_path / "c.json")
    assert result.vault == str(vault.resolve())
    assert result.notes == ["restart Cursor to load the 'vrom' server"]  # indexed: no index note


def test_an_unindexed_vault_gets_a_note(vault: Path, tmp_path: Path) -> None:
    result = install("cursor", vault, config=tmp_path / "c.json")
    assert any(f"vrom index {vault.resolve()}" in note for note in result.notes)


def test_an_explicit_embedder_is_pinned(vault: Path, tmp_path: Path) -> None:
    config = tmp_path / "c.json"
    install("claude-desktop", vault, config=config, embedder="fake:32")
    assert _servers("claude-desktop", config)["vrom"]["env"]["VROM_EMBEDDER"] == "fake:32"


def test_the_script_launcher_runs_the_vrom_console_script(vault: Path, tmp_path: Path) -> None:
    try:
        result = install("cursor", vault, config=tmp_path / "c.json", launcher="script")
    except NotFoundError:
        pytest.skip("no vrom console script in this environment")
    command = entry_command("cursor", result.entry)
    assert Path(command[0]).name.startswith("vrom") and command[1:3] == ["mcp", "--vault"]


def test_config_must_be_a_file(vault: Path, tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="is a folder"):
        install("cursor", vault, config=tmp_path)


# -- the entry really starts the server -------------------------------------------------------


@pytest.mark.parametrize("client", ["claude-code", "opencode"])
def test_the_installed_entry_starts_a_server_a_client_can_use(
    client: str, vault: Path, tmp_path: Path, open_vault: Any
) -> None:
    """Launch the entry as a client would (its env only, on top of the SDK's minimal one)."""
    pytest.importorskip("vrom.server.app", reason="vrom mcp is not in this tree yet")
    from mcp import Client, StdioServerParameters

    open_vault(vault).index()
    entry = install(client, vault, config=tmp_path / "config.json").entry
    command = entry_command(client, entry)
    env = entry["environment" if client == "opencode" else "env"]
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)

    async def main() -> set[str]:
        async with Client(params, mode="legacy") as session:
            return {tool.name for tool in (await session.list_tools()).tools}

    assert "vault_search" in asyncio.run(main())


@pytest.mark.parametrize("dry_run", [False, True])
def test_without_the_mcp_sdk_nothing_is_written(
    vault: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dry_run: bool
) -> None:
    real = importlib.util.find_spec

    def without_mcp(name: str, *args: Any) -> Any:
        return None if name == "mcp" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", without_mcp)
    config = tmp_path / "client" / "config.json"
    with pytest.raises(ValidationError, match=r"pip install 'vrom\[mcp\]' first"):
        install("cursor", vault, config=config, dry_run=dry_run)
    assert not config.parent.exists(), "no config whose server cannot start"
    with pytest.raises(ValidationError, match=r"vrom\[mcp\]"):  # the CLI's one-line error
        _run(["install", "cursor", "--vault", str(vault), "--config", str(config)])
    assert not config.exists()


# -- the MCP tool ------------------------------------------------------------------------------


def test_the_mcp_tool_installs_opencode_for_the_served_vault_only_when_told_to_apply(
    vault: Path, fake_home: Path, tmp_path: Path
) -> None:
    """``vault_install_opencode`` is `vrom install opencode` for the served vault: a dry run
    that writes nothing by default, the same change as the CLI's, and with apply=true the
    write (backed up first, and a second call changes nothing)."""
    pytest.importorskip("mcp")
    from mcp import Client

    from vrom.server.app import build_server
    from vrom.server.state import ServerState

    config = fake_home / ".config" / "opencode" / "opencode.json"
    config.parent.mkdir(parents=True)
    old = json.dumps({"theme": "dark", "mcp": {"other": {"type": "local", "command": ["x"]}}})
    config.write_text(old, encoding="utf-8")
    agents, skill = opencode_instruction_paths(config)
    _, cli_json = _run(["install", "opencode", "--vault", str(vault), "--dry-run", "--json"])
    cli = json.loads(cli_json)
    state = ServerState(vault, embedder=None, watch=False)
    state.open_explicit()
    replies: dict[str, Any] = {}

    async def session(client: Client) -> None:
        (tool,) = [t for t in (await client.list_tools()).tools if t.name.endswith("opencode")]
        assert tool.name == "vault_install_opencode"
        assert tool.annotations is not None and tool.annotations.destructive_hint
        assert tool.annotations.idempotent_hint and not tool.annotations.read_only_hint
        assert tool.input_schema["properties"]["apply"]["default"] is False
        for step, arguments in (
            ("dry", {}),
            ("applied", {"apply": True}),
            ("again", {"apply": True}),
        ):
            result = await client.call_tool("vault_install_opencode", arguments)
            assert not result.is_error, result.content[0].text
            replies[step] = (result.structured_content, result.content[0].text)
            if step == "dry":  # nothing is written before the agent passes apply=true
                assert config.read_text(encoding="utf-8") == old
                assert not agents.exists() and not skill.exists() and not _backups(config)

    try:
        asyncio.run(session_in(build_server(state), session))
    finally:
        state.close()

    dry, dry_text = replies["dry"]
    assert dry["dry_run"] and dry["config"] == str(config) and dry["vault"] == str(vault)
    assert dry["entry"] == cli["entry"], "the entry `vrom install opencode` writes"
    assert [f["diff"] for f in dry["files"]] == [f["diff"] for f in cli["files"]]
    first = dry["files"][0]
    assert first["path"] == str(config) and first["changed"] and not first["created"]
    assert first["backs_up"] and first["backup"] is None, "a backup would be made, none was"
    assert dry["entry"]["command"][-2:] == ["--vault", str(vault)]
    assert f"{config}: would be updated (backed up first)" in dry_text
    assert "apply=true" in dry_text

    applied, applied_text = replies["applied"]
    assert not applied["dry_run"]
    (backup,) = _backups(config)
    assert applied["files"][0]["backup"] == str(backup) and f"backup: {backup}" in applied_text
    assert backup.read_text(encoding="utf-8") == old
    servers = _servers("opencode", config)
    assert servers["vrom"] == dry["entry"] and servers["other"] == {
        "type": "local",
        "command": ["x"],
    }
    assert json.loads(config.read_text(encoding="utf-8"))["theme"] == "dark"
    assert str(vault) in agents.read_text(encoding="utf-8")
    assert "vault_recall" in skill.read_text(encoding="utf-8")

    again, again_text = replies["again"]
    assert not any(f["changed"] for f in again["files"]) and len(_backups(config)) == 1
    assert again_text.count(": unchanged") == 3


async def session_in(server: Any, session: Callable[[Any], Any]) -> None:
    """Run ``session`` with an SDK client connected to ``server`` in memory."""
    from mcp import Client

    async with Client(server, mode="legacy") as client:
        await session(client)
