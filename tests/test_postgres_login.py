"""Issue 26 item 14: a PostgreSQL login turned away says so, and a URL's password never shows,
whatever characters it holds.

The session's server trusts local logins, so a user of its own with a password is made here,
with a ``pg_hba.conf`` line of its own asking that user (only) for the password.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit

import psycopg
import pytest
from vrom_cli import run_vrom

from vrom.errors import VromError
from vrom.store import open_store
from vrom.store.urls import mask_url, scrub

PASSWORD = "Zq%@9x:K/v?#j"
"""The login's password: every character a URL has to percent-encode (and no word a message
might hold for its own sake)."""


@pytest.fixture(scope="module")
def login(postgres_url: str) -> Iterator[tuple[str, str]]:
    """Yield (a user whose password is `PASSWORD`, the socket folder) on the session's server."""
    user = f"vrom_login_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {user} LOGIN SUPERUSER PASSWORD '{PASSWORD}'")
        hba = Path(str(conn.execute("SHOW hba_file").fetchone()[0]))  # type: ignore[index]
        before = hba.read_text()
        with hba.open("r+") as file:  # in place: the file keeps its owner and mode
            file.write(f"local all {user} scram-sha-256\n{before}")
        conn.execute("SELECT pg_reload_conf()")
    folder = dict(p.split("=", 1) for p in urlsplit(postgres_url).query.split("&"))["host"]
    _wait_until_refused(f"postgresql://{user}:wrong@/postgres?host={folder}")
    try:
        yield user, folder
    finally:
        with hba.open("w") as file:
            file.write(before)
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute("SELECT pg_reload_conf()")


def _wait_until_refused(url: str) -> None:
    """Return once the server asks for the password (it reloads its configuration on its own
    time): a wrong one is then refused."""
    for _ in range(10_000):
        try:
            psycopg.connect(url).close()
        except psycopg.OperationalError as exc:
            if "password authentication failed" in str(exc):
                return
    raise AssertionError("the server never asked for the password")


def _url(user: str, folder: str, password: str) -> str:
    return f"postgresql://{user}:{password}@/postgres?host={folder}"


def _error_of(url: str) -> str:
    with pytest.raises(VromError) as caught:
        open_store(url, namespace="login")
    return str(caught.value)


def _shows_part_of(text: str, password: str) -> str | None:
    """Return a piece of ``password`` (3 characters or more) ``text`` shows."""
    for size in range(3, len(password) + 1):
        for start in range(len(password) - size + 1):
            if password[start : start + size] in text:
                return password[start : start + size]
    return None


def test_a_wrong_password_says_the_login_was_refused(login: tuple[str, str]) -> None:
    user, folder = login
    message = _error_of(_url(user, folder, "Wr0ng-guess"))
    assert "refused the login" in message, message
    assert "password authentication failed" in message and "check the password" in message
    assert "is the server running" not in message, "the server was reached: it said no"
    assert "Wr0ng-guess" not in message
    assert f'for user "{user}"' in message, "a user sharing letters with the password is shown"
    missing = _error_of(f"postgresql://{user}@/postgres?host={folder}")
    assert "refused the login" in missing and "no password supplied" in missing, missing
    nobody = _error_of(_url("nobody_here", folder, "x"))
    assert "refused the login" in nobody and "nobody_here" in nobody, nobody


def test_the_right_password_percent_encoded_opens_the_store(login: tuple[str, str]) -> None:
    user, folder = login
    store = open_store(_url(user, folder, quote(PASSWORD, safe="")), namespace="login")
    try:
        assert PASSWORD not in store.location and quote(PASSWORD, safe="") not in store.location
        assert "***" in store.location
    finally:
        store.close()


@pytest.mark.parametrize(
    "password",
    [
        PASSWORD,  # every character a URL has to encode, raw
        "Zq%Kx9",  # a % that starts no %XX: libpq quotes the token it could not decode
        "Zq9@Kx7w",  # a raw @: libpq reads "Kx7w@..." as the host, Python "Zq9@Kx7w"
        "Zqrd%@127",  # the issue's: the error showed '***ercent-encoded token: "rd%@127..."'
        "Zq/9Kx",  # a raw /: the rest reads as the database name
    ],
)
def test_a_password_with_percent_at_or_colon_is_never_shown(
    login: tuple[str, str], password: str
) -> None:
    user, folder = login
    url = _url(user, folder, password)
    message = _error_of(url)
    assert _shows_part_of(message, password) is None, message
    assert _shows_part_of(mask_url(url), password) is None, mask_url(url)
    assert "percent-encode" in message or "refused the login" in message, message


def test_a_driver_error_quoting_part_of_a_password_is_scrubbed() -> None:
    """What psycopg's own texts echo of a URL it could not read is masked, as it is worded."""
    url = "postgresql://me:secret@tail@127.0.0.1:5432/db"
    assert "tail" not in scrub('could not translate host name "tail@127.0.0.1" to address', url)
    url = "postgresql://me:pa%ss@127.0.0.1/db"
    assert "pa%ss" not in scrub('invalid percent-encoded token: "pa%ss"', url)
    kept = scrub('password authentication failed for user "me"', url)
    assert kept == 'password authentication failed for user "me"', "no password: left alone"


def test_the_cli_says_a_wrong_password_in_one_line(
    login: tuple[str, str], write_vault: Callable[[dict[str, str]], Path], tmp_path: Path
) -> None:
    user, folder = login
    vault_root = write_vault({"a.md": "# A\nApples.\n"})
    state = tmp_path / "state"
    assert run_vrom(state, "index", str(vault_root)).returncode == 0
    done = run_vrom(
        state, "--vault", str(vault_root), "sync", "--to", _url(user, folder, "Wr0ng-pw")
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "refused the login" in lines[0], done.stderr
    assert "Wr0ng-pw" not in done.stdout + done.stderr
