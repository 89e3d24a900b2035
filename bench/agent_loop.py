"""The agent loop: `vrom mcp` over stdio as an agent meets it, against the same search in process.

    python bench/agent_loop.py [--vault ../shared/data/vault/obsidian-hub] [--calls 60]
        [--imports 7] [--base ../base29/src] [--state-dir DIR] [--watch]

Indexes the vault once (``vrom index --embedder none`` into a temporary state directory, or
``--state-dir``), then for each side (this checkout, and with ``--base`` the source tree given,
e.g. the untouched start commit) starts the real ``vrom mcp --vault VAULT`` in a subprocess and
talks to it with the official MCP SDK client over stdio:

1. **initialize**: wall time from starting the process to the ``initialize`` reply, and to the
   first ``vault_search`` reply (which waits for the vault's file check);
2. **vault_search round trip**: once each server is idle (what its first searches start
   building beside them is built), ``--calls`` keyword searches (k=10, the tool's defaults),
   the sides and the in-process ``Vault.search`` (same arguments, this checkout, the same
   store) taking turns query by query, order rotated: client wall p50/p95, and the CPU the
   server process spent per call (its ``/proc`` utime+stime, all its threads: the mean, as
   the kernel counts in 10 ms ticks) against the in-process search's CPU
   (``time.thread_time``), and the p50 of each round's difference between a side's round trip
   and the in-process search's wall (the same query, moments apart: most of the load cancels out);
   a ``ping`` round trip after each round shows the transport alone, and the client's own
   CPU per call (``time.process_time``: the SDK client parses the reply and checks it against
   the tool's output schema) what of the round trip is the client's; a second server per side
   spoken to in raw JSON-RPC lines (no SDK client) takes its turn too: the server's share;
3. **import vrom**: CPU (``time.process_time``) of ``import vrom`` in ``--imports`` fresh
   interpreters per side, alternating: median and range.

The servers are keyword-only (``--embedder none``). The machine may be loaded: compare the
sides within one run, and run the same tree as both sides (``--base src``) to see the noise.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from search_stalls import QUERIES  # the hub queries search_stalls.py asks

from vrom import Vault

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent / "src"
DEFAULT_VAULT = HERE.parents[1] / "shared" / "data" / "vault" / "obsidian-hub"
_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_of(pid: int) -> float:
    """Seconds of CPU process ``pid`` has used (user + system, all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _children() -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        found.update(int(pid) for pid in (task / "children").read_text().split())
    return found


class Side:
    """One `vrom mcp` subprocess (the source tree ``src``) and the MCP client talking to it."""

    def __init__(self, name: str, src: Path, args: list[str], log: Path) -> None:
        self.name, self.src, self.args, self.log = name, src, args, log
        self.walls: list[float] = []
        self.cpus: list[float] = []
        self.pings: list[float] = []
        self.client_cpus: list[float] = []
        self.raw: RawSide

    async def start(self, stack: Any) -> None:
        env = {"PYTHONPATH": str(self.src), "VROM_STATE_DIR": self.args[-1]}
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "vrom", "mcp", *self.args[:-1]], env=env
        )
        before = _children()
        started = time.perf_counter()
        errlog = stack.enter_context(self.log.open("w"))
        self.client = await stack.enter_async_context(
            Client(stdio_client(params, errlog=errlog), mode="legacy")
        )
        self.initialize = time.perf_counter() - started
        (self.pid,) = _children() - before
        await self.search(QUERIES[0], timed=False)
        self.first_search = time.perf_counter() - started
        for query in QUERIES:  # what a first search starts building beside it
            await self.search(query, timed=False)

    async def settled(self) -> None:
        """Return once the server is idle: what its first searches started (the keyword
        copy) is built, and its CPU per call is only the calls'."""
        for _ in range(120):
            cpu = _cpu_of(self.pid)
            await asyncio.sleep(0.5)
            if _cpu_of(self.pid) - cpu <= 0.01:
                return

    async def ping(self, query: str) -> None:
        wall = time.perf_counter()
        await self.client.send_ping()
        self.pings.append(time.perf_counter() - wall)

    async def search(self, query: str, *, timed: bool = True) -> int:
        cpu, wall, mine = _cpu_of(self.pid), time.perf_counter(), time.process_time()
        result = await self.client.call_tool("vault_search", {"query": query, "mode": "keyword"})
        wall, cpu = time.perf_counter() - wall, _cpu_of(self.pid) - cpu
        mine = time.process_time() - mine
        assert not result.is_error, result.content
        if timed:
            self.walls.append(wall)
            self.cpus.append(cpu)
            self.client_cpus.append(mine)
        return len((result.structured_content or {})["results"])


class RawSide:
    """One more `vrom mcp` of a side's tree, spoken to in raw JSON-RPC lines: the round trip
    without the SDK client's own work (parsing, output-schema checks)."""

    def __init__(self, side: Side) -> None:
        env = {**os.environ, "PYTHONPATH": str(side.src), "VROM_STATE_DIR": side.args[-1]}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "vrom", "mcp", *side.args[:-1]],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.walls: list[float] = []
        self._id = 0
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {}}
        self._call("initialize", {**hello, "clientInfo": {"name": "raw", "version": "1"}})
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for query in QUERIES:
            self.search(query, timed=False)

    def _send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def _call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdout is not None
        self._id += 1
        self._send({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})
        while True:
            reply: dict[str, Any] = json.loads(self.process.stdout.readline())
            if reply.get("id") == self._id:
                return reply

    def search(self, query: str, *, timed: bool = True) -> int:
        arguments = {"query": query, "mode": "keyword"}
        wall = time.perf_counter()
        reply = self._call("tools/call", {"name": "vault_search", "arguments": arguments})
        if timed:
            self.walls.append(time.perf_counter() - wall)
        return len(reply["result"]["structuredContent"]["results"])

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


