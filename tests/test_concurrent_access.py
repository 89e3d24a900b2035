"""Readers search while a writer indexes, and a second writer waits instead of failing.

* While ``vrom index --force`` rewrites every note of a 1,500-note vault in one process, another
  process runs searches through the CLI in a loop and a third runs ``vrom search --json``
  processes one after another. Every search must succeed (exit 0, valid JSON, a full page of hits,
  nothing on stderr, so no "database is locked"), and many must have run inside the window in which
  the writer was writing notes (read back from the notes' ``indexed_at`` times).
* Two ``vrom index`` processes started together on the same vault both succeed, and the store they
  leave is sound and equal to a clean index: on a store that does not exist yet, on a store whose
  vault gained, changed and lost notes, and with ``--force``.
"""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vrom import Vault
from vrom.state import store_path
from vrom.store.sqlite import SQLiteStore

sys.path.insert(0, str(Path(__file__).parent))
import vaultgen  # a plain module next to this file, importable once its folder is on sys.path

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _embed_with_the_fake_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Indexing here also embeds (fake model), so kills and races hit vector writes too."""
    monkeypatch.setenv("VROM_EMBEDDER", "fake")


SEED = 4242
TIMEOUT = 120.0
QUERIES = ("network", "budget meeting", "release OR archive", "garden*", "switch -budget")
K = 10

# Runs searches through the real CLI entry point in a loop until the stop file appears, and
# prints one JSON line per search: times, exit code, what went to stderr, and the hits.
READER = r"""
import contextlib, io, json, sys, time
from pathlib import Path
from vrom.cli import main

state, vault, stop, k, *queries = sys.argv[1:]
n = 0
deadline = time.time() + 100
while not Path(stop).exists() and time.time() < deadline:
    query = queries[n % len(queries)]
    n += 1
    out, err = io.StringIO(), io.StringIO()
    t0 = time.time()
    with contextlib.redirect_stderr(err):
        code = main(["--state-dir", state, "search", query, "--vault", vault, "--json", "-k", k], out)
    t1 = time.time()
    try:
        hits = len(json.loads(out.getvalue())["results"])
    except ValueError:
        hits = None
    print(json.dumps({"t0": t0, "t1": t1, "code": code, "err": err.getvalue(), "hits": hits,
                      "query": query}), flush=True)
