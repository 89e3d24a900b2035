"""A new user's first hour on a real vault: how soon ``vrom mcp`` answers, and how it embeds.

    python bench/first_hour.py [--vault ../shared/data/vault/obsidian-hub] [--minutes 10]
        [--embedder default] [--out FILE]

Starts ``vrom mcp --vault VAULT --no-watch`` on a fresh state directory, as a real subprocess,
and talks to it with the official MCP SDK client over stdio, as a desktop client does:

1. **first answer**: from starting the process to the ``initialize`` reply.
2. **keyword-complete**: to the first ``vault_search`` reply (keyword mode), which waits for
   the keyword index of every note; the reply's ``chunks`` is the vault's total.
3. **while embedding**, for ``--minutes`` in two phases. First (``--search-minutes``, a
   third by default) a ``vault_search`` in the default mode (hybrid where vectors exist) every
   2 seconds, queries in turn, with ``vault_stats`` between them: the p50/p95 of their round
   trips. Then only ``vault_stats`` every 5 seconds: the background worker's rate, as vectors
   gained over seconds in that phase (searches take CPU from the worker on a small machine, so
   its rate while they run is printed apart). The worker's own ``chunks_per_second``
   (measured from its first batch on) is printed too.
4. the server is stopped; then **the raw model** (a fresh process) embeds exactly the texts the
   worker embedded (the first chunks by id: the worker's order), in the worker's batch size.
   The ratio of chunks per second, background over raw, is the number to watch (>= 0.95: the
   background worker costs nothing but the searches it lets through).

When the vault is not embedded within ``--minutes``, the time to embed all of it is
extrapolated from the measured rate, and the output says so. Prints a table and writes JSON to
bench/results/first_hour.json. Takes about ``2 × --minutes`` plus the keyword index (seconds).
``--embedder fake`` (instant) is for the smoke test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

QUERIES = [
    "how do I install community plugins",
    "daily notes template",
    "sync my vault to mobile",
    "dataview query examples",
    "keyboard shortcuts",
    "graph view settings",
    "css snippets for themes",
    "backlinks and outgoing links",
    "markdown tables",
    "publish notes as a website",
]
SEARCH_EVERY_S = 2.0
POLL_EVERY_S = 5.0
DEFAULT_VAULT = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "vault"


def _payload(result: Any) -> Any:
    """Return a tool result's data: its structured content, else its JSON text."""
    if getattr(result, "is_error", False):
        raise RuntimeError(result.content[0].text)
    structured = getattr(result, "structured_content", None)
    if structured:
        return structured.get("result", structured) if len(structured) == 1 else structured
    return json.loads(result.content[0].text)


async def _serve_and_measure(
    vault: Path, state_dir: Path, embedder: str, minutes: float, search_minutes: float
) -> dict[str, Any]:
    from mcp import Client, StdioServerParameters

    env = {**os.environ, "VROM_EMBEDDER": embedder}
    env.pop("VROM_VAULT", None)
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "vrom",
            "--state-dir",
            str(state_dir),
            "mcp",
            "--vault",
            str(vault),
            "--no-watch",
        ],
        env=env,
    )
    started = time.perf_counter()
    async with Client(params, mode="legacy") as client:
        initialized = time.perf_counter() - started
        first = _payload(
            await client.call_tool("vault_search", {"query": QUERIES[0], "mode": "keyword", "k": 5})
        )
        keyword_complete = time.perf_counter() - started
        chunks = first["chunks"]
        latencies: list[float] = []
        samples: list[tuple[float, int, bool]] = []  # (seconds since start, vectors, searching)
        worker_rate = None
        now = time.perf_counter()
        stop_searching = now + search_minutes * 60
        deadline = now + minutes * 60
        turn = 0
        while time.perf_counter() < deadline:
            began = time.perf_counter()
            searching = began < stop_searching
            if searching:
                query = QUERIES[turn % len(QUERIES)]
                _payload(await client.call_tool("vault_search", {"query": query, "k": 10}))
                latencies.append(time.perf_counter() - began)
                turn += 1
            stats = _payload(await client.call_tool("vault_stats", {}))
            progress = stats.get("embedding") or {}
            vectors = int(progress.get("vectors", stats.get("vectors", 0)))
            samples.append((time.perf_counter() - started, vectors, searching))
            worker_rate = progress.get("chunks_per_second") or worker_rate
            if vectors >= chunks or (progress and not progress.get("running", True)):
                break
            pause = SEARCH_EVERY_S if searching else POLL_EVERY_S
            await asyncio.sleep(max(0.0, pause - (time.perf_counter() - began)))
    return {
        "initialize_s": initialized,
        "keyword_complete_s": keyword_complete,
        "chunks": chunks,
        "latencies_s": latencies,
        "samples": samples,
        "worker_chunks_per_second": worker_rate,
    }


def _background_rate(
    samples: list[tuple[float, int, bool]], searching: bool, chunks: int
) -> tuple[float | None, int]:
    """Return vectors gained per second over the samples of one phase (from its first sample
    with a vector on: the model's loading left out), and the vectors at its end."""
    phase = [(t, v) for t, v, during in samples if during == searching and v > 0]
    if len(phase) > 2 and phase[-1][1] >= chunks:
        phase.pop()  # it finished some time before that sample: the rate would come out low
    if len(phase) < 2 or phase[-1][1] <= phase[0][1]:
        return None, phase[-1][1] if phase else 0
    (t0, v0), (t1, v1) = phase[0], phase[-1]
    return (v1 - v0) / (t1 - t0), v1


