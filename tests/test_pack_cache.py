"""The pack registry and cache: fetch and TTL, offline fallback, pull, resume, verification.

Packs here are fakes built by the test: two files of random bytes and a manifest with their true
sizes and hashes (the cache never opens the files). They are published into a registry folder as
docs/packs.md describes and served by a real HTTP server on 127.0.0.1 (tests/pack_server.py).
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest
from pack_server import PackServer, pack_server_fixture  # noqa: F401 (the pack_server fixture)
from vrom_cli import run_vrom

from vrom import AgentMemory
from vrom.errors import PackError, ValidationError
from vrom.packs.cache import (
    PROGRESS_STEP,
    PullProgress,
    VromCache,
    parse_pack_ref,
)
from vrom.packs.cache_folders import CacheFolders
from vrom.packs.manifest import (
    REGISTRY_NAME,
    PackFile,
    PackManifest,
    Registry,
    RegistryEntry,
    file_sha256,
)
from vrom.packs.quota import parse_quota
from vrom.packs.signing import UnverifiedPackWarning

STORE_SIZE = 300_000
INDEX_SIZE = 140_000
# the packs here are unsigned and no trusted keys are set: every pull warns (tests/test_pack_signing.py)
pytestmark = pytest.mark.filterwarnings("ignore::vrom.packs.signing.UnverifiedPackWarning")


@pytest.fixture(autouse=True)
def _no_pack_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VROM_REGISTRY_URL", raising=False)
    monkeypatch.delenv("VROM_CACHE_DIR", raising=False)


def make_pack(folder: Path, pack_id: str, version: str, seed: int = 0) -> PackManifest:
    """Build a fake pack (random store and index bytes, a true manifest) in ``folder``."""
    folder.mkdir(parents=True)
    rng = random.Random(f"{pack_id}-{version}-{seed}")
    (folder / "store.db").write_bytes(rng.randbytes(STORE_SIZE))
    (folder / "index.usearch").write_bytes(rng.randbytes(INDEX_SIZE))
    files = {
        role: PackFile(name, (folder / name).stat().st_size, file_sha256(folder / name))
        for role, name in (("store", "store.db"), ("index", "index.usearch"))
    }
    manifest = PackManifest(
        vrom_id=pack_id,
        version=version,
        embedding_spec={"model": "fake-model", "dimensions": 8, "distance_metric": "cosine"},
        hnsw_config={"M": 16, "ef_construction": 128, "ef_search": 64},
        vector_count=10,
        total_tokens=100,
        total_chunks=10,
        corpus_hash="sha256:0123456789abcdef",
        created_at="2026-01-01T00:00:00Z",
        chunk_strategy={"splitter": "heading-aware", "target_chars": 1000, "overlap_chars": 150},
        files=files,
        name=f"{pack_id} pack",
    )
    manifest.write(folder)
    return manifest


def publish(pack_dir: Path, registry_dir: Path, base_url: str = "") -> RegistryEntry:
    """Copy a pack to ``registry_dir/<id>/<version>/`` and add or replace its registry entry."""
    manifest = PackManifest.read(pack_dir)
    rel = f"{manifest.vrom_id}/{manifest.version}"
    shutil.copytree(pack_dir, registry_dir / rel, dirs_exist_ok=True)
    entry = RegistryEntry(
        id=manifest.vrom_id,
        name=manifest.name,
        description="",
        version=manifest.version,
        vectors=manifest.vector_count,
        dimensions=manifest.dimensions,
        tokens=manifest.total_tokens,
        size_mb=round((STORE_SIZE + INDEX_SIZE) / 1e6, 1),
        model=manifest.model,
        tags=(),
        official=False,
        files={
            "manifest": f"{base_url}{rel}/manifest.json",
            "index": f"{base_url}{rel}/{manifest.files['index'].path}",
            "chunks": f"{base_url}{rel}/{manifest.files['store'].path}",
        },
    )
    path = registry_dir / REGISTRY_NAME
    packs = list(Registry.from_dict(json.loads(path.read_text())).packs) if path.exists() else []
    packs = [p for p in packs if p.id != entry.id] + [entry]
    registry = Registry(tuple(packs), "2026-01-01T00:00:00Z")
    path.write_text(json.dumps(registry.to_dict(), indent=1), encoding="utf-8")
    return entry


@pytest.fixture
def served(pack_server: PackServer, tmp_path: Path) -> PackServer:
    """The server, with packs alpha 1.0.0 and beta 0.1.0 published in its folder."""
    make_pack(tmp_path / "build" / "alpha-1.0.0", "alpha", "1.0.0")
    make_pack(tmp_path / "build" / "beta-0.1.0", "beta", "0.1.0")
    publish(tmp_path / "build" / "alpha-1.0.0", pack_server.root)
    publish(tmp_path / "build" / "beta-0.1.0", pack_server.root)
    return pack_server


def new_cache(server: PackServer, tmp_path: Path, ttl_seconds: float = 3600) -> VromCache:
    return VromCache(server.url_for(REGISTRY_NAME), tmp_path / "cache", ttl_seconds=ttl_seconds)


def republish(tmp_path: Path, server: PackServer, pack_id: str, version: str) -> Path:
    """Build and publish a new version; return its folder on the server."""
    make_pack(tmp_path / "build" / f"{pack_id}-{version}", pack_id, version)
    publish(tmp_path / "build" / f"{pack_id}-{version}", server.root)
    return server.root / pack_id / version


# -- the registry ----------------------------------------------------------------------------


def test_registry_is_fetched_once_within_its_ttl(served: PackServer, tmp_path: Path) -> None:
    cache = new_cache(served, tmp_path)
    first = cache.get_registry()
    second = VromCache(served.url_for(REGISTRY_NAME), tmp_path / "cache").get_registry()
    assert [e.id for e in first.packs] == ["alpha", "beta"] == [e.id for e in second.packs]
    assert len(served.requests_for(REGISTRY_NAME)) == 1
    copy = json.loads((tmp_path / "cache" / REGISTRY_NAME).read_text())
    assert copy["fetched_from"] == served.url_for(REGISTRY_NAME) and copy["fetched_at"] > 0
    assert Registry.from_dict(copy).packs == first.packs  # the copy is itself a registry


def test_registry_is_fetched_again_when_stale_or_asked(served: PackServer, tmp_path: Path) -> None:
    cache = new_cache(served, tmp_path, ttl_seconds=0)
    cache.get_registry()
    cache.get_registry()
    assert len(served.requests_for(REGISTRY_NAME)) == 2

    hourly = new_cache(served, tmp_path)
    copy_path = tmp_path / "cache" / REGISTRY_NAME
    copy = json.loads(copy_path.read_text())
    copy["fetched_at"] -= 3601  # fetched over an hour ago
    copy_path.write_text(json.dumps(copy))
    hourly.get_registry()
    assert len(served.requests_for(REGISTRY_NAME)) == 3
    hourly.get_registry()
    assert len(served.requests_for(REGISTRY_NAME)) == 3
    hourly.get_registry(refresh=True)
    assert len(served.requests_for(REGISTRY_NAME)) == 4


def test_the_registry_copy_refreshes_on_a_miss_on_refresh_and_past_its_ttl(
    served: PackServer, tmp_path: Path
) -> None:
    cache = new_cache(served, tmp_path)
    assert [e.id for e in cache.list()] == ["alpha", "beta"]
    assert len(served.requests_for(REGISTRY_NAME)) == 1
    make_pack(tmp_path / "build" / "gamma-1.0.0", "gamma", "1.0.0")
    publish(tmp_path / "build" / "gamma-1.0.0", served.root)
    republish(tmp_path, served, "alpha", "2.0.0")
    assert cache.resolve("alpha") is not None  # listed in the copy: no fetch
    assert len(served.requests_for(REGISTRY_NAME)) == 1
    entry = cache.require_entry("gamma")  # a miss in the copy fetches the registry again
    assert (entry.id, len(served.requests_for(REGISTRY_NAME))) == ("gamma", 2)
    assert cache.pull("gamma").version == "1.0.0"
    assert cache.resolve("hub://alpha@2.0.0") is not None  # the copy is fresh now: no fetch
    assert len(served.requests_for(REGISTRY_NAME)) == 2
    assert cache.resolve("nothing") is None  # every miss asks again, once
    assert len(served.requests_for(REGISTRY_NAME)) == 3
    with pytest.raises(PackError, match="not in the registry"):
        cache.require_entry("nothing")
    assert len(served.requests_for(REGISTRY_NAME)) == 4


def test_pack_pull_force_and_list_refresh_see_a_pack_published_after_the_copy(
    served: PackServer, tmp_path: Path
) -> None:
    env = {"VROM_CACHE_DIR": str(tmp_path / "cache"), "VROM_REGISTRY_URL": served.url}
    state = tmp_path / "state"
    listed = run_vrom(state, "pack", "list", env=env)
    assert listed.returncode == 0 and "gamma" not in listed.stdout, listed
    make_pack(tmp_path / "build" / "gamma-1.0.0", "gamma", "1.0.0")
    publish(tmp_path / "build" / "gamma-1.0.0", served.root)
    assert "gamma" not in run_vrom(state, "pack", "list", env=env).stdout  # the copy, fresh
    assert "gamma" in run_vrom(state, "pack", "list", "--refresh", env=env).stdout
    make_pack(tmp_path / "build" / "delta-1.0.0", "delta", "1.0.0")
    publish(tmp_path / "build" / "delta-1.0.0", served.root)
    pulled = run_vrom(state, "pack", "pull", "delta", "--force", env=env)
    assert pulled.returncode == 0 and "delta 1.0.0 is cached" in pulled.stdout, pulled.stderr
    republish(tmp_path, served, "alpha", "2.0.0")
    pulled = run_vrom(state, "pack", "pull", "alpha", "--refresh", env=env)
    assert pulled.returncode == 0 and "alpha 2.0.0 is cached" in pulled.stdout, pulled.stderr


def test_stale_copy_is_used_with_a_warning_when_the_server_fails(
    served: PackServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = new_cache(served, tmp_path, ttl_seconds=0)
    assert len(cache.list()) == 2
    served.fail_status = 500
    with (
        caplog.at_level(logging.WARNING, "vrom.packs.registry"),
        pytest.warns(RuntimeWarning, match="HTTP 500.*using the copy fetched"),
    ):
        assert [e.id for e in cache.list()] == ["alpha", "beta"]
    assert "cannot refresh the pack registry" in caplog.text


def test_stale_copy_is_used_when_the_server_sends_bad_json(
    served: PackServer, tmp_path: Path
) -> None:
    cache = new_cache(served, tmp_path, ttl_seconds=0)
    cache.get_registry()
    (served.root / REGISTRY_NAME).write_text("<html>captive portal</html>")
    with pytest.warns(RuntimeWarning, match="not valid JSON"):
        assert len(cache.get_registry().packs) == 2


def test_no_copy_and_no_server_is_an_error(served: PackServer, tmp_path: Path) -> None:
    served.fail_status = 500
    with pytest.raises(PackError, match=r"HTTP 500.*no copy of it is cached"):
        new_cache(served, tmp_path).get_registry()


def test_a_copy_of_another_registry_is_not_reused(served: PackServer, tmp_path: Path) -> None:
    new_cache(served, tmp_path).get_registry()
    other = VromCache(served.url_for("other/registry.json"), tmp_path / "cache")
    with pytest.raises(PackError, match="HTTP 404"):
        other.get_registry()


def test_malformed_registry_says_what_is_wrong(pack_server: PackServer, tmp_path: Path) -> None:
    path = pack_server.root / REGISTRY_NAME
    cache = new_cache(pack_server, tmp_path, ttl_seconds=0)
    path.write_text(json.dumps({"registry_version": 1, "packs": [{"id": "x", "files": {}}]}))
    with pytest.raises(PackError, match=r"packs\[0\] is malformed.*version"):
        cache.get_registry()
    path.write_text(json.dumps({"registry_version": 1, "packs": {}}))
    with pytest.raises(PackError, match="'packs' must be a list"):
        cache.get_registry()
    path.write_text(json.dumps({"registry_version": 9, "packs": []}))
    with pytest.raises(PackError, match="upgrade vrom"):
        cache.get_registry()


def test_without_a_registry_cached_packs_still_load(served: PackServer, tmp_path: Path) -> None:
    new_cache(served, tmp_path).pull("alpha")
    offline = VromCache(cache_dir=tmp_path / "cache")
    assert offline.load_index("alpha").version == "1.0.0"
    with pytest.raises(PackError, match="VROM_REGISTRY_URL"):
        offline.list()


def test_environment_variables_choose_registry_and_cache_for_agent_memory(
    served: PackServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VROM_REGISTRY_URL", served.url)  # a folder URL: registry.json is added
    monkeypatch.setenv("VROM_CACHE_DIR", str(tmp_path / "env-cache"))
    with AgentMemory() as memory:
        memory.init()
        assert [e.id for e in memory.list_vroms()] == ["alpha", "beta"]
    assert (tmp_path / "env-cache" / REGISTRY_NAME).is_file()  # the registry copy is kept there


def test_the_cache_itself_reads_no_environment(
    served: PackServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VROM_REGISTRY_URL", served.url)
    monkeypatch.setenv("VROM_CACHE_DIR", str(tmp_path / "env-cache"))
    cache = VromCache(cache_dir=tmp_path / "cache")
    assert cache.registry_url is None and cache.cache_dir == tmp_path / "cache"
    cache = VromCache(served.url, tmp_path / "cache")
    assert cache.registry_url == served.url_for(REGISTRY_NAME)
    assert cache.pull("beta").directory == tmp_path / "cache" / "packs" / "beta" / "0.1.0"


@pytest.mark.parametrize("form", ["folder", "file", "file-url"])
def test_local_registries_list_and_pull_without_http(tmp_path: Path, form: str) -> None:
    registry_dir = tmp_path / "reg istry"  # a space, to exercise file:// quoting
    registry_dir.mkdir()
    make_pack(tmp_path / "build", "alpha", "1.0.0")
    publish(tmp_path / "build", registry_dir)
    location = {
        "folder": str(registry_dir),
        "file": str(registry_dir / REGISTRY_NAME),
        "file-url": (registry_dir / REGISTRY_NAME).as_uri(),
    }[form]
    cache = VromCache(location, tmp_path / "cache")
    assert [e.id for e in cache.list()] == ["alpha"]
    events: list[PullProgress] = []
    pack = cache.pull("hub://alpha", on_progress=events.append)
    pack.manifest.verify(pack.directory)
    assert events[0].phase == "manifest" and events[-1].phase == "done"
    assert {e.phase for e in events} == {"manifest", "index", "chunks", "done"}


def test_local_registry_is_read_on_every_call(tmp_path: Path) -> None:
    make_pack(tmp_path / "a", "alpha", "1.0.0")
    make_pack(tmp_path / "b", "beta", "1.0.0")
    publish(tmp_path / "a", tmp_path / "registry")
    cache = VromCache(tmp_path / "registry", tmp_path / "cache")
    assert [e.id for e in cache.list()] == ["alpha"]
    publish(tmp_path / "b", tmp_path / "registry")
    assert [e.id for e in cache.list()] == ["alpha", "beta"]


def test_resolve_ids_and_hub_uris(served: PackServer, tmp_path: Path) -> None:
    cache = new_cache(served, tmp_path)
    for found in (cache.resolve("alpha"), cache.require_entry("alpha")):
        assert found is not None and found.version == "1.0.0"
    beta = cache.resolve("hub://beta")
    assert beta is not None and beta.id == "beta"
    alpha = cache.resolve("hub://alpha@1.0.0")
    assert alpha is not None and alpha.id == "alpha"
    # an id (or version) the registry does not list: resolve says None, require_entry says why
    assert cache.resolve("gamma") is None
    assert cache.resolve("hub://alpha@2.0.0") is None
    with pytest.raises(PackError, match=r"has alpha 1\.0\.0, not 2\.0\.0"):
        cache.require_entry("hub://alpha@2.0.0")
    with pytest.raises(
        PackError,
        match=r"pack 'gamma' is not in the registry at http://127\.0\.0\.1:\d+/registry\.json; "
        r"available: alpha, beta",
    ):
        cache.require_entry("gamma")
    with pytest.raises(PackError, match="not in the registry"):
        cache.pull("gamma")
    with pytest.raises(PackError, match="not a pack id"):
        cache.resolve("hub://Not Valid")
    with pytest.raises(PackError, match="not a pack id"):
        parse_pack_ref("hub://Not Valid")


# -- pulling ---------------------------------------------------------------------------------


def test_pull_reports_progress_in_order(served: PackServer, tmp_path: Path) -> None:
    events: list[PullProgress] = []
    pack = new_cache(served, tmp_path).pull("alpha", on_progress=events.append)
    phases = [e.phase for e in events]
    assert phases == sorted(phases, key=["manifest", "index", "chunks", "done"].index)
    for phase, total, name in (
        ("index", INDEX_SIZE, "index.usearch"),
        ("chunks", STORE_SIZE, "store.db"),
    ):
        loaded = [e.loaded for e in events if e.phase == phase]
        assert loaded == sorted(loaded) and loaded[-1] == total
        assert all(e.total == total and e.file == name for e in events if e.phase == phase)
        assert 2 <= len(loaded) <= total // PROGRESS_STEP + 2  # throttled to ~64 KiB steps
    assert events[-1] == PullProgress("done", "", STORE_SIZE + INDEX_SIZE, STORE_SIZE + INDEX_SIZE)
    assert pack.directory == tmp_path / "cache" / "packs" / "alpha" / "1.0.0"
    assert pack.store_path.stat().st_size == STORE_SIZE
    assert pack.index_path.name == "index.usearch"
    pack.manifest.verify(pack.directory)
    assert not list(pack.directory.parent.glob(".partial-*"))


def test_pull_of_a_cached_unchanged_pack_downloads_nothing(
    served: PackServer, tmp_path: Path
) -> None:
    cache = new_cache(served, tmp_path)
    cache.pull("alpha")
    served.clear_log()
    events: list[PullProgress] = []
    again = cache.pull("alpha", on_progress=events.append)
    assert [r.path for r in served.requests] == ["/alpha/1.0.0/manifest.json"]
    assert [e.phase for e in events] == ["manifest", "done"]
    assert again == cache.load_index("alpha")


def test_pull_of_a_cached_pack_works_offline_with_a_warning(
    served: PackServer, tmp_path: Path
) -> None:
    cache = new_cache(served, tmp_path)
    cache.pull("alpha")
    served.fail_status = 500
    with pytest.warns(RuntimeWarning, match="using the cached copy"):
        assert cache.pull("alpha").version == "1.0.0"  # the registry copy is still fresh


def test_interrupted_download_resumes_with_a_range_request(
    served: PackServer, tmp_path: Path
) -> None:
    cache = new_cache(served, tmp_path)
    served.drop_after("alpha/1.0.0/store.db", 100_000)
    with pytest.raises(PackError, match=r"stopped after .* pull again to resume"):
        cache.pull("alpha")
    partial = tmp_path / "cache" / "packs" / "alpha" / ".partial-1.0.0" / "store.db"
    kept = partial.stat().st_size
    assert 0 < kept <= 100_000
    assert not cache.is_cached("alpha")

    events: list[PullProgress] = []
    pack = cache.pull("alpha", on_progress=events.append)
    store_gets = served.requests_for("alpha/1.0.0/store.db")
    assert [(r.range, r.status) for r in store_gets] == [(None, 200), (f"bytes={kept}-", 206)]
    assert len(served.requests_for("alpha/1.0.0/index.usearch")) == 1  # complete: not fetched
    chunks = [e.loaded for e in events if e.phase == "chunks"]
    assert chunks[0] > kept and chunks[-1] == STORE_SIZE
    pack.manifest.verify(pack.directory)


def test_a_server_ignoring_range_gets_the_whole_file_again(
    served: PackServer, tmp_path: Path
) -> None:
    cache = new_cache(served, tmp_path)
    served.drop_after("alpha/1.0.0/index.usearch", 70_000)
    with pytest.raises(PackError):
        cache.pull("alpha")
    served.ignore_range = True
    pack = cache.pull("alpha")
    last = served.requests_for("alpha/1.0.0/index.usearch")[-1]
    assert last.range is not None and last.range.startswith("bytes=") and last.status == 200
    pack.manifest.verify(pack.directory)


def test_a_partial_longer_than_the_servers_file_is_refused(
    served: PackServer, tmp_path: Path
) -> None:
    cache = new_cache(served, tmp_path)
    served.drop_after("alpha/1.0.0/store.db", 120_000)
    with pytest.raises(PackError):
        cache.pull("alpha")
    served_store = served.root / "alpha" / "1.0.0" / "store.db"
    served_store.write_bytes(served_store.read_bytes()[:1000])  # now shorter than our partial
    with pytest.raises(PackError, match="1000 bytes, the manifest says 300000"):
        cache.pull("alpha")
    ranges = [(r.range, r.status) for r in served.requests_for("alpha/1.0.0/store.db")]
    assert ranges[-2][1] == 416 and ranges[-1] == (None, 200)
    assert not (tmp_path / "cache" / "packs" / "alpha" / ".partial-1.0.0").exists()


@pytest.mark.parametrize("damage", ["tampered", "truncated"])
def test_bad_data_is_refused_and_the_previous_version_stays(
    served: PackServer, tmp_path: Path, damage: str
) -> None:
    cache = new_cache(served, tmp_path, ttl_seconds=0)
    cache.pull("alpha")
    folder = republish(tmp_path, served, "alpha", "1.1.0")
    if damage == "tampered":  # same size, one byte changed
        data = bytearray((folder / "store.db").read_bytes())
        data[12345] ^= 0xFF
        (folder / "store.db").write_bytes(bytes(data))
        expected = "does not match its SHA-256"
    else:
        (folder / "index.usearch").write_bytes((folder / "index.usearch").read_bytes()[:-10])
        expected = "139990 bytes, the manifest says 140000"
    with pytest.raises(PackError, match=expected):
        cache.pull("alpha")
    pack_dir = tmp_path / "cache" / "packs" / "alpha"
    assert sorted(p.name for p in pack_dir.iterdir()) == ["1.0.0"]  # partial deleted
    kept = cache.load_index("alpha")
    assert kept.version == "1.0.0"
    kept.manifest.verify(kept.directory)


def test_a_new_version_replaces_the_old_one(served: PackServer, tmp_path: Path) -> None:
    cache = new_cache(served, tmp_path, ttl_seconds=0)
    cache.pull("alpha")
    republish(tmp_path, served, "alpha", "1.1.0")
    assert cache.pull("alpha").version == "1.1.0"
    assert sorted(p.name for p in (tmp_path / "cache" / "packs" / "alpha").iterdir()) == ["1.1.0"]
    assert cache.load_index("alpha").version == "1.1.0"


def test_manifest_for_another_version_is_refused(served: PackServer, tmp_path: Path) -> None:
    manifest_path = served.root / "alpha" / "1.0.0" / "manifest.json"
    data = json.loads(manifest_path.read_text())
    data["version"] = "1.0.1"
    manifest_path.write_text(json.dumps(data))
    with pytest.raises(PackError, match=r"is for alpha 1\.0\.1, but the registry entry is alpha"):
        new_cache(served, tmp_path).pull("alpha")


def test_absolute_file_urls_are_used_as_given(pack_server: PackServer, tmp_path: Path) -> None:
    make_pack(tmp_path / "build", "alpha", "1.0.0")
    publish(tmp_path / "build", pack_server.root / "files", base_url=pack_server.url_for("files/"))
    registry_dir = tmp_path / "local-registry"  # a local registry pointing at HTTP files
    registry_dir.mkdir()
    shutil.copy(pack_server.root / "files" / REGISTRY_NAME, registry_dir / REGISTRY_NAME)
    pack = VromCache(registry_dir, tmp_path / "cache").pull("alpha")
    pack.manifest.verify(pack.directory)
    assert len(pack_server.requests_for("files/alpha/1.0.0/store.db")) == 1


def test_force_download_fetches_everything_again(served: PackServer, tmp_path: Path) -> None:
    cache = new_cache(served, tmp_path)
    served.drop_after("alpha/1.0.0/store.db", 80_000)
    with pytest.raises(PackError):
        cache.pull("alpha")
    cache.pull("alpha", force_download=True)
    assert served.requests_for("alpha/1.0.0/store.db")[-1].range is None  # the partial was dropped
    served.clear_log()
    pack = cache.pull("alpha", force_download=True)
    assert len(served.requests_for("alpha/1.0.0/store.db")) == 1
    assert len(served.requests_for("alpha/1.0.0/index.usearch")) == 1
    assert sorted(p.name for p in pack.directory.parent.iterdir()) == ["1.0.0"]
    pack.manifest.verify(pack.directory)


def test_two_pulls_at_once_take_turns(served: PackServer, tmp_path: Path) -> None:
    results: list[str] = []
    errors: list[BaseException] = []

    def pull() -> None:
        try:
            results.append(new_cache(served, tmp_path).pull("alpha").version)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=pull) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors and results == ["1.0.0", "1.0.0"]
    assert len(served.requests_for("alpha/1.0.0/store.db")) == 1  # the second found it cached
    pack = new_cache(served, tmp_path).load_index("alpha")
    pack.manifest.verify(pack.directory)


# -- the cache -------------------------------------------------------------------------------


def test_is_cached_and_cached_manifest(served: PackServer, tmp_path: Path) -> None:
    cache = new_cache(served, tmp_path)
    assert not cache.is_cached("alpha") and cache.get_cached_manifest("alpha") is None
    with pytest.raises(PackError, match="'alpha' is not cached"):
        cache.load_index("alpha")
    pack = cache.pull("alpha")
    assert cache.is_cached("alpha") and cache.is_cached("hub://alpha@1.0.0")
    assert not cache.is_cached("alpha@2.0.0") and not cache.is_cached("beta")
    manifest = cache.get_cached_manifest("alpha")
    assert manifest is not None and manifest.vrom_id == "alpha" and manifest.version == "1.0.0"

    with open(pack.store_path, "ab") as file:  # damaged after the pull: sizes are re-checked
        file.write(b"x")
    assert not cache.is_cached("alpha")
    with pytest.raises(PackError, match=r"is damaged.*300001 bytes.*force_download=True"):
        cache.load_index("alpha")
    assert cache.pull("alpha", force_download=True).store_path.stat().st_size == STORE_SIZE


def test_evict(served: PackServer, tmp_path: Path) -> None:
    cache = new_cache(served, tmp_path)
    cache.pull("alpha")
    cache.pull("beta")
    assert cache.evict("hub://alpha") is True
    assert not cache.is_cached("alpha") and cache.is_cached("beta")
    assert not (tmp_path / "cache" / "packs" / "alpha").exists()
    assert cache.evict("alpha") is False


def test_storage_estimate(served: PackServer, tmp_path: Path) -> None:
    assert new_cache(served, tmp_path).storage_estimate().quota == 10 * 1024**3  # the default
    cache = VromCache(served.url_for(REGISTRY_NAME), tmp_path / "cache", quota="unlimited")
    empty = cache.storage_estimate()
    assert (empty.used, empty.packs) == (0, 0) and empty.free_bytes > 0
    assert empty.quota == empty.free_bytes and not empty.limited, "no quota: the disk is the limit"
    pack = cache.pull("alpha")
    cache.pull("beta")
    estimate = cache.storage_estimate()
    manifest_sizes = sum(
        (tmp_path / "cache" / "packs" / p / v / name).stat().st_size
        for p, v in (("alpha", "1.0.0"), ("beta", "0.1.0"))
        for name in ("manifest.json", "verified.json")
    )
    assert estimate.packs == 2
    assert estimate.used == estimate.used_bytes == 2 * (STORE_SIZE + INDEX_SIZE) + manifest_sizes
    assert estimate.free_bytes > 0 and estimate.quota == estimate.used + estimate.free_bytes
    cache.evict("beta")
    assert cache.storage_estimate().packs == 1
    assert pack.directory.exists()
    limited = VromCache(served.url_for(REGISTRY_NAME), tmp_path / "cache", quota="2MB")
    assert (limited.quota, limited.storage_estimate().quota) == (2_000_000, 2_000_000)
    assert limited.storage_estimate().limited


# -- the quota -------------------------------------------------------------------------------

PACK_BYTES = STORE_SIZE + INDEX_SIZE
TWO_PACKS = 2 * PACK_BYTES + 10_000  # room for two packs with their manifests, not three


def quota_cache(server: PackServer, tmp_path: Path, quota: int | str) -> VromCache:
    return VromCache(server.url_for(REGISTRY_NAME), tmp_path / "cache", quota=quota, ttl_seconds=0)


def set_last_use(tmp_path: Path, pack_id: str, when: float) -> None:
    """Backdate the pack's recorded last use (seconds since the epoch)."""
    os.utime(tmp_path / "cache" / "last-used" / pack_id, (when, when))


