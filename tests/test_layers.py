"""Layers point one way: no module of vrom imports a module of a higher layer.

The layers, highest first, are those of docs/architecture.md. The check reads every module's
imports with `ast` (imports inside functions and under TYPE_CHECKING count too), so a lazy
import cannot hide a dependency that points up.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[1] / "src" / "vrom"

FACES, FACADES, CORE, ENGINES, STORE, BASE = 5, 4, 3, 2, 1, 0
LAYER_NAMES = {5: "faces", 4: "facades", 3: "the search core", 2: "engines", 1: "store", 0: "base"}
LAYERS = {
    # faces: parse, call the SDK, format
    "cli": FACES,
    "server": FACES,
    "tools": FACES,
    "install": FACES,
    "selftest": FACES,
    "__main__": FACES,
    # facades: each keeps its own vocabulary; settings are read here and in the faces only
    "vault": FACADES,
    "_vault_files": FACADES,
    "_vault_notes": FACADES,
    "_vault_format": FACADES,
    "_vault_sync": FACADES,
    "_background_embedding": FACADES,
    "collection": FACADES,
    "documents": FACADES,
    "agent_memory": FACADES,
    "memories": FACADES,
    "pack_builder": FACADES,
    "evaluation": FACADES,
    "vectordb": FACADES,
    "_vectordb_file": FACADES,
    "state": FACADES,
    "corpus": CORE,
    "ingest": ENGINES,
    "export": ENGINES,
    "search": ENGINES,
    "embed": ENGINES,
    "index": ENGINES,
    "packs": ENGINES,
    "store": STORE,
    "errors": BASE,
    "results": BASE,
    "vault_results": BASE,  # what vault reads and writes and the admin commands return
    "_async": BASE,  # asyncio.to_thread, imported only when an async face runs a call
    # the one reader of the environment: a leaf, asked by faces, facades and the
    # user-facing embedder constructors (an OpenAI key); test_only_the_settings_module...
    "settings": BASE,
    "dates": BASE,
    "bounded_json": BASE,  # the one bounded parser of a peer's JSON (MCP messages, registries)
}


ALLOWED_UPWARD = {
    # Collection.as_tool returns the agent-tool adapter (the seed's API); the adapter knows
    # only a `Searchable` protocol, never Collection, so there is no cycle.
    ("vrom.collection", "vrom.tools"),
}


def _layer(module: str) -> int | None:
    """Return the layer of ``vrom.x.y`` (None for ``vrom`` itself, which exports the API)."""
    parts = module.split(".")
    if parts[0] != "vrom" or len(parts) == 1:
        return None
    name = parts[1]
    if name not in LAYERS:
        raise AssertionError(f"vrom.{name} has no layer: add it to LAYERS and the docs")
    return LAYERS[name]


def _module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            # `from vrom import settings` names a module, not just the package
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return [(line, name) for line, name in found if name.split(".")[0] == "vrom"]


MODULES = sorted(SOURCE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SOURCE)))
def test_no_module_imports_a_higher_layer(path: Path) -> None:
    importer = _layer(_module_name(path))
    if importer is None:
        return  # vrom/__init__.py: the public surface re-exports every layer
    upward = []
    module = _module_name(path)
    for line, name in _imports(path):
        if any(module == low and name.startswith(high) for low, high in ALLOWED_UPWARD):
            continue
        parts = name.split(".")
        if len(parts) > 1 and parts[1] not in LAYERS and name.count(".") == 1:
            continue  # `from vrom import __version__` and the like
        imported = _layer(name)
        if imported is not None and imported > importer:
            upward.append(f"line {line}: {name} ({LAYER_NAMES[imported]})")
    assert not upward, f"{path.name} ({LAYER_NAMES[importer]}) imports upward: {upward}"


def test_every_module_has_a_layer() -> None:
    for path in MODULES:
        _layer(_module_name(path))


def test_the_check_catches_an_upward_import(tmp_path: Path) -> None:
    engine = tmp_path / "engine.py"
    engine.write_text("from vrom.vault import Vault\nimport vrom.store\n", encoding="utf-8")
    names = [name for _, name in _imports(engine)]
    assert "vrom.vault" in names and _layer("vrom.vault") == FACADES > _layer("vrom.search.x")  # type: ignore[operator]


def test_no_module_outside_the_store_names_a_backend_or_runs_sql() -> None:
    offenders = []
    for path in MODULES:
        if "store" in path.relative_to(SOURCE).parts:
            continue
        for _, name in _imports(path):
            if name.startswith(("vrom.store.sqlite", "vrom.store.factory")):
                offenders.append(f"{path.name}: {name}")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name == "sqlite3" for a in node.names):
                offenders.append(f"{path.name}: import sqlite3")
            if isinstance(node, ast.Name) and node.id == "SQLiteStore":
                offenders.append(f"{path.name}: SQLiteStore")
    assert offenders == []


def test_only_the_settings_module_reads_the_environment() -> None:
    readers = []
    for path in MODULES:
        if path.name == "settings.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("environ", "getenv")
                and isinstance(node.value, ast.Name)
                and node.value.id == "os"
            ):
                readers.append(f"{path.relative_to(SOURCE)}:{node.lineno}")
    assert readers == []
