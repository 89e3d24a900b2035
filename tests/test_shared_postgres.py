"""Vaults on a shared PostgreSQL database, as users reach it: ``Vault.open(database_url=)``,
``--db URL``, ``$VROM_DATABASE_URL``, ``vrom mcp --database-url``, namespaces, several processes
at once, and passwords that never show.

One PostgreSQL server (with pgvector) runs for the test session (``postgres_url``); each test
names namespaces of its own.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from vrom_cli import INHERITED, run_vrom

from vrom import Embedder, Vault

NOTES = {
    "Atlas.md": "# Atlas\n\nAtlas maps every office network switch. See [[Beacon]].\n",
    "Beacon.md": "# Beacon\n\nBeacon sends alerts when a switch fails. #alerts\n",
    "Garden.md": "# Garden\n\nRepotted the basil and the thyme.\n",
}
SECRET = "s3cret"


def write_vault(folder: Path, notes: dict[str, str] = NOTES) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in notes.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def with_password(url: str) -> str:
    """Return the server's URL with a password in it (the test server trusts local users, so
    any password opens it): what a password must never be shown from."""
    parts = urlsplit(url)
    user = parts.username or "postgres"
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{user}:{SECRET}@{host}"))


@pytest.fixture
def folder_name() -> str:
    """A vault folder name of this test's own: its namespace in the shared database."""
    return f"notes-{uuid.uuid4().hex[:8]}"


def test_vaults_named_alike_share_a_namespace_and_others_are_kept_apart(
    postgres_url: str, tmp_path: Path, folder_name: str
) -> None:
    machine_a = write_vault(tmp_path / "a" / folder_name)
    machine_b = write_vault(tmp_path / "b" / folder_name)  # the same vault, another machine
    other = write_vault(tmp_path / "a" / f"other-{folder_name}", {"Cats.md": "# Cats\n\nMeow.\n"})
    fake = Embedder.fake(16)
    with Vault.open(machine_a, database_url=postgres_url, embedder=fake) as vault:
        assert vault.namespace == folder_name
        vault.index()
        vault.memories.remember("Rota", "Beacon pages the on-call engineer.")
    with Vault.open(other, database_url=postgres_url, embedder=fake) as vault:
        vault.index()
    with Vault.open(machine_b, database_url=postgres_url, embedder=fake, create=False) as shared:
        assert shared.stats().notes == 3  # what machine A indexed, found from machine B
        assert [h.path for h in shared.search("switch alerts", k=1)] == ["Beacon.md"]
        assert [m.title for m in shared.memories.list()] == ["Rota"]
        assert not shared.search(
            "meow", mode="keyword"
        )  # the other vault's notes are another namespace's
    apart = f"{folder_name}-private"
    with Vault.open(machine_b, database_url=postgres_url, namespace=apart, embedder=None) as own:
        assert own.stats().notes == 0


def test_the_cli_on_a_database_by_option_and_by_variable(
    postgres_url: str, tmp_path: Path, folder_name: str
) -> None:
    root = write_vault(tmp_path / folder_name)
    state = tmp_path / "state"
    indexed = run_vrom(
        state, "index", str(root), "--db", postgres_url, "--json", embedder="fake:16"
    )
    assert indexed.returncode == 0, indexed.stderr
    assert json.loads(indexed.stdout)["added"] == 3
    env = {"VROM_DATABASE_URL": postgres_url}
    found = run_vrom(state, "search", "basil", "--vault", str(root), "--json", env=env,
                     embedder="fake:16")  # fmt: skip
    assert [hit["path"] for hit in json.loads(found.stdout)["results"]][:1] == ["Garden.md"]
    remembered = run_vrom(state, "memory", "remember", "Basil", "Water it on Tuesdays.",
                          "--vault", str(root), env=env)  # fmt: skip
    assert remembered.returncode == 0, remembered.stderr
    recalled = run_vrom(state, "--db", postgres_url, "memory", "recall", "basil", "--vault",
                        str(root), "--json")  # fmt: skip
    assert [hit["memory"]["title"] for hit in json.loads(recalled.stdout)] == ["Basil"]
    stats = run_vrom(state, "stats", "--json", env=env)  # the vault indexed last
    assert json.loads(stats.stdout)["vault_root"] == str(root)