RAW_SCRIPT = """
import json, sys, time
from vrom import Embedder, Vault
from vrom.ingest.embedding import EMBED_BATCH, embedding_text
store_file, spec, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
with Vault.open_store(store_file, embedder=None) as vault:
    ids = [chunk_id for chunk_id, _ in vault.store.vectors.document_ids()][:count]
    by_id = {c.chunk_id: c for c in vault.store.documents.get_chunks(ids)}
    texts = [embedding_text(by_id[i]) for i in ids if i in by_id]
model = Embedder.from_spec(spec)
model.embed_documents(texts[:1])  # load the model: not part of the rate
batches = [texts[i : i + EMBED_BATCH] for i in range(0, len(texts), EMBED_BATCH)]
started = time.perf_counter()
for batch in batches[1:]:  # the first batch is skipped, as the worker's rate skips it
    model.embed_documents(batch)
seconds = time.perf_counter() - started
done = sum(len(b) for b in batches[1:])
print(json.dumps({"texts": done, "seconds": seconds}))
"""


def _raw_rate(store_file: Path, embedder: str, count: int) -> tuple[float | None, int]:
    """Return the raw model's chunks per second on the worker's texts (a fresh process)."""
    done = subprocess.run(
        [sys.executable, "-c", RAW_SCRIPT, str(store_file), embedder, str(count)],
        capture_output=True,
        text=True,
        check=True,
    )
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    if not measured["texts"] or measured["seconds"] <= 0:
        return None, measured["texts"]
    return measured["texts"] / measured["seconds"], measured["texts"]


def _idle_search(store_file: Path, embedder: str) -> float:
    """Return the p50 of the same searches in process, the server gone (for scale)."""
    from vrom import Vault

    with Vault.open_store(store_file, embedder=embedder) as vault:
        vault.search(QUERIES[0], k=10, fallback=True)  # warm: model, index
        times = []
        for query in QUERIES * 2:
            began = time.perf_counter()
            vault.search(query, k=10, fallback=True)
            times.append(time.perf_counter() - began)
    return statistics.median(times)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vault", type=Path, default=DEFAULT_VAULT / "obsidian-hub")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument(
        "--search-minutes",
        type=float,
        default=None,
        help="search every 2 s for this long first (default: a third of --minutes); the "
        "worker's rate is measured on the rest, with only vault_stats every 5 s",
    )
    parser.add_argument("--embedder", default="default")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "first_hour.json"
    )
    args = parser.parse_args(argv)
    vault = args.vault.resolve()
    if not vault.is_dir():
        parser.error(f"no vault at {vault}")
    with tempfile.TemporaryDirectory(prefix="vrom-first-hour-") as tmp:
        state_dir = Path(tmp) / "state"
        search_minutes = args.minutes / 3 if args.search_minutes is None else args.search_minutes
        served = asyncio.run(
            _serve_and_measure(vault, state_dir, args.embedder, args.minutes, search_minutes)
        )
        store_file = next(state_dir.rglob("store.db"))
        chunks = served["chunks"]
        while_searching, _ = _background_rate(served["samples"], True, chunks)
        background, _ = _background_rate(served["samples"], False, chunks)
        vectors = served["samples"][-1][1] if served["samples"] else 0
        raw, raw_texts = (None, 0)
        if vectors:
            raw, raw_texts = _raw_rate(store_file, args.embedder, vectors)
        idle_p50 = _idle_search(store_file, args.embedder)
    latencies = served["latencies_s"]
    complete = vectors >= chunks
    result = {
        "vault": str(vault),
        "embedder": args.embedder,
        "minutes": args.minutes,
        "initialize_s": round(served["initialize_s"], 3),
        "keyword_complete_s": round(served["keyword_complete_s"], 3),
        "chunks": chunks,
        "vectors_at_end": vectors,
        "embedded_all": complete,
        "background_chunks_per_second": None if background is None else round(background, 2),
        "background_chunks_per_second_while_searching": (
            None if while_searching is None else round(while_searching, 2)
        ),
        "worker_chunks_per_second": served["worker_chunks_per_second"],
        "raw_chunks_per_second": None if raw is None else round(raw, 2),
        "raw_texts": raw_texts,
        "background_over_raw": None if not (background and raw) else round(background / raw, 3),
        "searches_while_embedding": len(latencies),
        "search_p50_ms": round(1000 * statistics.median(latencies), 1) if latencies else None,
        "search_p95_ms": round(1000 * _percentile(latencies, 0.95), 1) if latencies else None,
        "idle_in_process_search_p50_ms": round(1000 * idle_p50, 2),
        "projected_full_embedding_minutes": (
            None if not background else round(chunks / background / 60, 1)
        ),
    }
    for key, value in result.items():
        print(f"{key:36} {value}")
    if not complete and background:
        print(
            f"(stopped after {args.minutes} min with {vectors:,} of {chunks:,} chunks embedded: "
            "the full embedding time is extrapolated from the measured rate)"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
