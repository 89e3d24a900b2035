"""`vrom selftest`: check that vrom, the vault, the model and the MCP clients are set up to work.

`run_selftest` returns a `SelftestReport`: one `Check` per thing checked, each ``ok``,
``fail``, ``warn`` (worth knowing, not broken) or ``skip`` (not applicable: no embedder is
configured, a client is not installed), with a fix for anything that is not ok. The report is
``ok`` when no required check failed. Printing is the CLI's business.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from vrom import __version__
from vrom.embed import Embedder, resolve_embedder
from vrom.errors import VromError
from vrom.ingest.embedding import stored_fingerprint
from vrom.install.client_configs import (
    CLIENTS,
    DEFAULT_NAME,
    default_config_path,
    find_entry,
    parse_config,
)
from vrom.install.server_entry import entry_command, resolve_vault
from vrom.results import vector_coverage
from vrom.settings import EMBEDDER_ENV, Settings
from vrom.vault import AUTO, Vault

OK, FAIL, WARN, SKIP = "ok", "fail", "warn", "skip"
MIN_PYTHON = (3, 10)
_PROBE = "vrom keeps notes searchable with exact provenance"


@dataclass(frozen=True)
class Check:
    """One check: its ``name``, ``status`` (ok, fail, warn, skip), what was found, and the fix.

    ``fix`` says what to do about a check that is not ok (None when there is nothing to do); a
    check that is not ``required`` never fails the self-test.
    """

    name: str
    status: str
    detail: str
    fix: str | None = None
    required: bool = True


@dataclass(frozen=True)
class SelftestReport:
    """Every check, in the order it ran; ``ok`` when no required check failed."""

    checks: list[Check]
    ok: bool


def _python() -> Check:
    version = platform.python_version()
    if sys.version_info < MIN_PYTHON:
        return Check(
            "python", FAIL, f"Python {version} at {sys.executable}", "install Python 3.10 or newer"
        )
    return Check("python", OK, f"Python {version} at {sys.executable}")


def _vrom() -> Check:
    return Check("vrom", OK, f"vrom {__version__} from {Path(__file__).resolve().parent}")


def _mcp() -> Check:
    if importlib.util.find_spec("mcp") is None:
        return Check("mcp", FAIL, "the mcp package is not installed", "pip install 'vrom[mcp]'")
    try:
        importlib.import_module("mcp.server.mcpserver")
    except ImportError as exc:
        return Check(
            "mcp",
            FAIL,
            f"mcp {importlib.metadata.version('mcp')} has no MCPServer ({exc})",
            "pip install 'vrom[mcp]' (the MCP SDK 2.x)",
        )
    return Check("mcp", OK, f"mcp {importlib.metadata.version('mcp')}")


def _first_title(vault: Vault) -> str | None:
    states = vault.store.documents.states()
    if not states:
        return None
    doc = vault.store.documents.get(states[min(states)].document_id)
    return None if doc is None else doc.title


def _vault_checks(
    vault: str | os.PathLike[str] | None,
    state_dir: str | os.PathLike[str] | None,
    settings: Settings,
) -> tuple[list[Check], Path | None, str | None, str | None]:
    """Return the vault and store checks, the root, a query that should hit, the model (JSON)."""
    try:
        root = resolve_vault(vault, state_dir, settings)
        with Vault.open(root, state_dir, create=False, embedder=None, settings=settings) as opened:
            stats = opened.stats()
            problems = opened.store.integrity_problems()
            title = _first_title(opened)
            fingerprint = stored_fingerprint(opened.store)
    except VromError as exc:
        if vault is None:
            fix = "run 'vrom index PATH' on your vault, or pass --vault PATH"
        elif Path(vault).expanduser().is_dir():
            fix = f"run 'vrom index {Path(vault).expanduser().resolve()}'"
        else:
            fix = "check the path: --vault takes the vault's folder"
        return [Check("vault", FAIL, str(exc), fix)], None, None, None
    model = None if fingerprint is None else fingerprint.describe()
    checks = [
        Check(
            "vault",
            OK,
            f"{root}: {stats.notes:,} notes, {stats.chunks:,} chunks, "
            f"{stats.vectors:,} vectors ({model or 'keyword only'})",
        )
    ]
    if stats.notes == 0:
        checks[0] = Check(
            "vault", FAIL, f"{root} holds no notes", "add Markdown notes, then run 'vrom index'"
        )
    if problems:
        checks.append(
            Check(
                "store",
                FAIL,
                f"{stats.store_path}: " + "; ".join(problems[:3]),
                f"rebuild it: delete {Path(stats.store_path).parent} and run 'vrom index {root}'",
            )
        )
    else:
        checks.append(Check("store", OK, f"{stats.store_path} passes its integrity check"))
    if fingerprint is not None and stats.chunks:
        checks.append(_vectors_check(stats.vectors, stats.chunks, root))
    return checks, root, title, None if fingerprint is None else fingerprint.to_json()


def _vectors_check(vectors: int, chunks: int, root: Path) -> Check:
    coverage = vector_coverage(vectors, chunks)
    if vectors >= chunks:
        return Check("vectors", OK, f"{coverage} chunks embedded")
    return Check(
        "vectors",
        WARN,
        f"only {coverage} chunks embedded: searches by meaning miss the rest",
        f"run 'vrom --vault {root} embed' to finish embedding",
        required=False,
    )


def _embedder_check(
    spec: str | None, stored: str | None, settings: Settings
) -> tuple[Check, Embedder | None]:
    """Return the embedder check and the loaded embedder (None when keyword-only or broken)."""
    try:
        embedder, _ = resolve_embedder(
            spec or AUTO, settings.embedder_spec, api_key=settings.openai_api_key
        )
    except VromError as exc:
        return Check("embedder", FAIL, str(exc), f"fix --embedder or ${EMBEDDER_ENV}"), None
    if embedder is None:
        return (
            Check(
                "embedder",
                SKIP,
                "no embedder configured: keyword search only",
                f"set ${EMBEDDER_ENV}=default (or pass --embedder) for search by meaning",
                required=False,
            ),
            None,
        )
    name = embedder.fingerprint.describe()
    try:
        documents = embedder.embed_documents([_PROBE, _PROBE])
        query = embedder.embed_query(_PROBE)
        same = float(documents[0] @ documents[1])
        asked = float(query @ documents[0])
    except VromError as exc:
        embedder.close()
        return Check("embedder", FAIL, f"{name}: {exc}", "see the message; reinstall vrom"), None
    if documents.shape[1] != embedder.dim or abs(same - 1.0) > 1e-3 or asked < 0.5:
        embedder.close()
        return (
            Check(
                "embedder",
                FAIL,
                f"{name}: identical texts score {same:.4f} (document) and {asked:.4f} (query)",
                "the model gives inconsistent vectors: reinstall vrom or choose another model",
            ),
            None,
        )
    detail = f"{name}: round trip ok (cosine {same:.4f}; as a query {asked:.4f})"
    if stored is not None and stored != embedder.fingerprint.to_json():
        embedder.close()
        return (
            Check(
                "embedder",
                FAIL,
                f"{detail}, but the vault's vectors are from another model",
                "run 'vrom embed --rebuild', or choose the vault's model with --embedder",
            ),
            None,
        )
    return Check("embedder", OK, detail), embedder


def _search_check(
    root: Path | None,
    state_dir: str | os.PathLike[str] | None,
    title: str | None,
    embedder: Embedder | None,
    settings: Settings,
) -> Check:
    if root is None or title is None:
        return Check("search", SKIP, "needs an indexed vault with notes", required=False)
    query = " ".join(title.split()[:6])
    try:
        with Vault.open(
            root, state_dir, create=False, embedder=embedder, settings=settings
        ) as vault:
            hits = vault.search(query, k=3)
    except VromError as exc:
        return Check("search", FAIL, f"{query!r}: {exc}", "see the checks above")
    finally:
        if embedder is not None:
            embedder.close()
    if not hits:
        return Check(
            "search",
            FAIL,
            f"no hits for the title {query!r}",
            f"re-index from scratch: vrom index --force {root}",
        )
    return Check("search", OK, f"{len(hits)} hits for {query!r}, best: {hits[0].path}")


def _runs_vrom(command: list[str]) -> str | None:
    """Return why ``command``'s Python cannot import vrom and mcp (None when it can)."""
    if os.path.abspath(command[0]) == os.path.abspath(sys.executable) or command[1:3] != [
        "-m",
        "vrom",
    ]:
        return None
    try:
        probe = subprocess.run(
            [command[0], "-c", "import vrom, mcp"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if probe.returncode != 0:
        lines = probe.stderr.strip().splitlines()
        return lines[-1] if lines else f"exit code {probe.returncode}"
    return None


def _client_check(client: str, path: Path, name: str) -> Check:
    label = f"client {client}"
    fix = f"vrom install {client}"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Check(label, SKIP, f"no config at {path}", None, required=False)
    except (OSError, UnicodeDecodeError) as exc:
        return Check(label, FAIL, f"cannot read {path}: {exc}", "check the file's permissions")
    try:
        entry = find_entry(client, parse_config(path, text), name)
    except VromError as exc:
        return Check(label, WARN, str(exc), "fix the file by hand", required=False)
    if entry is None:
        return Check(label, WARN, f"{path} has no {name!r} server", fix, required=False)
    try:
        command = entry_command(client, entry)
    except VromError as exc:
        return Check(label, FAIL, f"{path}: {exc}", fix)
    program = command[0] if os.path.isabs(command[0]) else shutil.which(command[0])
    if program is None or not os.access(program, os.X_OK):
        return Check(label, FAIL, f"{path}: {command[0]} does not exist or cannot run", fix)
    vault = command[command.index("--vault") + 1] if "--vault" in command[:-1] else None
    if vault is not None and not Path(vault).is_dir():
        return Check(label, FAIL, f"{path}: its vault {vault} is not a folder", fix)
    problem = _runs_vrom([program, *command[1:]])
    if problem is not None:
        return Check(
            label,
            FAIL,
            f"{path}: {program} cannot import vrom and mcp ({problem})",
            f"{program} -m pip install 'vrom[mcp]', or {fix}",
        )
    return Check(label, OK, f"{path}: {' '.join(command)}")


def run_selftest(
    vault: str | os.PathLike[str] | None = None,
    *,
    state_dir: str | os.PathLike[str] | None = None,
    embedder: str | None = AUTO,
    clients: Mapping[str, Path] | None = None,
    name: str = DEFAULT_NAME,
    progress: Callable[[Check], None] | None = None,
    settings: Settings | None = None,
) -> SelftestReport:
    """Check Python, vrom, the vault and its store, the model, search, mcp and client configs.

    ``vault`` None means the vault vrom uses when none is named. ``embedder`` is a spec (or
    ``"auto"``: ``$VROM_EMBEDDER``, else the default model). ``clients`` maps client names to
    config files (default: each client's usual place); ``name`` is the server entry to look
    for. ``progress(check)`` is called as each check finishes. ``settings``: as for
    `vrom.Vault.open` (resolved from the environment when not given).
    """
    config = Settings.from_environment() if settings is None else settings
    checks: list[Check] = []

    def add(check: Check) -> None:
        checks.append(check)
        if progress is not None:
            progress(check)

    add(_python())
    add(_vrom())
    vault_checks, root, title, stored = _vault_checks(vault, state_dir, config)
    for check in vault_checks:
        add(check)
    model_check, model = _embedder_check(None if embedder == AUTO else embedder, stored, config)
    add(model_check)
    add(_search_check(root, state_dir, title, model, config))
    add(_mcp())
    configs = clients if clients is not None else {c: default_config_path(c) for c in CLIENTS}
    for client, path in configs.items():
        add(_client_check(client, Path(path), name))
    ok = not any(c.status == FAIL and c.required for c in checks)
    return SelftestReport(checks, ok)