def test_sync_to_a_database_and_back_gives_a_new_machine_a_local_copy(
    postgres_url: str, tmp_path: Path, folder_name: str
) -> None:
    root = write_vault(tmp_path / "a" / folder_name)
    state = tmp_path / "state-a"
    done = run_vrom(state, "index", str(root), "--remote-sync", postgres_url, "--json",
                    embedder="fake:16")  # fmt: skip
    assert done.returncode == 0, done.stderr
    synced = json.loads(done.stdout)["sync"]
    assert (synced["added"], synced["vectors"], synced["namespace"]) == (3, 3, folder_name)
    (root / "Garden.md").write_text("# Garden\n\nThe basil flowered.\n")
    run_vrom(state, "index", str(root), embedder="fake:16")
    again = run_vrom(state, "sync", "--to", postgres_url, "--vault", str(root))
    assert again.returncode == 0, again.stderr
    assert f"(namespace '{folder_name}'): 0 added, 1 changed, 0 removed, 2 unchanged;" in (
        again.stdout
    )
    machine_b = tmp_path / "b" / folder_name
    shutil.copytree(root, machine_b)
    state_b = tmp_path / "state-b"
    pulled = run_vrom(state_b, "sync", "--from", postgres_url, "--json", cwd=machine_b)
    assert pulled.returncode == 0, pulled.stderr
    assert json.loads(pulled.stdout)["added"] == 3
    reindexed = run_vrom(state_b, "index", str(machine_b), "--json", embedder="fake:16")
    counts = json.loads(reindexed.stdout)
    assert (counts["unchanged"], counts["embedded"]) == (3, 0)


def test_several_processes_write_one_namespace_at_once(
    postgres_url: str, tmp_path: Path, folder_name: str
) -> None:
    """Two machines (two folders named alike) index the same vault into one namespace at the
    same moment, and a third process adds memories meanwhile: all succeed, and the store holds
    each note once, each memory, and nothing inconsistent."""
    env = {k: v for k, v in os.environ.items() if k not in INHERITED}
    env.update(VROM_EMBEDDER="fake:16", VROM_DATABASE_URL=postgres_url)
    roots = [write_vault(tmp_path / machine / folder_name) for machine in ("a", "b")]
    commands = [
        [sys.executable, "-m", "vrom", "--state-dir", str(tmp_path / f"state-{i}"), "index",
         str(root)]
        for i, root in enumerate(roots)
    ]  # fmt: skip
    commands += [
        [sys.executable, "-m", "vrom", "--state-dir", str(tmp_path / "state-m"), "memory",
         "remember", f"Memory {i}", f"Something to keep, number {i}.", "--vault", str(roots[0])]
        for i in range(3)
    ]  # fmt: skip
    processes = [
        subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for c in commands[:2]
    ]
    outcomes = [(*p.communicate(timeout=300), p.returncode) for p in processes]
    memory_runs = [
        subprocess.run(c, env=env, capture_output=True, text=True, timeout=300, check=False)
        for c in commands[2:]
    ]
    for _, err, code in outcomes:
        assert code == 0, err
    for run in memory_runs:
        assert run.returncode == 0, run.stderr
    with Vault.open(roots[1], database_url=postgres_url, embedder=None, create=False) as vault:
        assert vault.stats().notes == 3 and vault.stats().chunks == 3
        assert sorted(m.title for m in vault.memories.list()) == [f"Memory {i}" for i in range(3)]
        assert vault.store.integrity_problems() == []


def test_vrom_mcp_serves_a_vault_from_the_database(
    postgres_url: str, tmp_path: Path, folder_name: str
) -> None:
    pytest.importorskip("mcp")
    from mcp import Client, StdioServerParameters

    root = write_vault(tmp_path / folder_name)
    env = {k: v for k, v in os.environ.items() if k not in INHERITED}
    env.update(VROM_STATE_DIR=str(tmp_path / "state"), VROM_EMBEDDER="none")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "vrom", "mcp", "--vault", str(root), "--database-url", postgres_url,
              "--no-watch"],
        env=env,
    )  # fmt: skip

    async def main() -> None:
        async with Client(params, mode="legacy") as client:
            found = await client.call_tool("vault_search", {"query": "basil"})
            assert not found.is_error, found.content
            assert found.structured_content is not None
            assert found.structured_content["results"][0]["path"] == "Garden.md"
            remembered = await client.call_tool(
                "vault_remember", {"title": "Thyme", "content": "Thyme needs little water."}
            )
            assert not remembered.is_error, remembered.content

    asyncio.run(main())
    with Vault.open(root, database_url=postgres_url, embedder=None, create=False) as vault:
        assert [m.title for m in vault.memories.list()] == ["Thyme"]  # in the shared store


def test_a_password_in_the_url_never_shows(
    postgres_url: str, tmp_path: Path, folder_name: str
) -> None:
    url = with_password(postgres_url)
    root = write_vault(tmp_path / folder_name)
    state = tmp_path / "state"
    runs = [
        run_vrom(state, "index", str(root), "--db", url, "--json"),
        run_vrom(state, "stats", "--vault", str(root), "--db", url, "--json"),
        run_vrom(state, "backend-info", "--vault", str(root), env={"VROM_DATABASE_URL": url}),
        run_vrom(state, "sync", "--from", url, "--vault", str(root), "--json"),
        run_vrom(state, "sync", "--to", url, "--vault", str(root), "--json"),
        run_vrom(state, "sync", "--to", url, "--vault", str(root)),
    ]
    for done in runs:
        assert done.returncode == 0, done.stderr
        assert SECRET not in done.stdout + done.stderr, done.args
    assert "***" in json.loads(runs[1].stdout)["store"]
    with Vault.open(root, database_url=url, embedder=None) as vault:
        assert SECRET not in repr(vault) and SECRET not in vault.store.location
