"""The pack SDK's details (issue 16, item 8): progress listeners, log levels, evicting the
mounted pack, the cache quota, and resolving an unknown id.

Real packs built from small corpora with the fake model, published into the folder a real HTTP
server on 127.0.0.1 serves (tests/pack_server.py), mounted through `AgentMemory`; the log-level
and CLI checks run real subprocesses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pack_server import PackServer, pack_server_fixture  # noqa: F401 (the pack_server fixture)

from vrom import Embedder
from vrom import agent_memory as agent_memory_module
from vrom.agent_memory import AgentMemory
from vrom.errors import PackError, ValidationError
from vrom.pack_builder import build_pack, publish_pack
from vrom.packs.cache import VromCache
from vrom.packs.manifest import PackManifest
from vrom.packs.quota import pack_size

REPO = Path(__file__).resolve().parents[1]
EXAMPLE_VAULT = REPO / "examples" / "vault"
# unsigned packs with no trusted keys: each pull warns (tests/test_pack_signing.py covers that)
pytestmark = pytest.mark.filterwarnings("ignore::vrom.packs.signing.UnverifiedPackWarning")
MODES = ("vector", "keyword", "hybrid", "rerank")


@pytest.fixture(autouse=True)
def _no_pack_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("VROM_REGISTRY_URL", "VROM_CACHE_DIR", "VROM_CACHE_QUOTA", "VROM_TRUSTED_KEYS"):
        monkeypatch.delenv(name, raising=False)


def publish(server: PackServer, work: Path, pack_id: str, source: Path, dims: int = 64) -> Path:
    """Build ``source`` as pack ``pack_id`` 1.0.0 with the fake model and publish it."""
    built = work / "built" / pack_id
    build_pack(source, built, pack_id=pack_id, version="1.0.0", embedder=Embedder.fake(dims))
    publish_pack(built, server.root)
    return built


def corpus(work: Path, name: str, topic: str, documents: int = 12) -> Path:
    """Write a JSONL corpus of ``documents`` short documents about ``topic``."""
    path = work / f"{name}.jsonl"
    rows = [
        {"_id": f"{name}-{i}", "text": f"{topic} note {i}: " + f"{topic} fact {i} " * 20}
        for i in range(documents)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture
def handbook(pack_server: PackServer, tmp_path: Path) -> str:
    """The example vault served as pack 'handbook'; returns the registry URL."""
    publish(pack_server, tmp_path, "handbook", EXAMPLE_VAULT)
    return pack_server.url_for("registry.json")


@pytest.fixture
def memory(handbook: str, tmp_path: Path) -> Iterator[AgentMemory]:
    with AgentMemory(registry_url=handbook, cache_dir=tmp_path / "cache") as memory:
        memory.init()
        yield memory


def data_requests(server: PackServer, pack_id: str) -> list[str]:
    """Return the paths of the pack's data files the server was asked for."""
    return [
        r.path
        for r in server.requests
        if r.path.startswith(f"/{pack_id}/") and not r.path.endswith("manifest.json")
    ]


# -- progress listeners ----------------------------------------------------------------------


def test_on_progress_none_removes_the_listeners_and_mounting_still_works(
    memory: AgentMemory,
) -> None:
    heard: list[dict[str, Any]] = []
    memory.on_progress(lambda event: heard.append(dict(event)))
    memory.on_progress(None)
    status = memory.mount("handbook")  # loads the model: this raised TypeError before
    assert status.ready and memory.model_loads == 1
    assert heard == []


