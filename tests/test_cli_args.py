"""How the CLI reads its arguments (filter flags, global options) and how its output looks
(score labels, colour)."""

from __future__ import annotations

import argparse
import io
import itertools
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from vrom import ValidationError
from vrom.cli import build_parser, main
from vrom.cli.completion import SHELLS
from vrom.cli.filter_option import parse_where_option
from vrom.cli.global_options import global_option_problem
from vrom.cli.output import colour_enabled, score_label
from vrom.cli.vault_format import format_hits
from vrom.results import Hit
from vrom.vault import AUTO


def test_where_values_are_read_as_json_scalars_or_strings() -> None:
    where = parse_where_option(["n=3", "ok=true", "name=Ana", 'version="1.0"', "list=[1]"])
    assert where == {
        "$and": [{"n": 3}, {"ok": True}, {"name": "Ana"}, {"version": "1.0"}, {"list": "[1]"}]
    }


def test_where_takes_a_json_filter_object() -> None:
    assert parse_where_option(['{"n": {"$gte": 3}}']) == {"n": {"$gte": 3}}
    assert parse_where_option([]) is None
    with pytest.raises(ValidationError, match="--where is nested more than"):
        parse_where_option(["{" + '"$or": [{' * 200])


@pytest.mark.parametrize("item", ["novalue", "=x", " =x", "[1]"])
def test_malformed_where_items_are_validation_errors(item: str) -> None:
    with pytest.raises(ValidationError, match="KEY=VALUE"):
        parse_where_option([item])


# -- colour and score labels -----------------------------------------------------------------


class Terminal(io.StringIO):
    """A stream that says it is a terminal, as a person's console does."""

    def isatty(self) -> bool:
        return True


def _hit(kind: str, score: float, **extra: Any) -> Hit:
    return Hit(
        chunk_id=7,
        path="Projects/Atlas.md",
        title="Atlas",
        heading_path="Atlas > Goals",
        excerpt="maps every office network",
        score=score,
        content_hash="ab" * 32,
        modified_unix=0.0,
        human_relevance_score=0.5,
        note_id=1,
        position=0,
        char_start=0,
        char_end=10,
        text="maps every office network",
        score_kind=kind,
        **extra,
    )


@pytest.mark.parametrize(
    ("no_color", "term", "expected"),
    [(None, "xterm", True), ("", "xterm", True), ("1", "xterm", False), (None, "dumb", False)],
)
def test_colour_only_on_a_terminal_without_no_color(
    monkeypatch: pytest.MonkeyPatch, no_color: str | None, term: str, expected: bool
) -> None:
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    monkeypatch.setenv("TERM", term)
    assert colour_enabled(Terminal()) is expected
    assert colour_enabled(io.StringIO()) is False, "a pipe or a file never gets colour"


def test_hits_are_coloured_on_a_terminal_and_plain_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    hits = [_hit("bm25", 12.3456)]
    plain, coloured = io.StringIO(), Terminal()
    format_hits(hits, plain)
    format_hits(hits, coloured)
    assert "\x1b[" not in plain.getvalue()
    assert "\x1b[" in coloured.getvalue()
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured.getvalue()) == plain.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    muted = Terminal()
    format_hits(hits, muted)
    assert muted.getvalue() == plain.getvalue()


@pytest.mark.parametrize(
    ("kind", "score", "label"),
    [
        ("bm25", 12.3456, "(bm25 12.35)"),
        ("fused", 0.81234, "(fused 0.812)"),
        ("cosine", 0.81234, "(cosine 0.812)"),
        ("rerank", 0.6531, "(rerank 0.653)"),
        ("euclidean", -0.5, "(euclidean -0.500)"),
    ],
)
def test_every_score_shows_its_kind(kind: str, score: float, label: str) -> None:
    out = io.StringIO()
    format_hits([_hit(kind, score)], out)
    assert out.getvalue().splitlines()[0] == f"1. Projects/Atlas.md › Atlas > Goals  {label}"