"""


def vrom_command(state: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "vrom", "--state-dir", str(state), *args]


def stored_notes(db: Path) -> dict[str, tuple[str, int]]:
    """Return path -> (content hash, chunk count) read with plain sqlite3."""
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT path, content_hash, chunk_count FROM documents")
        return {path: (content_hash, count) for path, content_hash, count in rows}
    finally:
        conn.close()


def clean_index(vault: Path, state: Path) -> dict[str, tuple[str, int]]:
    with Vault.open(vault, state_dir=state) as clean:
        clean.index()
        db = clean.store.path
    return stored_notes(db)


def test_searches_succeed_while_another_process_indexes(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vaultgen.generate_vault(vault, 1500, SEED)
    state = tmp_path / "state"
    with Vault.open(vault, state_dir=state) as first:
        first.index()
    db = store_path(vault.resolve(), state)
    stop = tmp_path / "stop"

    writer = subprocess.Popen(
        vrom_command(state, "index", str(vault), "--force", "--quiet"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    # The reader logs to a file: a full pipe would stall it while nobody reads.
    reader_log = (tmp_path / "reader.jsonl").open("w", encoding="utf-8")
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(state), str(vault), str(stop), str(K), *QUERIES],
        stdout=reader_log,
        stderr=subprocess.PIPE,
        text=True,
    )
    cli_runs: list[tuple[float, float, subprocess.CompletedProcess[str]]] = []
    try:
        # Meanwhile, whole `vrom search` processes, one after another, until the writer is done.
        n = 0
        while writer.poll() is None:
            t0 = time.time()
            result = subprocess.run(
                vrom_command(
                    state, "search", QUERIES[n % len(QUERIES)], "--vault", str(vault), "--json"
                ),
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
            )
            cli_runs.append((t0, time.time(), result))
            n += 1
        _, writer_err = writer.communicate(timeout=TIMEOUT)
    finally:
        stop.touch()
        _, reader_err = reader.communicate(timeout=TIMEOUT)
        reader_log.close()
        writer.kill()  # no-op unless the block above failed

    assert writer.returncode == 0, writer_err
    assert writer_err == ""
    assert reader.returncode == 0, reader_err
    assert reader_err == ""

    # The writer's window: from its first note written to its last (--force rewrote them all).
    conn = sqlite3.connect(db)
    try:
        first_write, last_write, count = conn.execute(
            "SELECT min(indexed_at), max(indexed_at), count(*) FROM documents"
        ).fetchone()
    finally:
        conn.close()
    assert count == 1500

    lines = (tmp_path / "reader.jsonl").read_text(encoding="utf-8").splitlines()
    searches = [json.loads(line) for line in lines]
    for search in searches:
        assert search["code"] == 0, search
        assert search["err"] == "", search
        assert search["hits"] == K, search  # every note stays searchable: rewrites are atomic
    during = [s for s in searches if first_write <= s["t0"] and s["t1"] <= last_write]
    for _t0, _t1, result in cli_runs:
        assert result.returncode == 0, result.stderr
        assert result.stderr == "", result.stderr
        assert len(json.loads(result.stdout)["results"]) == K
    # A process overlaps the writes when it ran at any moment between the first and last write:
    # its open, its query or its output met a store being rewritten. (Counting only processes
    # wholly inside the window ties the test to this machine's speed: each one takes ~0.7 s.)
    processes_during = [r for t0, t1, r in cli_runs if t0 < last_write and first_write < t1]
    print(
        f"writer window {last_write - first_write:.2f}s: {len(during)} of {len(searches)} "
        f"in-process CLI searches and {len(processes_during)} of {len(cli_runs)} search "
        "processes overlapped it"
    )
    # Overlap is the point of the test: without it, the checks above prove nothing about
    # concurrency. The floors are far below what a slow machine yields (window 4.8 s on CI:
    # 91 in-process searches and 7 processes), so they fail only when nothing overlapped.
    assert len(during) >= 10, f"only {len(during)} of {len(searches)} searches ran during writes"
    assert len(processes_during) >= 2, (
        f"only {len(processes_during)} of {len(cli_runs)} search processes ran during writes"
    )

    store = SQLiteStore(db, create=False)
    try:
        assert store.integrity_problems() == []
    finally:
        store.close()


def change_vault(vault: Path, seed: int) -> None:
    """Edit, delete and add notes, so an index has new, changed and vanished notes to handle."""
    rng = random.Random(seed)
    paths = sorted(p.relative_to(vault).as_posix() for p in vault.rglob("*.md"))
    picked = rng.sample(paths, 120)
    for rel in picked[:60]:
        vaultgen.rewrite_note(vault, rel, rng)
    for rel in picked[60:]:
        (vault / rel).unlink()
    (vault / "Added").mkdir()
    for k in range(60):
        vaultgen.rewrite_note(vault, f"Added/New {k:03d}.md", rng)


@pytest.mark.parametrize("scenario", ["new-store", "changed-vault", "force"])
def test_two_indexers_at_once_both_succeed(tmp_path: Path, scenario: str) -> None:
    vault = tmp_path / "vault"
    vaultgen.generate_vault(vault, 800, SEED)
    state = tmp_path / "state"
    if scenario != "new-store":
        with Vault.open(vault, state_dir=state) as first:
            first.index()
    if scenario == "changed-vault":
        change_vault(vault, SEED)
    command = vrom_command(state, "index", str(vault), "--quiet")
    if scenario == "force":
        command.append("--force")

    one = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    two = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert one.poll() is None, "the first indexer finished before the second started"
    _, err_one = one.communicate(timeout=TIMEOUT)
    _, err_two = two.communicate(timeout=TIMEOUT)
    assert (one.returncode, err_one) == (0, ""), f"first indexer failed: {err_one}"
    assert (two.returncode, err_two) == (0, ""), f"second indexer failed: {err_two}"

    db = store_path(vault.resolve(), state)
    store = SQLiteStore(db, create=False)
    try:
        assert store.integrity_problems() == []
    finally:
        store.close()
    assert stored_notes(db) == clean_index(vault, tmp_path / "clean")
