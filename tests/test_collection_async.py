"""AsyncCollection: the same API for asyncio code, without blocking the event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from vrom import AsyncCollection, Embedder, Fingerprint, StorageError, ValidationError


class _GatedEmbedder(Embedder):
    """The fake model, but embedding documents waits until the test opens a gate."""

    def __init__(self) -> None:
        self._inner = Embedder.fake()
        self.gate = threading.Event()
        self.waiting = threading.Event()

    @property
    def fingerprint(self) -> Fingerprint:
        return self._inner.fingerprint

    def _embed(self, texts: Sequence[str], kind: str) -> npt.NDArray[np.float32]:
        if kind == "document":
            self.waiting.set()
            if not self.gate.wait(timeout=10):
                raise RuntimeError("the gate was never opened: the event loop was blocked")
        return (
            self._inner.embed_documents(texts)
            if kind == "document"
            else np.stack([self._inner.embed_query(t) for t in texts])
        )


def test_the_async_api_mirrors_the_sync_one(tmp_path: Path) -> None:
    async def main() -> None:
        async with await AsyncCollection.open(
            "handbook", embedder=Embedder.fake(), storage=tmp_path
        ) as docs:
            assert docs.name == "handbook"
            assert await docs.add([{"id": "a", "text": "annual leave is 25 days"}]) == 1
            assert (
                await docs.add([{"id": "b", "text": "parking permits", "metadata": {"n": 2}}]) == 2
            )
            hits = await docs.search("annual leave", k=2)
            assert hits[0].id == "a"
            assert [h.id for h in await docs.search("permits", where={"n": {"$gt": 1}})] == ["b"]
            many = await asyncio.gather(*(docs.search("leave", k=1) for _ in range(20)))
            assert all(h[0].id == "a" for h in many)
            assert await docs.remove("a") is True and await docs.count() == 1
            assert await docs.reload() == 1
            with pytest.raises(ValidationError):
                await docs.search("x", k=0)
            result = await docs.as_tool("search_handbook", "Search the handbook.").acall(
                {"query": "parking"}
            )
            assert not result.is_error and '"b"' in result.content
        with pytest.raises(StorageError, match="closed"):
            await docs.count()

    asyncio.run(main())


def test_a_slow_add_does_not_block_the_event_loop() -> None:
    embedder = _GatedEmbedder()

    async def main() -> int:
        docs = await AsyncCollection.open("slow", embedder=embedder)
        adding = asyncio.create_task(docs.add([{"id": "a", "text": "slow text"}]))
        # The embedder is now blocked in a worker thread; if the loop were blocked with it,
        # this coroutine could never run to open the gate (the add would fail after 10 s).
        while not embedder.waiting.is_set():
            await asyncio.sleep(0.01)
        embedder.gate.set()
        count = await adding
        await docs.close()
        return count

    assert asyncio.run(main()) == 1