def test_a_reranked_search_ends_with_its_time_in_ms() -> None:
    out = io.StringIO()
    format_hits([_hit("rerank", 0.6, ranking_runtime=1.234)], out)
    assert out.getvalue().splitlines()[-1] == "reranked in 1.23 ms"
    assert score_label("distance", 0.19) == "distance 0.190"


# -- global options before or after the command ------------------------------------------------


def _parse(*argv: str) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    assert global_option_problem(args) is None
    return args


@pytest.mark.parametrize(
    "argv",
    [
        ("--json", "search", "q"),
        ("search", "q", "--json"),
        ("search", "--json", "q"),
        ("--json", "memory", "recall", "q"),
        ("memory", "recall", "q", "--json"),
        ("pack", "list", "--json"),
        ("--json", "eval", "data"),
    ],
)
def test_json_is_read_before_or_after_the_command(argv: tuple[str, ...]) -> None:
    assert _parse(*argv).json is True
    assert _parse(*(a for a in argv if a != "--json")).json is False


def test_a_value_after_the_command_wins_and_one_before_it_stays() -> None:
    args = _parse(
        "--embedder", "fake", "--state-dir", "/s", "--vault", "/v1",
        "search", "q", "--embedder", "none", "--vault", "/v2",
    )  # fmt: skip
    assert (args.embedder, args.state_dir, args.vault, args.db) == ("none", "/s", "/v2", None)
    args = _parse("--embedder", "fake", "--db", "/x.db", "stats")
    assert (args.embedder, args.state_dir, args.vault, args.db) == ("fake", None, None, "/x.db")
    assert _parse("stats").embedder == AUTO


@pytest.mark.parametrize(
    "argv",
    [
        ("stats", "--vault", "/v", "--embedder", "none", "--state-dir", "/s", "--json"),
        ("related", "Atlas", "--db", "/x.db"),
        ("index", "/v", "--embedder", "none", "--state-dir", "/s", "--json"),
        ("memory", "list", "--db", "/x.db", "--embedder", "fake"),
        ("mcp", "--vault", "/v", "--embedder", "none", "--state-dir", "/s"),
        ("selftest", "--vault", "/v", "--embedder", "none", "--json"),
        ("install", "cursor", "--vault", "/v", "--state-dir", "/s", "--dry-run"),
        ("eval", "/data", "--embedder", "none"),
        ("pack", "build", "/notes", "--id", "x", "--version", "1.0.0", "--embedder", "fake"),
        ("--embedder", "none", "--state-dir", "/s", "pack", "list"),  # accepted, as always
    ],
)
def test_global_options_are_taken_where_they_apply(argv: tuple[str, ...]) -> None:
    args = _parse(*argv)
    for option, value in itertools.pairwise(argv):
        if option in ("--vault", "--db", "--embedder", "--state-dir"):
            assert getattr(args, option[2:].replace("-", "_")) == value


@pytest.mark.parametrize(
    "argv",
    [
        ("stats", "--vault", "/v", "--db", "postgresql://u@h/db", "--namespace", "team"),
        ("--db", "sqlite:///x.db", "--vault", "/v", "search", "q"),
        ("index", "/v", "--database-url", "postgresql://u@h/db", "--namespace", "team"),
        ("mcp", "--vault", "/v", "--database-url", "postgresql://u@h/db"),
        ("sync", "--to", "postgresql://u@h/db", "--vault", "/v", "--namespace", "team"),
        ("memory", "list", "--vault", "/v", "--database-url", "sqlite:///x.db"),
    ],
)
def test_a_database_url_goes_with_a_vault_folder(argv: tuple[str, ...]) -> None:
    """A store file names its vault, so --vault with --db FILE is refused; a database URL
    names only where the store is, so --vault (and --namespace) go with it, under either
    spelling of the option."""
    args = _parse(*argv)
    url = next(v for o, v in itertools.pairwise(argv) if o in ("--db", "--database-url", "--to"))
    assert url in (args.db, getattr(args, "to", None))
    assert args.vault == "/v" or args.command == "index"
    assert args.namespace == ("team" if "--namespace" in argv else None)


