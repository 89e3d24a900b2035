"""Settings once (issue 28 item 6): one immutable `Settings` value, resolved by the faces from
their arguments, then the environment, then the defaults, and passed down.

Where the environment may be read is checked in tests/test_layers.py; the page listing every
variable in tests/test_docs.py.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from vrom import AgentMemory, Vault
from vrom.embed import resolve_embedder
from vrom.embed.remote import OpenAIEmbedder
from vrom.errors import ValidationError
from vrom.server.state import ServerState
from vrom.settings import VARIABLES, Settings


class CountingEnvironment(dict[str, str]):
    """The process environment as a dict that counts how often each variable is read."""

    def __init__(self, real: dict[str, str]) -> None:
        super().__init__(real)
        self.reads: Counter[str] = Counter()

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        self.reads[key] += 1
        return super().get(key, default)

    def __getitem__(self, key: str) -> str:
        self.reads[key] += 1
        return super().__getitem__(key)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[CountingEnvironment]:
    environment = CountingEnvironment(dict(os.environ))
    monkeypatch.setattr(os, "environ", environment)
    yield environment


def _vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    root.mkdir()
    for i in range(5):
        (root / f"note-{i}.md").write_text(f"# Note {i}\n\nalpha beta topic {i}\n", "utf-8")
    return root


VROM_NAMES = {variable.name for variable in VARIABLES}


def test_settings_once_an_open_reads_each_variable_once_and_a_search_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted: CountingEnvironment
) -> None:
    monkeypatch.setenv("VROM_EMBEDDER", "fake")
    root = _vault(tmp_path)
    with Vault.open(root) as vault:
        vault.index()
    counted.reads.clear()
    with Vault.open_default(cwd=root) as vault:  # the variables, the store, the model
        opened = {name: n for name, n in counted.reads.items() if name in VROM_NAMES}
        assert opened and max(opened.values()) == 1, opened
        vault.search("alpha")
        counted.reads.clear()
        for _ in range(3):
            vault.search("alpha topic")
            vault.context("alpha topic")
        assert not VROM_NAMES & set(counted.reads), "a warm search reads no setting"


def test_settings_once_an_argument_beats_the_value_and_the_value_beats_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _vault(tmp_path)
    monkeypatch.setenv("VROM_STATE_DIR", str(tmp_path / "from-env"))
    given = Settings.from_environment().given(
        state_dir=str(tmp_path / "from-settings"), embedder="fake"
    )
    with Vault.open(root, settings=given) as vault:
        assert Path(vault.store.location).is_relative_to(tmp_path / "from-settings")
        assert vault.embedder is not None and vault.embedder.dim == 64  # "auto" is fake here
    with Vault.open(root, tmp_path / "from-argument", settings=given, embedder=None) as vault:
        assert Path(vault.store.location).is_relative_to(tmp_path / "from-argument")
        assert vault.embedder is None
    with Vault.open(root) as vault:  # no value given: resolved from the environment now
        assert Path(vault.store.location).is_relative_to(tmp_path / "from-env")

    monkeypatch.setenv("VROM_CACHE_DIR", str(tmp_path / "env-cache"))
    packs = Settings(cache_dir=str(tmp_path / "settings-cache"))
    with AgentMemory(settings=packs) as memory:
        memory.init()
        assert memory._cache is not None
        assert Path(memory._cache.cache_dir) == tmp_path / "settings-cache"
    with AgentMemory(tmp_path / "none", tmp_path / "argument-cache", settings=packs) as memory:
        memory.init()
        assert memory._cache is not None
        assert Path(memory._cache.cache_dir) == tmp_path / "argument-cache"


def test_settings_once_the_mcp_server_opens_every_vault_with_the_value_it_started_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _vault(tmp_path)
    monkeypatch.setenv("VROM_VAULT", str(root))
    state = ServerState(None, embedder=None, watch=False, roots=False)
    monkeypatch.setenv("VROM_VAULT", str(tmp_path / "elsewhere"))  # after start: not read
    monkeypatch.setenv("VROM_STATE_DIR", str(tmp_path / "later"))
    try:
        vault = state.open_explicit()
        assert vault is not None and vault.root == root.resolve()
        assert not Path(vault.store.location).is_relative_to(tmp_path / "later")
    finally:
        state.close()


def test_settings_once_the_embedder_binding_is_handed_its_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "from-the-environment")
    made, owned = resolve_embedder("openai:m@http://127.0.0.1:9/v1", "none", api_key="handed")
    assert isinstance(made, OpenAIEmbedder) and owned
    try:
        assert made._api_key == "handed"
    finally:
        made.close()
    made, _ = resolve_embedder("openai:m@http://127.0.0.1:9/v1", "none")
    assert isinstance(made, OpenAIEmbedder)
    try:
        assert made._api_key is None, "the engine path reads no environment"
    finally:
        made.close()


def test_settings_are_one_immutable_value_read_as_the_variables_say() -> None:
    resolved = Settings.from_environment(
        {
            "VROM_VAULT": "",  # empty: unset
            "VAULT_ROOT": "  ",  # set but empty: kept, refused when asked for the vault
            "VROM_EMBEDDER": " fake:8 ",
            "VROM_TRUSTED_KEYS": f"a, b{os.pathsep} ,",
            "NO_COLOR": "",
            "TERM": "dumb",
        }
    )
    assert resolved.vault is None and resolved.vault_root == "  "
    assert resolved.embedder_spec == "fake:8" and Settings().embedder_spec == "default"
    assert resolved.trusted_keys == ("a", "b")
    assert resolved.colour is False and Settings().colour is True
    with pytest.raises(ValidationError, match=r"\$VAULT_ROOT is set but empty"):
        resolved.vault_variable()
    with pytest.raises(dataclasses.FrozenInstanceError):
        resolved.state_dir = "x"  # type: ignore[misc]
    assert resolved.given(state_dir=None, cache_dir="c").cache_dir == "c"
    assert resolved.given(state_dir=None) is resolved
    assert Settings.from_environment({}) == Settings()
