"""Two processes writing one collection and three reading it, for a bounded time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from vrom import Collection, Embedder

WORKER = Path(__file__).with_name("collection_worker.py")
SECONDS = 4.0


def test_two_writers_and_three_readers_agree_and_lose_nothing(tmp_path: Path) -> None:
    storage, barrier = tmp_path / "storage", tmp_path / "barrier"
    barrier.mkdir()
    roles = {"w1": "writer", "w2": "writer", "r1": "reader", "r2": "reader", "r3": "reader"}
    processes = {
        name: subprocess.Popen(
            [
                sys.executable,
                str(WORKER),
                role,
                name,
                str(storage),
                str(SECONDS),
                str(barrier),
                str(len(roles)),
                str(tmp_path / f"{name}.json"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, role in roles.items()
    }
    results = {}
    for name, process in processes.items():
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, f"{name}: {stderr}"
        results[name] = json.loads((tmp_path / f"{name}.json").read_text())

    for name, result in results.items():
        assert result["errors"] == [], name
        assert result["ops"] > 3, f"{name} barely ran: {result['ops']} operations"
    written = results["w1"]["written"] + results["w2"]["written"]
    assert len(written) == len(set(written))
    counts = {name: result["count"] for name, result in results.items()}
    assert set(counts.values()) == {len(written)}, counts

    with Collection.open("shared", embedder=Embedder.fake(), storage=storage) as docs:
        assert docs.count() == len(written)
        assert set(docs._store.documents.states()) == set(written), "every document, once"
        for writer in ("w1", "w2"):
            for doc_id in results[writer]["written"][:: max(1, len(written) // 40)]:
                n = int(doc_id.rsplit("-", 1)[1])
                hits = docs.search("note", k=2, where={"writer": writer, "n": n})
                assert [h.id for h in hits] == [doc_id]
        assert docs._store.integrity_problems() == []
