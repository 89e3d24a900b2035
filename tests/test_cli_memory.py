"""``vrom memory``: its actions parsed and run against a real vault (the fake model embeds)."""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from vrom import Embedder, Vault
from vrom.cli.global_options import add_global_options
from vrom.cli.memory import add_memory_command, memories_for
from vrom.errors import NotFoundError, ValidationError

Run = Callable[..., tuple[int, str]]


@pytest.fixture
def vault_root(write_vault: Callable[[dict[str, str | bytes]], Path], tmp_path: Path) -> Path:
    root = write_vault({"deploy.md": "# Deploy\n\nHow we deploy.\n"})
    with Vault.open(root, tmp_path / "state", embedder=None) as vault:
        vault.index()
    return root


def _parser(open_vault: Callable[[argparse.Namespace], Vault]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vrom")
    add_global_options(parser, top=True)
    add_memory_command(parser.add_subparsers(dest="command", required=True), open_vault)
    return parser


@pytest.fixture
def run(vault_root: Path, tmp_path: Path) -> Run:
    """Return a function running ``vrom memory ARGS`` in-process: (exit code, output)."""

    def open_vault(args: argparse.Namespace) -> Vault:
        assert args.vault is None and args.db is None and args.vector_encoding is None
        return Vault.open(vault_root, tmp_path / "state", create=False, embedder=Embedder.fake())

    parser = _parser(open_vault)

    def run_(*argv: str) -> tuple[int, str]:
        args = parser.parse_args(["memory", *argv])
        out = io.StringIO()
        code = args.handler(args, out)
        return code, out.getvalue()

    return run_


def _json(run: Run, *argv: str) -> Any:
    code, text = run(*argv, "--json")
    assert code == 0
    return json.loads(text)


def test_memories_are_timed_and_recalled_by_time_span_and_mode(run: Run) -> None:
    may = _json(run, "remember", "Offsite", "The team met in Lisbon.", "--timestamp", "8 May, 2023")
    june = _json(
        run, "remember", "Offsite again", "The team met in Porto.", "--timestamp", "1685577600"
    )
    assert may["timestamp"].startswith("2023-05-08T00:00:00")
    assert june["timestamp"].startswith("2023-06-01T00:00:00")
    spans = {
        ("--since", "2023-05-15"): [june["id"]],
        ("--until", "2023-05-15"): [may["id"]],
        ("--since", "2023-06"): [june["id"]],  # a month: its first day
        ("--since", "2023"): sorted([may["id"], june["id"]]),  # a year, not 2,023 s after 1970
        ("--since", "2024"): [],
        ("--until", "2023"): sorted([may["id"], june["id"]]),  # through the year's last instant
        ("--until", "2023-05"): [may["id"]],
        ("--until", "2023-05-08"): [may["id"]],
        ("--until", "2023-05-07"): [],
    }
    for span, expected in spans.items():
        hits = _json(run, "recall", "team met", *span)
        assert sorted(h["memory"]["id"] for h in hits) == expected, span
    keyword = _json(run, "recall", "Lisbon", "--mode", "keyword")
    assert [h["score_kind"] for h in keyword] == ["bm25"]
    decayed = _json(run, "recall", "team met", "--half-life-days", "30", "-k", "2")
    assert {"recency", "fused"} <= set(decayed[0]["scores"])
    with pytest.raises(ValidationError, match="since must be a date or time"):
        run("recall", "team", "--since", "someday")  # the CLI's error handler prints it


def test_remember_then_recall_list_and_get(run: Run) -> None:
    code, text = run(
        "remember",
        "Deploys go through CI",
        "Never push to production by hand.",
        "--type",
        "decision",
        "--project",
        "web",
        "--tag",
        "ops",
        "--related",
        "deploy.md",
        "--source",
        "session 1",
    )
    assert code == 0 and text.startswith("remembered mem_")
    assert "[decision · web] Deploys go through CI" in text
    memory_id = text.split()[1].rstrip(":")
    other = _json(run, "remember", "Coffee", "Espresso, no sugar.", "--type", "preference")

    hits = _json(run, "recall", "production deploys", "-k", "2")
    assert hits[0]["memory"]["id"] == memory_id
    assert {"bm25", "vector", "fused", "rrf"} <= set(hits[0]["scores"])
    assert hits[0]["memory"]["tags"] == ["ops"] and hits[0]["memory"]["related"] == ["deploy.md"]
    code, text = run("recall", "production deploys")
    assert text.startswith("1. [decision · web] Deploys go through CI  (fused ")
    assert f"   {hits[0]['memory']['id']} · " in text and "#ops" in text

    listed = _json(run, "list", "--project", "web")
    assert [m["id"] for m in listed] == [memory_id]
    code, text = run("list")
    assert text.splitlines()[0].startswith(f"{other['id']}  ")

    shown = _json(run, "get", memory_id)
    assert shown["source"] == "session 1" and shown["status"] == "active"
    code, text = run("get", memory_id)
    assert text.startswith("Deploys go through CI\n") and "related: deploy.md" in text
    assert text.rstrip().endswith("Never push to production by hand.")


def test_archive_and_supersede(run: Run) -> None:
    old = _json(run, "remember", "Tabs", "Indent with tabs.")
    new = _json(run, "remember", "Spaces", "Indent with four spaces.")
    code, text = run("archive", old["id"], "--superseded-by", new["id"])
    assert code == 0 and text == f"{old['id']} is superseded by {new['id']}\n"
    archived = _json(run, "archive", new["id"])
    assert archived["status"] == "archived" and archived["superseded_by"] is None
    assert _json(run, "list") == []
    assert len(_json(run, "list", "--status", "any")) == 2
    assert _json(run, "recall", "indent", "--status", "superseded")[0]["memory"]["id"] == old["id"]


def test_stats(run: Run, vault_root: Path) -> None:
    _json(run, "remember", "A", "alpha", "--project", "web")
    _json(run, "remember", "B", "beta", "--type", "fact")
    stats = _json(run, "stats")
    assert stats.pop("vault") == str(vault_root.resolve())
    assert Path(stats.pop("store")).name == "store.db"
    assert stats == {
        "total": 2,
        "by_status": {"active": 2},
        "by_type": {"fact": 1, "note": 1},
        "by_project": {"web": 1},
        "embedded": 2,
    }
    code, text = run("stats")
    assert (
        code == 0
        and text.startswith("memories:    2 (2 embedded)\n")
        and "by project:  web 1" in text
    )


def test_content_from_stdin(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("Line one.\nLine two.\n"))
    memory = _json(run, "remember", "From stdin", "-")
    assert memory["content"] == "Line one.\nLine two."


def test_errors_are_vrom_errors(run: Run) -> None:
    with pytest.raises(ValidationError, match="title must not be blank"):
        run("remember", " ", "content")
    with pytest.raises(NotFoundError, match="mem_missing"):
        run("archive", "mem_missing")
    with pytest.raises(ValidationError, match="k must be"):
        run("recall", "x", "-k", "0")


def test_empty_results_say_so(run: Run) -> None:
    assert run("recall", "anything") == (0, "no matching memories\n")
    assert run("list") == (0, "no memories\n")


def test_usage_errors_exit_2(run: Run, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        run("recall", "x", "--status", "deleted")
    assert exited.value.code == 2
    with pytest.raises(SystemExit):
        run("archive")
    assert "usage:" in capsys.readouterr().err


def test_memories_for_uses_the_vault_model(vault_root: Path, tmp_path: Path) -> None:
    with Vault.open(vault_root, tmp_path / "state", embedder=Embedder.fake()) as vault:
        memories = memories_for(vault)
        memory = memories.remember("Deploy", "Through CI.")
        assert memories.embedder is not None
        assert memories.recall("deploy")[0].scores.keys() >= {"vector", "bm25"}
    with Vault.open(vault_root, tmp_path / "state", embedder=None) as vault:
        memories = memories_for(vault)
        hits = memories.recall("deploy")
        assert memories.embedder is None
        assert hits[0].memory.id == memory.id and set(hits[0].scores) == {"bm25"}


def test_memory_help_shows_every_action_and_its_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = _parser(lambda args: Vault.open_store(args.db))
    with pytest.raises(SystemExit):
        parser.parse_args(["memory", "--help"])
    text = capsys.readouterr().out
    for action in ("remember", "recall", "list", "get", "archive", "stats"):
        assert f"  vrom memory {action} [-h] [--json] [--vault PATH] [--db FILE|URL]" in text
    for flag in ("--type", "--project", "--tag", "--related", "--source", "--status", "--limit"):
        assert flag in text
    assert "--superseded-by" in text
