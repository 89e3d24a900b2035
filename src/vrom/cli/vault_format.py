"""How the vault commands print their results as text (``--json`` prints them as JSON instead).

A note's path is printed through `shown_path`, so a name holding control or bidirectional
characters shows as it is (``bidi \\u202egnp.md``), and ``get-note`` takes it back as printed;
JSON keeps the real name.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from vrom.cli.output import score_label, styler
from vrom.ingest.parse import shown_path
from vrom.results import (
    BackendInfo,
    Context,
    Hit,
    IndexSummary,
    Note,
    Related,
    SyncSummary,
    VaultStats,
    VectorInfo,
    rough_duration,
    vector_coverage,
)
from vrom.search.context import CHANGED_ON_DISK


def format_hits(hits: Sequence[Hit], out: TextIO) -> None:
    """Print search hits, best first, each with its excerpt, provenance and labelled score; a
    hit whose note is past its ``stale_after`` says since when it is stale, and one whose note
    changed on disk since it was indexed says so under it.

    A reranked search ends with the reranking's wall time (in ms).
    """
    if not hits:
        out.write("no matches\n")
        return
    style = styler(out)
    for rank, hit in enumerate(hits, start=1):
        where = f" › {hit.heading_path}" if hit.heading_path else ""
        score = style(f"({score_label(hit.score_kind, hit.score)})", "cyan")
        out.write(f"{style(f'{rank}. {shown_path(hit.path)}', 'bold')}{where}  {score}\n")
        out.write(f"   {hit.excerpt}\n")
        provenance = (
            f"   chunk {hit.chunk_id} · sha256 {hit.content_hash[:12]} · "
            f"relevance {hit.human_relevance_score:.2f}"
        )
        stale = f" · {style(f'stale since {hit.stale_after}', 'yellow')}" if hit.stale else ""
        out.write(style(provenance, "dim") + stale + "\n")
        if hit.fresh is False:
            out.write(style(f"   {CHANGED_ON_DISK}: run 'vrom index'", "yellow") + "\n")
    runtime = hits[0].ranking_runtime
    if runtime is not None:
        out.write(style(f"reranked in {runtime:.2f} ms", "dim") + "\n")


def format_summary(summary: IndexSummary) -> str:
    """Return one line saying what an index run did, how long it took, and where time went."""
    embedded = f", {summary.embedded:,} chunks embedded" if summary.embedded else ""
    parts = f"parse {summary.parse_seconds:.2f} s, keyword index {summary.index_seconds:.2f} s"
    if summary.embedded:
        rate = summary.embedded / summary.embed_seconds if summary.embed_seconds else 0.0
        parts += f", embedding {summary.embed_seconds:.2f} s at {rate:,.1f} chunks/s"
    return (
        f"indexed {summary.notes:,} notes, {summary.chunks:,} chunks in "
        f"{summary.seconds:.2f} s: {summary.added:,} added, {summary.changed:,} changed, "
        f"{summary.removed:,} removed, {summary.renamed:,} renamed, "
        f"{summary.unchanged:,} unchanged, {summary.skipped:,} skipped{embedded} ({parts})"
    )


def format_sync(summary: SyncSummary) -> str:
    """Return one line saying what a sync copied, from where to where (a database's store
    names its namespace), and how long it took."""
    return (
        f"synced {summary.notes:,} notes from {summary.source} to {summary.target}:"
        f" {summary.added:,} added, {summary.changed:,} changed, {summary.removed:,} removed,"
        f" {summary.unchanged:,} unchanged; {summary.vectors:,} vectors,"
        f" {summary.memories:,} memories in {summary.seconds:.2f} s"
        + "".join(f"; {w.path!r} {w.reason}" for w in summary.warnings)
    )


def format_note(note: Note, out: TextIO) -> None:
    """Print a note's title, metadata, tags, frontmatter and body."""
    modified = dt.datetime.fromtimestamp(note.modified_unix, dt.timezone.utc).isoformat(
        timespec="seconds"
    )
    out.write(
        f"{note.title}\n{shown_path(note.path)} · id {note.note_id} · {note.chunk_count} chunks · "
        f"modified {modified} · sha256 {note.content_hash[:12]}\n"
    )
    if note.tags:
        out.write("tags: " + ", ".join(f"#{t}" for t in note.tags) + "\n")
    if note.frontmatter:
        out.write("frontmatter: " + json.dumps(note.frontmatter, ensure_ascii=False) + "\n")
    out.write("\n" + note.body.rstrip() + "\n")


