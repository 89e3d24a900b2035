"""`vrom selftest`: every check passes on a working setup, and a broken one says how to fix it."""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from vrom import Vault
from vrom.cli.global_options import add_global_options
from vrom.cli.setup import add_setup_commands
from vrom.install import CLIENTS, install
from vrom.selftest import FAIL, OK, SKIP, WARN, Check, SelftestReport, run_selftest, vector_coverage
from vrom.store.sqlite import SQLiteStore

WriteVault = Callable[[dict[str, str | bytes]], Path]


@pytest.fixture
def vault(write_vault: WriteVault) -> Path:
    return write_vault(
        {
            "Network Switch.md": "# Network Switch\n\nThe switch sits in rack 2. #hardware\n",
            "Notes/Plan.md": "---\nstatus: active\n---\n# Plan\n\nReplace the switch in May.\n",
        }
    )


def _index(root: Path, tmp_path: Path, embedder: str | None) -> None:
    with Vault.open(root, tmp_path / "state", embedder=embedder) as opened:
        opened.index()


def _no_clients(tmp_path: Path) -> dict[str, Path]:
    return {client: tmp_path / "clients" / f"{client}.json" for client in CLIENTS}


def _by_name(report: SelftestReport) -> dict[str, Check]:
    return {check.name: check for check in report.checks}


def _run(argv: list[str]) -> tuple[int, str]:
    """Run a setup command through an argparse tree built like the CLI's."""
    parser = argparse.ArgumentParser(prog="vrom")
    add_global_options(parser, top=True)
    add_setup_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    out = io.StringIO()
    code: int = args.handler(args, out)
    return code, out.getvalue()