def data_requests(server: PackServer, pack_id: str) -> list[str]:
    return [
        r.path
        for r in server.requests
        if r.path.startswith(f"/{pack_id}/") and not r.path.endswith("manifest.json")
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (750_000, 750_000),
        ("750000", 750_000),
        ("500MB", 500_000_000),
        ("2 GiB", 2 * 1024**3),
        ("1.5kb", 1500),
        (" 3 mib ", 3 * 1024**2),
        (None, 10 * 1024**3),  # the default quota
        ("Unlimited", None),  # the disk is the limit
    ],
)
def test_a_quota_is_bytes_or_a_size_with_a_unit(
    value: int | str | None, expected: int | None
) -> None:
    assert parse_quota(value) == expected


@pytest.mark.parametrize("value", [0, -5, True, 1.5, "", "lots", "5 parsecs", "0MB", "-1GB"])
def test_a_bad_quota_is_a_one_line_validation_error(value: object) -> None:
    with pytest.raises(ValidationError, match=r"^the cache quota must be a positive number") as err:
        parse_quota(value)  # type: ignore[arg-type]
    assert "\n" not in str(err.value)


def test_a_pull_evicts_the_least_recently_used_packs_to_fit_the_quota(
    served: PackServer, tmp_path: Path
) -> None:
    cache = quota_cache(served, tmp_path, TWO_PACKS)
    cache.pull("alpha")
    cache.pull("beta")
    set_last_use(tmp_path, "alpha", 2_000_000_000)  # alpha was used after beta
    set_last_use(tmp_path, "beta", 1_000_000_000)
    republish(tmp_path, served, "gamma", "1.0.0")
    cache.pull("gamma")
    assert [cache.is_cached(p) for p in ("alpha", "beta", "gamma")] == [True, False, True]
    assert not (tmp_path / "cache" / "last-used" / "beta").exists()
    estimate = cache.storage_estimate()
    assert estimate.packs == 2 and estimate.used <= estimate.quota == TWO_PACKS


