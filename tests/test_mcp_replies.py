"""What the MCP tools answer: one-line errors from every tool, bounded replies, and the tool
list's descriptions, output schemas and annotations, through the official SDK's client."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
pytest.importorskip("jsonschema")

import jsonschema
from mcp import Client
from mcp.types import TextContent

from vrom import Vault
from vrom._background_embedding import BackgroundEmbedding, EmbeddingProgress
from vrom.errors import StorageError
from vrom.server.app import build_server
from vrom.server.bounds import REPLY_CHARS
from vrom.server.replies import search_reply
from vrom.server.state import ServerState

NOTES: dict[str, str | bytes] = {
    "Projects/Atlas.md": "---\nstatus: active\ntags: [project]\n---\n# Atlas\n\n"
    "Atlas maps every office network switch. See [[Beacon]].\n",
    "Projects/Beacon.md": "# Beacon\n\nBeacon sends alerts when a switch fails. #project/alerts\n",
}

Session = Callable[[Client], Awaitable[None]]


def _run(state: ServerState, session: Session) -> None:
    async def main() -> None:
        async with Client(build_server(state), mode="legacy") as client:
            await session(client)

    asyncio.run(main())


@pytest.fixture
def state(write_vault: Callable[[dict[str, str | bytes]], Path]) -> Iterator[ServerState]:
    state = ServerState(write_vault(NOTES), embedder=None, watch=False)
    state.open_explicit()
    yield state
    state.close()


def _arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Return arguments a tool's input schema accepts: each required one, of its type."""
    samples = {"string": "Projects/Atlas.md", "integer": 1, "boolean": False, "object": {}}
    arguments = {}
    for name in schema.get("required", []):
        kind = schema["properties"][name].get("type", "string")
        arguments[name] = samples[kind]
    return arguments