def _ms(values: list[float], q: float = 0.5) -> str:
    ordered = sorted(values)
    return f"{1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]:.2f}"


def _import_cpu(src: Path) -> float:
    code = "import time; t = time.process_time(); import vrom; print(time.process_time() - t)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(src)},
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout)


async def _loop(sides: list[Side], vault: Vault, calls: int) -> tuple[list[float], list[float]]:
    from contextlib import AsyncExitStack

    walls: list[float] = []
    cpus: list[float] = []

    async def in_process(query: str) -> int:
        wall, cpu = time.perf_counter(), time.thread_time()
        hits = vault.search(query, k=10, mode="keyword", per_note=True, fallback=True)
        cpus.append(time.thread_time() - cpu)
        walls.append(time.perf_counter() - wall)
        return len(hits)

    async with AsyncExitStack() as stack:
        for side in sides:
            await side.start(stack)
            side.raw = RawSide(side)
            stack.callback(side.raw.close)
        for query in QUERIES:
            await in_process(query)
        for side in sides:
            await side.settled()
        walls.clear()
        cpus.clear()

        async def raw(side: Side, query: str) -> int:
            return side.raw.search(query)

        runners = [in_process, *(side.search for side in sides)]
        runners += [functools.partial(raw, side) for side in sides]
        for number in range(calls):
            query = QUERIES[number % len(QUERIES)]
            turn = number % len(runners)
            counts = {await run(query) for run in runners[turn:] + runners[:turn]}
            assert len(counts) == 1, f"the sides found different numbers of hits: {counts}"
            for side in sides[turn % len(sides) :] + sides[: turn % len(sides)]:
                await side.ping(query)
    return walls, cpus


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vault", type=Path, default=DEFAULT_VAULT)
    parser.add_argument("--state-dir", type=Path, default=None, help="(default: a new temp dir)")
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--imports", type=int, default=7)
    parser.add_argument("--base", type=Path, default=None, help="the 'before' side's src")
    parser.add_argument("--watch", action="store_true", help="serve with the file watcher on")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="agent-loop-") as temporary:
        state = args.state_dir or Path(temporary) / "state"
        subprocess.run(
            [sys.executable, "-m", "vrom", "index", str(args.vault), "--embedder", "none"],
            env={**os.environ, "VROM_STATE_DIR": str(state)},
            capture_output=True,
            check=True,
        )
        serve = ["--vault", str(args.vault), "--embedder", "none"]
        serve += [] if args.watch else ["--no-watch"]
        serve.append(str(state))  # the state dir, passed as $VROM_STATE_DIR
        named = [("after", SOURCE)] + ([("before", args.base.resolve())] if args.base else [])
        sides = [Side(name, src, serve, Path(temporary) / f"{name}.log") for name, src in named]
        vault = Vault.open(args.vault, state, embedder=None)
        try:
            walls, cpus = asyncio.run(_loop(sides, vault, args.calls))
        finally:
            vault.close()
        imports: dict[str, list[float]] = {name: [] for name, _ in named}
        for _ in range(args.imports):
            for name, src in named:
                imports[name].append(_import_cpu(src))
    in_process = 1000 * statistics.mean(cpus)
    print(f"vault {args.vault} ({len(QUERIES)} queries in turn, {args.calls} calls per side)")
    print(
        f"in process Vault.search: wall p50 {_ms(walls)} p95 {_ms(walls, 0.95)} ms, "
        f"CPU p50 {_ms(cpus)} mean {in_process:.2f} ms"
    )
    for side in sides:
        server = 1000 * statistics.mean(side.cpus)
        took = imports[side.name]
        extra = [mcp - alone for mcp, alone in zip(side.walls, walls, strict=True)]
        bare = [mcp - alone for mcp, alone in zip(side.raw.walls, walls, strict=True)]
        print(
            f"{side.name:>6}: initialize {1000 * side.initialize:.0f} ms, first vault_search "
            f"{1000 * side.first_search:.0f} ms; vault_search wall p50 {_ms(side.walls)} "
            f"p95 {_ms(side.walls, 0.95)} ms, in process + {_ms(extra)} ms p50 of the same "
            f"round's difference (ping p50 {_ms(side.pings)} ms); server CPU "
            f"{server:.2f} ms a call (mean: in process + {server - in_process:.2f}), the SDK "
            f"client's CPU p50 {_ms(side.client_cpus)} ms; raw JSON-lines client: wall p50 "
            f"{_ms(side.raw.walls)} ms, in process + {_ms(bare)} ms; "
            f"import vrom CPU median {1000 * statistics.median(took):.0f} ms "
            f"({1000 * min(took):.0f}-{1000 * max(took):.0f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
