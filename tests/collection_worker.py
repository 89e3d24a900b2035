"""A process of the collection concurrency test: writes or reads one collection for a while.

    python collection_worker.py writer|reader NAME STORAGE SECONDS BARRIER_DIR PROCESSES OUT

When its time is up it marks itself done in BARRIER_DIR, waits for all PROCESSES to be done,
then reloads and writes {"role", "count", "ops", "errors", "written"} as JSON to OUT.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from vrom import Collection, Embedder, VromError


def main() -> None:
    role, name, storage, seconds, barrier, processes, out = sys.argv[1:8]
    docs = Collection.open("shared", embedder=Embedder.fake(), storage=storage)
    written: list[str] = []
    errors: list[str] = []
    ops = 0
    deadline = time.monotonic() + float(seconds)
    while time.monotonic() < deadline:
        try:
            if role == "writer":
                batch = [
                    {
                        "id": f"{name}-{len(written) + i}",
                        "text": f"note {len(written) + i} from {name} about shared topics",
                        "metadata": {"writer": name, "n": len(written) + i},
                    }
                    for i in range(5)
                ]
                docs.add(batch)
                written += [doc["id"] for doc in batch]
                if len(written) % 20 == 0:  # replace an earlier document: no duplicate may appear
                    docs.add(
                        [
                            {
                                "id": written[0],
                                "text": "rewritten first note",
                                "metadata": {"writer": name, "n": 0},
                            }
                        ]
                    )
            else:
                docs.reload()
                hits = docs.search("note about shared topics", k=10)
                if len({h.id for h in hits}) != len(hits):
                    errors.append(f"duplicate hits: {[h.id for h in hits]}")
                docs.search("note", k=5, where={"n": {"$lt": 3}}, mode="hybrid")
                docs.count()
            ops += 1
        except VromError as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
    (Path(barrier) / name).touch()
    while len(list(Path(barrier).iterdir())) < int(processes):
        time.sleep(0.05)
    count = docs.reload()
    result = {"role": role, "count": count, "ops": ops, "errors": errors, "written": written}
    Path(out).write_text(json.dumps(result))
    docs.close()


if __name__ == "__main__":
    main()