def format_related(related: Related, out: TextIO) -> None:
    """Print a note's links, backlinks, notes sharing its tags and notes similar in meaning."""
    out.write(f"{related.note.title} ({shown_path(related.note.path)})\n")
    out.write(f"\nlinks ({len(related.links)}):\n")
    for link in related.links:
        target = shown_path(link.resolved_path) if link.resolved_path else "(unresolved)"
        written = link.target + (f"#{link.heading}" if link.heading else "")
        alias = f" ({link.alias})" if link.alias else ""
        out.write(f"  {link.kind}: {written}{alias} → {target}\n")
    out.write(f"\nbacklinks ({len(related.backlinks)}):\n")
    for ref in related.backlinks:
        out.write(f"  {shown_path(ref.path)}\n")
    out.write(f"\nshared tags ({len(related.shared_tags)}):\n")
    for shared in related.shared_tags:
        out.write(
            f"  {shown_path(shared.note.path)}: " + ", ".join(f"#{t}" for t in shared.tags) + "\n"
        )
    if related.similar:
        out.write(f"\nsimilar in meaning ({len(related.similar)}):\n")
        for similar in related.similar:
            score = score_label("cosine", similar.score)
            out.write(f"  {shown_path(similar.note.path)} ({score})\n")


def format_context(context: Context, out: TextIO) -> None:
    """Print the LLM-ready context text, or ``no matches``."""
    out.write((context.text or "no matches") + "\n")


def format_stats(stats: VaultStats, out: TextIO) -> None:
    """Print the vault's counts and sizes, one per line."""
    last = (
        "never"
        if stats.last_indexed_unix is None
        else dt.datetime.fromtimestamp(stats.last_indexed_unix, dt.timezone.utc).isoformat(
            timespec="seconds"
        )
    )
    out.write(
        f"vault:       {stats.vault_root}\nstore:       {stats.store_path} "
        f"({stats.store_bytes / 1e6:.1f} MB)\nnotes:       {stats.notes:,}\n"
        f"chunks:      {stats.chunks:,}\nlinks:       {stats.links:,} "
        f"({stats.unresolved_links:,} unresolved)\ntags:        {stats.tags:,}\n"
        f"vectors:     {vector_coverage(stats.vectors, stats.chunks)} chunks embedded"
        f" ({stats.embedding_model or 'no model'})\n"
        f"last index:  {last}\n"
    )
    embedding = format_embedding(stats)
    if embedding:
        out.write(f"embedding:   {embedding}\n")


def format_embedding(stats: VaultStats) -> str | None:
    """Return how embedding goes (running: rate and time left; else what embeds the rest), or
    None when every chunk has a vector and no run is going."""
    status = stats.embedding
    if status is not None and status.running:
        rate = (
            f"{status.chunks_per_second:,.1f} chunks/s"
            if status.chunks_per_second
            else "measuring the rate"
        )
        left = (
            ""
            if status.eta_seconds is None
            else f", about {rough_duration(status.eta_seconds)} left"
        )
        return (
            f"running in process {status.pid}: {vector_coverage(status.vectors, status.chunks)}, "
            f"{rate}{left}"
        )
    if stats.embedding_model is None and stats.vectors == 0 and status is None:
        return None  # keyword only, or never embedded: the vectors line says so
    if stats.vectors < stats.chunks:
        return (
            f"not running: {stats.chunks - stats.vectors:,} chunks have no vector "
            "('vrom embed' or 'vrom index --background' embeds them)"
        )
    return None


