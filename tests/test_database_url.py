"""Where a vault's store is: ``database_url=``/``--db URL`` over ``$VROM_DATABASE_URL`` over the
vault's own file in the state dir; namespaces; and passwords that never show.

A ``sqlite:///`` URL goes everywhere a ``postgresql://`` one does, so these tests run on SQLite
files; the password tests use a PostgreSQL URL on a port nothing listens on.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from vrom_cli import run_vrom

from vrom import Collection, Embedder, NotFoundError, StorageError, ValidationError, Vault
from vrom.errors import hide_passwords
from vrom.state import store_path

SECRET = "s3cret"
BAD_URL = f"postgresql://u:{SECRET}@127.0.0.1:1/db"
NOTES = {
    "Atlas.md": "# Atlas\n\nAtlas maps every office network switch. See [[Beacon]].\n",
    "Beacon.md": "# Beacon\n\nBeacon sends alerts when a switch fails. #alerts\n",
}


@pytest.fixture
def vault_root(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    root.mkdir()
    for name, text in NOTES.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


# -- masking ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (BAD_URL, "postgresql://u:***@127.0.0.1:1/db"),
        ("cannot reach postgres://me:p@ss/w@db.example:5432/x now", "postgres://me:***@"),
        ("postgresql://db/x?sslmode=require&password=hunter2", "password=***"),
        ("host=db user=me password=hunter2 dbname=x", "password=***"),
        ("postgresql://me@db/x", "postgresql://me@db/x"),  # no password: as it is
        ("sqlite:////tmp/a:b@c.db", "sqlite:////tmp/a:b@c.db"),  # a file, not a user
    ],
)
def test_passwords_are_masked_wherever_a_text_holds_them(text: str, shown: str) -> None:
    masked = hide_passwords(text)
    assert shown in masked
    for secret in ("s3cret", "p@ss/w", "hunter2"):
        assert secret not in masked


def test_no_vrom_error_ever_carries_a_password() -> None:
    error = NotFoundError(f"no store at {BAD_URL}")
    assert SECRET not in str(error) and "u:***@127.0.0.1:1" in str(error)
    assert SECRET not in str(ValidationError(f"bad {BAD_URL}", "code"))


@pytest.mark.parametrize(
    "open_it",
    [
        lambda root: Vault.open(root, database_url=BAD_URL, embedder=None),
        lambda root: Vault.open(root, database_url=BAD_URL, create=False, embedder=None),
        lambda root: Vault.open_store(BAD_URL),
        lambda root: Collection.open("handbook", embedder=None, storage=BAD_URL),
        lambda root: Collection.open("handbook", embedder=None, storage=BAD_URL, key="k"),
    ],
    ids=["vault", "vault-indexed", "store", "collection", "collection-key"],
)
def test_opening_an_unreachable_database_names_it_without_its_password(
    vault_root: Path, open_it: object
) -> None:
    with pytest.raises((StorageError, NotFoundError, ValidationError)) as failed:
        open_it(vault_root)  # type: ignore[operator]
    assert SECRET not in str(failed.value) and "\n" not in str(failed.value)


def test_a_sync_with_an_unreachable_database_names_it_without_its_password(
    vault_root: Path,
) -> None:
    with Vault.open(vault_root, embedder=None) as vault:
        vault.index()
        for sync in (vault.sync_to, vault.sync_from):
            with pytest.raises((StorageError, NotFoundError, ValidationError)) as failed:
                sync(BAD_URL)
            assert SECRET not in str(failed.value)


def test_the_cli_never_prints_a_password(vault_root: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert run_vrom(state, "index", str(vault_root)).returncode == 0
    runs = {
        "--db": run_vrom(state, "--db", BAD_URL, "stats", "--vault", str(vault_root)),
        "--database-url": run_vrom(state, "search", "atlas", "--database-url", BAD_URL),
        "index --db": run_vrom(state, "index", str(vault_root), "--db", BAD_URL, "--json"),
        "env": run_vrom(state, "stats", "--json", env={"VROM_DATABASE_URL": BAD_URL}),
        "sync --to": run_vrom(state, "sync", "--to", BAD_URL, "--vault", str(vault_root)),
        "sync --from": run_vrom(state, "sync", "--from", BAD_URL, cwd=vault_root),
        "--remote-sync": run_vrom(state, "index", str(vault_root), "--remote-sync", BAD_URL),
        "typo": run_vrom(state, "stats", "--databse-url", BAD_URL),
    }
    for name, done in runs.items():
        assert done.returncode in (1, 2), (name, done.stdout, done.stderr)
        assert SECRET not in done.stdout + done.stderr, name
        assert done.stderr.strip(), name


# -- MCP -------------------------------------------------------------------------------------


def test_the_mcp_server_never_sends_or_logs_a_password(vault_root: Path) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from vrom.server.app import build_server
    from vrom.server.state import ServerState

    logged: list[str] = []
    state = ServerState(
        vault_root, embedder=None, watch=False, log=logged.append, database_url=BAD_URL
    )
    state.open_in_background()
    server = build_server(state)

    async def main() -> list[str]:
        async with Client(server, mode="legacy") as client:
            texts = []
            for tool, arguments in (("vault_search", {"query": "atlas"}), ("vault_stats", {})):
                result = await client.call_tool(tool, arguments)
                assert result.is_error
                texts.append(result.content[0].text)  # type: ignore[union-attr]
            return texts

    try:
        replies = asyncio.run(main())
    finally:
        state.close()
    assert replies and all(SECRET not in text for text in replies)
    assert logged and all(SECRET not in line for line in logged)


def test_vrom_mcp_over_stdio_never_sends_a_password(vault_root: Path, tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "vrom", "mcp", "--vault", str(vault_root), "--database-url", BAD_URL],
        env={
            **{k: v for k, v in os.environ.items() if k != "VROM_DATABASE_URL"},
            "VROM_STATE_DIR": str(tmp_path / "state"),
            "VROM_EMBEDDER": "none",
        },
    )

    async def main() -> str:
        async with Client(params, mode="legacy") as client:
            result = await client.call_tool("vault_search", {"query": "atlas"})
            assert result.is_error
            return str(result.content[0].text)  # type: ignore[union-attr]

    assert SECRET not in asyncio.run(main())


def test_vrom_mcp_takes_a_database_url_not_a_store_file(tmp_path: Path) -> None:
    done = run_vrom(tmp_path / "state", "mcp", "--db", str(tmp_path / "x.db"))
    assert done.returncode == 1 and "takes a database URL" in done.stderr


# -- which store -----------------------------------------------------------------------------


def test_the_database_is_the_argument_then_the_variable_then_the_state_dir(
    vault_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    local = store_path(vault_root.resolve(), state)
    given, variable = tmp_path / "given.db", tmp_path / "variable.db"
    with Vault.open(vault_root, embedder=None) as vault:
        assert vault.store.location == str(local)
    monkeypatch.setenv("VROM_DATABASE_URL", sqlite_url(variable))
    with Vault.open(vault_root, embedder=None) as vault:
        assert vault.store.location == str(variable)
    with Vault.open(vault_root, embedder=None, database_url=sqlite_url(given)) as vault:
        assert vault.store.location == str(given)
    with Vault.open(vault_root, embedder=None, local=True) as vault:
        assert vault.store.location == str(local)
    with pytest.raises(ValidationError, match="not both"):
        Vault.open(vault_root, embedder=None, database_url=sqlite_url(given), local=True)
    with pytest.raises(ValidationError, match="empty"):
        Vault.open(vault_root, embedder=None, database_url=" ")


def test_the_cli_takes_db_over_the_variable_over_the_state_dir(
    vault_root: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    given, variable = tmp_path / "given.db", tmp_path / "variable.db"
    env = {"VROM_DATABASE_URL": sqlite_url(variable)}
    indexed = run_vrom(state, "index", str(vault_root), "--json", env=env)
    assert json.loads(indexed.stdout)["store"] == str(variable)
    assert not store_path(vault_root.resolve(), state).exists()  # nothing went local

    def store_of(*args: str, **options: object) -> str:
        done = run_vrom(state, *args, "--json", **options)  # type: ignore[arg-type]
        assert done.returncode == 0, done.stderr
        return str(json.loads(done.stdout)["store"])

    # the vault is the one indexed last; its store is where the variable says
    assert store_of("stats", env=env) == str(variable)
    run_vrom(state, "sync", "--to", sqlite_url(given), "--vault", str(vault_root), env=env)
    assert not given.exists()  # sync copies the local store, which does not exist
    run_vrom(state, "index", str(vault_root), "--db", sqlite_url(given))
    assert store_of("stats", "--db", sqlite_url(given), env=env) == str(given)
    assert store_of("--db", str(given), "stats", env=env) == str(given)  # a store file
    local = run_vrom(state, "stats", "--vault", str(vault_root))
    assert local.returncode == 1 and "not indexed yet" in local.stderr


def test_a_vault_without_a_namespace_is_in_its_folder_name(
    vault_root: Path, tmp_path: Path
) -> None:
    with Vault.open(vault_root, embedder=None) as vault:
        assert vault.namespace == "notes"
    with Vault.open(vault_root, embedder=None, namespace="team notes") as vault:
        assert vault.namespace == "team notes"
    for bad in ("", "  ", 3):
        with pytest.raises(ValidationError, match="namespace"):
            Vault.open(vault_root, embedder=None, namespace=bad)  # type: ignore[arg-type]


def test_a_vault_not_indexed_in_a_database_is_not_found_there(
    vault_root: Path, tmp_path: Path
) -> None:
    url = sqlite_url(tmp_path / "shared.db")
    with Vault.open(vault_root, embedder=None, database_url=url):
        pass  # the store exists now, but no vault was indexed into it
    with pytest.raises(NotFoundError, match=r"is not indexed in .*shared\.db yet: run 'vrom index"):
        Vault.open(vault_root, embedder=None, database_url=url, create=False)


def test_a_vault_refuses_a_store_that_holds_a_collection(vault_root: Path, tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    with Collection.open("handbook", embedder=None, storage=path) as docs:
        docs.add([{"id": "a", "text": "some text"}])
    with pytest.raises(StorageError, match="holds collection 'handbook', not a vault"):
        Vault.open(vault_root, embedder=None, database_url=sqlite_url(path))


def test_vault_open_store_refuses_a_database_server(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="a database, not a store file"):
        Vault.open_store("postgresql://u@127.0.0.1:1/db")


def test_without_a_vault_named_a_database_serves_the_vault_indexed_last_else_this_folder(
    vault_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = sqlite_url(tmp_path / "shared.db")
    other = tmp_path / "elsewhere" / "notes"
    other.mkdir(parents=True)
    monkeypatch.chdir(other)
    with Vault.open(vault_root, embedder=Embedder.fake(16), database_url=url) as vault:
        vault.index()
    with Vault.open_default(database_url=url, embedder=None) as found:
        assert found.root == vault_root.resolve()
    # (a SQLite file holds one store: any folder opened on it finds the vault indexed there)
    fresh = tmp_path / "fresh-state"  # no vault indexed last on this "machine": this folder
    with Vault.open_default(fresh, database_url=url, embedder=None) as here:
        assert here.root == other.resolve()
    monkeypatch.setenv("VROM_VAULT", str(other))  # named: that one, over the one indexed last
    with Vault.open_default(database_url=url, embedder=None) as named:
        assert named.root == other.resolve()


# -- the commands ----------------------------------------------------------------------------


def test_vrom_sync_copies_to_a_database_and_back_to_a_new_machine(
    vault_root: Path, tmp_path: Path
) -> None:
    state, url = tmp_path / "state", sqlite_url(tmp_path / "shared.db")
    indexed = run_vrom(state, "index", str(vault_root), embedder="fake:16")
    assert indexed.returncode == 0, indexed.stderr
    pushed = run_vrom(state, "sync", "--to", url, "--vault", str(vault_root), "--json")
    assert pushed.returncode == 0, pushed.stderr
    summary = json.loads(pushed.stdout)
    assert (summary["added"], summary["vectors"], summary["vault"]) == (2, 2, str(vault_root))
    (vault_root / "Beacon.md").write_text("# Beacon\n\nBeacon now sends SMS too.\n")
    run_vrom(state, "index", str(vault_root), embedder="fake:16")
    again = run_vrom(state, "sync", "--to", url, cwd=vault_root)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("synced 2 notes from ") and (
        ": 0 added, 1 changed, 0 removed, 1 unchanged; 1 vectors, 0 memories in " in again.stdout
    )

    machine_b = tmp_path / "machine-b" / "notes"
    machine_b.mkdir(parents=True)
    for note in vault_root.iterdir():
        (machine_b / note.name).write_bytes(note.read_bytes())
    state_b = tmp_path / "state-b"
    pulled = run_vrom(state_b, "sync", "--from", url, "--json", cwd=machine_b)
    assert pulled.returncode == 0, pulled.stderr
    copied = json.loads(pulled.stdout)
    assert (copied["added"], copied["vectors"], copied["vault"]) == (2, 2, str(machine_b))
    reindexed = run_vrom(state_b, "index", str(machine_b), "--json", embedder="fake:16")
    counts = json.loads(reindexed.stdout)
    assert (counts["unchanged"], counts["added"], counts["embedded"]) == (2, 0, 0)


def test_vrom_index_remote_sync_indexes_and_syncs_in_one_step(
    vault_root: Path, tmp_path: Path
) -> None:
    state, url = tmp_path / "state", sqlite_url(tmp_path / "shared.db")
    done = run_vrom(state, "index", str(vault_root), "--remote-sync", url, embedder="fake:16")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("indexed 2 notes") and lines[1].startswith("synced 2 notes")
    as_json = run_vrom(
        state, "index", str(vault_root), "--remote-sync", url, "--json", embedder="fake:16"
    )
    data = json.loads(as_json.stdout)
    assert data["unchanged"] == 2 and data["sync"]["unchanged"] == 2
    assert data["sync"]["target"] == str(tmp_path / "shared.db")
    # with the database as everyone's default, --remote-sync still indexes the local store
    env = {"VROM_DATABASE_URL": url}
    (vault_root / "Atlas.md").write_text("# Atlas\n\nAtlas now maps the routers too.\n")
    shared = run_vrom(
        state, "index", str(vault_root), "--remote-sync", url, "--json", env=env, embedder="fake:16"
    )
    data = json.loads(shared.stdout)
    assert data["store"] == str(store_path(vault_root.resolve(), state))
    assert (data["changed"], data["sync"]["changed"], data["sync"]["vectors"]) == (1, 1, 1)


def test_vrom_sync_to_needs_the_vault_indexed_here(vault_root: Path, tmp_path: Path) -> None:
    done = run_vrom(tmp_path / "state", "sync", "--to", sqlite_url(tmp_path / "x.db"), "--vault",
                    str(vault_root))  # fmt: skip
    assert done.returncode == 1 and "not indexed yet" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("url", ["libsql://notes.example.io", f"mysql://u:{SECRET}@db.local/notes"])
def test_a_database_url_of_another_kind_is_refused_by_its_scheme_not_its_namespace(
    vault_root: Path, tmp_path: Path, url: str
) -> None:
    state = tmp_path / "state"
    done = run_vrom(state, "--db", url, "search", "atlas", "--vault", str(vault_root))
    assert done.returncode == 1, done.stderr
    scheme = url.split("://")[0]
    assert done.stderr.strip() == (
        f"vrom: error: storage scheme {scheme!r} is not supported: give a path, a sqlite:///"
        " URL or a postgresql:// URL"
    )