def test_a_listener_is_removed_by_its_remover_or_by_off_progress(
    pack_server: PackServer, tmp_path: Path
) -> None:
    publish(pack_server, tmp_path, "narrow", corpus(tmp_path, "narrow", "harbour"), dims=64)
    publish(pack_server, tmp_path, "wide", corpus(tmp_path, "wide", "harbour"), dims=32)
    first: list[str] = []
    second: list[str] = []
    with AgentMemory(pack_server.url_for("registry.json"), tmp_path / "cache") as memory:
        memory.init()
        remove_first = memory.on_progress(lambda event: first.append(event["status"]))

        def listen(event: Any) -> None:
            second.append(event["status"])

        memory.on_progress(listen)
        memory.mount("narrow")
        assert first == second == ["loading", "ready"]
        assert remove_first() is True and remove_first() is False
        memory.mount("wide")  # another model: loaded, heard by the second listener only
        assert first == ["loading", "ready"] and second == ["loading", "ready"] * 2
        assert memory.off_progress(listen) is True and memory.off_progress(listen) is False
        memory.mount("narrow")
        assert memory.model_loads == 3 and len(second) == 4, "no listener is left"
        with pytest.raises(ValidationError, match=r"^a progress listener must be callable"):
            memory.on_progress("print")  # type: ignore[arg-type]


# -- log levels ------------------------------------------------------------------------------

LOG_SCRIPT = textwrap.dedent(
    """
    import logging, sys
    from vrom import AgentMemory

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)  # an application that logs
    registry, cache, level = sys.argv[1:4]
    with AgentMemory(registry_url=registry, cache_dir=cache, log_level=level) as memory:
        memory.init()
        memory.mount("handbook")
        print(memory.search("network switch", top_k=1)[0].metadata["source_file"])
    """
)


