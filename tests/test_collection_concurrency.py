"""Two writer processes and four reader processes on one collection, each opening it itself as
separate machines would: on a SQLite file for a few seconds, and on one namespace of the test
session's PostgreSQL for a minute (issue 14's multi-machine test, marked slow).

Every process must end with 0 errors, every write a writer had acknowledged must be in the store
at the end (0 lost writes), and every read must be consistent (`collection_worker.Reader` says
what that means). ``pytest -s`` shows each process's writes, reads and searches.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from collection_worker import (
    MIN_ROUNDS,
    QUERY,
    document_text,
    memory_texts,
    open_all,
    parse_document_id,
)

WORKER = Path(__file__).with_name("collection_worker.py")
POSTGRES_SECONDS = 60.0
"""How long the processes run on PostgreSQL: the minute issue 14 asks for."""
SQLITE_SECONDS = 4.0
"""How long they run on SQLite: the same checks, kept short for the fast suite."""
ROLES = {
    "w1": "writer",
    "w2": "writer",
    "r1": "reader",
    "r2": "reader",
    "r3": "reader",
    "r4": "reader",
}
WAIT_SECONDS = 600
"""How long the test waits for a process past its run time before it kills them all."""


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)])
def test_two_writers_and_four_readers_agree_and_lose_nothing(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        storage, collection, seconds = str(tmp_path / "shared.db"), "shared", SQLITE_SECONDS
    else:  # a namespace of its own on the session's server
        storage = request.getfixturevalue("postgres_url")
        collection, seconds = f"concurrency-{uuid.uuid4().hex[:8]}", POSTGRES_SECONDS
    started = time.monotonic()
    results = _run_processes(storage, collection, seconds, tmp_path)
    writers = {name: r for name, r in results.items() if r["role"] == "writer"}
    readers = {name: r for name, r in results.items() if r["role"] == "reader"}
    # what the store must hold: each writer's own documents at their last version, each
    # shared document at the last version one of the writers gave it, every memory
    live: dict[str, set[tuple[str, int]]] = {}
    acknowledged: set[tuple[str, str, int]] = set()
    memories: dict[str, tuple[str, int, str]] = {}
    for name, writer in writers.items():
        for doc_id, version in (*writer["live"].items(), *writer["shared"].items()):
            live.setdefault(doc_id, set()).add((name, version))
        acknowledged.update((i, w, v) for i, w, v in writer["acknowledged"])
        memories.update((i, (name, m, status)) for i, (m, status) in writer["memories"].items())
    lost = _lost_writes(storage, collection, live, memories)
    _print_numbers(backend, results, lost, time.monotonic() - started)

    for name, result in results.items():
        shown = "\n".join(result["errors"])
        assert result["errors"] == [], f"{name}: {result['error_count']} errors:\n{shown}"
        assert result["rounds"] >= MIN_ROUNDS, name
    assert lost == [], "every acknowledged write is in the store"
    for name, reader in readers.items():
        unwritten = {(i, w, v) for i, w, v in reader["seen"]} - acknowledged
        assert unwritten == set(), f"{name} saw versions no writer acknowledged"
        assert set(reader["memories"]) <= set(memories), f"{name} saw unknown memories"
        assert reader["counts"]["sweeps"] > 0 and reader["counts"]["document reads"] > 0
    counts = {name: result["count"] for name, result in results.items()}
    assert set(counts.values()) == {len(live)}, f"every process ends seeing {len(live)}: {counts}"


def _run_processes(
    storage: str, collection: str, seconds: float, tmp_path: Path
) -> dict[str, dict[str, Any]]:
    """Run a worker process for each of `ROLES` at once; return their reports by name."""
    barrier = tmp_path / "barrier"
    (barrier / "ready").mkdir(parents=True)
    (barrier / "done").mkdir()
    processes = {
        name: subprocess.Popen(
            [
                sys.executable,
                str(WORKER),
                role,
                name,
                storage,
                collection,
                str(seconds),
                str(barrier),
                str(len(ROLES)),
                str(tmp_path / f"{name}.json"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, role in ROLES.items()
    }
    results = {}
    try:
        for name, process in processes.items():
            _, stderr = process.communicate(timeout=seconds + WAIT_SECONDS)
            assert process.returncode == 0, f"{name}: {stderr}"
            results[name] = json.loads((tmp_path / f"{name}.json").read_text())
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()
    return results


def _lost_writes(
    storage: str,
    collection: str,
    live: dict[str, set[tuple[str, int]]],
    memories: dict[str, tuple[str, int, str]],
) -> list[str]:
    """Return what the writers acknowledged and the store does not hold as they left it: a
    document missing or not at a writer's last version of it (``live``: id → (writer,
    version) candidates), one removed still there, a memory missing or of another status;
    and check the store is sound."""
    docs, store, kept = open_all(storage, collection)
    try:
        states = store.documents.states()
        lost = [f"{doc_id} missing" for doc_id in sorted(set(live) - set(states))]
        lost += [f"{doc_id} not removed" for doc_id in sorted(set(states) - set(live))]
        texts = store.documents.texts([state.document_id for state in states.values()])
        for doc_id, candidates in sorted(live.items()):
            text = texts.get(states[doc_id].document_id) if doc_id in states else None
            if doc_id in states and text not in {document_text(doc_id, *c) for c in candidates}:
                lost.append(f"{doc_id} not at the last version of {sorted(candidates)}: {text!r}")
        for memory_id, (writer, m, status) in sorted(memories.items()):
            found = store.memories.get(memory_id)
            if not found or (found.title, found.content, found.status) != (
                *memory_texts(writer, m),
                status,
            ):
                lost.append(f"memory {memory_id} ({writer} memory {m}, {status}): {found}")
        if kept.stats().total != len(memories):
            lost.append(f"{kept.stats().total} memories, {len(memories)} remembered")
        # a sample through the public search: each document found, at its last version
        for doc_id, candidates in sorted(live.items())[:: max(1, len(live) // 40)]:
            owner, n = parse_document_id(doc_id)
            if owner == "s":
                continue
            ((writer, version),) = candidates
            hits = docs.search(QUERY, k=2, where={"owner": owner, "n": n}, mode="hybrid")
            if [(h.id, h.metadata["v"]) for h in hits] != [(doc_id, version)]:
                lost.append(f"{doc_id} searched: {[(h.id, h.metadata) for h in hits]}")
        assert store.vectors.count() == store.documents.chunk_count(), "every chunk has a vector"
        assert store.integrity_problems() == []
        return lost
    finally:
        docs.close()
        store.close()


def _print_numbers(
    backend: str, results: dict[str, dict[str, Any]], lost: list[str], wall_seconds: float
) -> None:
    """Print what each process did (``pytest -s`` shows it)."""
    print(f"\n{backend}: {len(ROLES)} processes, {wall_seconds:.1f} s in all")
    for name, result in results.items():
        counts = result["counts"]
        if result["role"] == "writer":
            kinds = ("adds", "shared writes", "replaces", "removes", "memories", "archives")
            writes = sum(counts.get(kind, 0) for kind in kinds)
            searches, reads = counts.get("searches", 0), 0
        else:
            writes = 0
            searches = sum(v for kind, v in counts.items() if kind.endswith("searches"))
            reads = sum(v for kind, v in counts.items() if not kind.endswith("searches"))
        detail = ", ".join(f"{kind} {value}" for kind, value in sorted(counts.items()))
        if result["role"] == "reader":
            detail += f"; saw {result['replaced_seen']} replaced versions"
            detail += f" and {result['removed_seen']} removed documents"
        print(
            f"  {name} {result['role']:6} {result['seconds']:5.1f} s {result['rounds']:6} rounds"
            f" writes {writes:6} reads {reads:6} searches {searches:6}"
            f" errors {result['error_count']} ({detail})"
        )
    print(f"  lost writes: {len(lost)}")
