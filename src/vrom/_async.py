"""Running blocking calls from asyncio code without importing asyncio for everyone else.

``import asyncio`` costs ~150 ms on two cores; every command and every synchronous user of
vrom would pay it at import time for the async faces only. Async callers have it loaded
already, so importing it inside the coroutine is free for them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def in_thread(function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Return ``function(*args, **kwargs)`` run in a worker thread (`asyncio.to_thread`)."""
    import asyncio

    return await asyncio.to_thread(function, *args, **kwargs)
