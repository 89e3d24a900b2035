"""``vrom models``: the embedders and rerankers vrom can run, whether each is installed, and
what it was measured to give; ``--measure`` times the installed ones on this machine."""

from __future__ import annotations

import argparse
import importlib.metadata
import statistics
import time
from dataclasses import dataclass, replace
from typing import Any, TextIO

from vrom.cli.global_options import add_global_options
from vrom.cli.output import print_json
from vrom.embed import Embedder
from vrom.embed.default import DEFAULT_MAX_TOKENS, MODEL_PACKAGE, default_fingerprint
from vrom.embed.rerank import NO_PACKAGED_RERANKER

DEFAULT_QUALITY = (
    "hybrid nDCG@10 through a collection: SciFact train 0.740, NFCorpus dev 0.333, LoCoMo dev"
    " 0.532; 10-17 chunks/s on 2 cores (docs/benchmarks.md)"
)
"""What the default model was measured to give, where docs/benchmarks.md says how."""
SAMPLE = (
    "The router's firmware is restored from a backup after a reset.",
    "Descale the office coffee machine every week and keep it clean.",
    "Vacation days are asked for a month ahead through the portal.",
    "A paper jam is cleared by opening the tray and pulling the sheet out.",
)
MEASURE_TEXTS = 64
CHUNK_CHARS = 1000  # a chunk's target size: what indexing embeds


@dataclass(frozen=True)
class ModelInfo:
    """One model vrom can run: its spec, what it is, and whether it is installed.

    Fields:
        spec: what ``--embedder`` or ``--reranker`` takes to use it.
        kind: ``embedder`` or ``reranker``.
        model: the model, or what the spec stands for.
        state: ``installed``, ``not installed`` (with what to install), ``bring your own`` or
            ``none packaged``.
        package: the package holding it (with its version when installed).
        details: dimensions, pooling, tokens, fingerprint, or what to give.
        measured: what it was measured to give (and where), or why there is nothing to use.
        chunks_per_s, query_ms: with ``--measure``: chunk-sized texts embedded a second, and
            the median time to embed one query, on this machine now.
    """

    spec: str
    kind: str
    model: str
    state: str
    package: str | None
    details: str
    measured: str
    chunks_per_s: float | None = None
    query_ms: float | None = None


def add_models_command(commands: Any) -> None:
    """Add the ``models`` command to the CLI's subcommands."""
    help_text = "List the embedding models and rerankers vrom can run, and what each gives."
    sub = commands.add_parser("models", help=help_text, description=help_text)
    sub.set_defaults(handler=_run_models)
    sub.add_argument(
        "--measure",
        action="store_true",
        help=f"embed {MEASURE_TEXTS} texts of a chunk's size, and queries, with each installed"
        " model: its speed on this machine now",
    )
    add_global_options(sub, ("json",))


def known_models() -> list[ModelInfo]:
    """Return every model vrom can run, packaged ones first."""
    fingerprint = default_fingerprint()
    try:
        version: str | None = importlib.metadata.version(MODEL_PACKAGE.replace("_", "-"))
    except importlib.metadata.PackageNotFoundError:
        version = None
    package = MODEL_PACKAGE.replace("_", "-")
    return [
        ModelInfo(
            "default",
            "embedder",
            fingerprint.describe(),
            "installed" if version is not None else f"not installed: pip install {package}",
            package if version is None else f"{package} {version}",
            f"{fingerprint.pooling} pooling, {DEFAULT_MAX_TOKENS} tokens, fingerprint"
            f" {fingerprint.digest()}",
            DEFAULT_QUALITY,
        ),
        ModelInfo(
            "onnx:DIR",
            "embedder",
            "a sentence-embedding model you bring",
            "bring your own",
            None,
            "DIR holds model.onnx and tokenizer.json; mean pooling",
            "yours to measure: vrom eval DATASET --embedder onnx:DIR",
        ),
        ModelInfo(
            "openai:MODEL[@URL]",
            "embedder",
            "an OpenAI-compatible /embeddings endpoint",
            "bring your own",
            None,
            "its key from $OPENAI_API_KEY",
            "yours to measure: vrom eval DATASET --embedder openai:MODEL",
        ),
        ModelInfo(
            "default",
            "reranker",
            "a packaged cross-encoder",
            "none packaged",
            None,
            "",
            NO_PACKAGED_RERANKER,
        ),
        ModelInfo(
            "onnx:DIR",
            "reranker",
            "a cross-encoder you bring",
            "bring your own",
            None,
            "DIR holds model.onnx and tokenizer.json (docs/models.md)",
            "yours to measure: vrom eval DATASET --reranker onnx:DIR",
        ),
    ]


def measured(info: ModelInfo) -> ModelInfo:
    """Return ``info`` with the installed default embedder's speed on this machine now."""
    if info.kind != "embedder" or info.spec != "default" or info.state != "installed":
        return info
    embedder = Embedder.default()
    try:
        texts = [_chunk(i) for i in range(MEASURE_TEXTS)]
        embedder.embed_documents(texts[:4])  # the session's first run is not the speed
        started = time.perf_counter()
        embedder.embed_documents(texts)
        rate = MEASURE_TEXTS / (time.perf_counter() - started)
        times = []
        for text in SAMPLE * 3:
            started = time.perf_counter()
            embedder.embed_query(text)
            times.append(time.perf_counter() - started)
    finally:
        embedder.close()
    return replace(
        info, chunks_per_s=round(rate, 1), query_ms=round(statistics.median(times) * 1000, 1)
    )


def _chunk(seed: int) -> str:
    """Return a text of a chunk's size (1,000 characters) made of the sample sentences."""
    words: list[str] = []
    while sum(len(word) + 1 for word in words) < CHUNK_CHARS:
        words.append(SAMPLE[(seed + len(words)) % len(SAMPLE)])
    return " ".join(words)[:CHUNK_CHARS]


def _run_models(args: argparse.Namespace, out: TextIO) -> int:
    models = known_models()
    if args.measure:
        models = [measured(info) for info in models]
    if args.json:
        print_json(models, out)
        return 0
    for kind in ("embedder", "reranker"):
        out.write(f"{kind}s\n")
        for info in (m for m in models if m.kind == kind):
            out.write(f"  {info.spec:<20} {info.model} ({info.state})\n")
            for line in (info.package, info.details, info.measured):
                if line:
                    out.write(f"  {'':<20} {line}\n")
            if info.chunks_per_s is not None:
                out.write(
                    f"  {'':<20} here, now: {info.chunks_per_s} chunks/s of"
                    f" {CHUNK_CHARS:,} characters, a query in {info.query_ms} ms\n"
                )
    return 0
