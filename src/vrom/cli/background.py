"""``vrom index --background``: embed in a detached ``vrom embed`` once the keyword index is
current, so the vault is searchable by keyword at once and by meaning as vectors arrive.

The detached process takes the store's embedding claim (`vrom.ingest.embed_job`): one writer
at a time, progress in ``<store>.embedding.json`` for ``vrom stats``, its output appended to
``<store>.embedding.log`` (a line when it starts, its progress every few seconds, how many
chunks it embedded, or the one-line error that stopped it). A killed run keeps every committed
batch; the next resumes.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

from vrom.ingest.embed_job import LOG_SUFFIX
from vrom.vault import AUTO, Vault


def embed_in_background(
    vault: Vault, embedder: str, vector_encoding: str | None, state_dir: str | None
) -> str | None:
    """Start ``vrom embed`` for the vault in a detached process; return what to tell the user.

    None when there is nothing to start: keyword only, or every chunk has a vector. When
    another process is embedding the store already, no second one starts.
    """
    if not vault.corpus.embedding_configured:
        return None
    stats = vault.stats()
    running = stats.embedding is not None and stats.embedding.running
    if running:
        pid = stats.embedding.pid if stats.embedding is not None else None
        return f"process {pid} is embedding this vault already: 'vrom stats' shows its progress"
    missing = stats.chunks - stats.vectors
    if missing <= 0:
        return None
    log = vault.store.sidecar(LOG_SUFFIX)
    if log is None:
        return (
            "this store cannot be embedded in the background (no file beside it): run 'vrom embed'"
        )
    command = [sys.executable, "-m", "vrom"]
    if embedder != AUTO:  # "auto" is read again from the same environment
        command += ["--embedder", embedder]
    if state_dir:
        command += ["--state-dir", state_dir]
    command += ["embed", "--vault", str(vault.root)]
    if vector_encoding:
        command += ["--vector-encoding", vector_encoding]
    # its own session (process group on Windows): closing the terminal does not stop it
    detached: dict[str, Any]
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        detached = {
            "creationflags": subprocess.DETACHED_PROCESS | subprocess.CREATE_NEW_PROCESS_GROUP
        }
    else:
        detached = {"start_new_session": True}
    with open(log.path, "ab") as output:
        started = time.strftime("%Y-%m-%d %H:%M:%S%z")
        output.write(
            f"{started} vrom embed started for {vault.root}: {missing:,} chunks to embed\n".encode()
        )
        output.flush()
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, **detached
        )
    return (
        f"embedding {missing:,} chunks in the background (process {process.pid}, log "
        f"{log.path}): searches use vectors as they arrive; 'vrom stats' shows progress"
    )