def test_mounting_or_pulling_a_pack_records_its_use(served: PackServer, tmp_path: Path) -> None:
    cache = quota_cache(served, tmp_path, TWO_PACKS)
    marker = tmp_path / "cache" / "last-used" / "alpha"
    cache.pull("alpha")
    for use in (lambda: cache.load_index("alpha"), lambda: cache.pull("alpha")):
        set_last_use(tmp_path, "alpha", 1_000_000_000)
        use()
        assert marker.stat().st_mtime > 1_000_000_000
    set_last_use(tmp_path, "alpha", 1_000_000_000)
    cache.is_cached("alpha"), cache.get_cached_manifest("alpha"), cache.storage_estimate()
    assert marker.stat().st_mtime == 1_000_000_000, "looking at a pack is not using it"


def test_kept_and_busy_packs_are_not_evicted(served: PackServer, tmp_path: Path) -> None:
    cache = quota_cache(served, tmp_path, TWO_PACKS)
    cache.pull("alpha")
    cache.pull("beta")
    set_last_use(tmp_path, "alpha", 1_000_000_000)  # alpha is the least recently used
    set_last_use(tmp_path, "beta", 2_000_000_000)
    republish(tmp_path, served, "gamma", "1.0.0")
    cache.pull("gamma", keep=("alpha",))  # alpha is mounted: beta goes instead
    assert [cache.is_cached(p) for p in ("alpha", "beta", "gamma")] == [True, False, True]

    set_last_use(tmp_path, "alpha", 1_000_000_000)
    set_last_use(tmp_path, "gamma", 2_000_000_000)
    with CacheFolders(tmp_path / "cache").locked("alpha"):  # another pull or evict holds alpha
        cache.pull("beta")
    assert [cache.is_cached(p) for p in ("alpha", "beta", "gamma")] == [True, True, False]