def format_backend_info(info: BackendInfo, out: TextIO) -> None:
    """Print the store backend's name, schema version, write and vector modes, model,
    vector index settings, tokenizers and capabilities."""
    rows = {
        "backend": info.backend,
        "store": info.store_path,
        "schema version": info.schema_version,
        "index write mode": info.index_write_mode,
        "vector mode": info.vector_mode,
        "embedding model": _model(info.embedding_model, info.embedding_fingerprint),
        "vector index": _index_settings(info.vector_index),
        "fts tokenizers": ", ".join(info.fts_tokenizers),
        "capabilities": ", ".join(info.capabilities),
        **info.details,
    }
    for key, value in rows.items():
        out.write(f"{key + ':':<23}{value}\n")


def _decoded(info: VectorInfo) -> bool:
    """True when exact search scores stored int8 vectors as float32 (the mode's name says
    float32 beside an int8 dtype)."""
    return info.vector_mode == "exact-float32" and info.dtype == "int8"


def format_vector_info(info: VectorInfo, out: TextIO) -> None:
    """Print the vectors' mode, count, dims, dtype, model fingerprint, index settings and the
    graph file's state, one per line."""
    settings = info.index_settings
    stored = "" if info.bytes_per_vector is None else f" ({info.bytes_per_vector:,} bytes a vector)"
    rows = {
        "vector mode": info.vector_mode
        + (" (int8 vectors decoded to float32 to score)" if _decoded(info) else ""),
        "vectors": f"{vector_coverage(info.vectors, info.chunks)} chunks",
        "dims": "-" if info.dims is None else info.dims,
        "dtype": info.dtype + stored,
        "embedding model": _model(info.embedding_model, info.embedding_fingerprint),
        "fingerprint": _fingerprint(info.embedding_fingerprint),
        "vector index": _index_settings(settings),
        "graph file": _graph(info.graph, info.vector_mode),
        "memory vectors": f"{info.memory_vectors:,}",
    }
    for key, value in rows.items():
        out.write(f"{key + ':':<23}{value}\n")


def _model(model: str | None, fingerprint: Mapping[str, Any] | None) -> str:
    if model is None:
        return "none yet (no vector stored)"
    return model if fingerprint is None else f"{model}, fingerprint {fingerprint['id']}"


def _fingerprint(fingerprint: Mapping[str, Any] | None) -> str:
    if fingerprint is None:
        return "-"
    return ", ".join(f"{key} {value}" for key, value in fingerprint.items() if key != "id")


def _index_settings(settings: Mapping[str, Any]) -> str:
    if not settings:
        return "-"
    return (
        f"{settings['index']}, {settings['metric']}, HNSW from {settings['hnsw_threshold']:,}"
        f" vectors (M {settings['connectivity']}, ef_construction {settings['ef_construction']},"
        f" ef_search {settings['ef_search']}, {settings['graph_dtype']})"
    )


GRAPH_STATES = {
    "current": "current",
    "behind": "a few changes behind: the next search by meaning catches it up",
    "rebuild": "out of date: rebuilt from the store when a search needs it",
    "missing": "not built: built from the store when a search needs it",
    "none": "none: this store keeps no file beside it (in memory, encrypted or on a server)",
}


def _graph(graph: Mapping[str, Any], mode: str) -> str:
    state = GRAPH_STATES.get(graph["state"], str(graph["state"]))
    if graph["state"] == "missing" and mode != "usearch-hnsw":
        state = "not built: searches are exact below the HNSW threshold"
    if graph["path"] is None:
        return state
    size = "" if graph["bytes"] is None else f", {graph['bytes']:,} bytes"
    held = "" if graph["vectors"] is None else f", {graph['vectors']:,} vectors"
    return f"{graph['path']} ({state}{size}{held})"


def format_embedded(result: dict[str, int], out: TextIO) -> None:
    """Print how many chunks an embed run embedded."""
    out.write(f"embedded {result['embedded']:,} chunks\n")