@pytest.mark.parametrize(
    "failure",
    [
        OSError(36, "File name too long", "/vault/" + "x" * 300),
        PermissionError(13, "Permission denied", "/vault/a.md"),
        StorageError("the store is locked: try again"),
        AttributeError("'NoneType' object has no attribute 'groupdict'"),
    ],
    ids=["name-too-long", "permission", "vrom-error", "bug"],
)
def test_issue26_item10_every_tool_answers_any_failure_with_a_one_line_error(
    state: ServerState,
    failure: Exception,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def fail(*_: Any) -> Any:
        raise failure

    async def session(client: Client) -> None:
        tools = (await client.list_tools()).tools
        monkeypatch.setattr(state, "run", fail)
        for tool in tools:
            result = await client.call_tool(tool.name, _arguments(tool.input_schema))
            assert result.is_error, tool.name
            text = result.content[0].text
            assert "Error executing tool" not in text, tool.name
            assert "\n" not in text and len(text) < 300, (tool.name, text)
            if isinstance(failure, OSError):
                assert failure.strerror in text and tool.name in text, text
            elif not isinstance(failure, StorageError):
                assert tool.name in text and "AttributeError" in text, text
            else:
                assert text == str(failure)

    _run(state, session)
    logged = [record for record in caplog.records if record.exc_info]
    assert bool(logged) == isinstance(failure, AttributeError)  # a bug keeps its traceback


def _size(data: Any) -> int:
    return len(json.dumps(data, ensure_ascii=False))


async def _pages(
    client: Client, tool: str, arguments: dict[str, Any], field: str, most: int = 10_000
) -> list[Any]:
    """Return the entries (up to about ``most``) of a paged tool's list ``field``, following
    each ``cut``'s offset, checking that each page fits a reply."""
    entries: list[Any] = []
    offset: int | None = 0
    while offset is not None and len(entries) < most:
        result = await client.call_tool(tool, {**arguments, "offset": offset})
        assert not result.is_error, result.content[0].text
        data = result.structured_content
        assert data is not None and _size(data) <= REPLY_CHARS, (tool, _size(data))
        entries += data[field] if field != "body" else [data["body"]]
        cuts = {c["field"]: c for c in data.get("cut", ())}
        offset = cuts[field]["next_offset"] if field in cuts else None
    return entries


def test_issue27_item6_mcp_replies_are_bounded_and_page_with_offset(
    write_vault: Callable[[dict[str, str | bytes]], Path],
) -> None:
    words = ["switch", "router", "cable", "firmware", "uplink", "port", "vlan", "gateway"]
    paragraph = " ".join(words[i % len(words)] for i in range(250))
    big_body = "\n\n".join(f"## Part {i}\n\n{paragraph} [[Many/n{i:03d}]]" for i in range(60))
    notes: dict[str, str | bytes] = {"Big.md": f"# Big\n\n{big_body}\n"}
    notes |= {f"Many/n{i:03d}.md": f"# N{i}\n\n{paragraph}\n\n{paragraph}\n" for i in range(260)}
    root = write_vault(notes)
    state = ServerState(root, embedder=None, watch=False)
    state.open_explicit()

    async def session(client: Client) -> None:
        body = await _pages(client, "vault_read", {"path": "Big.md", "limit": 5000}, "body")
        assert len(body) > 1 and "".join(body) == (root / "Big.md").read_text()
        listed = await _pages(client, "vault_list", {"folder": "Many"}, "notes")
        assert [n["path"] for n in listed] == [f"Many/n{i:03d}.md" for i in range(260)]
        checked = await _pages(client, "vault_format", {}, "notes")
        assert sorted(n["path"] for n in checked) == sorted(notes)
        query = {"query": "switch firmware", "k": 50, "chunks": True, "expand_context": True}
        first = (await client.call_tool("vault_search", query)).structured_content
        assert _size(first) <= REPLY_CHARS and len(first["results"]) < 50
        (left,) = first["cut"]
        assert left["field"] == "results" and left["next_offset"] == len(first["results"])
        text = (await client.call_tool("vault_search", query)).content[0].text
        assert f"offset={left['next_offset']}" in text  # the summary says what was cut too
        paged = [
            hit["chunk_id"] for hit in await _pages(client, "vault_search", query, "results", 50)
        ]
        assert len(paged) == len(set(paged)) >= 50  # each page goes on where the last stopped
        assert paged[: len(first["results"])] == [hit["chunk_id"] for hit in first["results"]]

    try:
        _run(state, session)
    finally:
        state.close()


def test_issue27_item6_a_tool_without_paging_says_what_it_cut(state: ServerState) -> None:
    async def session(client: Client) -> None:
        for i in range(6):
            content = f"memory {i} about the uplink: " + "uplink firmware " * 1200
            remembered = await client.call_tool(
                "vault_remember", {"title": f"Uplink {i}", "content": content}
            )
            assert not remembered.is_error, remembered.content[0].text
        result = await client.call_tool("vault_recall", {"query": "uplink firmware", "k": 6})
        data = result.structured_content
        assert data is not None and _size(data) <= REPLY_CHARS
        (left,) = data["cut"]
        assert left["field"] == "results" and left["total"] == 6
        assert 1 <= left["returned"] == len(data["results"]) < 6
        assert left["next_offset"] is None and "narrow the request" in left["message"]

    _run(state, session)


def test_issue27_item9_tool_descriptions_carry_no_docstring_indentation(
    state: ServerState,
) -> None:
    async def session(client: Client) -> None:
        for tool in (await client.list_tools()).tools:
            description = tool.description or ""
            assert description and description == inspect.cleandoc(description), tool.name
            assert not any(line.startswith(" ") for line in description.splitlines()), tool.name

    _run(state, session)


HINTS = {  # tool: (readOnlyHint, destructiveHint, idempotentHint)
    "vault_search": (True, None, True),
    "vault_context": (True, None, True),
    "vault_read": (True, None, True),
    "vault_list": (True, None, True),
    "vault_wikilinks": (True, None, True),
    "vault_backlinks": (True, None, True),
    "vault_related": (True, None, True),
    "vault_tags": (True, None, True),
    "vault_stats": (True, None, True),
    "vault_recall": (True, None, True),
    "vault_memory_stats": (True, None, True),
    "vault_frontmatter": (False, True, True),  # set with merge=false replaces it
    "vault_format": (False, True, True),  # apply rewrites each note's frontmatter
    "vault_delete": (False, True, True),
    "vault_write": (False, True, False),  # overwrite; append again appends again
    "vault_install_opencode": (False, True, True),
    "vault_reindex": (False, False, True),
    "vault_memory_archive": (False, False, True),
    "vault_remember": (False, False, False),
}


def test_issue27_item9_tool_annotations_say_what_each_tool_may_change(state: ServerState) -> None:
    async def session(client: Client) -> None:
        tools = (await client.list_tools()).tools
        assert {tool.name for tool in tools} == set(HINTS)
        for tool in tools:
            hints = tool.annotations
            assert hints is not None and hints.open_world_hint is False, tool.name
            said = (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint)
            assert said == HINTS[tool.name], tool.name

    _run(state, session)


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("vault_search", {"query": "switch"}),
    ("vault_search", {"query": "switch", "chunks": True, "expand_context": True}),
    ("vault_context", {"query": "switch"}),
    ("vault_read", {"path": "Projects/Atlas.md", "limit": 10}),
    ("vault_frontmatter", {"path": "Projects/Atlas.md"}),
    ("vault_list", {"folder": "Projects", "limit": 1}),
    ("vault_wikilinks", {"path": "Projects/Atlas.md"}),
    ("vault_backlinks", {"path": "Projects/Beacon.md"}),
    ("vault_related", {"path": "Projects/Atlas.md"}),
    ("vault_tags", {}),
    ("vault_tags", {"tag": "project"}),
    ("vault_stats", {}),
    ("vault_write", {"path": "Inbox/new.md", "content": "A new switch."}),
    ("vault_frontmatter", {"path": "Inbox/new.md", "set": {"status": "draft"}}),
    ("vault_format", {}),
    ("vault_format", {"action": "enrich", "limit": 1}),
    ("vault_reindex", {}),
    ("vault_remember", {"title": "Switches", "content": "Atlas maps them."}),
    ("vault_recall", {"query": "switches"}),
    ("vault_memory_stats", {}),
    ("vault_install_opencode", {}),
    ("vault_delete", {"path": "Inbox/new.md"}),
]