def test_a_pack_larger_than_the_quota_is_refused_before_downloading(
    served: PackServer, tmp_path: Path
) -> None:
    cache = quota_cache(served, tmp_path, "100kB")
    with pytest.raises(
        PackError,
        match=r"^pack alpha 1\.0\.0 needs 44\d,\d{3} bytes, more than the cache quota of "
        r"100,000 bytes: raise the quota",
    ):
        cache.pull("alpha")
    assert data_requests(served, "alpha") == [], "no data file was downloaded"
    assert not (tmp_path / "cache" / "packs" / "alpha").exists()


def test_a_pack_that_cannot_fit_beside_kept_packs_evicts_nothing(
    served: PackServer, tmp_path: Path
) -> None:
    cache = quota_cache(served, tmp_path, TWO_PACKS)
    cache.pull("alpha")
    cache.pull("beta")
    republish(tmp_path, served, "gamma", "1.0.0")
    served.clear_log()
    with pytest.raises(PackError, match=r"packs that stay \(alpha, beta\) hold"):
        cache.pull("gamma", keep=("alpha", "beta"))
    assert data_requests(served, "gamma") == []
    assert cache.is_cached("alpha") and cache.is_cached("beta") and not cache.is_cached("gamma")


def test_an_unsigned_pull_warns_only_that_it_is_unsigned(
    served: PackServer, tmp_path: Path
) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        new_cache(served, tmp_path).pull("alpha")
    assert [(w.category, str(w.message).split(":")[0]) for w in caught] == [
        (UnverifiedPackWarning, "pack alpha 1.0.0 is not signed")
    ]