def test_a_usage_error_never_shows_a_password(capsys: pytest.CaptureFixture[str]) -> None:
    """argparse quotes what it could not use; a mistyped option's URL keeps its password."""
    with pytest.raises(SystemExit):
        main(["--databse-url", "postgresql://u:s3cret@127.0.0.1:1/db", "stats"], io.StringIO())
    err = capsys.readouterr().err
    assert "s3cret" not in err and "postgresql://u:***@127.0.0.1:1/db" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--json", "mcp"), "--json does not apply to 'vrom mcp'"),
        (("--vault", "/v", "index", "/v"), "--vault does not apply to 'vrom index'"),
        (("--db", "/x.db", "selftest"), "--db does not apply to 'vrom selftest'"),
        (("--vault", "/v", "stats", "--db", "/x.db"), "give --vault PATH or --db FILE, not both"),
        (("stats", "--vault", "/v", "--db", "/x.db"), "give --vault PATH or --db FILE, not both"),
        (("--namespace", "n", "pack", "list"), "--namespace does not apply to 'vrom pack'"),
        (("--db", "sqlite:///x.db", "sync", "--to", "/y.db"), "--db does not apply to 'vrom sync'"),
        (("sync", "--vault", "/v"), "one of the arguments --to --from is required"),
        (("pack", "list", "--vault", "/v"), "unrecognized arguments: --vault"),
    ],
)
def test_a_global_option_where_it_makes_no_sense_is_a_usage_error(
    argv: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(list(argv), io.StringIO())
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


# -- shell completion --------------------------------------------------------------------------

SCRIPT_MARKS = {
    "bash": "complete -o bashdefault -F",
    "zsh": "#compdef vrom",
    "fish": "complete -c vrom",
}
SYNTAX_CHECK = {"bash": ["bash", "-n"], "zsh": ["zsh", "-n"], "fish": ["fish", "--no-execute"]}


def _script(shell: str) -> str:
    out = io.StringIO()
    assert main(["completion", shell], out) == 0
    return out.getvalue()


@pytest.mark.parametrize("shell", SHELLS)
def test_completion_scripts_know_every_command_and_parse(shell: str, tmp_path: Path) -> None:
    script = _script(shell)
    assert SCRIPT_MARKS[shell] in script
    for word in ("search", "memory", "recall", "completion", "--embedder", "--json", "rerank"):
        written = f"-l {word[2:]}" if shell == "fish" and word.startswith("--") else word
        assert written in script, f"the {shell} script does not know {word}"
    checker = shutil.which(SYNTAX_CHECK[shell][0])
    if checker is None:
        pytest.skip(f"{shell} is not installed: the script is made but not parsed")
    path = tmp_path / f"vrom.{shell}"
    path.write_text(script, encoding="utf-8")
    checked = subprocess.run(
        [checker, *SYNTAX_CHECK[shell][1:], str(path)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stderr


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@pytest.mark.parametrize(
    ("words", "offered"),
    [
        (["vrom", "sea"], {"search"}),
        (["vrom", "search", "--mo"], {"--mode"}),
        (["vrom", "search", "--mode", ""], {"hybrid", "keyword", "vector", "rerank"}),
        (["vrom", "memory", "rec"], {"recall"}),
        (["vrom", "--js"], {"--json"}),
        (["vrom", "completion", ""], set(SHELLS)),
    ],
)
def test_bash_completes_commands_options_and_choices(
    words: list[str], offered: set[str], tmp_path: Path
) -> None:
    path = tmp_path / "vrom.bash"
    path.write_text(_script("bash"), encoding="utf-8")
    line = " ".join(shlex.quote(w) for w in words)
    ask = (
        f"source {shlex.quote(str(path))}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; "
        'COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}; _shtab_vrom; '
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(["bash", "-c", ask], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert set(done.stdout.split()) == offered


def test_completion_imports_shtab_only_when_asked() -> None:
    code = "import sys, vrom.cli; vrom.cli.build_parser(); print('shtab' in sys.modules)"
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert shown.stdout.strip() == "False", shown.stderr
