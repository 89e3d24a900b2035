"""``vrom format check|enrich [PATH]``: how a vault's notes stand against OKF v0.2, and the
frontmatter enrichment would add.

Each action opens the vault the way every other command does (``--vault``, ``--db`` or the
default vault), calls `vrom.Vault.check_format` or `vrom.Vault.enrich_format`, and prints the
notes that have something to say and a summary, or with ``--json`` the whole `FormatReport`.
Notes are read from disk, so a ``--vault`` folder that was never indexed (an OKF bundle just
downloaded) is checked as it is, with a store in memory and no model: nothing is written for it
but what ``--apply`` writes into its notes.
Like a linter, it exits with 1 when a note has an error (and 0 when none has), so a script or CI
can gate on it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TextIO

from vrom.cli.global_options import add_global_options, settings_of
from vrom.cli.output import print_json, styler
from vrom.cli.vault_options import announce, open_vault, where
from vrom.errors import NotFoundError
from vrom.ingest.parse import shown_path
from vrom.results import FormatReport, NoteFormat
from vrom.vault import Vault

FORMAT_NAMES = {
    "okf_concept": ("OKF concept", "OKF concepts"),
    "okf_index": ("index.md", "index.md"),
    "okf_log": ("log.md", "log.md"),
    "obsidian": ("note with frontmatter but no type", "notes with frontmatter but no type"),
    "markdown": ("plain Markdown note", "plain Markdown notes"),
}
"""How the summary names each format: (one, many)."""
EXIT_NOTE = (
    "exit status: 0 when no note has an error, 1 when one has (or vrom fails), 2 for a usage error"
)


def add_format_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``format`` and its actions (``check``, ``enrich``) to the CLI's subcommands."""
    help_text = (
        "Check notes against OKF v0.2 (the Open Knowledge Format), or enrich their frontmatter."
    )
    command = commands.add_parser(
        "format",
        help=help_text,
        description=help_text,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = command.add_subparsers(dest="format_action", metavar="ACTION", required=True)
    leaves = []
    for name, action_help in (
        (
            "check",
            "Report each note's format (OKF concept, index.md, log.md, note with frontmatter, "
            "plain Markdown) and what breaks OKF v0.2: errors (what it says MUST hold) and "
            "warnings (what it says SHOULD hold). Writes nothing.",
        ),
        (
            "enrich",
            "Suggest the OKF frontmatter each note lacks (type, title, description, tags, "
            "timestamp), from its content, its folder and its file; --apply writes it, merged "
            "into the frontmatter (every field already there is kept).",
        ),
    ):
        sub = actions.add_parser(name, help=action_help, description=action_help, epilog=EXIT_NOTE)
        sub.set_defaults(handler=_run, vector_encoding=None)
        sub.add_argument(
            "path",
            metavar="PATH",
            nargs="?",
            default=None,
            help="a note or folder in the vault (default: the whole vault)",
        )
        if name == "enrich":
            sub.add_argument(
                "--apply", action="store_true", help="write the suggested fields into the notes"
            )
        add_global_options(sub)
        leaves.append(sub)
    # every action's options in 'vrom format --help', so one page shows them all
    command.epilog = (
        "usage of each action:\n"
        + "".join(
            "  " + leaf.format_usage().removeprefix("usage: ").replace("\n     ", "\n")
            for leaf in leaves
        )
        + EXIT_NOTE
    )


def _run(args: argparse.Namespace, out: TextIO) -> int:
    with _vault_to_check(args) as vault:
        if args.format_action == "enrich":
            report = vault.enrich_format(args.path, apply=args.apply)
        else:
            report = vault.check_format(args.path)
    if args.json:
        print_json(report, out, where(vault))
    else:
        format_report(report, out)
    return 1 if report.errors else 0


def _vault_to_check(args: argparse.Namespace) -> Vault:
    """Return the vault the arguments name; a ``--vault`` folder never indexed, with a store in
    memory and no model (a check reads the notes from disk)."""
    try:
        return open_vault(args)
    except NotFoundError:
        if args.vault is None or args.db:  # nothing names the folder, or a store was named
            raise
        vault = Vault.open(
            args.vault,
            args.state_dir,
            embedder=None,
            database_url=":memory:",
            settings=settings_of(args),
        )
        announce(vault)
        return vault


def format_report(report: FormatReport, out: TextIO) -> None:
    """Print each note that has an error, a warning or (enrich) a field to add, then a summary."""
    style = styler(out)
    for note in report.notes:
        if note.errors or note.warnings or note.enrichment:
            _note(note, out, style)
    counts = ", ".join(
        f"{count:,} {FORMAT_NAMES.get(kind, (kind, kind))[count != 1]}"
        for kind, count in report.formats.items()
        if count
    )
    checked = len(report.notes)
    where_text = f" in {shown_path(report.scope)}" if report.scope else ""
    summary = (
        f"{checked:,} note{'s' if checked != 1 else ''}{where_text} checked against OKF"
        f" v{report.okf_version}{': ' + counts if counts else ''}; {_count(report.errors, 'error')},"
        f" {_count(report.warnings, 'warning')}"
    )
    out.write(style(summary, "red" if report.errors else "bold") + "\n")
    if report.action == "enrich":
        if report.applied:
            line = f"enriched {_count(report.enriched, 'note')}"
            failed = report.enrichable - report.enriched
            line += f"; {_count(failed, 'note')} not written (see its warning)" if failed else ""
        elif report.enrichable:
            line = (
                f"{_count(report.enrichable, 'note')} can be enriched:"
                " run again with --apply to write the fields"
            )
        else:
            line = "nothing to enrich"
        out.write(line + "\n")


def _note(note: NoteFormat, out: TextIO, style: Callable[[str, str], str]) -> None:
    out.write(f"{style(shown_path(note.path), 'bold')}  {style(note.format, 'dim')}\n")
    for issue in note.errors:
        out.write(f"  {style('error', 'red')} {issue.code}: {issue.message}\n")
    for issue in note.warnings:
        out.write(f"  {style('warning', 'yellow')} {issue.code}: {issue.message}\n")
    verb = "added" if note.enriched else "add"
    for field in note.enrichment:
        value = ", ".join(field.value) if isinstance(field.value, list) else field.value
        out.write(
            f"  {style(verb, 'cyan')} {field.field}: {value}  {style(f'({field.source})', 'dim')}\n"
        )


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'' if number == 1 else 's'}"