@pytest.fixture
def isolated_clients(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the clients' default config places into an empty fake home."""
    home = tmp_path / "home"
    home.mkdir()
    for name in ("HOME", "USERPROFILE"):
        monkeypatch.setenv(name, str(home))
    monkeypatch.setenv("APPDATA", str(home / "AppData"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    return home


def test_a_working_setup_with_the_fake_model_passes(vault: Path, tmp_path: Path) -> None:
    _index(vault, tmp_path, "fake")
    report = run_selftest(vault, embedder="fake", clients=_no_clients(tmp_path))

    checks = _by_name(report)
    assert report.ok
    for name in ("python", "vrom", "vault", "store", "embedder", "search", "mcp"):
        assert checks[name].status == OK, checks[name]
    assert "2 notes" in checks["vault"].detail and "fake-hashed-words" in checks["vault"].detail
    assert "cosine 1.0000" in checks["embedder"].detail
    assert checks["vectors"].status == OK and checks["vectors"].detail.startswith("2 / 2 (100%)")
    assert all(checks[f"client {c}"].status == SKIP for c in CLIENTS)


def test_a_partly_embedded_vault_is_a_warning_with_the_count(vault: Path, tmp_path: Path) -> None:
    _index(vault, tmp_path, "fake")
    with Vault.open(vault, tmp_path / "state", create=False, embedder=None) as opened:
        store_file = opened.stats().store_path
    with sqlite3.connect(store_file) as raw:  # as if embedding had stopped half way
        raw.execute("DELETE FROM vectors WHERE chunk_id = (SELECT min(chunk_id) FROM vectors)")
    report = run_selftest(vault, embedder="fake", clients=_no_clients(tmp_path))
    check = _by_name(report)["vectors"]
    assert check.status == WARN and not check.required and report.ok
    assert "1 / 2 (50%)" in check.detail and "embed" in (check.fix or "")


@pytest.mark.parametrize(
    ("vectors", "chunks", "shown"),
    [
        (2368, 24096, "2,368 / 24,096 (10%)"),
        (24095, 24096, "24,095 / 24,096 (99%)"),
        (3, 1000, "3 / 1,000 (0.3%)"),
        (0, 10, "0 / 10 (0%)"),
        (10, 10, "10 / 10 (100%)"),
    ],
)
def test_vector_coverage_reads_like_a_person_would_write_it(
    vectors: int, chunks: int, shown: str
) -> None:
    assert vector_coverage(vectors, chunks) == shown


def test_no_embedder_is_a_skip_not_a_failure(vault: Path, tmp_path: Path) -> None:
    _index(vault, tmp_path, None)
    report = run_selftest(vault, clients=_no_clients(tmp_path))  # conftest: VROM_EMBEDDER=none

    checks = _by_name(report)
    assert report.ok
    assert checks["embedder"].status == SKIP and not checks["embedder"].required
    assert "VROM_EMBEDDER" in (checks["embedder"].fix or "")
    assert checks["search"].status == OK and "Network Switch.md" in checks["search"].detail


def test_the_cli_exits_0_and_prints_one_line_per_check(
    vault: Path, tmp_path: Path, isolated_clients: Path
) -> None:
    _index(vault, tmp_path, "fake")
    code, out = _run(["--embedder", "fake", "selftest", "--vault", str(vault)])

    assert code == 0, out
    lines = out.splitlines()
    assert lines[-1] == "all required checks passed"
    assert [line[0] for line in lines[:-1]] == ["✓"] * 8 + ["–"] * len(CLIENTS)
    assert lines[4].startswith("✓ vectors: 2 / 2 (100%)")
    assert lines[5].startswith("✓ embedder: fake-hashed-words")


def test_a_missing_vault_exits_1_with_a_fix(tmp_path: Path, isolated_clients: Path) -> None:
    code, out = _run(["selftest", "--vault", str(tmp_path / "nowhere")])

    assert code == 1
    line = next(line for line in out.splitlines() if line.startswith("✗ vault:"))
    assert "does not exist" in line and "fix: check the path" in line
    assert out.splitlines()[-1] == "1 check failed"
    assert "– search: needs an indexed vault" in out


def test_an_unindexed_vault_says_to_index_it(vault: Path, tmp_path: Path) -> None:
    report = run_selftest(vault, clients=_no_clients(tmp_path))
    check = _by_name(report)["vault"]
    assert not report.ok and check.status == FAIL
    assert check.fix == f"run 'vrom index {vault.resolve()}'"


def test_the_selftest_says_its_fix_once(
    vault: Path, tmp_path: Path, isolated_clients: Path
) -> None:
    code, out = _run(["selftest", "--vault", str(vault)])
    assert code == 1
    line = next(line for line in out.splitlines() if line.startswith("✗ vault:"))
    assert line.count(f"run 'vrom index {vault.resolve()}'") == 1, line


def test_no_vault_named_and_none_indexed_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    check = _by_name(run_selftest(clients=_no_clients(tmp_path)))["vault"]
    assert check.status == FAIL and "--vault PATH" in (check.fix or "")


def test_the_json_output_lists_every_check(
    vault: Path, tmp_path: Path, isolated_clients: Path
) -> None:
    _index(vault, tmp_path, None)
    code, out = _run(["selftest", "--vault", str(vault), "--json"])

    report = json.loads(out)
    assert code == 0 and report["ok"] is True
    names = [check["name"] for check in report["checks"]]
    assert names[:7] == ["python", "vrom", "vault", "store", "embedder", "search", "mcp"]
    assert set(report["checks"][0]) == {"name", "status", "detail", "fix", "required"}


def test_a_damaged_store_fails_with_a_rebuild_hint(
    vault: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _index(vault, tmp_path, None)
    monkeypatch.setattr(SQLiteStore, "integrity_problems", lambda self: ["3 orphan chunks"])
    report = run_selftest(vault, clients=_no_clients(tmp_path))
    check = _by_name(report)["store"]
    assert not report.ok and check.status == FAIL
    assert "3 orphan chunks" in check.detail and "vrom index" in (check.fix or "")


def test_vectors_from_another_model_fail_the_embedder_check(vault: Path, tmp_path: Path) -> None:
    _index(vault, tmp_path, "fake:64")
    report = run_selftest(vault, embedder="fake:32", clients=_no_clients(tmp_path))
    check = _by_name(report)["embedder"]
    assert not report.ok and check.status == FAIL
    assert "vrom embed --rebuild" in (check.fix or "")


def test_a_missing_mcp_package_says_how_to_install_it(
    vault: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _index(vault, tmp_path, None)
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "mcp" else real_find_spec(name, *args)

    monkeypatch.setattr("importlib.util.find_spec", find_spec)
    check = _by_name(run_selftest(vault, clients=_no_clients(tmp_path)))["mcp"]
    assert check.status == FAIL and check.fix == "pip install 'vrom[mcp]'"


# -- client configs --------------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_an_installed_client_entry_passes(client: str, vault: Path, tmp_path: Path) -> None:
    _index(vault, tmp_path, None)
    configs = _no_clients(tmp_path)
    install(client, vault, config=configs[client])

    report = run_selftest(vault, clients=configs)

    check = _by_name(report)[f"client {client}"]
    assert report.ok and check.status == OK, check
    assert sys.executable in check.detail and str(vault.resolve()) in check.detail


@pytest.mark.parametrize("client", CLIENTS)
def test_an_entry_with_a_missing_python_fails(client: str, vault: Path, tmp_path: Path) -> None:
    _index(vault, tmp_path, None)
    configs = _no_clients(tmp_path)
    install(client, vault, config=configs[client])
    path = configs[client]
    path.write_text(path.read_text().replace(sys.executable, "/gone/bin/python3"))

    report = run_selftest(vault, clients=configs)

    check = _by_name(report)[f"client {client}"]
    assert not report.ok and check.status == FAIL
    assert "/gone/bin/python3 does not exist" in check.detail
    assert check.fix == f"vrom install {client}"


def test_an_entry_for_a_vanished_vault_fails(vault: Path, tmp_path: Path) -> None:
    _index(vault, tmp_path, None)
    configs = _no_clients(tmp_path)
    install("cursor", vault, config=configs["cursor"])
    text = configs["cursor"].read_text().replace(str(vault.resolve()), "/gone/vault")
    configs["cursor"].write_text(text)
    check = _by_name(run_selftest(vault, clients=configs))["client cursor"]
    assert check.status == FAIL and "/gone/vault is not a folder" in check.detail


def test_a_client_without_a_vrom_entry_is_only_a_warning(vault: Path, tmp_path: Path) -> None:
    _index(vault, tmp_path, None)
    configs = _no_clients(tmp_path)
    configs["cursor"].parent.mkdir(parents=True)
    configs["cursor"].write_text('{"mcpServers": {"other": {"command": "npx"}}}')

    report = run_selftest(vault, clients=configs)

    check = _by_name(report)["client cursor"]
    assert report.ok and check.status == WARN and check.fix == "vrom install cursor"


def test_an_entry_whose_python_lacks_vrom_fails(vault: Path, tmp_path: Path) -> None:
    _index(vault, tmp_path, None)
    fake_python = tmp_path / "bin" / "python3"
    fake_python.parent.mkdir()
    fake_python.write_text(
        "#!/bin/sh\necho 'ModuleNotFoundError: No module named vrom' >&2\nexit 1\n"
    )
    fake_python.chmod(0o755)
    if sys.platform == "win32":
        pytest.skip("a shell script is not an executable on Windows")
    configs = _no_clients(tmp_path)
    install("cursor", vault, config=configs["cursor"])
    path = configs["cursor"]
    path.write_text(path.read_text().replace(sys.executable, str(fake_python)))

    check = _by_name(run_selftest(vault, clients=configs))["client cursor"]

    assert check.status == FAIL and "No module named vrom" in check.detail
    assert "pip install 'vrom[mcp]'" in (check.fix or "")
