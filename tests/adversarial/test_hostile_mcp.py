"""MCP on hostile notes: an agent can write any of them, and vault_reindex keeps working.

Issue 15, item 1: a note with ``x: .inf`` written by ``vault_write`` made every later
``vault_reindex`` fail until a person fixed the file.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from hostile import (
    GOOD_NOTES,
    HOSTILE_NOTES,
    UNBUILDABLE_FRONTMATTER,
    UNBUILDABLE_NOTES,
    alias_bomb,
)

pytest.importorskip("mcp")

from mcp import Client

from vrom.server.app import build_server
from vrom.server.state import ServerState


def run(root: Path, session: Callable[[Client], Awaitable[None]]) -> None:
    state = ServerState(root, embedder=None, watch=False)
    state.open_explicit()

    async def main() -> None:
        async with Client(build_server(state), mode="legacy") as client:
            await session(client)

    try:
        asyncio.run(main())
    finally:
        state.close()


def data(result: Any) -> Any:
    assert not result.is_error, result.content[0].text
    return result.structured_content


def test_issue15_item1_hostile_notes_written_over_mcp_leave_vault_reindex_working(
    write_vault: Callable[[dict[str, str | bytes]], Path],
) -> None:
    root = write_vault(GOOD_NOTES)

    async def session(client: Client) -> None:
        for path, text in HOSTILE_NOTES.items():
            written = data(await client.call_tool("vault_write", {"path": path, "content": text}))
            assert written["indexed"], written
        bomb = data(
            await client.call_tool("vault_write", {"path": "inbox/b.md", "content": alias_bomb()})
        )
        assert "aliases expand it" in bomb["warning"]
        summary = data(await client.call_tool("vault_reindex", {}))
        assert summary["notes"] == len(GOOD_NOTES) + len(HOSTILE_NOTES) + 1
        assert all("\n" not in warning["reason"] for warning in summary["warnings"])
        note = data(await client.call_tool("vault_read", {"path": "inf.md"}))
        assert note["frontmatter"] == {"x": "inf", "y": "-inf"}
        hits = data(await client.call_tool("vault_search", {"query": "orchard", "k": 50}))
        assert {hit["path"] for hit in hits["results"]} == set(GOOD_NOTES)
        name = "caf\udce9.md"  # the name of a file whose name is not UTF-8, as Python has it
        for tool, arguments in [("vault_read", {}), ("vault_write", {"content": "x"})]:
            refused = await client.call_tool(tool, {"path": name, **arguments})
            assert refused.is_error and "\n" not in refused.content[0].text
            assert "not valid UTF-8" in refused.content[0].text
        assert not (root / name).exists(), "nothing is created before a request is accepted"

    run(root, session)


def test_issue26_item10_vault_format_and_vault_frontmatter_answer_on_values_yaml_cannot_build(
    write_vault: Callable[[dict[str, str | bytes]], Path],
) -> None:
    root = write_vault({**GOOD_NOTES, **UNBUILDABLE_NOTES})
    before = (root / "not-a-date.md").read_text()

    async def session(client: Client) -> None:
        report = data(await client.call_tool("vault_format", {}))
        warned = {
            note["path"]: [warning["code"] for warning in note.get("warnings", [])]
            for note in report["notes"]
        }
        assert all(warned[path] == ["kept_as_text"] for path in UNBUILDABLE_NOTES), warned
        enriched = data(await client.call_tool("vault_format", {"action": "enrich", "apply": True}))
        assert enriched["applied"] and enriched["enriched"] == len(GOOD_NOTES)
        for path, frontmatter in UNBUILDABLE_FRONTMATTER.items():
            read = data(await client.call_tool("vault_frontmatter", {"path": path}))
            assert read["frontmatter"] == frontmatter
        refused = await client.call_tool(
            "vault_frontmatter", {"path": "not-a-date.md", "set": {"status": "draft"}}
        )
        assert refused.is_error
        assert refused.content[0].text == (
            "note 'not-a-date.md' has broken frontmatter (frontmatter values YAML cannot build,"
            " kept as text: d (not a valid !!timestamp)); fix it by hand first, nothing was"
            " written"
        )

    run(root, session)
    assert (root / "not-a-date.md").read_text() == before


@pytest.mark.parametrize(
    ("line", "answer"),
    [
        ('{"jsonrpc":"2.0","id":9,"method":"ping","params":{"x":"\\udcff"}}', (9, -32700)),
        ('{"jsonrpc":"2.0","id":"a","method":["ping"]}', ("a", -32600)),
        ('{"jsonrpc":"2.0","method":"notifications/x","params":"\\udcff"}', None),  # no id
        ('{"jsonrpc":"2.0","id":"\\udcff","method":"ping"}', None),  # an id no reply can carry
        ('{"jsonrpc":"2.0","id":3,"result":"\\udcff"}', None),  # an answer is never answered
        ("[1, 2", None),
    ],
)
def test_a_message_the_sdk_cannot_read_is_answered_when_it_is_a_request(
    line: str, answer: tuple[object, int] | None
) -> None:
    from mcp import types

    from vrom.server.base import unreadable_request_error

    with pytest.raises(Exception) as unread:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    error = unreadable_request_error(unread.value)
    if answer is None:
        assert error is None
    else:
        assert error is not None and (error.id, error.error.code) == answer
        error.model_dump_json()  # it can be sent


def test_issue26_item10_mcp_tools_answer_a_long_path_or_a_bad_tag_with_a_one_line_error(
    write_vault: Callable[[dict[str, str | bytes]], Path],
) -> None:
    root = write_vault(
        {**GOOD_NOTES, "timestamp.md": "---\nd: !!timestamp not-a-date\n---\n# T\n\nbody\n"}
    )
    long = "x" * 300
    calls: list[tuple[str, dict[str, Any]]] = [
        ("vault_list", {"folder": long}),
        ("vault_format", {"path": long}),
        ("vault_format", {"path": f"{long}/{long}.md", "action": "enrich"}),
        ("vault_frontmatter", {"path": f"{long}.md"}),
        ("vault_frontmatter", {"path": f"{long}.md", "set": {"a": 1}}),
        ("vault_read", {"path": f"{long}.md"}),
        ("vault_write", {"path": f"{long}.md", "content": "x"}),
        ("vault_format", {"path": "timestamp.md"}),
        ("vault_frontmatter", {"path": "timestamp.md"}),
        ("vault_frontmatter", {"path": "timestamp.md", "set": {"a": 1}}),
    ]

    async def session(client: Client) -> None:
        for name, arguments in calls:
            result = await client.call_tool(name, arguments)
            text = result.content[0].text
            assert "Error executing tool" not in text, (name, arguments)
            assert "Traceback" not in text, (name, text)
            if result.is_error:  # the note's frontmatter is read since issue 26 item 4: a report
                assert "\n" not in text and len(text) < 400, (name, text)
            else:
                assert arguments["path"] == "timestamp.md" and "set" not in arguments, name

    run(root, session)


def test_issue26_item15_vault_read_takes_a_bidi_name_as_vault_list_gives_it(
    write_vault: Callable[[dict[str, str | bytes]], Path],
) -> None:
    bidi = "bidi \u202egnp.md"
    root = write_vault({**GOOD_NOTES, bidi: "# Bidi\n\nkumquat\n"})

    async def session(client: Client) -> None:
        data(await client.call_tool("vault_reindex", {}))
        listed = data(await client.call_tool("vault_list", {}))
        assert bidi in [note["path"] for note in listed["notes"]], listed
        note = data(await client.call_tool("vault_read", {"path": bidi}))
        assert note["path"] == bidi and "kumquat" in note["body"]

    run(root, session)


def test_issue26_item10_a_300_character_path_is_a_one_line_tool_error(
    write_vault: Callable[[dict[str, str | bytes]], Path],
) -> None:
    root = write_vault(GOOD_NOTES)
    long_path = "x" * 300

    async def session(client: Client) -> None:
        data(await client.call_tool("vault_reindex", {}))
        for tool, arguments in [
            ("vault_list", {"folder": long_path}),
            ("vault_read", {"path": long_path}),
            ("vault_frontmatter", {"path": long_path}),
            ("vault_write", {"path": long_path, "content": "# Long\n"}),
        ]:
            result = await client.call_tool(tool, arguments)
            assert result.is_error, (tool, result)
            text = result.content[0].text
            assert "over the file system's 255-byte limit for one name" in text, (tool, text)
            assert "\n" not in text

    run(root, session)


def _stdio_session(
    root: Path, lines: list[str], tail: str = ""
) -> tuple[subprocess.CompletedProcess[str], dict[Any, Any]]:
    """Run `vrom mcp` over stdio on ``root`` for one session: initialize, then ``lines`` (and
    ``tail``, unterminated); return the finished process and its replies by id."""
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "hostile", "version": "1"},
        },
    }
    sent = [json.dumps(init), '{"jsonrpc":"2.0","method":"notifications/initialized"}', *lines]
    done = subprocess.run(
        [sys.executable, "-m", "vrom", "mcp", "--vault", str(root), "--no-watch"],
        input="".join(line + "\n" for line in sent) + tail,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done, {reply["id"]: reply for reply in map(json.loads, done.stdout.splitlines())}


def test_issue26_item9_a_deeply_nested_stdio_message_gets_an_error_and_the_server_stays_up(
    write_vault: Callable[[dict[str, str | bytes]], Path],
) -> None:
    """Issue 26, item 9: one 2 KB line nested 1,000 levels deep killed `vrom mcp` over stdio
    (RecursionError finding the request's id); each is answered by its id, or ignored when it
    has none, and the server goes on answering."""
    root = write_vault(GOOD_NOTES)
    nested = {depth: "[" * depth + "]" * depth for depth in (1_000, 100_000)}
    done, replies = _stdio_session(
        root,
        [
            '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":' + nested[1_000] + "}}",
            '{"jsonrpc":"2.0","method":"notifications/x","params":{"x":' + nested[1_000] + "}}",
            '{"jsonrpc":"2.0","params":{"x":' + nested[100_000] + '},"id":"two","method":"ping"}',
            nested[100_000],
            '{"jsonrpc":"2.0","id":3,"method":"ping"}',
        ],
    )
    assert set(replies) == {0, 1, "two", 3}, done.stderr
    for deep in (1, "two"):
        assert replies[deep]["error"]["code"] == -32700
        assert "too deep" in replies[deep]["error"]["message"]
    assert replies[3]["result"] == {}, "the server still answers"
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


def test_issue26_item9_a_stdio_line_past_the_size_bound_is_refused_unread(
    write_vault: Callable[[dict[str, str | bytes]], Path],
) -> None:
    """The SDK read each stdio line whole, however long; a line past 16 MiB is skipped unread
    and answered by the id it starts with, and the next line is served."""
    from vrom.server.base import MAX_MESSAGE_BYTES

    root = write_vault(GOOD_NOTES)
    huge = "a" * (MAX_MESSAGE_BYTES + 10)
    done, replies = _stdio_session(
        root,
        [
            '{"jsonrpc":"2.0","id":5,"method":"ping","params":{"x":"' + huge + '"}}',
            '{"jsonrpc":"2.0","id":6,"method":"ping"}',
        ],
        tail=huge,  # and one that never ends
    )
    assert set(replies) == {0, 5, 6, None}, done.stderr
    assert replies[5]["error"]["code"] == -32600
    assert "longer than the 16,777,216 bytes" in replies[5]["error"]["message"]
    assert replies[6]["result"] == {}, "the next line is served"
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
