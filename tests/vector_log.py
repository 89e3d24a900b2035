"""Reading a vault store's vector change log, to prove no chunk was embedded twice."""

from __future__ import annotations

import sqlite3


def vector_writes(store_file: str) -> int:
    """Return how many vectors were ever written to the store (its change log's rows)."""
    with sqlite3.connect(store_file) as raw:
        return int(raw.execute("SELECT count(*) FROM vector_changes").fetchone()[0])
