"""Benchmark mounting a large knowledge pack from the cache: time to first answer, search p50.

    python bench/pack_mount.py [--chunks 100000] [--dims 384] [--repeat 3]

The pack is built from a generated corpus (one chunk per document) with the fake embedder at
``--dims`` dimensions: 100k real embeddings would take hours on two cores. It is signed, and
mounted with its publisher's key trusted, so every mount checks the signature and each cached
file's size and time. Each mount runs in a fresh process (imports included); a mount with
``verify=True`` (every file hashed again) is measured the same way, against the ordinary mount.
The default model's load time, which a pack built with it adds to the first answer, is measured
in its own fresh process in the same run and added to give the first-answer time with the model.

Prints a table and writes JSON to bench/results/pack_mount.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vrom import Embedder, __version__
from vrom.agent_memory import AgentMemory
from vrom.pack_builder import build_pack, publish_pack
from vrom.packs.signing import generate_key_pair

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "pack_mount.json"
VOCABULARY = 5_000

_MOUNT = """
import json, time
started = time.perf_counter()
from vrom.agent_memory import AgentMemory
memory = AgentMemory(registry_url={registry!r}, cache_dir={cache!r}, trusted_keys=[{key!r}])
memory.init()
memory.mount("bench", verify={verify!r})
mounted = time.perf_counter()
results = memory.search("w17 w230 w4001", top_k=10)
answered = time.perf_counter()
memory.destroy()
print(json.dumps({{"mount_s": mounted - started, "first_answer_s": answered - started,
                  "results": len(results)}}))
"""

_MODEL = """
import json, time
started = time.perf_counter()
from vrom import Embedder
embedder = Embedder.default()
embedder.embed_query("how do I read a file")
print(json.dumps({"model_load_and_first_query_s": time.perf_counter() - started}))
"""


def _fresh(code: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    result: dict[str, float] = json.loads(out)
    return result


def _corpus(path: Path, count: int) -> None:
    rng = random.Random(7)
    with path.open("w", encoding="utf-8") as out:
        for n in range(count):
            words = " ".join(f"w{rng.randrange(VOCABULARY)}" for _ in range(12))
            out.write(json.dumps({"_id": f"doc-{n}", "title": f"Doc {n}", "text": words}) + "\n")


def run(chunks: int, dims: int, repeat: int) -> dict[str, object]:
    results: dict[str, object] = {
        "vrom": __version__,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores",
        "chunks": chunks,
        "dims": dims,
        "embeddings": f"fake (hashed words, {dims} d)",
    }
    with tempfile.TemporaryDirectory(prefix="vrom-bench-") as tmp:
        work = Path(tmp)
        _corpus(work / "corpus.jsonl", chunks)
        keys = generate_key_pair(work / "keys", "bench")
        key = keys.public_key.text
        started = time.perf_counter()
        manifest = build_pack(
            work / "corpus.jsonl",
            work / "pack",
            pack_id="bench",
            version="1.0.0",
            embedder=Embedder.fake(dims),
            sign_key=keys.private_path,
        )
        results["build_s"] = time.perf_counter() - started
        results["pack_mb"] = sum(f.size for f in manifest.files.values()) / 1e6
        publish_pack(work / "pack", work / "registry")
        registry, cache = str(work / "registry"), str(work / "cache")
        with AgentMemory(registry_url=registry, cache_dir=cache, trusted_keys=[key]) as memory:
            memory.init()
            started = time.perf_counter()
            memory.mount("bench")  # pulls (copies and verifies) into the cache
            results["pull_and_mount_s"] = time.perf_counter() - started
            rng = random.Random(11)
            queries = [
                " ".join(f"w{rng.randrange(VOCABULARY)}" for _ in range(4)) for _ in range(200)
            ]
            times = []
            for query in queries:
                started = time.perf_counter()
                memory.search(query, top_k=10)
                times.append((time.perf_counter() - started) * 1000)
            results["search_p50_ms"] = statistics.median(times)
            results["search_p95_ms"] = sorted(times)[int(0.95 * (len(times) - 1))]
        for name, verify in (("mount_from_cache", False), ("mount_from_cache_verify", True)):
            code = _MOUNT.format(registry=registry, cache=cache, key=key, verify=verify)
            runs = [_fresh(code) for _ in range(repeat)]
            results[name] = {field: statistics.median(r[field] for r in runs) for field in runs[0]}
        model = [_fresh(_MODEL) for _ in range(repeat)]
        results["default_model_load_s"] = statistics.median(
            r["model_load_and_first_query_s"] for r in model
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    results = run(args.chunks, args.dims, args.repeat)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    mount = results["mount_from_cache"]
    verified = results["mount_from_cache_verify"]
    assert isinstance(mount, dict) and isinstance(verified, dict)
    model = float(results["default_model_load_s"])  # type: ignore[arg-type]
    print(f"{results['chunks']:,} chunks, {results['embeddings']}, {results['machine']}")
    print(f"build:                               {results['build_s']:8.1f} s")
    print(f"pack size:                           {results['pack_mb']:8.1f} MB")
    print(f"pull (copy + verify) and mount:      {results['pull_and_mount_s']:8.2f} s")
    print(f"fresh process: mount from cache      {mount['mount_s']:8.3f} s")
    print(f"fresh process: first answer          {mount['first_answer_s']:8.3f} s")
    print(
        f"fresh process: mount, verify=True    {verified['mount_s']:8.3f} s "
        f"({verified['mount_s'] / mount['mount_s']:.1f}x the stat check)"
    )
    print(f"default model load + first query:    {model:8.3f} s")
    print(f"first answer with the default model: {mount['first_answer_s'] + model:8.3f} s")
    print(
        f"search p50 / p95 (top 10):           {results['search_p50_ms']:8.2f} / "
        f"{results['search_p95_ms']:.2f} ms"
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
