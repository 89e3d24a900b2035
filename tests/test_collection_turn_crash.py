"""A collection's change and the turns after it in its conversation are one transaction: a
process that dies between them (an exit at that point, or kill -9 at any point) leaves every
stored vector as a full `Collection.reembed()` makes it from the stored documents.

The writer runs in a subprocess (`CHILD`), so its death is real; the test reopens the
collection in its own process with the same fake model and compares vector by vector.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from vrom import Collection, Embedder
from vrom.index.codec import decode

DIMS = 16
CHILD = """
import os, random, sys
from vrom import Collection, Embedder

storage, mode, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])


class Model(Embedder):
    '''The fake model; with ``dying`` set it exits as it embeds turn 3 again.'''

    dying = False

    def __init__(self, delay):
        self.inner = Embedder.fake(DIMS, delay)

    @property
    def fingerprint(self):
        return self.inner.fingerprint

    def _embed(self, texts, kind):
        if self.dying and any(text.endswith("T3: line 3") for text in texts):
            os._exit(9)
        return self.inner._embed(texts, kind)


def turn(i, text, source="chat"):
    return {"id": str(i), "text": "Chat\\n\\n" + text,
            "metadata": {"title": "Chat", "source": source}}


model = Model(0.002 if mode == "trials" else 0.0)
docs = Collection.open("c", embedder=model, storage=storage)
docs.add([turn(i, f"T{i}: line {i}") for i in range(1, 7)])
print("ready", flush=True)
if mode == "add":
    model.dying = True
    docs.add([turn(2, "T2: edited")])
elif mode == "remove":
    model.dying = True
    docs.remove("2")
else:  # trials: edits, moves and removals until killed
    rng = random.Random(seed)
    for step in range(10_000):
        i = rng.randint(1, 6)
        kind = rng.choice(("edit", "move", "remove", "back"))
        if kind == "remove":
            docs.remove(str(i))
        else:
            source = "other" if kind == "move" else "chat"
            docs.add([turn(i, f"T{i}: line {i} v{step}", source)])
        print("step", step, flush=True)
""".replace("DIMS", str(DIMS))


def _run(storage: Path, mode: str, seed: int = 0) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(storage), mode, str(seed)],
        stdout=subprocess.PIPE,
        text=True,
    )


def _stale_vectors(storage: Path) -> list[str]:
    """Return the ids of the chunks whose stored vector differs from what a full re-embed
    makes (reopening the collection as the next process would)."""
    with Collection.open("c", embedder=Embedder.fake(DIMS), storage=storage) as docs:
        store = docs._store

        def vectors() -> dict[int, np.ndarray]:
            rows = store.vectors.rows()
            matrix = decode([blob for _, blob in rows], store.vectors.encoding())
            return {chunk_id: matrix[i] for i, (chunk_id, _) in enumerate(rows)}

        stored = vectors()
        docs.reembed()
        made = vectors()
        assert stored.keys() == made.keys(), "a chunk without a vector, or a vector without one"
        return [
            str(chunk_id)
            for chunk_id, vector in made.items()
            if not np.array_equal(vector, stored[chunk_id])
        ]


@pytest.mark.parametrize("change", ["add", "remove"])
def test_a_process_that_dies_before_the_turns_after_a_change_are_embedded_leaves_none_stale(
    tmp_path: Path, change: str
) -> None:
    child = _run(tmp_path, change)
    out, _ = child.communicate(timeout=300)
    assert child.returncode == 9 and out.strip() == "ready", "it died embedding turn 3 again"
    assert _stale_vectors(tmp_path) == []
    with Collection.open("c", embedder=Embedder.fake(DIMS), storage=tmp_path) as docs:
        assert docs.count() == 6, "the change that died with the process was not kept"


@pytest.mark.slow
def test_collection_changes_killed_at_random_points_leave_no_stale_turn(tmp_path: Path) -> None:
    rng = random.Random(26)
    for trial in range(20):
        storage = tmp_path / f"trial-{trial}"
        storage.mkdir()
        child = _run(storage, "trials", seed=trial)
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        for _ in range(rng.randint(0, 6)):  # a few changes made, the next one under way
            assert child.stdout.readline().startswith("step")
        time.sleep(rng.random() * 0.05)  # only to spread where in that change the kill lands
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        assert _stale_vectors(storage) == [], f"trial {trial}"
