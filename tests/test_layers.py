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
    "queryable": FACADES,  # the one read half every facade stands on
    "seed_views": FACADES,  # the seeds' shapes, thin views over the read half
    "vault": FACADES,
    "_vault_files": FACADES,
    "_vault_notes": FACADES,
    "_vault_format": FACADES,
    "_vault_sync": FACADES,
    "_vault_writes": FACADES,
    "_background_embedding": FACADES,
    "collection": FACADES,
    "documents": FACADES,
    "agent_memory": FACADES,
    "pack": FACADES,  # a cached pack opened read-only: what AgentMemory mounts
    "_pack_models": FACADES,
    "memories": FACADES,
    "_memory_results": FACADES,
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
    # user-facing embedder constructors (an OpenAI key); test_settings_once_... checks it
    "settings": BASE,
    "dates": BASE,
    "filters": BASE,  # the one filter grammar: the stores compile it, every face parses it
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


ENVIRONMENT_NAMES = ("environ", "environb", "getenv", "getenvb", "putenv", "unsetenv")
"""What of `os` reads (or writes) the environment."""
PURE_SETTINGS_FUNCTIONS = ("key_list",)
"""The functions of `vrom.settings` that read no environment (every other one does, as does
`Settings.from_environment`)."""
RESOLVING_CONSTRUCTORS = {
    # Embedder.openai(model) and Embedder.from_spec("openai:...") are constructors user code
    # calls itself, as it calls Vault.open: they look the API key up in the variable
    # ``api_key_env=`` names. The embedder binding the facades make is handed the key.
    ("embed/__init__.py", "openai"),
    ("embed/__init__.py", "from_spec"),
}


def _environment_readers(path: Path, relative: str) -> list[str]:
    """Return where ``path`` reads the environment itself (`os.environ`, `os.getenv`, ...)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ENVIRONMENT_NAMES
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ):
            found.append(f"{relative}:{node.lineno}: os.{node.attr}")
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            named = [a.name for a in node.names if a.name in ENVIRONMENT_NAMES]
            found += [f"{relative}:{node.lineno}: from os import {name}" for name in named]
    return found


def _resolver_calls(path: Path) -> list[tuple[int, str, ast.AST | None]]:
    """Return each call in ``path`` that reads settings from the environment (a function of
    `vrom.settings` but `PURE_SETTINGS_FUNCTIONS`, or `Settings.from_environment`): its line,
    its name and the function it is made in (None: at import)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    modules, functions = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "vrom":
            modules |= {a.asname or a.name for a in node.names if a.name == "settings"}
        elif isinstance(node, ast.ImportFrom) and node.module == "vrom.settings":
            functions |= {
                a.asname or a.name
                for a in node.names
                if a.name[0].islower() and a.name not in PURE_SETTINGS_FUNCTIONS
            }
    calls: list[tuple[int, str, ast.AST | None]] = []

    def reads(called: ast.expr) -> str | None:
        if isinstance(called, ast.Name) and called.id in functions:
            return called.id
        if not isinstance(called, ast.Attribute) or not isinstance(called.value, ast.Name):
            return None
        owner, name = called.value.id, called.attr
        if owner in modules and name[0].islower() and name not in PURE_SETTINGS_FUNCTIONS:
            return name
        return name if (owner, name) == ("Settings", "from_environment") else None

    def visit(node: ast.AST, function: ast.AST | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Call) and (name := reads(child.func)) is not None:
                calls.append((child.lineno, name, function))
            inner = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            visit(child, child if inner else function)

    visit(tree, None)
    return calls


def _takes_settings(function: ast.AST | None) -> bool:
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    arguments = function.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    return any(a.arg == "settings" for a in every)


def _settings_problems(path: Path, relative: str, layer: int | None) -> list[str]:
    """Return where module ``path`` (``relative`` to src/vrom, in ``layer``) reads settings
    from the environment where it may not: the faces anywhere; a facade only in a function
    that takes ``settings=`` (resolving only when not given, so an argument beats the
    environment); below the facades never."""
    if relative == "settings.py":
        return []
    problems = _environment_readers(path, relative)
    for line, name, function in _resolver_calls(path):
        where = getattr(function, "name", "<module>")
        if layer == FACES or (relative, where) in RESOLVING_CONSTRUCTORS:
            continue
        if layer == FACADES and _takes_settings(function):
            continue
        problems.append(f"{relative}:{line}: {name}() in {where}")
    return problems


def test_settings_once_only_the_faces_resolve_them_and_no_engine_reads_the_environment() -> None:
    """Issue 28 item 6: the environment is read by `vrom.settings` alone, asked by the faces
    (CLI, MCP server, installers) and by the facades' ``open`` methods and constructors that
    take ``settings=``; every module below them is handed what it needs."""
    problems = []
    for path in MODULES:
        relative = str(path.relative_to(SOURCE))
        problems += _settings_problems(path, relative, _layer(_module_name(path)))
    assert problems == []


def test_the_settings_check_catches_an_engine_that_reads_the_environment(tmp_path: Path) -> None:
    engine = tmp_path / "engine.py"
    engine.write_text(
        "import os\nfrom os import getenv\nfrom vrom import settings\n"
        "from vrom.settings import Settings\n"
        "def k() -> str | None:\n    return os.environ.get('X') or settings.api_key()\n"
        "def s(settings: object = None) -> object:\n    return Settings.from_environment()\n",
        encoding="utf-8",
    )
    facade = tmp_path / "facade.py"
    facade.write_text(
        "from vrom.settings import Settings\n"
        "def open(settings: object = None) -> object:\n    return Settings.from_environment()\n"
        "def search() -> object:\n    return Settings.from_environment()\n",
        encoding="utf-8",
    )
    found = [p.split(": ", 1)[1] for p in _settings_problems(engine, "search/x.py", ENGINES)]
    assert found == [
        "from os import getenv",
        "os.environ",
        "api_key() in k",
        "from_environment() in s",
    ]
    found = [p.split(": ", 1)[1] for p in _settings_problems(facade, "x.py", FACADES)]
    assert found == ["from_environment() in search"]
    assert _settings_problems(facade, "cli/x.py", FACES) == []


SHARED_SQL = sorted((SOURCE / "store").glob("sql_*.py"))
"""The store's roles written once over a dialect (`vrom.store.sql_dialect`)."""


def test_the_store_written_once_names_no_driver_nor_backend() -> None:
    assert len(SHARED_SQL) >= 5, SHARED_SQL
    offenders = []
    for path in SHARED_SQL:
        name = path.name
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for imported in names:
                if imported.split(".")[0] in ("sqlite3", "psycopg", "psycopg_pool") or (
                    imported.startswith(("vrom.store.sqlite", "vrom.store.postgres"))
                ):
                    offenders.append(f"{name}: {imported}")
    assert offenders == []


def test_the_store_roles_carry_no_facade_words() -> None:
    from vrom.store import DocumentStore, MemoryStore

    facade_words = ("links_of", "links_to_keys", "turns_before", "turns_after", "has_shared_source")
    assert [w for w in facade_words if hasattr(DocumentStore, w) or hasattr(MemoryStore, w)] == []
