"""``vrom export``: the vault's store as tables for DuckDB, in a DuckDB file or Parquet files.

It opens the vault as every vault command does (``--vault``, ``--db``, or the default), calls
`vrom.vault.Vault.export`, and prints what changed since the export ``OUT`` held, or the
`vrom.results.ExportSummary` with ``--json``.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from vrom.cli.global_options import GLOBAL_OPTIONS, add_global_options
from vrom.cli.output import print_json
from vrom.cli.vault_options import open_vault, where
from vrom.export import FORMATS
from vrom.results import ExportSummary


def format_export(summary: ExportSummary) -> str:
    """Return one line saying what an export wrote and what changed since the last one."""
    how = "incremental" if summary.incremental else "full"
    rows = ", ".join(f"{count:,} {table}" for table, count in summary.tables.items())
    return (
        f"exported {summary.notes:,} notes to {summary.out} ({summary.format}, {how}):"
        f" {summary.changed:,} changed, {summary.added:,} added, {summary.removed:,} removed,"
        f" {summary.unchanged:,} unchanged; {rows} in {summary.seconds:.2f} s"
    )


def _export(args: argparse.Namespace, out: TextIO) -> int:
    with open_vault(args) as vault:
        summary = vault.export(args.out, args.format, vectors=args.vectors, full=args.full)
    if args.json:
        print_json(summary, out, where(vault))
        return 0
    if summary.note:
        out.write(f"note: {summary.note}\n")
    out.write(format_export(summary) + "\n")
    return 0


def add_export_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``vrom export`` to the CLI's subcommands."""
    help_text = (
        "Export the vault for analytics: notes, chunks, links, tags, fields, memories (and "
        "vectors) as a DuckDB file or a folder of Parquet files; again to the same OUT, only "
        "what changed is read again."
    )
    sub = commands.add_parser("export", help=help_text, description=help_text)
    sub.set_defaults(handler=_export, vector_encoding=None)
    add_global_options(sub, GLOBAL_OPTIONS)
    sub.add_argument("out", metavar="OUT", help="the DuckDB file or Parquet folder to write")
    sub.add_argument(
        "--format",
        choices=FORMATS,
        default=None,
        help="parquet (a folder: one file per table and manifest.json) or duckdb (one file);"
        " default: duckdb when OUT ends in .duckdb or .db, else parquet",
    )
    sub.add_argument(
        "--vectors",
        action="store_true",
        help="include the chunk vectors (FLOAT[], with the model's fingerprint id)",
    )
    sub.add_argument(
        "--full",
        action="store_true",
        help="read and write everything again (and replace an export of another vault)",
    )
