"""``vrom format check|enrich`` as a user runs it: the real CLI in a subprocess, exit codes like a
linter's (1 when a note has an error), a summary on stdout, ``--json``, and ``--apply``."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from vrom_cli import run_vrom

TIMEOUT = 120

CLEAN: dict[str, str | bytes] = {
    "index.md": "# Runbook\n\n* [Restart](restart.md) - How to restart the service.\n",
    "restart.md": "---\ntype: Runbook\ntitle: Restart\n---\n# Restart\n\nRun the script.\n",
}


def vrom(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_vrom(state, *args, timeout=TIMEOUT)


def test_a_clean_vault_exits_0_with_a_summary(
    write_vault: Callable[[dict[str, str | bytes]], Path], tmp_path: Path
) -> None:
    root = write_vault(CLEAN)
    state = tmp_path / "cli-state"
    assert vrom(state, "index", str(root)).returncode == 0
    done = vrom(state, "--vault", str(root), "format", "check")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "2 notes checked against OKF v0.2: 1 OKF concept, 1 index.md; 0 errors, 0 warnings\n"
    )


def test_errors_exit_1_name_each_note_and_json_has_the_report(
    write_vault: Callable[[dict[str, str | bytes]], Path], tmp_path: Path
) -> None:
    root = write_vault(
        {
            **CLEAN,
            "Journal/today.md": "# Today\n\nWe fixed the #pager alerts.\n",
            "log.md": "# History\n\n## yesterday\n- restarted\n",
        }
    )
    state = tmp_path / "cli-state"
    vrom(state, "index", str(root))
    done = vrom(state, "format", "check", "--vault", str(root))
    assert done.returncode == 1, done
    lines = done.stdout.splitlines()
    assert lines[:4] == [
        "Journal/today.md  markdown",
        "  error no_frontmatter: no frontmatter block: an OKF concept starts with YAML"
        " frontmatter holding its 'type'",
        "log.md  okf_log",
        "  error bad_log_date: line 3: log heading 'yesterday' is not an ISO 8601 date"
        " (YYYY-MM-DD)",
    ]
    assert lines[-1].startswith("4 notes checked against OKF v0.2") and "2 errors" in lines[-1]
    one = vrom(state, "--json", "--vault", str(root), "format", "check", "Journal")
    assert one.returncode == 1
    report = json.loads(one.stdout)
    assert report["scope"] == "Journal" and report["vault"] == str(root.resolve())
    assert [
        (n["path"], n["format"], [e["code"] for e in n["errors"]]) for n in report["notes"]
    ] == [("Journal/today.md", "markdown", ["no_frontmatter"])]
    missing = vrom(state, "--vault", str(root), "format", "check", "Nope")
    assert missing.returncode == 1 and missing.stderr.startswith("vrom: error: no note or folder")
    assert vrom(state, "--vault", str(root), "format", "lint").returncode == 2


def test_enrich_suggests_then_applies(
    write_vault: Callable[[dict[str, str | bytes]], Path], tmp_path: Path
) -> None:
    root = write_vault({**CLEAN, "alerts.md": "# Pager alerts\n\nWho gets paged, and when.\n"})
    state = tmp_path / "cli-state"
    vrom(state, "index", str(root))
    before = (root / "alerts.md").read_text()
    suggested = vrom(state, "--vault", str(root), "format", "enrich")
    assert suggested.returncode == 1, "the missing type is still an error"
    assert "  add type: Runbook  (sibling concepts)\n" in suggested.stdout
    assert "  add title: Pager alerts  (first heading)\n" in suggested.stdout
    assert suggested.stdout.endswith(
        "2 notes can be enriched: run again with --apply to write the fields\n"
    )
    assert (root / "alerts.md").read_text() == before
    applied = vrom(state, "--vault", str(root), "format", "enrich", "alerts.md", "--apply")
    assert applied.returncode == 0, applied.stdout
    assert "  added type: Runbook  (sibling concepts)\n" in applied.stdout
    assert applied.stdout.endswith("; 0 errors, 0 warnings\nenriched 1 note\n")
    text = (root / "alerts.md").read_text()
    assert text.startswith("---\ntype: Runbook\ntitle: Pager alerts\n") and text.endswith(before)
    found = vrom(
        state, "--json", "--vault", str(root), "search", "paged", "--where", "type=Runbook"
    )
    assert [hit["path"] for hit in json.loads(found.stdout)["results"]] == ["alerts.md"]


def test_issue26_item10_format_on_a_value_yaml_cannot_build_warns_in_one_line(
    write_vault: Callable[[dict[str, str | bytes]], Path], tmp_path: Path
) -> None:
    note = "---\nd: !!timestamp not-a-date\ntype: Runbook\n---\n# Dates\n\nOdd date.\n"
    root = write_vault({**CLEAN, "dates.md": note})
    state = tmp_path / "cli-state"
    assert vrom(state, "index", str(root)).returncode == 0
    kept = (
        "  warning kept_as_text: frontmatter values YAML cannot build, kept as text:"
        " d (not a valid !!timestamp)\n"
    )
    done = vrom(state, "--vault", str(root), "format", "check")  # no traceback (run_vrom)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("dates.md  okf_concept\n" + kept), done.stdout
    applied = vrom(state, "--vault", str(root), "format", "enrich", "dates.md", "--apply")
    assert applied.returncode == 0, applied.stderr
    assert (
        "  warning not_enriched: enrichment was not written: note 'dates.md' has broken"
        " frontmatter (frontmatter values YAML cannot build, kept as text: d (not a valid"
        " !!timestamp)); fix it by hand first, nothing was written\n"
    ) in applied.stdout
    assert (root / "dates.md").read_text() == note


def test_issue27_item5_format_check_reads_a_folder_that_was_never_indexed(
    write_vault: Callable[[dict[str, str | bytes]], Path], tmp_path: Path
) -> None:
    root = write_vault({**CLEAN, "alerts.md": "# Pager alerts\n\nWho gets paged, and when.\n"})
    state = tmp_path / "cli-state"
    done = vrom(state, "--vault", str(root), "format", "check", "restart.md")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "1 note in restart.md checked against OKF v0.2: 1 OKF concept; 0 errors, 0 warnings\n"
    )
    report = json.loads(vrom(state, "--json", "--vault", str(root), "format", "check").stdout)
    assert report["formats"]["okf_concept"] == 1 and report["errors"] == 1
    suggested = vrom(state, "--vault", str(root), "format", "enrich")
    assert "  add type: Runbook  (sibling concepts)\n" in suggested.stdout
    applied = vrom(state, "--vault", str(root), "format", "enrich", "alerts.md", "--apply")
    assert applied.stdout.endswith("; 0 errors, 0 warnings\nenriched 1 note\n"), applied.stdout
    assert (root / "alerts.md").read_text().startswith("---\ntype: Runbook\n")
    assert not state.exists() or not any(state.rglob("*.db")), "a check makes no store"
    missing = vrom(state, "--vault", str(tmp_path / "nowhere"), "format", "check")
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    assert vrom(state, "search", "paged").returncode == 1, "the folder is still not indexed"
