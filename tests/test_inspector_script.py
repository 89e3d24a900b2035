"""A third-party MCP client (the official MCP Inspector CLI) lists and calls vrom's tools.

Runs ``scripts/mcp_inspector.sh`` when ``npx`` is on PATH and the pinned Inspector is in npm's
cache or the registry answers; skips (saying why) otherwise.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "mcp_inspector.sh"


def _pinned_inspector() -> str:
    match = re.search(r'INSPECTOR="\$\{INSPECTOR:-([^}]+)\}"', SCRIPT.read_text(encoding="utf-8"))
    assert match, "the script pins the Inspector's version"
    return match.group(1)


def _inspector_unavailable(package: str) -> str | None:
    """Return why the Inspector cannot run here (None when it can)."""
    if shutil.which("bash") is None:
        return "bash is not on PATH"
    npx, npm = shutil.which("npx"), shutil.which("npm")
    if npx is None or npm is None:
        return "npx (Node.js) is not on PATH"
    try:
        cached = subprocess.run(
            [npx, "--no", "--", package, "--version"], capture_output=True, timeout=120
        )
        if cached.returncode == 0:
            return None
        online = subprocess.run(
            [npm, "view", package, "version"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"npx/npm did not answer: {exc}"
    if online.returncode != 0 or not online.stdout.strip():
        return f"{package} is neither in npm's cache nor reachable in the registry"
    return None


def test_the_script_pins_an_inspector_version() -> None:
    assert re.fullmatch(r"@modelcontextprotocol/inspector@\d+\.\d+\.\d+", _pinned_inspector())


@pytest.mark.slow
def test_mcp_inspector_lists_and_calls_vault_search() -> None:
    package = _pinned_inspector()
    reason = _inspector_unavailable(package)
    if reason is not None:
        pytest.skip(reason)
    env = dict(os.environ)
    env.pop("VROM_EMBEDDER", None)  # the script's default: the built-in model, as a user runs it
    result = subprocess.run(
        ["bash", str(SCRIPT)], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert '"name": "vault_search"' in result.stdout
    assert "== ok:" in result.stdout and ".md" in result.stdout
