"""Run the real ``vrom`` CLI in a subprocess, as a user would: this Python, the given state
folder and model, and no vault or state inherited from the developer's environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

INHERITED = ("VROM_VAULT", "VAULT_ROOT", "VROM_STATE_DIR", "VROM_DATABASE_URL")


def run_vrom(
    state: Path,
    *args: str,
    embedder: str = "none",
    cwd: Path | None = None,
    timeout: float = 120,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m vrom ARGS`` with ``state`` as its state folder (and ``env`` set too);
    whatever it exits with, it must not print a traceback."""
    given = env or {}
    env = {k: v for k, v in os.environ.items() if k not in INHERITED}
    env.update(VROM_STATE_DIR=str(state), VROM_EMBEDDER=embedder, PYTHONIOENCODING="utf-8")
    env.update(given)
    done = subprocess.run(
        [sys.executable, "-m", "vrom", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        cwd=cwd,
        timeout=timeout,
        check=False,
    )
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    return done
