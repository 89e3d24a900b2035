"""End-to-end tests of the real ``vrom`` CLI, run as subprocesses on vaults built in tmp_path.

Every command runs as ``python -m vrom --state-dir <tmp> ...`` with ``VROM_STATE_DIR`` pointing
into tmp_path as well and ``VROM_VAULT`` removed, so the user's real data dir is never touched.
Independent read-only commands are started together (`run_many`) to keep the file fast.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import select
import sqlite3
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

TIMEOUT = 60
AT_ONCE = max(2, os.cpu_count() or 2)
"""Commands `run_many` runs at the same time."""
MAX_FILE_SIZE = 4096
SUMMARY_KEYS = {
    "added",
    "embedded",
    "changed",
    "removed",
    "renamed",
    "unchanged",
    "skipped",
    "notes",
    "chunks",
    "seconds",
    "warnings",
    "parse_seconds",
    "index_seconds",
    "embed_seconds",
    "not_embedded",
}
HIT_KEYS = {
    "chunk_id",
    "path",
    "heading_path",
    "excerpt",
    "score",
    "content_hash",
    "modified_unix",
    "human_relevance_score",
    "title",
    "char_start",
    "char_end",
}
SUMMARY_LINE = re.compile(
    r"indexed (?P<notes>\d+) notes, (?P<chunks>\d+) chunks in \d+\.\d\d s: "
    r"(?P<added>\d+) added, (?P<changed>\d+) changed, (?P<removed>\d+) removed, "
    r"(?P<renamed>\d+) renamed, (?P<unchanged>\d+) unchanged, (?P<skipped>\d+) skipped"
    r"(?:, (?P<embedded>\d+) chunks embedded)?"
    r" \(parse \d+\.\d\d s, keyword index \d+\.\d\d s"
    r"(?:, embedding \d+\.\d\d s at [\d,.]+ chunks/s)?\)"
)

# -- running the CLI ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    args: tuple[str, ...]
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        assert self.code == 0, self.describe()
        return json.loads(self.stdout)

    def hits(self) -> list[Any]:
        """The hits of ``vrom search --json``: its report's results (the MCP shape)."""
        report = self.json()
        assert {"results", "mode", "vectors", "chunks", "vault", "store"} <= set(report), report
        hits: list[Any] = report["results"]
        return hits

    def ok(self) -> Result:
        assert self.code == 0, self.describe()
        assert "Traceback" not in self.stderr + self.stdout, self.describe()
        return self

    def describe(self) -> str:
        return f"vrom {' '.join(self.args)!r} exited {self.code}\n--stdout--\n{self.stdout}\n--stderr--\n{self.stderr}"


@dataclass(frozen=True)
class Call:
    args: Sequence[str]
    state: Path | None = None  # passed as --state-dir (None: leave it to the environment)
    env_state: Path | None = None  # VROM_STATE_DIR (default: same as ``state``)
    cwd: Path | None = None
    env: dict[str, str] | None = None  # extra environment (e.g. VROM_VAULT)


def _environment(call: Call, scratch: Path) -> dict[str, str]:
    unset = ("VROM_STATE_DIR", "VROM_VAULT", "VAULT_ROOT")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env_state = call.env_state or call.state
    assert env_state is not None, "every call must pin the state dir inside tmp_path"
    env["VROM_STATE_DIR"] = str(env_state)
    env["PYTHONIOENCODING"] = "utf-8"
    env["VROM_EMBEDDER"] = "none"  # keyword behaviour; module fixtures run outside conftest
    env["XDG_DATA_HOME"] = str(scratch / "xdg")  # belt and braces for the platformdirs default
    env.update(call.env or {})
    return env