def _run_logging(registry: str, cache: Path, level: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VROM_")}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    return subprocess.run(
        [sys.executable, "-c", LOG_SCRIPT, registry, str(cache), level],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_log_level_silent_writes_nothing_where_info_logs_and_warns(
    handbook: str, tmp_path: Path
) -> None:
    chatty = _run_logging(handbook, tmp_path / "cache-info", "info")
    assert chatty.returncode == 0, chatty.stderr
    assert "INFO:vrom." in chatty.stderr and "mounted handbook 1.0.0" in chatty.stderr
    assert "UnverifiedPackWarning" in chatty.stderr, "an unsigned pull warns"
    quiet = _run_logging(handbook, tmp_path / "cache-silent", "silent")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout == "Projects/Project Atlas.md\n"
    assert quiet.stderr == ""


@pytest.mark.parametrize("level", ["SILENT", "Warning", "debug", "critical"])
def test_log_levels_are_named_in_any_case(level: str) -> None:
    AgentMemory(log_level=level).destroy()


def test_log_level_warn_is_the_seed_s_spelling_of_warning() -> None:
    import logging

    AgentMemory(log_level="debug").destroy()
    AgentMemory(log_level="warn").destroy()
    assert logging.getLogger("vrom").level == logging.WARNING


@pytest.mark.parametrize("level", ["loud", "", "warn ", 30])
def test_an_unknown_log_level_is_a_one_line_validation_error(level: Any) -> None:
    with pytest.raises(ValidationError) as err:
        AgentMemory(log_level=level)
    assert str(err.value) == (
        "log_level must be one of debug, info, warning, warn, error, critical, silent, not"
        f" {level!r}"
    )


# -- evicting the mounted pack ---------------------------------------------------------------


def _results(memory: AgentMemory) -> dict[str, list[int]]:
    return {m: [r.id for r in memory.search("network switch", top_k=4, mode=m)] for m in MODES}


@pytest.mark.skipif(os.name != "posix", reason="POSIX deletes open files; Windows defers")
def test_evicting_the_mounted_pack_keeps_it_mounted_and_searchable(
    handbook: str, pack_server: PackServer, tmp_path: Path, memory: AgentMemory
) -> None:
    with AgentMemory(registry_url=handbook, cache_dir=tmp_path / "other-cache") as reference:
        reference.init()
        reference.mount("handbook")
        expected = _results(reference)
        expanded = reference.search("network switch", top_k=2, expand_context=True)

    memory.mount("handbook")  # reads little more than the schema and the counts
    folder = tmp_path / "cache" / "packs" / "handbook"
    assert memory.evict("handbook") is True
    assert not folder.exists(), "the cached files went at once"
    assert not memory.is_cached("handbook")
    assert memory.is_ready and memory.get_mount_status().active_vrom == "handbook"
    # the first searches read the deleted files' pages through the open store and mapping
    assert _results(memory) == expected
    assert memory.search("network switch", top_k=2, expand_context=True) == expanded
    memory.unmount()
    assert not folder.exists(), "unmounting writes nothing back"
    assert memory.evict("handbook") is False, "nothing is cached any more"

    pack_server.clear_log()
    assert memory.mount("handbook").ready, "mounting again pulls it again"
    assert any(path.endswith("store.db") for path in data_requests(pack_server, "handbook"))


def test_where_open_files_stay_the_mounted_pack_is_evicted_when_unmounted(
    memory: AgentMemory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agent_memory_module, "OPEN_FILES_CAN_BE_DELETED", False)  # as on Windows
    folder = tmp_path / "cache" / "packs" / "handbook"
    memory.mount("handbook")
    expected = _results(memory)
    assert memory.evict("handbook") is True
    assert folder.exists() and not memory.is_cached("handbook")
    assert _results(memory) == expected
    memory.mount("handbook")  # mounting it again keeps it: the eviction is called off
    assert memory.is_cached("handbook")
    memory.unmount()
    assert folder.exists() and memory.is_cached("handbook")

    memory.mount("handbook")
    assert memory.evict("hub://handbook") is True
    memory.unmount()
    assert not folder.exists() and not memory.is_cached("handbook")
    memory.mount("handbook")
    assert memory.evict("handbook") is True
    memory.destroy()  # destroying unmounts, so the files go too
    assert not folder.exists()


def test_evicting_another_pack_leaves_the_mounted_one_alone(
    pack_server: PackServer, tmp_path: Path
) -> None:
    publish(pack_server, tmp_path, "fruit", corpus(tmp_path, "fruit", "pear"))
    publish(pack_server, tmp_path, "boats", corpus(tmp_path, "boats", "harbour"))
    with AgentMemory(pack_server.url_for("registry.json"), tmp_path / "cache") as memory:
        memory.init()
        memory.mount("fruit")
        memory.mount("boats")
        assert memory.evict("fruit") is True and memory.is_cached("boats")
        assert memory.search("harbour", top_k=1)[0].metadata["source_file"].startswith("boats-")


# -- resolving ids ---------------------------------------------------------------------------


def test_resolving_an_unknown_id_gives_none_and_mounting_it_names_the_packs(
    handbook: str, tmp_path: Path, memory: AgentMemory
) -> None:
    cache = VromCache(handbook, tmp_path / "cache")
    assert cache.resolve("no-such-pack") is None
    assert cache.resolve("hub://handbook@9.9.9") is None
    found = cache.resolve("hub://handbook")
    assert found is not None and found.version == "1.0.0"
    with pytest.raises(PackError, match=r"'no-such-pack' is not in the registry.*handbook$"):
        memory.mount("no-such-pack")


# -- the quota -------------------------------------------------------------------------------


def _sizes(built: list[Path]) -> list[int]:
    sizes = []
    for folder in built:
        raw = (folder / "manifest.json").read_bytes()
        sizes.append(pack_size(PackManifest.read(folder), len(raw), 0))
    return sizes


@pytest.fixture
def three_packs(pack_server: PackServer, tmp_path: Path) -> list[int]:
    """Packs a, b and c, each about topic a/b/c; returns their sizes in the cache."""
    built = [
        publish(pack_server, tmp_path, name, corpus(tmp_path, name, topic))
        for name, topic in (("a", "apple"), ("b", "boat"), ("c", "cello"))
    ]
    return _sizes(built)


def test_a_mount_evicts_the_least_recently_used_pack_but_never_the_mounted_one(
    pack_server: PackServer, tmp_path: Path, three_packs: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    quota = sorted(three_packs)[-1] + sorted(three_packs)[-2] + 100
    assert sum(three_packs) > quota, "two packs fit, three do not"
    monkeypatch.setenv("VROM_CACHE_QUOTA", str(quota))
    registry = pack_server.url_for("registry.json")
    with AgentMemory(registry, tmp_path / "cache") as memory:
        memory.init()
        memory.mount("a")
        VromCache(registry, tmp_path / "cache", quota=quota).pull("b")  # b is used after a
        memory.mount("c")  # a is the least recently used, but mounted: b goes
        assert [memory.is_cached(p) for p in "abc"] == [True, False, True]
        memory.mount("b")  # c is mounted and kept: a, not mounted any more, goes
        assert [memory.is_cached(p) for p in "abc"] == [False, True, True]
        estimate = memory.storage_estimate()
        assert estimate.limited and estimate.quota == quota and estimate.used <= quota
        assert estimate.packs == 2
        assert memory.search("boat fact", top_k=1)[0].metadata["source_file"].startswith("b-")


def test_a_pack_that_cannot_fit_beside_the_mounted_one_is_refused_before_downloading(
    pack_server: PackServer, tmp_path: Path, three_packs: list[int]
) -> None:
    quota = max(three_packs) + 100  # one pack at a time
    with AgentMemory(
        pack_server.url_for("registry.json"), tmp_path / "cache", cache_quota=quota
    ) as memory:
        memory.init()
        memory.mount("a")
        pack_server.clear_log()
        with pytest.raises(PackError, match=r"^pack b 1\.0\.0 needs .* packs that stay \(a\)"):
            memory.mount("b")
        assert data_requests(pack_server, "b") == []
        assert memory.get_mount_status().active_vrom == "a" and memory.is_cached("a")
        assert memory.search("apple", top_k=1)[0].metadata["source_file"].startswith("a-")
        memory.unmount()
        memory.mount("b")  # nothing mounted: a makes room
        assert not memory.is_cached("a") and memory.is_cached("b")


def test_a_bad_quota_is_refused_when_the_memory_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValidationError, match=r"not 'plenty'$"):
        AgentMemory(cache_quota="plenty")
    monkeypatch.setenv("VROM_CACHE_QUOTA", "-3GB")
    with pytest.raises(ValidationError, match=r"not '-3GB'$"):
        AgentMemory()


def _vrom(tmp_path: Path, *args: str, quota: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VROM_")}
    env["VROM_CACHE_DIR"] = str(tmp_path / "cli-cache")
    env["VROM_EMBEDDER"] = "fake:16"
    if quota is not None:
        env["VROM_CACHE_QUOTA"] = quota
    return subprocess.run(
        [sys.executable, "-m", "vrom", *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_the_cli_keeps_to_the_quota_from_the_environment(
    pack_server: PackServer, tmp_path: Path, three_packs: list[int]
) -> None:
    registry = pack_server.url_for("registry.json")
    refused = _vrom(tmp_path, "pack", "pull", "a", "--registry", registry, quota="10kB")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    warning, error = refused.stderr.splitlines()  # the pack is unsigned, then too large
    assert warning.startswith("vrom: warning: pack a 1.0.0 is not signed")
    assert error.startswith("vrom: error: pack a 1.0.0 needs ")
    assert "more than the cache quota of 10,000 bytes" in error
    assert data_requests(pack_server, "a") == []

    quota = str(max(three_packs) + 100)
    for name in ("a", "b"):
        pulled = _vrom(tmp_path, "pack", "pull", name, "--registry", registry, quota=quota)
        assert pulled.returncode == 0, pulled.stderr
    storage = _vrom(tmp_path, "pack", "storage", "--json", quota=quota)
    assert storage.returncode == 0, storage.stderr
    estimate = json.loads(storage.stdout)
    assert estimate["packs"] == 1 and estimate["quota"] == int(quota) and estimate["limited"]
    assert 0 < estimate["used"] <= int(quota)
    text = _vrom(tmp_path, "pack", "storage", quota=None)  # the default quota
    assert text.stdout.startswith(
        f"1 pack uses {estimate['used']:,} bytes of a 10,737,418,240-byte quota"
    )
    text = _vrom(tmp_path, "pack", "storage", quota="unlimited")
    assert text.stdout.startswith(f"1 pack uses {estimate['used']:,} bytes; no quota")
    bad = _vrom(tmp_path, "pack", "storage", quota="lots")
    assert bad.returncode == 1 and bad.stderr.startswith("vrom: error: the cache quota must be")
