"""The three real OKF v0.2 bundles (../shared/data/okf/bundles; skipped when absent): every
concept detected and valid through the Python API, the MCP SDK client and the CLI, and a damaged
copy's errors reported per file."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from vrom_cli import run_vrom

from vrom import Vault

BUNDLES = Path(__file__).resolve().parents[2] / "shared" / "data" / "okf" / "bundles"
NAMES = ("acme_retail", "crypto_bitcoin", "ga4")

pytestmark = [
    pytest.mark.data,
    pytest.mark.skipif(not BUNDLES.is_dir(), reason=f"no OKF bundles at {BUNDLES}"),
]


def _expected_formats(root: Path) -> dict[str, str]:
    """Return each Markdown file's format as the spec names it, read off the file tree alone."""
    reserved = {"index.md": "okf_index", "log.md": "okf_log"}
    return {
        path.relative_to(root).as_posix(): reserved.get(path.name, "okf_concept")
        for path in root.rglob("*.md")
    }


@pytest.mark.parametrize("name", NAMES)
def test_every_concept_of_a_real_bundle_is_detected_and_valid(name: str, tmp_path: Path) -> None:
    root = BUNDLES / name
    expected = _expected_formats(root)
    assert sum(kind == "okf_concept" for kind in expected.values()) >= 9
    with Vault.open(root, tmp_path / "state", embedder=None) as vault:
        report = vault.check_format()
        assert {note.path: note.format for note in report.notes} == expected
        problems = {note.path: note.errors for note in report.notes if note.errors}
        assert problems == {} and report.errors == 0
        enrich = vault.enrich_format()
        assert enrich.enrichable == 0, "the bundles carry every field enrichment adds"


def _damaged_copy(tmp_path: Path) -> Path:
    """Copy acme_retail and break five files the ways OKF v0.2's conformance forbids."""
    root = tmp_path / "acme_retail"
    shutil.copytree(BUNDLES / "acme_retail", root)

    def edit(rel: str, old: str, new: str) -> None:
        path = root / rel
        text = path.read_text(encoding="utf-8")
        assert old in text, f"{rel} no longer holds {old!r}"
        path.write_text(text.replace(old, new, 1), encoding="utf-8")

    edit("metrics/revenue.md", "type: Metric\n", "")  # no type
    edit("tables/orders.md", "title: Customer Orders\n", "title: [Customer Orders\n")  # not YAML
    edit("computations/revenue-ytd.md", "type: Attested Computation\n", "type: ''\n")
    policy = root / "policies" / "margin-standard.md"  # no frontmatter at all
    policy.write_text(policy.read_text(encoding="utf-8").split("---\n", 2)[2], encoding="utf-8")
    edit("log.md", "## 2026-04-15\n", "## April 15th\n")  # not an ISO date heading
    edit("metrics/index.md", "# Metric\n", "---\ntype: Index\n---\n# Metric\n")  # frontmatter
    return root


DAMAGE = {
    "metrics/revenue.md": ["missing_type"],
    "tables/orders.md": ["bad_frontmatter"],
    "computations/revenue-ytd.md": ["empty_type"],
    "policies/margin-standard.md": ["no_frontmatter"],
    "log.md": ["bad_log_date"],
    "metrics/index.md": ["index_frontmatter"],
}


def test_a_damaged_copys_errors_are_reported_per_file(tmp_path: Path) -> None:
    root = _damaged_copy(tmp_path)
    with Vault.open(root, tmp_path / "state", embedder=None) as vault:
        report = vault.check_format()
    found = {note.path: [i.code for i in note.errors] for note in report.notes if note.errors}
    assert found == DAMAGE
    assert report.errors == len(DAMAGE)
    log = next(note for note in report.notes if note.path == "log.md")
    line = (root / "log.md").read_text(encoding="utf-8").splitlines().index("## April 15th") + 1
    assert log.errors[0].message.startswith(f"line {line}: log heading 'April 15th'")


def _mcp(root: Path, calls: list[dict[str, Any]]) -> list[Any]:
    pytest.importorskip("mcp")
    from mcp import Client

    from vrom.server.app import build_server
    from vrom.server.state import ServerState

    state = ServerState(root, embedder="none", watch=False)
    state.open_explicit()
    replies: list[Any] = []

    async def main() -> None:
        async with Client(build_server(state), mode="legacy") as client:
            for arguments in calls:
                replies.append(await client.call_tool("vault_format", arguments))

    try:
        asyncio.run(main())
    finally:
        state.close()
    return replies


def test_vault_format_through_the_mcp_client_on_real_and_damaged_bundles(tmp_path: Path) -> None:
    good = tmp_path / "bundles"
    shutil.copytree(BUNDLES, good, ignore=shutil.ignore_patterns("*.html", "*.py"))
    replies = _mcp(good, [{"path": name} for name in NAMES])
    for name, reply in zip(NAMES, replies, strict=True):
        data = reply.structured_content
        assert not reply.is_error and data["scope"] == name and data["errors"] == 0
        expected = {f"{name}/{p}": kind for p, kind in _expected_formats(BUNDLES / name).items()}
        assert {n["path"]: n["format"] for n in data["notes"]} == expected
        assert all("errors" not in n for n in data["notes"]), "no errors to list"
    (damaged,) = _mcp(_damaged_copy(tmp_path), [{"action": "check"}])
    data = damaged.structured_content
    found = {n["path"]: [e["code"] for e in n["errors"]] for n in data["notes"] if "errors" in n}
    assert found == DAMAGE
    text = damaged.content[0].text
    for path, codes in DAMAGE.items():
        assert re.search(rf"^{re.escape(path)} \(\w+\): error {codes[0]}", text, re.MULTILINE)


def _vrom(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_vrom(state, *args)


def test_vrom_format_check_on_a_real_and_a_damaged_bundle(tmp_path: Path) -> None:
    state = tmp_path / "cli-state"
    good = tmp_path / "ga4"
    shutil.copytree(BUNDLES / "ga4", good)
    assert _vrom(state, "index", str(good)).returncode == 0
    done = _vrom(state, "--vault", str(good), "format", "check")
    assert done.returncode == 0, done.stdout
    assert done.stdout == (
        "14 notes checked against OKF v0.2: 9 OKF concepts, 5 index.md; 0 errors, 0 warnings\n"
    )
    damaged = _damaged_copy(tmp_path)
    assert _vrom(state, "index", str(damaged)).returncode == 0
    done = _vrom(state, "--vault", str(damaged), "format", "check")
    assert done.returncode == 1
    for path, codes in DAMAGE.items():
        assert re.search(
            rf"^{re.escape(path)}  \w+\n  error {codes[0]}: ", done.stdout, re.MULTILINE
        ), path
    assert done.stdout.splitlines()[-1].endswith("; 6 errors, 0 warnings")
    as_json = _vrom(state, "--vault", str(damaged), "--json", "format", "check")
    assert as_json.returncode == 1
    report = json.loads(as_json.stdout)
    found = {n["path"]: [e["code"] for e in n["errors"]] for n in report["notes"] if n["errors"]}
    assert found == DAMAGE and report["errors"] == 6