def _popen(call: Call, stdout: Any = subprocess.PIPE) -> subprocess.Popen[bytes]:
    state_args = ["--state-dir", str(call.state)] if call.state is not None else []
    scratch = (call.state or call.env_state or Path.cwd()).parent
    return subprocess.Popen(
        [sys.executable, "-m", "vrom", *state_args, *call.args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        cwd=call.cwd or scratch,
        env=_environment(call, scratch),
    )


def run_many(calls: Sequence[Call]) -> list[Result]:
    """Run independent commands, at most `AT_ONCE` at a time; return their results in order.

    Each process's `TIMEOUT` runs from its own start, and only a bounded number compete for
    the CPU: on a loaded machine (CI shares its 2 cores) thirty processes started at once
    made each wait for all the others, and a slow one hit its timeout though nothing hung.
    """

    def finish(call: Call, proc: subprocess.Popen[bytes]) -> Result:
        out, err = proc.communicate(timeout=TIMEOUT)
        return Result(tuple(call.args), proc.returncode, out.decode("utf-8"), err.decode("utf-8"))

    results: list[Result] = []
    for start in range(0, len(calls), AT_ONCE):
        group = calls[start : start + AT_ONCE]
        procs = [_popen(call) for call in group]
        results += [finish(call, proc) for call, proc in zip(group, procs, strict=True)]
    return results


def run(*args: str, state: Path, **kw: Any) -> Result:
    return run_many([Call(args, state, **kw)])[0]


# -- vaults ------------------------------------------------------------------------------------

LONG_NOTE = "# Seabirds\n\n" + "\n\n".join(
    f"Paragraph {i}: the albatross glides for hours over the southern ocean without resting."
    for i in range(30)
)

NOTES: dict[str, str | bytes] = {
    "Atlas.md": """---
title: Project Atlas
status: active
owners: [mira, jon]
tags: [project/atlas, infra]
---
# Project Atlas

Atlas maps every office network so engineers find a failing switch.

## Goals

### Latency budget

Keep the zephyr dashboard under two seconds.

## Decisions

We chose SQLite because the data fits on one machine.
See [[Beacon|the beacon project]] and [[Beacon#Rollout]] and [[Missing Note]].
![[Diagram]]
Read the [setup guide](Guides/Setup.md) too. #networking
""",
    "Beacon.md": """---
status: done
tags: project
---
# Beacon

The beacon broadcasts heartbeats across the network. #infra #networking

## Rollout

Rollout happened in three waves, see [[#Rollout]]. #project/beacon
""",
    "Guides/Setup.md": """---
title: Setup Guide
audience: human
---
# Installing

Install with pip and run the indexer. The word quokka appears here.

## Troubleshooting

If the quokka misbehaves, restart it.
""",
    "system/agent.md": "# Agent rules\n\nThe agent must cite the quokka chunk it used, per [[Setup]].\n",
    "Diagram.md": "# Diagram\n\nBoxes and arrows. #infra\n",
    "Journal.md": (
        "Today I mentioned zephyr in passing, nothing more. Back to [the map](Atlas.md).\n"
        "A [website](https://example.com/page.md) and an image ![chart](chart.png).\n"
    ),
    "東京.md": "# 東京メモ\n\n東京都の天気は晴れです。\n",
    # identical text, different human-relevance prior (system/ path vs audience: human)
    "system/walrus.md": "---\ntitle: Walrus protocol\n---\nThe walrus protocol keeps tusks clean.\n",
    "Guides/walrus.md": (
        "---\ntitle: Walrus protocol\naudience: human\n---\nThe walrus protocol keeps tusks clean.\n"
    ),
    # title match vs body-only match (the body-only chunk is shorter: BM25 favours it)
    "Pelican.md": "# Pelican\n\nLarge birds with a throat pouch live along the warm shore and eat fish.\n",
    "Shore.md": "# Shore walk\n\nWe saw a pelican near the pier.\n",
    # heading match vs body-only match
    "Birds.md": (
        "# Birds\n\n## Cormorant sightings\n\nDark diving birds dried their wings on the rocks "
        "by the harbour wall today.\n\n## Other\n\nNothing else.\n"
    ),
    "Harbour.md": "# Harbour\n\nA cormorant sat on a post.\n",
    "Long.md": LONG_NOTE + "\n",
    "crlf.md": (
        b"---\r\ntitle: Crlf Note\r\npriority: 2\r\n---\r\n# Crlf\r\n\r\n"
        b"Windows line endings with a gannet.\r\n\r\n## Second\r\n\r\nMore gannet text.\r\n"
    ),
    "broken.md": "---\ntitle: [unclosed\nstatus: x\n---\n# Broken\n\nbrokenword body\n",
    "latin1.md": "# Latin\n\ncaf\xe9 invalidbytes here\n".encode("latin-1"),
    "binary.md": b"# Binary\n\x00\x01\x02 binaryword",
    "big.md": "# Big\n\n" + "bigword " * 1500,
    ".hidden/secret.md": "# Secret\n\nhiddenword\n",
    ".obsidian/workspace.md": "# Workspace\n\nobsidianword\n",
    ".trash/old.md": "# Old\n\ntrashword\n",
    ".draft.md": "# Draft\n\ndraftword\n",
}
INDEXED = {
    path
    for path in NOTES
    if not path.startswith(".") and path not in ("binary.md", "big.md") and "/." not in path
}
SKIPPED = {"binary.md", "big.md", "escape.md", "escape-dir"}
LINKS = 8  # Atlas 5, Beacon 1 (to itself), Journal 1, system/agent 1; URLs and images are not
TAGS = {"project/atlas", "infra", "networking", "project", "project/beacon"}


def write_files(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


@dataclass(frozen=True)
class Indexed:
    vault: Path
    state: Path
    first: Result  # `index --json` on the fresh vault
    second: Result  # plain `index` again

    def call(self, *args: str, **kw: Any) -> Call:
        return Call(args, self.state, **kw)

    def run(self, *args: str, **kw: Any) -> Result:
        return run(*args, state=self.state, **kw)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Indexed]:
    base = tmp_path_factory.mktemp("e2e")
    vault = write_files(base / "vault", NOTES)
    outside = write_files(base / "outside", {"outside.md": "# Outside\n\noutsideword\n"})
    (vault / "escape.md").symlink_to(outside / "outside.md")
    (vault / "escape-dir").symlink_to(outside, target_is_directory=True)
    state = base / "state"
    size = ("--max-file-size", str(MAX_FILE_SIZE))
    first = run("index", str(vault), "--json", *size, state=state).ok()
    second = run("index", str(vault), *size, state=state).ok()
    yield Indexed(vault, state, first, second)


def note_text(path: Path) -> str:
    """Decode a note's bytes the way vrom documents it (BOM dropped, bad UTF-8 replaced)."""
    data = path.read_bytes().removeprefix(b"\xef\xbb\xbf")
    return data.decode("utf-8", errors="replace")


def check_hit(hit: dict[str, Any], vault: Path) -> None:
    """Assert the provenance contract of one search hit against the file on disk."""
    assert hit.keys() >= HIT_KEYS, sorted(hit)
    path = vault / hit["path"]
    assert path.is_file() and not path.is_symlink()
    text = note_text(path)
    chunk = text[hit["char_start"] : hit["char_end"]]
    assert chunk.strip(), hit
    assert hit.get("text", chunk) == chunk
    assert re.fullmatch(r"[0-9a-f]{64}", hit["content_hash"])
    assert hashlib.sha256(chunk.encode("utf-8")).hexdigest() == hit["content_hash"]
    assert hit["modified_unix"] == pytest.approx(path.stat().st_mtime, abs=1e-3)
    assert 0.0 <= hit["human_relevance_score"] <= 1.0
    assert isinstance(hit["score"], float) and hit["score"] > 0
    assert isinstance(hit["chunk_id"], int)
    assert isinstance(hit["title"], str) and hit["title"]
    for heading in filter(None, hit["heading_path"].split(" > ")):
        assert heading in text
    excerpt = hit["excerpt"]
    assert 0 < len(excerpt) <= 282
    assert excerpt.strip("…") in re.sub(r"\s+", " ", chunk)


def paths(hits: list[dict[str, Any]]) -> list[str]:
    return [h["path"] for h in hits]


def single_error_line(result: Result) -> str:
    assert result.code == 1, result.describe()
    assert "Traceback" not in result.stdout + result.stderr, result.describe()
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.describe()
    assert lines[0].startswith("vrom: error: "), result.describe()
    assert result.stdout == "", result.describe()
    return lines[0]


# -- index -------------------------------------------------------------------------------------


def test_index_json_summary_and_warnings(indexed: Indexed) -> None:
    summary = indexed.first.json()
    assert set(summary) == SUMMARY_KEYS | {"vault", "store"}
    assert summary["vault"] == str(indexed.vault.resolve())
    assert indexed.state.resolve() in Path(summary["store"]).parents
    assert summary["added"] == summary["notes"] == len(INDEXED)
    assert (summary["changed"], summary["removed"], summary["renamed"]) == (0, 0, 0)
    assert summary["unchanged"] == 0
    assert summary["skipped"] == len(SKIPPED)
    assert summary["chunks"] >= summary["notes"]
    assert isinstance(summary["seconds"], float) and summary["seconds"] >= 0
    reasons = {w["path"]: w["reason"] for w in summary["warnings"]}
    assert all(set(w) == {"path", "reason"} for w in summary["warnings"])
    assert "binary" in reasons["binary.md"]
    assert "4,096" in reasons["big.md"]
    assert "frontmatter" in reasons["broken.md"]
    assert "UTF-8" in reasons["latin1.md"]
    assert "outside the vault" in reasons["escape.md"]
    assert "outside the vault" in reasons["escape-dir"]
    assert set(reasons) == SKIPPED | {"broken.md", "latin1.md"}
    assert not [p for p in reasons if "hidden" in p or "obsidian" in p or "trash" in p]


def test_index_again_is_unchanged_with_one_line_summary(indexed: Indexed) -> None:
    result = indexed.second
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result.describe()
    match = SUMMARY_LINE.fullmatch(lines[0])
    assert match, lines[0]
    counts = {k: int(v) for k, v in match.groupdict().items() if v is not None}
    assert counts["unchanged"] == counts["notes"] == len(INDEXED)
    assert counts["added"] == counts["changed"] == counts["removed"] == counts["renamed"] == 0
    assert counts["skipped"] == len(SKIPPED)
    assert counts["chunks"] == indexed.first.json()["chunks"]
    # warnings go to stderr, one line each, naming the skipped files
    warned = {line.split(": ")[1] for line in result.stderr.splitlines()}
    assert all(line.startswith("warning: ") for line in result.stderr.splitlines())
    assert warned == SKIPPED


def test_hidden_skipped_and_caveat_notes_are_handled(indexed: Indexed) -> None:
    hidden_words = "hiddenword obsidianword trashword draftword outsideword bigword binaryword"
    only_hidden, with_control, broken, latin, hidden_note = run_many(
        [
            indexed.call("search", hidden_words, "--json", "--vault", str(indexed.vault)),
            indexed.call(
                "search", hidden_words + " zephyr", "--json", "--vault", str(indexed.vault)
            ),
            indexed.call("get-note", "broken", "--json", "--vault", str(indexed.vault)),
            indexed.call("search", "invalidbytes", "--json", "--vault", str(indexed.vault)),
            indexed.call("get-note", ".obsidian/workspace", "--vault", str(indexed.vault)),
        ]
    )
    assert only_hidden.ok().hits() == []
    assert set(paths(with_control.ok().hits())) == {"Journal.md", "Atlas.md"}
    note = broken.ok().json()
    assert note["frontmatter"] == {}  # broken YAML: indexed as plain text, nothing lost
    assert note["body"].startswith("---\ntitle: [unclosed")
    assert note["title"] == "Broken"
    hits = latin.ok().hits()
    assert paths(hits) == ["latin1.md"]
    assert "\ufffd" in hits[0]["text"]
    check_hit(hits[0], indexed.vault)
    assert "no note" in single_error_line(hidden_note)


def test_index_lifecycle_edit_delete_rename(tmp_path: Path) -> None:
    vault = write_files(
        tmp_path / "vault",
        {
            "one.md": "# One\n\nfirst note about otters\n",
            "two.md": "# Two\n\nsecond note about badgers\n",
            "sub/three.md": "# Three\n\nthird note about ferrets\n",
        },
    )
    state = tmp_path / "state"

    def index(*extra: str) -> dict[str, Any]:
        summary = run("index", str(vault), "--json", *extra, state=state).ok().json()
        assert summary["warnings"] == [] and summary["not_embedded"] is None
        assert summary["vault"] == str(vault.resolve())
        counts = set(summary) - {"warnings", "not_embedded", "vault", "store"}
        return {k: summary[k] for k in counts if not k.endswith("seconds")}

    zero = dict.fromkeys(
        ("added", "changed", "removed", "renamed", "unchanged", "skipped", "embedded"), 0
    )
    first = run("index", str(vault), state=state).ok()
    assert SUMMARY_LINE.fullmatch(first.stdout.strip()), first.stdout
    assert " 3 added, " in first.stdout and first.stderr == ""
    assert index() == {**zero, "unchanged": 3, "notes": 3, "chunks": 3}

    os.utime(vault / "one.md", (1_700_000_000, 1_700_000_000))  # new mtime, same bytes
    assert index() == {**zero, "unchanged": 3, "notes": 3, "chunks": 3}

    with (vault / "one.md").open("a", encoding="utf-8") as f:
        f.write("\nnow also about narwhals\n")
    assert index() == {**zero, "changed": 1, "unchanged": 2, "notes": 3, "chunks": 3}
    narwhal = run("search", "narwhals", "--json", "--vault", str(vault), state=state).hits()
    assert paths(narwhal) == ["one.md"]

    (vault / "two.md").unlink()
    assert index() == {**zero, "removed": 1, "unchanged": 2, "notes": 2, "chunks": 2}

    before = run("get-note", "sub/three", "--json", "--vault", str(vault), state=state).json()
    (vault / "sub" / "three.md").rename(vault / "moved.md")
    assert index() == {**zero, "renamed": 1, "unchanged": 1, "notes": 2, "chunks": 2}
    badgers, ferrets, after = run_many(
        [
            Call(("search", "badgers", "--json", "--vault", str(vault)), state),
            Call(("search", "ferrets", "--json", "--vault", str(vault)), state),
            Call(("get-note", "moved", "--json", "--vault", str(vault)), state),
        ]
    )
    assert badgers.hits() == []
    assert paths(ferrets.hits()) == ["moved.md"]
    assert after.json()["note_id"] == before["note_id"]  # a rename keeps the note's id

    assert index("--force") == {**zero, "changed": 2, "notes": 2, "chunks": 2}


def test_index_shows_ten_warnings_then_a_count(tmp_path: Path) -> None:
    vault = write_files(
        tmp_path / "vault",
        {"ok.md": "# Fine\n", **{f"bin{i:02d}.md": b"\x00binary" for i in range(12)}},
    )
    result = run("index", str(vault), state=tmp_path / "state").ok()
    lines = result.stderr.splitlines()
    assert len(lines) == 11, result.describe()
    assert all(line.startswith("warning: bin") for line in lines[:10])
    assert lines[10] == "warning: … and 2 more (see --json)"
    assert " 12 skipped" in result.stdout


# -- search ------------------------------------------------------------------------------------


def test_search_hits_carry_verifiable_provenance(indexed: Indexed) -> None:
    query = "zephyr quokka beacon walrus gannet albatross 東京 invalidbytes brokenword pelican"
    hits = indexed.run(
        "search", query, "-k", "100", "--chunks", "--json", "--vault", str(indexed.vault)
    ).hits()  # every matching chunk, several of a note among them
    assert {"Atlas.md", "crlf.md", "東京.md", "latin1.md", "Long.md"} <= set(paths(hits))
    assert len({h["chunk_id"] for h in hits}) == len(hits)
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    for hit in hits:
        check_hit(hit, indexed.vault)
    by_path = {h["path"]: h for h in hits}
    assert by_path["Atlas.md"]["title"] == "Project Atlas"  # frontmatter title
    assert by_path["Beacon.md"]["title"] == "Beacon"  # first H1
    assert by_path["crlf.md"]["title"] == "Crlf Note"
    assert by_path["Guides/Setup.md"]["human_relevance_score"] == 0.9  # audience: human
    assert by_path["system/agent.md"]["human_relevance_score"] == 0.25  # under system/
    assert by_path["Atlas.md"]["human_relevance_score"] == 0.5
    zephyr = [h for h in hits if h["path"] == "Atlas.md" and "zephyr" in h["text"]]
    assert [h["heading_path"] for h in zephyr] == ["Project Atlas > Goals"]


def test_search_human_output_matches_json(indexed: Indexed) -> None:
    human, as_json, nothing = run_many(
        [
            indexed.call("search", "quokka", "--vault", str(indexed.vault)),
            indexed.call("search", "quokka", "--json", "--vault", str(indexed.vault)),
            indexed.call("search", "nosuchwordanywhere", "--vault", str(indexed.vault)),
        ]
    )
    hits = as_json.hits()
    lines = human.ok().stdout.splitlines()
    assert len(lines) == 3 * len(hits) and hits
    for rank, hit in enumerate(hits, start=1):
        head, excerpt, ids = lines[3 * rank - 3 : 3 * rank]
        where = f" › {hit['heading_path']}" if hit["heading_path"] else ""
        assert hit["score_kind"] == "bm25"  # keyword only: the environment says --embedder none
        assert head == f"{rank}. {hit['path']}{where}  (bm25 {hit['score']:.2f})"
        assert excerpt == "   " + hit["excerpt"]
        assert ids.startswith(f"   chunk {hit['chunk_id']} · sha256 {hit['content_hash'][:12]} ")
    assert nothing.ok().stdout == "no matches\n"


def test_title_and_heading_matches_rank_above_body_matches(indexed: Indexed) -> None:
    v = str(indexed.vault)
    pelican, cormorant, walrus = run_many(
        [
            indexed.call("search", "pelican", "--json", "--vault", v),
            indexed.call("search", "cormorant", "--json", "--vault", v),
            indexed.call("search", "walrus", "--json", "--vault", v),
        ]
    )
    assert paths(pelican.hits()) == ["Pelican.md", "Shore.md"]
    hits = cormorant.hits()
    assert paths(hits) == ["Birds.md", "Harbour.md"]
    assert hits[0]["heading_path"] == "Birds > Cormorant sightings"
    # same text: the note written for people outranks the system note, by the prior alone
    human, system = walrus.hits()
    assert (human["path"], system["path"]) == ("Guides/walrus.md", "system/walrus.md")
    assert human["scores"]["bm25"] == pytest.approx(system["scores"]["bm25"])
    assert human["scores"]["prior"] > 1 > system["scores"]["prior"]
    assert human["score"] == pytest.approx(human["scores"]["bm25"] * human["scores"]["prior"])


FILTER_QUERY = "zephyr quokka beacon heartbeats walrus networking"
FILTERS: list[tuple[list[str], set[str]]] = [
    (
        [],
        {
            "Atlas.md",
            "Beacon.md",
            "Journal.md",
            "Guides/Setup.md",
            "system/agent.md",
            "Guides/walrus.md",
            "system/walrus.md",
        },
    ),
    (["--path", "Guides/"], {"Guides/Setup.md", "Guides/walrus.md"}),
    (["--path", "system"], {"system/agent.md", "system/walrus.md"}),
    (["--tag", "project"], {"Atlas.md", "Beacon.md"}),  # Atlas only has project/atlas
    (["--tag", "project/atlas"], {"Atlas.md"}),
    (["--tag", "atlas"], set()),
    (["--tag", "#Infra", "--tag", "project/beacon"], {"Beacon.md"}),
    (["--where", "status=active"], {"Atlas.md"}),
    (["--where", "status=done"], {"Beacon.md"}),
    (["--where", "audience=human"], {"Guides/Setup.md", "Guides/walrus.md"}),
    # issue 28 item 3: `tags` in a filter is the frontmatter field (Beacon's #infra is inline),
    # never the note's tags, which --tag filters
    (["--where", "tags=infra"], {"Atlas.md"}),
    (["--tag", "infra"], {"Atlas.md", "Beacon.md"}),
    (["--where", "owners=jon"], {"Atlas.md"}),  # a list field matches when it holds the value
    (["--where", "owners=jo"], set()),
    (["--tag", "project", "--where", "status=done"], {"Beacon.md"}),
    (["--path", "Guides", "--where", "title=Walrus protocol"], {"Guides/walrus.md"}),
]


def test_search_filters(indexed: Indexed) -> None:
    calls = [
        indexed.call(
            "search", FILTER_QUERY, "--json", "-k", "50", "--vault", str(indexed.vault), *f
        )
        for f, _ in FILTERS
    ]
    for (flags, expected), result in zip(FILTERS, run_many(calls), strict=True):
        assert set(paths(result.ok().hits())) == expected, flags
    gannet = indexed.run(
        "search", "gannet", "--json", "--where", "priority=2", "--vault", str(indexed.vault)
    )
    assert set(paths(gannet.hits())) == {"crlf.md"}  # a JSON number matches a YAML number


SYNTAX: list[tuple[str, list[str] | None]] = [
    ('"two seconds"', ["Atlas.md"]),
    ('"seconds two"', []),  # a phrase keeps its word order
    ("zephyr -dashboard", ["Journal.md"]),
    ('zephyr -"two seconds"', ["Journal.md"]),
    ("zeph*", ["Journal.md", "Atlas.md"]),
    ("zeph", []),  # without the star it is a whole word
    ("東京", ["東京.md"]),
    ("天気", ["東京.md"]),  # a word inside a CJK sentence
]


def test_query_syntax(indexed: Indexed) -> None:
    calls = [
        indexed.call("search", "--json", "--vault", str(indexed.vault), "--", q) for q, _ in SYNTAX
    ]
    for (query, expected), result in zip(SYNTAX, run_many(calls), strict=True):
        assert sorted(paths(result.ok().hits())) == sorted(expected or []), query


LONG_QUERY = "zephyr " + " ".join(f"w{i}" for i in range(3000)) + " -" * 50 + ' "x' * 50
HOSTILE: list[tuple[str, str | None]] = [
    # (query, a path that must be among the hits, or None when nothing may match, or "" for any)
    ('"unbalanced', None),
    ('zephyr "unbalanced', "Journal.md"),
    ('zephyr"', "Journal.md"),
    ("AND OR NOT", ""),
    ("zephyr AND NOT quokka", "Journal.md"),
    ("*", None),
    ("**", None),
    ('"', None),
    ('""', None),
    ('"*"', None),
    ("(", None),
    ("NEAR(", ""),
    ("NEAR(zephyr quokka, 2)", "Journal.md"),
    ("title:zephyr", "Journal.md"),
    ("body:quokka OR", "system/agent.md"),
    ("^", None),
    ("^zephyr", "Journal.md"),
    ("🦘", None),
    ("🦘 zephyr 🦘", "Journal.md"),
    ("!@#$%^&*()[]{}<>?/\\|~`'", None),
    ("-", None),
    ("-zephyr", None),  # only exclusions: nothing positive left
    ("zephyr -zephyr", None),
    ('-"', None),
    ("'", None),
    ("\\", None),
    ("a\"b'c(d)e*f:g^h", ""),
    (LONG_QUERY, "Journal.md"),
    ("q" * 20000, None),
]


def test_hostile_queries_never_crash(indexed: Indexed) -> None:
    calls = [
        indexed.call("search", "--json", "--vault", str(indexed.vault), "--", q) for q, _ in HOSTILE
    ]
    for (query, expected), result in zip(HOSTILE, run_many(calls), strict=True):
        label = query[:40]
        assert result.code == 0, (label, result.describe())
        assert result.stderr == "", (label, result.describe())
        hits = result.hits()
        assert isinstance(hits, list), label
        if expected is None:
            assert hits == [], label
        elif expected:
            assert expected in paths(hits), label
    human = indexed.run("search", "--vault", str(indexed.vault), "--", 'NEAR("( ^*').ok()
    assert human.stdout == "no matches\n" or human.stdout.startswith("1. ")


# -- get-note, related, context, stats, backend-info --------------------------------------------


def test_get_note_by_name_path_id_and_absolute_path(indexed: Indexed) -> None:
    v = str(indexed.vault)
    atlas = indexed.run("get-note", "Atlas", "--json", "--vault", v).json()
    by_path, by_md, by_id, by_abs, human, cjk, nested = run_many(
        [
            indexed.call("get-note", "Atlas.md", "--json", "--vault", v),
            indexed.call("get-note", "./ATLAS.md", "--json", "--vault", v),
            indexed.call("get-note", str(atlas["note_id"]), "--json", "--vault", v),
            indexed.call("get-note", str(indexed.vault / "Atlas.md"), "--json", "--vault", v),
            indexed.call("get-note", "Atlas", "--vault", v),
            indexed.call("get-note", "東京", "--json", "--vault", v),
            indexed.call("get-note", "Guides/Setup", "--json", "--vault", v),
        ]
    )
    for result in (by_path, by_md, by_id, by_abs):
        assert result.json() == atlas
    data = (indexed.vault / "Atlas.md").read_bytes()
    assert atlas["path"] == "Atlas.md"
    assert atlas["title"] == "Project Atlas"
    assert atlas["frontmatter"] == {
        "title": "Project Atlas",
        "status": "active",
        "owners": ["mira", "jon"],
        "tags": ["project/atlas", "infra"],
    }
    assert atlas["headings"] == ["Project Atlas", "Goals", "Latency budget", "Decisions"]
    assert atlas["tags"] == ["infra", "networking", "project/atlas"]
    assert atlas["content_hash"] == hashlib.sha256(data).hexdigest()
    assert atlas["size"] == len(data)
    assert atlas["chunk_count"] >= 2
    assert atlas["body"] == data.decode().split("---\n", 2)[2]
    assert [(link["kind"], link["resolved_path"]) for link in atlas["links"]] == [
        ("wikilink", "Beacon.md"),
        ("wikilink", "Beacon.md"),
        ("wikilink", None),
        ("embed", "Diagram.md"),
        ("markdown", "Guides/Setup.md"),
    ]
    assert atlas["links"][0]["alias"] == "the beacon project"
    assert atlas["links"][1]["heading"] == "Rollout"

    lines = human.ok().stdout.splitlines()
    assert lines[0] == "Project Atlas"
    assert lines[1].startswith(f"Atlas.md · id {atlas['note_id']} · {atlas['chunk_count']} chunks")
    assert f"sha256 {atlas['content_hash'][:12]}" in lines[1]
    assert lines[2] == "tags: #infra, #networking, #project/atlas"
    assert json.loads(lines[3].removeprefix("frontmatter: ")) == atlas["frontmatter"]
    assert "\n".join(lines[5:]) == atlas["body"].rstrip()

    assert cjk.json()["title"] == "東京メモ"
    assert cjk.json()["path"] == "東京.md"
    assert nested.json()["path"] == "Guides/Setup.md"
    assert nested.json()["human_relevance_score"] == 0.9


def test_related_links_backlinks_and_shared_tags(indexed: Indexed) -> None:
    v = str(indexed.vault)
    atlas, beacon, setup, human, human_beacon, limited = run_many(
        [
            indexed.call("related", "Atlas", "--json", "--vault", v),
            indexed.call("related", "Beacon", "--json", "--vault", v),
            indexed.call("related", "Setup", "--json", "--vault", v),
            indexed.call("related", "Atlas", "--vault", v),
            indexed.call("related", "Beacon", "--vault", v),
            indexed.call("related", "Atlas", "-k", "1", "--json", "--vault", v),
        ]
    )
    data = atlas.json()
    assert data["note"]["path"] == "Atlas.md" and data["note"]["title"] == "Project Atlas"
    resolved = {(link["target"], link["heading"]): link["resolved_path"] for link in data["links"]}
    assert resolved == {
        ("Beacon", None): "Beacon.md",
        ("Beacon", "Rollout"): "Beacon.md",
        ("Missing Note", None): None,
        ("Diagram", None): "Diagram.md",
        ("Guides/Setup.md", None): "Guides/Setup.md",
    }
    assert paths(data["backlinks"]) == ["Journal.md"]  # via a markdown link
    shared = [(s["note"]["path"], s["tags"]) for s in data["shared_tags"]]
    assert shared == [("Beacon.md", ["infra", "networking"]), ("Diagram.md", ["infra"])]
    assert [(s["note"]["path"], s["tags"]) for s in limited.json()["shared_tags"]] == shared[:1]

    beacon_data = beacon.json()
    assert paths(beacon_data["backlinks"]) == ["Atlas.md"]  # the self-link does not count
    assert [(link["target"], link["resolved_path"]) for link in beacon_data["links"]] == [
        ("", "Beacon.md")
    ]
    assert paths(setup.json()["backlinks"]) == ["Atlas.md", "system/agent.md"]

    text = human.ok().stdout
    assert text.startswith("Project Atlas (Atlas.md)\n\nlinks (5):\n")
    assert "  wikilink: Missing Note → (unresolved)\n" in text
    assert "  embed: Diagram → Diagram.md\n" in text
    assert "  markdown: Guides/Setup.md → Guides/Setup.md\n" in text
    assert "\nbacklinks (1):\n  Journal.md\n" in text
    assert "\nshared tags (2):\n  Beacon.md: #infra, #networking\n  Diagram.md: #infra\n" in text
    assert "  wikilink: #Rollout → Beacon.md\n" in human_beacon.ok().stdout


def test_context_stays_within_budget_and_cites_sources(indexed: Indexed) -> None:
    v = str(indexed.vault)
    small, large, human, nothing, nothing_json = run_many(
        [
            indexed.call("context", "albatross", "--max-tokens", "80", "--json", "--vault", v),
            indexed.call(
                "context", "quokka zephyr", "--max-tokens", "2000", "--json", "--vault", v
            ),
            indexed.call("context", "quokka zephyr", "--max-tokens", "2000", "--vault", v),
            indexed.call("context", "nosuchwordanywhere", "--vault", v),
            indexed.call("context", "nosuchwordanywhere", "--json", "--vault", v),
        ]
    )
    cut = small.json()
    assert set(cut) == {"query", "text", "tokens", "sources", "vault", "store"}
    assert cut["query"] == "albatross"
    assert cut["tokens"] == math.ceil(len(cut["text"]) / 4) <= 80
    assert paths(cut["sources"]) == ["Long.md"]
    assert "…" in cut["text"]  # the only passage did not fit whole, so it was cut
    assert cut["text"].startswith("[1] Seabirds (Long.md")
    assert "\n\nSources:\n[1] Long.md" in cut["text"]

    full = large.json()
    assert full["tokens"] == math.ceil(len(full["text"]) / 4) <= 2000
    sources = full["sources"]
    assert {"Journal.md", "Atlas.md", "Guides/Setup.md", "system/agent.md"} <= set(paths(sources))
    passages, _, cited = full["text"].partition("\n\nSources:\n")
    cited_lines = cited.splitlines()
    assert len(cited_lines) == len(sources)
    for number, (hit, line) in enumerate(zip(sources, cited_lines, strict=True), start=1):
        check_hit(hit, indexed.vault)
        assert line.startswith(f"[{number}] {hit['path']}")
        assert f"chunk {hit['chunk_id']} · sha256 {hit['content_hash'][:12]}" in line
        assert f"[{number}] {hit['title']} ({hit['path']}" in passages
        assert hit["text"].strip() in passages
    assert human.ok().stdout == full["text"] + "\n"
    assert nothing.ok().stdout == "no matches\n"
    assert nothing_json.json() == {
        "query": "nosuchwordanywhere",
        "text": "",
        "tokens": 0,
        "sources": [],
        "vault": cut["vault"],
        "store": cut["store"],
    }


def test_stats_and_backend_info(indexed: Indexed) -> None:
    v = str(indexed.vault)
    stats_json, stats_human, info_json, info_human = run_many(
        [
            indexed.call("stats", "--json", "--vault", v),
            indexed.call("stats", "--vault", v),
            indexed.call("backend-info", "--json", "--vault", v),
            indexed.call("backend-info", "--vault", v),
        ]
    )
    stats = stats_json.json()
    assert stats["vault_root"] == str(indexed.vault.resolve())
    store = Path(stats["store_path"])
    assert store.is_file() and indexed.state.resolve() in store.parents
    assert stats["notes"] == len(INDEXED)
    assert stats["chunks"] == indexed.first.json()["chunks"]
    assert (stats["links"], stats["unresolved_links"]) == (LINKS, 1)
    assert stats["tags"] == len(TAGS)
    assert stats["store_bytes"] > 0
    assert isinstance(stats["last_indexed_unix"], float)
    assert stats["chunk_strategy"]["target_chars"] == 1000
    text = stats_human.ok().stdout
    assert f"vault:       {stats['vault_root']}\n" in text
    assert f"store:       {stats['store_path']} (" in text
    assert f"notes:       {len(INDEXED)}\n" in text
    assert f"links:       {LINKS} (1 unresolved)\n" in text
    assert f"tags:        {len(TAGS)}\n" in text
    assert re.search(r"^last index:  \d{4}-\d\d-\d\dT", text, re.MULTILINE)

    assert (stats["vault"], stats["store"]) == (stats["vault_root"], stats["store_path"])
    info = info_json.json()
    assert info["backend"] == "sqlite"
    assert (info["vault"], info["store"]) == (stats["vault_root"], stats["store_path"])
    assert info["store_path"] == stats["store_path"]
    assert isinstance(info["schema_version"], int) and info["schema_version"] >= 1
    assert {"keyword-bm25", "cjk-keyword", "metadata-filter"} <= set(info["capabilities"])
    assert info["fts_tokenizers"] and all(isinstance(t, str) for t in info["fts_tokenizers"])
    assert info["details"]["journal_mode"] == "wal"
    rows = dict(line.split(":", 1) for line in info_human.ok().stdout.splitlines())
    assert rows["backend"].strip() == "sqlite"
    assert rows["store"].strip() == info["store_path"]
    assert rows["schema version"].strip() == str(info["schema_version"])
    assert rows["capabilities"].strip() == ", ".join(info["capabilities"])
    assert rows["journal_mode"].strip() == "wal"


# -- choosing the vault ------------------------------------------------------------------------


def test_vault_selection(tmp_path: Path) -> None:
    alpha = write_files(
        tmp_path / "alpha", {"Alpha.md": "# Alpha\n\nkiwi\n", "Sub/Deep.md": "kiwi too\n"}
    )
    bravo = write_files(tmp_path / "bravo", {"Bravo.md": "# Bravo\n\nmango\n"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    state = tmp_path / "state"
    for vault in (alpha, bravo):  # bravo is the vault indexed last
        run("index", str(vault), "--quiet", state=state).ok()
    store_a = Path(run("stats", "--json", "--vault", str(alpha), state=state).json()["store_path"])

    def root_of(result: Result) -> str:
        return str(result.json()["vault_root"])

    empty = tmp_path / "empty-state"
    cases = {
        "last indexed, unrelated cwd": (Call(("stats", "--json"), state, cwd=elsewhere), bravo),
        "cwd inside a vault folder": (Call(("stats", "--json"), state, cwd=alpha / "Sub"), alpha),
        "VROM_VAULT beats cwd": (
            Call(("stats", "--json"), state, cwd=bravo, env={"VROM_VAULT": str(alpha)}),
            alpha,
        ),
        "--vault beats VROM_VAULT": (
            Call(
                ("stats", "--json", "--vault", str(alpha)),
                state,
                cwd=bravo,
                env={"VROM_VAULT": str(bravo)},
            ),
            alpha,
        ),
        "VAULT_ROOT beats cwd": (
            Call(("stats", "--json"), state, cwd=bravo, env={"VAULT_ROOT": str(alpha)}),
            alpha,
        ),
        "VAULT_ROOT and VROM_VAULT naming one folder": (
            Call(
                ("stats", "--json"),
                state,
                cwd=bravo,
                env={"VAULT_ROOT": str(alpha), "VROM_VAULT": f"{alpha}/"},
            ),
            alpha,
        ),
        "--vault beats VAULT_ROOT": (
            Call(
                ("stats", "--json", "--vault", str(alpha)),
                state,
                cwd=bravo,
                env={"VAULT_ROOT": str(bravo)},
            ),
            alpha,
        ),
        "--db": (Call(("stats", "--json", "--db", str(store_a)), state, cwd=bravo), alpha),
        "VROM_STATE_DIR alone": (
            Call(("stats", "--json"), None, env_state=state, cwd=elsewhere),
            bravo,
        ),
        "--state-dir beats VROM_STATE_DIR": (
            Call(("stats", "--json"), state, env_state=empty, cwd=elsewhere),
            bravo,
        ),
    }
    results = run_many([call for call, _ in cases.values()])
    for (label, (_, expected)), result in zip(cases.items(), results, strict=True):
        assert root_of(result) == str(expected.resolve()), label
    kiwi, mango = run_many(
        [
            Call(("search", "kiwi mango", "--json"), state, cwd=alpha),
            Call(("search", "kiwi mango", "--json"), state, cwd=elsewhere),
        ]
    )
    assert sorted(paths(kiwi.hits())) == ["Alpha.md", "Sub/Deep.md"]
    assert paths(mango.hits()) == ["Bravo.md"]
    assert not empty.exists()  # an overridden VROM_STATE_DIR is never written


def test_global_options_go_before_or_after_the_command(indexed: Indexed) -> None:
    v = str(indexed.vault)
    before, after, both = run_many(
        [
            indexed.call("--json", "--vault", v, "search", "zephyr"),
            indexed.call("search", "zephyr", "--json", "--vault", v),
            indexed.call("--vault", str(indexed.state), "search", "--json", "zephyr", "--vault", v),
        ]
    )
    assert paths(before.hits()) and "Journal.md" in paths(before.hits())
    assert before.stdout == after.ok().stdout == both.ok().stdout, "the one after the command wins"
    # the embedder after the command wins: none (no model) or fake (a model, but no vectors)
    none_wins, fake_wins, refused = run_many(
        [
            indexed.call("--embedder", "fake", "search", "zephyr", "--mode", "vector",
                         "--embedder", "none", "--vault", v),
            indexed.call("--embedder", "none", "search", "zephyr", "--mode", "vector",
                         "--embedder", "fake", "--vault", v),
            indexed.call("--json", "mcp", "--vault", v),
        ]
    )  # fmt: skip
    assert "needs an embedder" in none_wins.ok().stderr
    assert "needs vectors" in fake_wins.ok().stderr
    assert refused.code == 2 and "--json does not apply to 'vrom mcp'" in refused.stderr


def test_object_results_name_their_vault_and_store_and_lists_stay_lists(indexed: Indexed) -> None:
    v = str(indexed.vault)
    note, related, context, memories, hits = run_many(
        [
            indexed.call("get-note", "Atlas", "--json", "--vault", v),
            indexed.call("related", "Atlas", "--json", "--vault", v),
            indexed.call("context", "zephyr", "--json", "--vault", v),
            indexed.call("memory", "stats", "--json", "--vault", v),
            indexed.call("search", "zephyr", "--json", "--vault", v),
        ]
    )
    store = note.json()["store"]
    assert indexed.state.resolve() in Path(store).parents
    for result in (note, related, context, memories):
        assert result.json()["vault"] == str(indexed.vault.resolve()), result.describe()
        assert result.json()["store"] == store
    assert hits.json()["vault"] == str(indexed.vault.resolve()) and hits.json()["store"] == store
    assert "vault" not in hits.hits()[0], "named once, for the whole report"


def _on_a_terminal(call: Call, *, no_color: bool = False) -> tuple[int, str, str]:
    """Run ``vrom`` with stdout and stderr on pseudo-terminals, as at a person's console."""
    pty = pytest.importorskip("pty")
    scratch = (call.state or Path.cwd()).parent
    env = _environment(call, scratch)
    env["TERM"] = "xterm"
    env.pop("NO_COLOR", None)
    if no_color:
        env["NO_COLOR"] = "1"
    masters, slaves = zip(pty.openpty(), pty.openpty(), strict=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "vrom", "--state-dir", str(call.state), *call.args],
        stdin=subprocess.DEVNULL,
        stdout=slaves[0],
        stderr=slaves[1],
        cwd=scratch,
        env=env,
    )
    for fd in slaves:
        os.close(fd)
    read: dict[int, bytes] = {fd: b"" for fd in masters}
    open_fds = list(masters)
    while open_fds:
        ready, _, _ = select.select(open_fds, [], [], TIMEOUT)
        assert ready, "vrom on a terminal wrote nothing for a minute"
        for fd in ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the child closed its end
                chunk = b""
            if chunk:
                read[fd] += chunk
            else:
                open_fds.remove(fd)
                os.close(fd)
    code = proc.wait(timeout=TIMEOUT)
    out, err = (read[fd].decode("utf-8").replace("\r\n", "\n") for fd in masters)
    return code, out, err


def test_a_terminal_is_told_the_vault_and_store_in_colour_unless_no_color(
    indexed: Indexed,
) -> None:
    call = indexed.call("search", "zephyr", "--vault", str(indexed.vault))
    stats = indexed.run("stats", "--json", "--vault", str(indexed.vault)).json()
    told = f"vrom: vault {stats['vault_root']} (store {stats['store_path']})"
    code, out, err = _on_a_terminal(call)
    assert code == 0, err
    assert told in err and "\x1b[" in err
    assert "\x1b[1m1. " in out, "a terminal gets colour"
    code, plain_out, plain_err = _on_a_terminal(call, no_color=True)
    assert code == 0 and plain_err == told + "\n"
    assert "\x1b[" not in plain_out and plain_out.startswith("1. ")
    assert re.sub(r"\x1b\[[0-9;]*m", "", out) == plain_out
    piped = indexed.run(*call.args).ok()
    assert piped.stderr == "" and piped.stdout == plain_out, "a pipe gets neither"


# -- errors ------------------------------------------------------------------------------------


def _error_cases(indexed: Indexed, tmp: Path) -> dict[str, Call]:
    v = str(indexed.vault)
    fresh = tmp / "fresh-state"
    (tmp / "notes.txt").write_text("this is not a database\n" * 100)
    (tmp / "a-file").write_text("")
    return {
        "index missing folder": Call(("index", str(tmp / "missing")), indexed.state),
        "index a file": Call(("index", str(tmp / "notes.txt"), "--json"), indexed.state),
        "search missing --vault": Call(
            ("search", "x", "--vault", str(tmp / "missing")), indexed.state
        ),
        "unknown note": Call(("get-note", "No Such Note", "--vault", v), indexed.state),
        "unknown note json": Call(
            ("get-note", "No Such Note", "--json", "--vault", v), indexed.state
        ),
        "unknown id": Call(("get-note", "999999", "--vault", v), indexed.state),
        "empty note name": Call(("get-note", " ", "--vault", v), indexed.state),
        "note outside the vault": Call(
            ("get-note", str(tmp / "notes.txt"), "--vault", v), indexed.state
        ),
        "related unknown": Call(("related", "No Such Note", "--vault", v), indexed.state),
        "--db missing": Call(("search", "x", "--db", str(tmp / "missing.db")), indexed.state),
        "--db not sqlite": Call(("stats", "--db", str(tmp / "notes.txt")), indexed.state),
        "--db a folder": Call(("backend-info", "--db", str(tmp)), indexed.state),
        "no vault indexed": Call(("search", "x"), fresh, cwd=tmp),
        "no vault indexed json": Call(("stats", "--json"), fresh, cwd=tmp),
        "VROM_VAULT missing": Call(
            ("stats",), fresh, cwd=tmp, env={"VROM_VAULT": str(tmp / "gone")}
        ),
        "VAULT_ROOT missing": Call(
            ("stats",), fresh, cwd=tmp, env={"VAULT_ROOT": str(tmp / "gone")}
        ),
        "VAULT_ROOT empty": Call(("stats",), fresh, cwd=tmp, env={"VAULT_ROOT": ""}),
        "VAULT_ROOT and VROM_VAULT differ": Call(
            ("stats",), fresh, cwd=tmp, env={"VAULT_ROOT": str(tmp), "VROM_VAULT": v}
        ),
        "bad --where": Call(("search", "x", "--where", "novalue", "--vault", v), indexed.state),
        "bad --path": Call(("search", "x", "--path", "/", "--vault", v), indexed.state),
        "k too large": Call(("search", "x", "-k", "100000", "--vault", v), indexed.state),
        "budget too small": Call(
            ("context", "x", "--max-tokens", "10", "--vault", v), indexed.state
        ),
        "state dir is a file": Call(("index", v), tmp / "a-file"),
    }


def test_a_blank_query_is_a_one_line_error(indexed: Indexed, tmp_path: Path) -> None:
    v = str(indexed.vault)
    fresh = tmp_path / "fresh-state"  # no vault at all: the query is still the first problem
    calls = [
        indexed.call("search", "", "--vault", v),
        indexed.call("search", " \t\n", "--json", "--vault", v),
        indexed.call("vector-search", " ", "--vault", v),
        indexed.call("hybrid-search", "", "--vault", v),
        indexed.call("context", "  ", "--vault", v),
        indexed.call("memory", "recall", "", "--vault", v),
        indexed.call("search", "--pack", "handbook", "--registry", str(tmp_path), " "),
        Call(("search", ""), fresh, cwd=tmp_path),
    ]
    for result in run_many(calls):
        line = single_error_line(result)
        assert line == "vrom: error: query is blank: say what to search for", result.describe()
    assert not fresh.exists()


def test_errors_are_one_line_on_stderr(indexed: Indexed, tmp_path: Path) -> None:
    cases = _error_cases(indexed, tmp_path)
    results = dict(zip(cases, run_many(list(cases.values())), strict=True))
    for label, result in results.items():
        try:
            single_error_line(result)
        except AssertionError as exc:
            raise AssertionError(f"{label}: {exc}") from None
    assert "does not exist" in results["index missing folder"].stderr
    assert "No Such Note" in results["unknown note"].stderr
    assert "not a SQLite database" in results["--db not sqlite"].stderr
    assert "vrom index" in results["no vault indexed"].stderr
    assert "$VAULT_ROOT: vault folder" in results["VAULT_ROOT missing"].stderr
    assert "$VAULT_ROOT is set but empty" in results["VAULT_ROOT empty"].stderr
    assert "name different vaults" in results["VAULT_ROOT and VROM_VAULT differ"].stderr
    assert not (tmp_path / "fresh-state" / "vaults").exists()


def test_output_to_a_closed_pipe_is_quiet(indexed: Indexed) -> None:
    v = str(indexed.vault)
    commands = [
        ("search", "quokka zephyr walrus", "--vault", v),
        ("search", "albatross", "-k", "200", "--json", "--vault", v),
        ("get-note", "Long", "--vault", v),
        ("related", "Atlas", "--vault", v),
        ("context", "albatross", "--vault", v),
        ("stats", "--vault", v),
        ("backend-info", "--vault", v),
    ]
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write to stdout fails with EPIPE
    try:
        procs = [_popen(Call(args, indexed.state), stdout=write_end) for args in commands]
        results = [
            (args, proc.communicate(timeout=TIMEOUT), proc.returncode)
            for args, proc in zip(commands, procs, strict=True)
        ]
    finally:
        os.close(write_end)
    for args, (_, err), code in results:
        assert code == 0, (args, err)
        assert err.decode() == "", (args, err)


# -- regressions found by these tests ------------------------------------------------------------


def test_index_quiet_prints_nothing(tmp_path: Path) -> None:
    vault = write_files(tmp_path / "vault", {"a.md": "# A\n"})
    result = run("index", str(vault), "--quiet", state=tmp_path / "state").ok()
    assert result.stdout == ""


def test_db_on_a_foreign_sqlite_file_leaves_it_alone(tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    conn.close()
    before = other.read_bytes()
    single_error_line(run("stats", "--db", str(other), state=tmp_path / "state"))
    assert other.read_bytes() == before


def test_reading_a_subfolder_does_not_shadow_the_vault(tmp_path: Path) -> None:
    vault = write_files(tmp_path / "vault", {"Guides/a.md": "# A\n\nquokka\n"})
    state = tmp_path / "state"
    run("index", str(vault), state=state).ok()
    run("search", "quokka", "--vault", str(vault / "Guides"), state=state)
    hits = run("search", "quokka", "--json", state=state, cwd=vault / "Guides").hits()
    assert paths(hits) == ["Guides/a.md"]


def test_human_output_survives_a_legacy_stdout_encoding(indexed: Indexed) -> None:
    result = indexed.run(
        "search", "天気", "--vault", str(indexed.vault), env={"PYTHONIOENCODING": "ascii"}
    )
    assert "Traceback" not in result.stderr
    assert result.code == 0