# -- HTTP needs nothing beyond the core dependencies --------------------------------------------

BLOCK_HTTPX = """
import runpy, sys

class NoHttpx:  # as on an install without httpx
    def find_spec(self, name, path=None, target=None):
        if name == "httpx" or name.startswith("httpx."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoHttpx())
sys.argv = ["vrom", *sys.argv[1:]]
runpy.run_module("vrom", run_name="__main__", alter_sys=True)
"""


def test_an_http_registry_needs_no_extra_and_never_a_traceback_without_httpx(
    served: PackServer, tmp_path: Path
) -> None:
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    core = pyproject.split("\ndependencies = [", 1)[1].split("\n]", 1)[0]
    assert '\n    "httpx>=' in core  # a plain pip install has it
    env = {k: v for k, v in os.environ.items() if not k.startswith("VROM_")}
    env.update(VROM_CACHE_DIR=str(tmp_path / "cache"), VROM_REGISTRY_URL=served.url)
    for args in (["pack", "list"], ["pack", "pull", "alpha"]):
        done = subprocess.run(
            [sys.executable, "-c", BLOCK_HTTPX, *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert "Traceback" not in done.stderr, done.stderr
        assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
        assert "needs httpx" in done.stderr and "reinstall vrom" in done.stderr, done.stderr
    assert served.requests == []
