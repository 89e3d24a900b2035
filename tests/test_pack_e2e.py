"""A real pack from examples/vault, published, served over HTTP on 127.0.0.1, pulled and searched.

Through the CLI (subprocesses) and through `AgentMemory`, against the test HTTP server.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pack_server import PackServer, pack_server_fixture  # noqa: F401 (the pack_server fixture)

from vrom import Embedder
from vrom.agent_memory import AgentMemory
from vrom.errors import PackError
from vrom.pack_builder import build_pack, publish_pack
from vrom.packs.cache import PullProgress, VromCache

REPO = Path(__file__).resolve().parents[1]
EXAMPLE_VAULT = REPO / "examples" / "vault"
# unsigned packs with no trusted keys: each pull warns (tests/test_pack_signing.py covers that)
pytestmark = pytest.mark.filterwarnings("ignore::vrom.packs.signing.UnverifiedPackWarning")


def _vrom(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VROM_CACHE_DIR": str(tmp_path / "cache"), "VROM_EMBEDDER": "fake"}
    env.pop("VROM_REGISTRY_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "vrom", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


def test_the_cli_builds_publishes_pulls_and_searches_a_pack(
    pack_server: PackServer, tmp_path: Path
) -> None:
    built = tmp_path / "built"
    _ok(
        _vrom(
            tmp_path,
            "pack",
            "build",
            str(EXAMPLE_VAULT),
            "--id",
            "handbook",
            "--version",
            "1.0.0",
            "--description",
            "The example vault",
            "--tags",
            "example,notes",
            "--url-base",
            "https://example.org/notes/",
            "--out",
            str(built),
        )
    )
    _ok(_vrom(tmp_path, "pack", "publish", str(built), str(pack_server.root)))
    registry = pack_server.url_for("registry.json")

    listed = json.loads(_ok(_vrom(tmp_path, "pack", "list", "--registry", registry, "--json")))
    assert [(p["id"], p["version"], p["cached"]) for p in listed] == [("handbook", "1.0.0", False)]
    assert listed[0]["tags"] == ["example", "notes"]

    pulled = json.loads(
        _ok(_vrom(tmp_path, "pack", "pull", "handbook", "--registry", registry, "--json"))
    )
    assert Path(pulled["directory"]).is_dir()
    assert any(r.path.endswith("store.db") for r in pack_server.requests)

    info = json.loads(
        _ok(_vrom(tmp_path, "pack", "info", "handbook", "--registry", registry, "--json"))
    )
    assert info["cached"] and info["manifest"]["vector_count"] == 16

    pack_server.clear_log()
    hits = json.loads(
        _ok(
            _vrom(
                tmp_path,
                "search",
                "--pack",
                "handbook",
                "--registry",
                registry,
                "network switch",
                "-k",
                "3",
                "--json",
            )
        )
    )
    assert hits[0]["metadata"]["source_file"] == "Projects/Project Atlas.md"
    assert hits[0]["metadata"]["url"] == "https://example.org/notes/Projects/Project Atlas"
    assert not any(r.path.endswith(("store.db", "index.usearch")) for r in pack_server.requests), (
        "a cached pack is not downloaded again"
    )
    text = _ok(
        _vrom(tmp_path, "search", "--pack", "handbook", "--registry", registry, "network switch")
    )
    assert text.startswith("1. Projects/Project Atlas.md")
    assert re.search(r"  \(distance \d\.\d{3}\)$", text.splitlines()[0]), text
    for mode, part in (("keyword", "bm25"), ("hybrid", "fused")):  # a real subprocess, a real pack
        command = ["search", "--pack", "handbook", "--registry", registry, "network switch"]
        found = json.loads(_ok(_vrom(tmp_path, *command, "--mode", mode, "--json")))
        assert found[0]["metadata"]["source_file"] == "Projects/Project Atlas.md"
        assert part in found[0]["metadata"]["scores"] and found[0]["distance"] == 0.0
        shown = _ok(_vrom(tmp_path, *command, "--mode", mode)).splitlines()[0]
        assert shown.endswith(
            f"  ({part} {found[0]['metadata']['score']:.{2 if part == 'bm25' else 3}f})"
        )

    assert "evicted" in _ok(_vrom(tmp_path, "pack", "evict", "handbook", "--registry", registry))
    missing = _vrom(tmp_path, "search", "--pack", "nope", "--registry", registry, "x")
    assert missing.returncode == 1 and missing.stderr.startswith("vrom: error:")
    assert "nope" in missing.stderr


def _publish(
    registry_dir: Path,
    work: Path,
    pack_id: str,
    version: str,
    dims: int,
    source: Path = EXAMPLE_VAULT,
) -> None:
    build_pack(
        source,
        work / f"{pack_id}-{version}",
        pack_id=pack_id,
        version=version,
        embedder=Embedder.fake(dims),
    )
    publish_pack(work / f"{pack_id}-{version}", registry_dir)


def test_agent_memory_over_http_with_progress_resume_tamper_and_hot_swap(
    pack_server: PackServer, tmp_path: Path
) -> None:
    served = pack_server.root
    _publish(served, tmp_path, "handbook", "1.0.0", 64)
    _publish(served, tmp_path, "handbook-wide", "1.0.0", 32)
    registry = pack_server.url_for("registry.json")
    events: list[PullProgress] = []

    with AgentMemory(registry_url=registry, cache_dir=tmp_path / "cache") as memory:
        memory.init()
        # a connection dropped in the middle of the store file: the mount fails, the next resumes
        pack_server.drop_after("handbook/1.0.0/store.db", 20_000)
        with pytest.raises(PackError):
            memory.mount("handbook", on_progress=events.append)
        assert not memory.is_cached("handbook")
        pack_server.clear_log()
        status = memory.mount("handbook", on_progress=events.append)
        assert status.ready and status.vectors == 16
        ranges = [r.range for r in pack_server.requests_for("handbook/1.0.0/store.db")]
        assert ranges == ["bytes=20000-"], "the second pull resumed where the first stopped"
        phases = [e.phase for e in events]
        assert phases[-1] == "done" and {"manifest", "index", "chunks"} <= set(phases)
        assert memory.search("network switch", top_k=1)[0].metadata["source_file"] == (
            "Projects/Project Atlas.md"
        )
        assert memory.model_loads == 1

        # hot-swap to a pack with another model, and back
        memory.mount("handbook-wide")
        assert memory.model_loads == 2 and memory.get_mount_status().dim == 32
        memory.mount("handbook")
        assert memory.model_loads == 3, "the 64-d model is loaded again (only one is kept)"
        memory.unmount()
        assert not memory.is_ready

        # a tampered new version is refused; the cache keeps the good one
        _publish(served, tmp_path, "handbook", "1.1.0", 64)
        store = served / "handbook" / "1.1.0" / "store.db"
        data = bytearray(store.read_bytes())
        data[5000] ^= 0xFF
        store.write_bytes(bytes(data))
        with pytest.raises(PackError, match="SHA-256"):
            memory.mount("handbook", force_download=True)  # rereads the registry: 1.1.0
        assert memory.is_cached("handbook")
        cache = VromCache(registry, tmp_path / "cache")
        assert cache.load_index("handbook").version == "1.0.0"

        # a truncated file is refused too
        store.write_bytes(bytes(data[: len(data) // 2]))
        with pytest.raises(PackError):
            memory.mount("handbook", force_download=True)
        assert cache.load_index("handbook").version == "1.0.0"

        assert memory.evict("handbook") is True
        assert not memory.is_cached("handbook")
        estimate = memory.storage_estimate()
        assert estimate.used_bytes > 0 and estimate.free_bytes > 0
