"""Hostile pack registries and servers: JSON nested to blow the stack, a server that drips its
bytes, a manifest that lies about its size. Each is refused in one line, in bounded time and
space, and the cache is left as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pack_server import PackServer, pack_server_fixture  # noqa: F401 (the pack_server fixture)
from test_pack_cache import make_pack, new_cache, publish
from vrom_cli import run_vrom

from vrom.bounded_json import loads_bounded
from vrom.errors import PackError, ValidationError
from vrom.packs.cache import VromCache
from vrom.packs.manifest import REGISTRY_NAME, PackManifest
from vrom.packs.quota import pack_size
from vrom.packs.signing import ManifestSignature
from vrom.packs.transfer import SLOWEST_RATE

pytestmark = pytest.mark.filterwarnings("ignore::vrom.packs.signing.UnverifiedPackWarning")
DEEP = 100_000


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    ("text", "max_depth", "max_bytes", "words"),
    [
        (nested(DEEP), 32, 10**6, "nested more than 32 levels"),
        ('{"a": ' * 40 + "1" + "}" * 40, 32, 10**6, "nested more than 32 levels"),
        ("[" * 10, 8, 10**6, "nested more than 8 levels"),  # too deep before it is cut off
        (b"\xff[]", 32, 10**6, "not UTF-8"),
        ("[1,", 32, 10**6, "not valid JSON"),
        ("x" * 2000, 32, 1000, "2,000 bytes, more than the 1,000 allowed"),
    ],
)
def test_loads_bounded_refuses_deep_large_and_broken_json_in_one_line(
    text: str | bytes, max_depth: int, max_bytes: int, words: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        loads_bounded(text, max_depth=max_depth, max_bytes=max_bytes, what="doc")
    message = str(caught.value)
    assert message.startswith("doc ") and words in message and "\n" not in message, message


def test_loads_bounded_reads_brackets_inside_strings_as_text() -> None:
    text = json.dumps({"a": "[[[[{{{{" * 10, "b": ['"[', "\\"], "c": [[[1]]]})
    assert loads_bounded(text, max_depth=4, max_bytes=10**6, what="doc") == json.loads(text)
    with pytest.raises(ValidationError, match="nested more than 3"):
        loads_bounded(text, max_depth=3, max_bytes=10**6, what="doc")


def test_a_registry_nested_100000_deep_is_a_one_line_error_from_pack_list_and_pull(
    tmp_path: Path,
) -> None:
    registry = tmp_path / "registry"
    registry.mkdir()
    (registry / REGISTRY_NAME).write_text('{"packs": ' + nested(DEEP) + "}")
    env = {"VROM_CACHE_DIR": str(tmp_path / "cache"), "VROM_REGISTRY_URL": str(registry)}
    for args in (("pack", "list"), ("pack", "pull", "alpha")):
        done = run_vrom(tmp_path / "state", *args, env=env)  # asserts no traceback
        assert done.returncode == 1, done
        assert done.stderr.count("\n") == 1, done.stderr
        assert "nested more than 32 levels deep" in done.stderr, done.stderr


def test_a_manifest_or_signature_nested_deep_over_http_is_refused(
    pack_server: PackServer, tmp_path: Path
) -> None:
    make_pack(tmp_path / "build" / "alpha-1.0.0", "alpha", "1.0.0")
    entry = publish(tmp_path / "build" / "alpha-1.0.0", pack_server.root)
    manifest = pack_server.root / entry.files["manifest"]
    manifest.write_text('{"files": ' + nested(DEEP) + "}")
    cache = new_cache(pack_server, tmp_path)
    with pytest.raises(PackError, match="nested more than 32 levels deep"):
        cache.pull("alpha")
    assert not cache.is_cached("alpha")
    # a signature file (read when trusted keys are set) nested as deep as its 4 KB allow
    with pytest.raises(PackError, match="signature is nested more than 2 levels deep"):
        ManifestSignature.from_bytes(nested(2000).encode(), "pack alpha 1.0.0")


# -- a server too slow, a manifest that lies about its size --------------------------------------


@pytest.mark.parametrize(
    "dripping", [REGISTRY_NAME, "alpha/1.0.0/manifest.json", "alpha/1.0.0/store.db"]
)
def test_a_pull_from_a_server_dripping_its_bytes_stops_at_its_deadline(
    pack_server: PackServer, tmp_path: Path, dripping: str
) -> None:
    make_pack(tmp_path / "build" / "alpha-1.0.0", "alpha", "1.0.0")
    publish(tmp_path / "build" / "alpha-1.0.0", pack_server.root)
    pack_server.drip(dripping, 0.05, 400)  # 20 s of dripping at least, far past the deadline
    cache = VromCache(pack_server.url_for(REGISTRY_NAME), tmp_path / "cache", pull_deadline=2)
    with pytest.raises(PackError) as caught:
        cache.pull("alpha")
    assert f"{dripping}: not done within the deadline of 2.0 s" in str(caught.value)
    assert "\n" not in str(caught.value)
    assert not cache.is_cached("alpha")


def lie_about_size(server: PackServer, role: str, size: int) -> None:
    """Make the served manifest of alpha 1.0.0 claim ``size`` bytes for its ``role`` file."""
    path = server.root / "alpha" / "1.0.0" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["files"][role]["size"] = size
    path.write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    ("quota", "claim", "words"),
    [
        (None, 50 * 10**9, "more than the cache quota of 10,737,418,240 bytes"),  # the default
        ("unlimited", 10**18, "but the disk holding the cache"),
    ],
)
def test_a_manifest_claiming_more_than_the_quota_or_the_disk_is_refused_before_downloading(
    pack_server: PackServer, tmp_path: Path, quota: str | None, claim: int, words: str
) -> None:
    make_pack(tmp_path / "build" / "alpha-1.0.0", "alpha", "1.0.0")
    publish(tmp_path / "build" / "alpha-1.0.0", pack_server.root)
    lie_about_size(pack_server, "store", claim)
    pack_server.stream_forever("alpha/1.0.0/store.db")
    cache = VromCache(pack_server.url_for(REGISTRY_NAME), tmp_path / "cache", quota=quota)
    with pytest.raises(PackError, match=words):
        cache.pull("alpha")
    assert [r.path for r in pack_server.requests if not r.path.endswith(".json")] == []
    assert cache.storage_estimate().used == 0


def test_a_body_longer_than_the_manifest_says_is_cut_as_it_arrives(
    pack_server: PackServer, tmp_path: Path
) -> None:
    make_pack(tmp_path / "build" / "alpha-1.0.0", "alpha", "1.0.0")
    publish(tmp_path / "build" / "alpha-1.0.0", pack_server.root)
    lie_about_size(pack_server, "index", 1000)
    pack_server.stream_forever("alpha/1.0.0/index.usearch")  # no Content-Length: only bytes tell
    cache = new_cache(pack_server, tmp_path)
    with pytest.raises(PackError, match="longer than the 1000 bytes the manifest says"):
        cache.pull("alpha")
    assert cache.storage_estimate().used == 0  # the partial folder is gone


def test_by_default_a_pull_must_average_64_kib_a_second_after_its_timeout(
    pack_server: PackServer, tmp_path: Path
) -> None:
    make_pack(tmp_path / "build" / "alpha-1.0.0", "alpha", "1.0.0")
    publish(tmp_path / "build" / "alpha-1.0.0", pack_server.root)
    pack_server.drip("alpha/1.0.0/store.db", 0.05, 400)  # 20 s of dripping at least
    cache = VromCache(pack_server.url_for(REGISTRY_NAME), tmp_path / "cache", timeout=3)
    manifest = (pack_server.root / "alpha" / "1.0.0" / "manifest.json").read_bytes()
    needed = pack_size(PackManifest.from_dict(json.loads(manifest)), len(manifest), 0)
    assert 5 < 3 + needed / SLOWEST_RATE < 15
    with pytest.raises(PackError, match=rf"deadline of {3 + needed / SLOWEST_RATE:.1f} s"):
        cache.pull("alpha")


def test_a_local_copy_keeps_to_the_deadline_too(tmp_path: Path) -> None:
    make_pack(tmp_path / "build" / "alpha-1.0.0", "alpha", "1.0.0")
    publish(tmp_path / "build" / "alpha-1.0.0", tmp_path / "registry")  # a slow network mount, say
    cache = VromCache(tmp_path / "registry", tmp_path / "cache", pull_deadline=1e-9)
    with pytest.raises(
        PackError, match=r"index\.usearch: not done within the deadline .*\(0 of 140,000 bytes in\)"
    ):
        cache.pull("alpha")
    assert not cache.is_cached("alpha")
