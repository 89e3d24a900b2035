"""One embedding run per store, its progress readable by others, and ``vrom index --background``.

The claim and the progress file are tested in process; the CLI end to end, as a user runs it:
``vrom index --background`` returns once the keyword index is current, a detached ``vrom
embed`` fills the vectors, ``vrom stats`` shows its progress, and a killed run resumes without
embedding a chunk twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from vector_log import vector_writes

from vrom import Embedder, Vault
from vrom._background_embedding import BackgroundEmbedding
from vrom.cli.vault_format import format_embedding
from vrom.ingest.embed_job import EmbeddingBusy, EmbeddingClaim, claimed, embedding_status
from vrom.results import EmbeddingStatus, VaultStats

TIMEOUT = 60


def _write_notes(root: Path, count: int) -> Path:
    root.mkdir()
    for i in range(count):
        (root / f"note {i:04d}.md").write_text(
            f"# Note {i}\n\nThe walrus {i % 7} swims near harbour {i % 13}.\n", encoding="utf-8"
        )
    return root


@pytest.fixture
def vault(tmp_path: Path) -> Iterator[Vault]:
    root = _write_notes(tmp_path / "vault", 40)
    with Vault.open(root, tmp_path / "state", embedder=Embedder.fake(16)) as opened:
        opened.index(embed=False)
        yield opened


def test_one_claim_at_a_time_and_others_see_it(vault: Vault, tmp_path: Path) -> None:
    assert embedding_status(vault.store) is None, "no run yet, nothing to report"
    with Vault.open(vault.root, tmp_path / "state", embedder=None) as other:
        with claimed(vault.store) as claim:
            with pytest.raises(EmbeddingBusy, match=f"process {os.getpid()} is embedding"):
                EmbeddingClaim.take(other.store)
            claim.report(10, 40, 10, final=False)
            status = embedding_status(other.store)
            assert status is not None and status.running and status.pid == os.getpid()
            assert (status.vectors, status.chunks) == (10, 40)
        status = embedding_status(other.store)
        assert status is not None and not status.running and status.eta_seconds is None
        EmbeddingClaim.take(other.store).release()  # free again once released


def test_the_progress_file_has_a_measured_rate_and_time_left(vault: Vault) -> None:
    with claimed(vault.store) as claim:
        claim.report(0, 100, 0, final=True)  # the model loads: no rate yet
        claim.report(20, 100, 20, final=True)  # the first batch starts the clock
        time.sleep(0.2)
        claim.report(40, 100, 40, final=True)
        # final=True writes at once; the file says whether the claim is still held
        status = embedding_status(vault.store)
        assert status is not None and status.running
        assert status.chunks_per_second is not None and 0 < status.chunks_per_second <= 100
        assert status.eta_seconds is not None
        assert status.eta_seconds == pytest.approx(60 / status.chunks_per_second, rel=0.2)


def test_embedding_a_store_another_run_holds_is_refused_and_index_says_so(
    vault: Vault, tmp_path: Path
) -> None:
    with Vault.open(vault.root, tmp_path / "state", embedder=Embedder.fake(16)) as other:
        with claimed(other.store):
            with pytest.raises(EmbeddingBusy):
                vault.embed()
            summary = vault.index(force=True)
            assert summary.embedded == 0 and summary.not_embedded is not None
            assert "is embedding this store" in summary.not_embedded
        assert vault.embed() == vault.stats().chunks
        assert vault.index(force=True).not_embedded is None


def test_a_worker_waits_for_another_run_then_finishes_the_rest(
    vault: Vault, tmp_path: Path
) -> None:
    logs: list[str] = []
    with Vault.open(vault.root, tmp_path / "state", embedder=None) as other:
        claim = EmbeddingClaim.take(other.store)
        claim.report(5, 40, 5, final=True)
        worker = BackgroundEmbedding(vault.root, tmp_path / "state", Embedder.fake(16), logs.append)
        worker.start()
        try:
            deadline = time.monotonic() + TIMEOUT
            while worker.progress().other_process is None and time.monotonic() < deadline:
                time.sleep(0.02)
            waiting = worker.progress()
            assert waiting.running and waiting.other_process == os.getpid()
            assert waiting.vectors == 5, "it mirrors the other run's progress"
            assert vault.stats().vectors == 0, "and writes nothing while the other run holds it"
        finally:
            claim.release()
        worker.join(TIMEOUT)
    done = worker.progress()
    assert not done.running and done.error is None and done.other_process is None
    assert vault.stats().vectors == vault.stats().chunks
    assert any("is embedding this vault" in line for line in logs)


def _stats(
    vectors: int, chunks: int, status: EmbeddingStatus | None, model: str | None = "fake"
) -> VaultStats:
    return VaultStats("/v", "/s", 1, chunks, 0, 0, 0, 0, None, {}, vectors, model, status)


def test_stats_show_the_rate_and_time_left_or_what_embeds_the_rest() -> None:
    running = EmbeddingStatus(True, 42, 2368, 24096, 2000, 14.25, 1244.0, time.time())
    assert format_embedding(_stats(2368, 24096, running)) == (
        "running in process 42: 2,368 / 24,096 (10%), 14.2 chunks/s, about 21 min left"
    )
    measuring = EmbeddingStatus(True, 42, 0, 100, 0, None, None, time.time())
    assert format_embedding(_stats(0, 100, measuring)) == (
        "running in process 42: 0 / 100 (0%), measuring the rate"
    )
    stopped = EmbeddingStatus(False, 42, 50, 100, 50, 10.0, None, time.time())
    assert "not running: 50 chunks have no vector" in (
        format_embedding(_stats(50, 100, stopped)) or ""
    )
    assert format_embedding(_stats(100, 100, stopped)) is None
    assert format_embedding(_stats(0, 100, None, None)) is None, "keyword only: nothing to say"
    assert "not running: 100 chunks" in (format_embedding(_stats(0, 100, None)) or "")


# -- the CLI, end to end -----------------------------------------------------------------------


def _vrom(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VROM_STATE_DIR": str(tmp_path / "state")}
    env.pop("VROM_VAULT", None)
    return subprocess.run(
        [sys.executable, "-m", "vrom", "--state-dir", str(tmp_path / "state"), *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
        check=False,
    )


def _status(tmp_path: Path, root: Path, embedder: str) -> dict[str, Any]:
    done = _vrom(tmp_path, "--embedder", embedder, "stats", "--vault", str(root), "--json")
    assert done.returncode == 0, done.stderr
    stats: dict[str, Any] = json.loads(done.stdout)
    return stats


def _wait(tmp_path: Path, root: Path, embedder: str, until: Any) -> dict[str, Any]:
    deadline = time.monotonic() + TIMEOUT
    while True:
        stats = _status(tmp_path, root, embedder)
        if until(stats) or time.monotonic() > deadline:
            return stats
        time.sleep(0.2)


def _kill(pid: int | None) -> None:
    if pid:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


class GatedEmbeddings:
    """A real OpenAI-compatible embeddings server on 127.0.0.1 that answers the first batch of
    documents at once and holds every later one until `release`: a background run is then
    under way for as long as a test needs, however slow the machine (queries and the model's
    one-text probe are never held)."""

    DIMS = 16

    def __init__(self) -> None:
        self.holding = threading.Event()  # a batch after the first is waiting
        self.failing = False
        self._gate = threading.Event()
        self._lock = threading.Lock()
        self._batches = 0
        gated = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                texts = body["input"]
                if len(texts) > 1:
                    with gated._lock:
                        later, gated._batches = gated._batches > 0, gated._batches + 1
                    if later:
                        gated.holding.set()
                        gated._gate.wait()
                        if gated.failing:
                            self._answer(400, {"error": {"message": "the model was unloaded"}})
                            return
                data = [
                    {"object": "embedding", "index": i, "embedding": _hashed(text, gated.DIMS)}
                    for i, text in enumerate(texts)
                ]
                self._answer(200, {"object": "list", "model": body["model"], "data": data})

            def _answer(self, status: int, payload: dict[str, Any]) -> None:
                out = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        host, port = self._httpd.server_address[:2]
        self.spec = f"openai:gated@http://{host!s}:{port}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def release(self, *, fail: bool = False) -> None:
        """Answer the held batches (with a refusal the client does not retry, if ``fail``)."""
        self.failing = fail
        self._gate.set()

    def close(self) -> None:
        self.release()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


def _hashed(text: str, dims: int) -> list[float]:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return [(digest[i % len(digest)] - 127.5) / 10.0 for i in range(dims)]


@pytest.fixture
def gated() -> Iterator[GatedEmbeddings]:
    server = GatedEmbeddings()
    yield server
    server.close()


def test_index_background_returns_at_once_and_embeds_in_a_detached_process(
    tmp_path: Path, gated: GatedEmbeddings
) -> None:
    root = _write_notes(tmp_path / "vault", 200)
    model = gated.spec
    done = _vrom(tmp_path, "--embedder", model, "index", str(root), "--background")
    assert done.returncode == 0, done.stderr
    assert "embedding 200 chunks in the background" in done.stderr
    assert gated.holding.wait(TIMEOUT), "the detached run asked for its second batch"
    early = _status(tmp_path, root, model)
    pid = early["embedding"]["pid"] if early["embedding"] else None
    try:
        assert early["embedding"]["running"], "held: it is running while the test looks"
        assert early["chunks"] == 200 and early["vectors"] < 200, "index returned before vectors"
        found = _vrom(tmp_path, "--embedder", model, "search", "walrus", "--vault", str(root))
        assert found.returncode == 0 and "note " in found.stdout
        twice = _vrom(tmp_path, "--embedder", model, "embed", "--vault", str(root))
        assert twice.returncode == 1 and "is embedding this store" in twice.stderr
        again = _vrom(tmp_path, "--embedder", model, "index", str(root), "--background")
        assert "is embedding this vault already" in again.stderr
        assert _status(tmp_path, root, model)["embedding"]["running"], "checked while it ran"
        gated.release()
        final = _wait(
            tmp_path, root, model, lambda s: s["embedding"] and not s["embedding"]["running"]
        )
    finally:
        _kill(pid)
    assert final["vectors"] == 200 and final["embedding"]["embedded"] == 200
    assert final["embedding"]["chunks_per_second"] > 0
    assert vector_writes(final["store_path"]) == 200, "no chunk was embedded twice"
    text = _vrom(tmp_path, "--embedder", model, "stats", "--vault", str(root)).stdout
    assert "embedding:" not in text, "complete: nothing more to say"


def test_the_background_embedding_log_says_when_a_run_starts_ends_and_fails(
    tmp_path: Path, gated: GatedEmbeddings
) -> None:
    root = _write_notes(tmp_path / "vault", 20)
    done = _vrom(tmp_path, "--embedder", "fake:16", "index", str(root), "--background")
    assert done.returncode == 0, done.stderr
    final = _wait(
        tmp_path, root, "fake:16", lambda s: s["embedding"] and not s["embedding"]["running"]
    )
    log = Path(final["store_path"] + ".embedding.log")
    lines = log.read_text(encoding="utf-8").splitlines()
    assert lines[0].endswith(f"vrom embed started for {root}: 20 chunks to embed"), lines
    assert f"vrom: embedding 20 chunks of {root}" in lines
    assert lines[-1] == "embedded 20 chunks", lines

    other = _write_notes(tmp_path / "other", 200)  # four batches: the second is refused
    done = _vrom(tmp_path, "--embedder", gated.spec, "index", str(other), "--background")
    assert done.returncode == 0, done.stderr
    assert gated.holding.wait(TIMEOUT)
    gated.release(fail=True)
    stopped = _wait(
        tmp_path, other, gated.spec, lambda s: s["embedding"] and not s["embedding"]["running"]
    )
    assert stopped["vectors"] < 200
    text = Path(stopped["store_path"] + ".embedding.log").read_text(encoding="utf-8")
    *_, last = text.splitlines()
    assert last.startswith("vrom: error: ") and "the model was unloaded" in last, text
    assert "Traceback" not in text


def test_a_killed_background_run_resumes_where_it_stopped(tmp_path: Path) -> None:
    root = _write_notes(tmp_path / "vault", 200)
    slow = "fake:16:40"  # 8 s for the vault's 200 chunks: time to kill it half way
    assert _vrom(tmp_path, "--embedder", slow, "index", str(root), "--background").returncode == 0
    part = _wait(tmp_path, root, slow, lambda s: s["vectors"] >= 64)
    pid = part["embedding"]["pid"] if part["embedding"] else None
    _kill(pid)
    stopped = _wait(tmp_path, root, slow, lambda s: not s["embedding"]["running"])
    assert 0 < stopped["vectors"] < 200, stopped
    shown = _vrom(tmp_path, "--embedder", slow, "stats", "--vault", str(root)).stdout
    assert "not running" in shown and "vrom index --background" in shown
    resumed = _vrom(tmp_path, "--embedder", slow, "index", str(root), "--background")
    assert f"embedding {200 - stopped['vectors']} chunks" in resumed.stderr
    final = _wait(
        tmp_path, root, slow, lambda s: s["vectors"] == 200 and not s["embedding"]["running"]
    )
    _kill(final["embedding"]["pid"] if final["embedding"]["running"] else None)
    assert final["vectors"] == 200
    assert vector_writes(final["store_path"]) == 200, "the resumed run redid nothing"


def test_index_background_without_an_embedder_is_keyword_only(tmp_path: Path) -> None:
    root = _write_notes(tmp_path / "vault", 5)
    done = _vrom(tmp_path, "--embedder", "none", "index", str(root), "--background")
    assert done.returncode == 0 and "background" not in done.stderr
    assert _status(tmp_path, root, "none")["embedding"] is None


def test_a_thread_and_a_claim_in_one_process_still_exclude_each_other(vault: Vault) -> None:
    # flock is per open file: the MCP server's worker thread and a re-index in the same
    # process must not both write vectors
    taken = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with claimed(vault.store):
            taken.set()
            release.wait(TIMEOUT)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert taken.wait(TIMEOUT)
        with pytest.raises(EmbeddingBusy):
            EmbeddingClaim.take(vault.store)
    finally:
        release.set()
        thread.join(TIMEOUT)