def test_issue27_item9_every_tool_declares_the_output_schema_its_replies_validate_against(
    state: ServerState,
) -> None:
    async def session(client: Client) -> None:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert {name for name, _ in CALLS} | {"vault_memory_archive"} == set(tools)
        for tool in tools.values():
            assert tool.output_schema is not None, tool.name
            assert tool.output_schema["type"] == "object", tool.name
            jsonschema.Draft202012Validator.check_schema(tool.output_schema)
        for name, arguments in CALLS:
            result = await client.call_tool(name, arguments)
            assert not result.is_error, (name, result.content[0].text)
            await client.session.validate_tool_result(name, result)  # raises if it does not
        memory = _data(await client.call_tool("vault_remember", {"title": "t", "content": "c"}))
        archived = await client.call_tool("vault_memory_archive", {"id": memory["id"]})
        await client.session.validate_tool_result("vault_memory_archive", archived)
        wrong = {"results": [{"path": 3}], "mode": "keyword", "vectors": 0, "chunks": 1}
        with pytest.raises(jsonschema.ValidationError):  # the schema says something
            jsonschema.validate(wrong, tools["vault_search"].output_schema)

    _run(state, session)


def _data(result: Any) -> Any:
    assert not result.is_error, result.content[0].text
    return result.structured_content


def test_issue27_item9_while_the_server_embeds_it_says_so_instead_of_run_vrom_embed(
    write_vault: Callable[[dict[str, str | bytes]], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(BackgroundEmbedding, "start", lambda self: None)  # no vector yet
    embedding = EmbeddingProgress(
        running=True, vectors=0, chunks=2, embedded=0, chunks_per_second=4.0, eta_seconds=37.4
    )
    monkeypatch.setattr(BackgroundEmbedding, "progress", lambda self: embedding)
    state = ServerState(write_vault(NOTES), embedder="fake", watch=False)
    state.open_explicit()

    async def session(client: Client) -> None:
        for asked in ({"mode": "vector"}, {"mode": "hybrid"}, {}):
            result = await client.call_tool("vault_search", {"query": "switch", **asked})
            said = _data(result)["fallback"]
            assert "vrom embed" not in said and "vrom embed" not in result.content[0].text
            assert "embedding them in the background (0 of 2 chunks" in said, said
            assert "about 37 s left" in said and "searched by keyword" in said

    try:
        _run(state, session)
    finally:
        state.close()


def test_a_search_reply_counts_its_hits_in_words(
    write_vault: Callable[[dict[str, str | bytes]], Path], tmp_path: Path
) -> None:
    root = write_vault({"A.md": "# A\n\nThe heron waits.\n", "B.md": "# B\n\nA heron flies.\n"})
    with Vault.open(root, state_dir=tmp_path / "state") as vault:
        vault.index()
        for k, said in ((1, "1 hit, keyword search"), (2, "2 hits, keyword search")):
            text = search_reply(vault.search("heron", k=k)).content[0]
            assert isinstance(text, TextContent) and text.text.startswith(said), text
