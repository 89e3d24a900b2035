"""The agent-tool face: a real in-memory collection as a search tool, its schema, its refusals,
and its OpenAI, Anthropic and MCP shapes (the MCP tests run the real SDK, client and server)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from vrom import Collection, Embedder, ValidationError
from vrom.tools import (
    MAX_TEXT_CHARS,
    TRUNCATION_MARK,
    SearchTool,
    ToolResult,
    anthropic_tool_result,
    openai_tool_message,
)

HANDBOOK = [
    {"id": "leave", "text": "Annual leave is 25 days a year.", "metadata": {"section": "hr"}},
    {
        "id": "expenses",
        "text": "Expenses are reimbursed within 30 days of a receipt.",
        "metadata": {"section": "finance"},
    },
    {
        "id": "laptops",
        "text": "Laptops are replaced every three years by IT.",
        "metadata": {"section": "it"},
    },
]
EXPECTED_SCHEMA = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "minLength": 1,
            "description": "What to search for: a question or a few keywords.",
        },
        "k": {
            "type": "integer",
            "minimum": 1,
            "maximum": 20,
            "default": 5,
            "description": "How many results to return (1 to 20).",
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}
HIT_KEYS = {"id", "text", "metadata", "score"}


@pytest.fixture
def docs() -> Iterator[Collection]:
    collection = Collection.open("handbook", embedder=Embedder.fake())
    collection.add(HANDBOOK)
    yield collection
    collection.close()


@pytest.fixture
def tool(docs: Collection) -> SearchTool:
    return docs.as_tool("search_handbook", "Search the employee handbook.")


# -- construction and schema -------------------------------------------------------------------


def test_input_schema_is_the_documented_json_schema(tool: SearchTool) -> None:
    assert tool.input_schema == EXPECTED_SCHEMA
    tool.input_schema["properties"].clear()  # each call returns a fresh dict
    assert tool.input_schema == EXPECTED_SCHEMA


@pytest.mark.parametrize(
    "arguments",
    [
        {"query": "leave"},
        {"query": "leave", "k": 20},
        {"query": "leave", "k": 3.0},
        {"query": "leave", "k": 0},
        {"query": "leave", "k": 21},
        {"query": "leave", "k": "3"},
        {"query": "leave", "k": True},
        {"query": ""},
        {"query": 5},
        {"k": 3},
        {"query": "leave", "where": {}},
    ],
)
def test_call_accepts_exactly_what_the_schema_accepts(tool: SearchTool, arguments: Any) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(tool.input_schema)
    validator.check_schema(tool.input_schema)

    assert validator.is_valid(arguments) == (not tool.call(arguments).is_error)


@pytest.mark.parametrize("name", ["", "has space", "dotted.name", "x" * 65, "ünïcode"])
def test_a_name_providers_reject_is_refused_at_construction(docs: Collection, name: str) -> None:
    with pytest.raises(ValidationError, match="tool name"):
        SearchTool(docs, name, "Search.")


@pytest.mark.parametrize("name", ["a", "search_handbook", "search-handbook-2", "x" * 64])
def test_names_providers_accept_are_allowed(docs: Collection, name: str) -> None:
    assert SearchTool(docs, name, "Search.").name == name


def test_a_blank_description_is_refused(docs: Collection) -> None:
    with pytest.raises(ValidationError, match="description"):
        SearchTool(docs, "search_handbook", "  ")


# -- calls -------------------------------------------------------------------------------------


def test_a_good_call_returns_the_hits_as_json(tool: SearchTool) -> None:
    result = tool.call({"query": "annual leave", "k": 2})

    assert not result.is_error
    assert 1 <= len(result.hits) <= 2
    best = result.hits[0]
    assert set(best) == HIT_KEYS
    assert best["id"] == "leave"
    assert best["text"] == "Annual leave is 25 days a year."
    assert best["metadata"] == {"section": "hr"}
    assert best["score"] == round(best["score"], 4)
    assert json.loads(result.content) == {"results": [dict(hit) for hit in result.hits]}


def test_json_text_arguments_work_like_a_dict(tool: SearchTool) -> None:
    from_text = tool.call('{"query": "annual leave", "k": 2}')
    assert from_text == tool.call({"query": "annual leave", "k": 2})
    assert not from_text.is_error


def test_k_defaults_to_5_and_bounds_the_hit_count(tool: SearchTool) -> None:
    assert len(tool.call({"query": "days"}).hits) <= 5
    assert len(tool.call({"query": "days", "k": 1}).hits) == 1


def test_an_integral_float_k_counts_as_an_integer(tool: SearchTool) -> None:
    result = tool.call('{"query": "annual leave", "k": 1.0}')
    assert not result.is_error
    assert len(result.hits) == 1


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ({"query": "leave", "k": 0}, "'k' must be from 1 to 20, got 0"),
        ({"query": "leave", "k": 500}, "'k' must be from 1 to 20, got 500"),
        ({"query": "leave", "k": "3"}, "'k' must be an integer from 1 to 20, not string \"3\""),
        ({"query": "leave", "k": True}, "'k' must be an integer from 1 to 20, not boolean true"),
        ({"query": "leave", "k": 2.5}, "'k' must be an integer from 1 to 20, not number 2.5"),
        ({"query": "leave", "k": None}, "'k' must be an integer from 1 to 20, not null"),
        ({"k": 3}, "missing the required argument 'query'"),
        ({"query": 5}, "'query' must be a string, not number 5"),
        ({"query": "   "}, "'query' is blank"),
        ({"query": ""}, "'query' is blank"),
        ({"query": "leave", "where": {"section": "hr"}}, "unknown argument 'where'"),
        ('{"query": "leave"', "arguments are not valid JSON"),
        ("", "arguments are not valid JSON"),
        ('["leave"]', "arguments must be a JSON object"),
        (["leave"], "arguments must be a JSON object"),
        (None, "arguments must be a JSON object"),
    ],
)
def test_bad_arguments_come_back_as_an_error_result(
    tool: SearchTool, arguments: Any, reason: str
) -> None:
    result = tool.call(arguments)

    assert result.is_error
    assert reason in result.content
    assert "\n" not in result.content
    assert result.hits == ()


def test_a_failed_search_comes_back_as_an_error_result(docs: Collection, tool: SearchTool) -> None:
    docs.close()

    result = tool.call({"query": "annual leave"})

    assert result == ToolResult(
        is_error=True, content="collection 'handbook' is closed: open it again"
    )


def test_a_long_text_is_cut_and_marked() -> None:
    # a hit's text is its document's best chunk, so the chunks must be longer than the cut
    with Collection.open("long", embedder=Embedder.fake(), chunk_chars=10_000) as docs:
        docs.add([*HANDBOOK, {"id": "policy", "text": "travel policy " + "detail " * 1000}])
        tool = SearchTool(docs, "search_long", "Search.")

        hits = {hit["id"]: hit for hit in tool.call({"query": "travel policy", "k": 5}).hits}

    cut = hits["policy"]
    assert cut["truncated"] is True
    assert len(cut["text"]) == MAX_TEXT_CHARS
    assert cut["text"].endswith(TRUNCATION_MARK)
    assert cut["text"].startswith("travel policy detail")
    assert all("truncated" not in hit for id_, hit in hits.items() if id_ != "policy")


def test_acall_gives_what_call_gives(tool: SearchTool) -> None:
    arguments = {"query": "annual leave", "k": 2}
    assert asyncio.run(tool.acall(arguments)) == tool.call(arguments)
    assert asyncio.run(tool.acall({"query": ""})).is_error


def test_to_dict_is_json_ready(tool: SearchTool) -> None:
    result = tool.call({"query": "annual leave", "k": 1})
    data = json.loads(json.dumps(result.to_dict()))
    assert data == {"is_error": False, "content": result.content, "hits": list(result.hits)}


# -- provider shapes ---------------------------------------------------------------------------


def test_openai_shapes(tool: SearchTool) -> None:
    assert tool.openai_schema() == {
        "type": "function",
        "function": {
            "name": "search_handbook",
            "description": "Search the employee handbook.",
            "parameters": EXPECTED_SCHEMA,
        },
    }
    assert tool.openai_responses_schema() == {
        "type": "function",
        "name": "search_handbook",
        "description": "Search the employee handbook.",
        "parameters": EXPECTED_SCHEMA,
    }
    result = tool.call('{"query": "annual leave"}')
    message = openai_tool_message("call_1", result)
    assert message == {"role": "tool", "tool_call_id": "call_1", "content": result.content}
    json.dumps([tool.openai_schema(), tool.openai_responses_schema(), message])


def test_anthropic_shapes(tool: SearchTool) -> None:
    assert tool.anthropic_schema() == {
        "name": "search_handbook",
        "description": "Search the employee handbook.",
        "input_schema": EXPECTED_SCHEMA,
    }
    good = anthropic_tool_result("toolu_1", tool.call({"query": "annual leave"}))
    bad = anthropic_tool_result("toolu_2", tool.call({"query": "leave", "k": 500}))
    assert good["type"] == "tool_result"
    assert good["tool_use_id"] == "toolu_1"
    assert good["is_error"] is False
    assert json.loads(good["content"])["results"][0]["id"] == "leave"
    assert bad == {
        "type": "tool_result",
        "tool_use_id": "toolu_2",
        "content": "'k' must be from 1 to 20, got 500",
        "is_error": True,
    }
    json.dumps([tool.anthropic_schema(), good, bad])


# -- MCP ---------------------------------------------------------------------------------------


def test_importing_the_tools_module_does_not_import_mcp() -> None:
    code = "import sys, vrom.tools; print([m for m in ('mcp', 'pydantic') if m in sys.modules])"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_mcp_client_lists_and_calls_the_tool(tool: SearchTool) -> None:
    pytest.importorskip("mcp")
    from mcp import Client
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("vrom-test")
    tool.register_mcp(server)

    async def session() -> None:
        # legacy mode: the initialize handshake and JSON-RPC messages over in-memory streams
        async with Client(server, mode="legacy") as client:
            (listed,) = (await client.list_tools()).tools
            assert listed.name == "search_handbook"
            assert listed.description == "Search the employee handbook."
            schema = listed.input_schema
            assert schema["type"] == "object"
            assert schema["required"] == ["query"]
            for name, expected in EXPECTED_SCHEMA["properties"].items():
                listed_property = schema["properties"][name]  # the SDK adds a "title" to each
                assert {key: listed_property[key] for key in expected} == expected
            assert listed.annotations is not None and listed.annotations.read_only_hint

            good = await client.call_tool("search_handbook", {"query": "annual leave", "k": 2})
            assert not good.is_error
            results = json.loads(good.content[0].text)["results"]
            assert results[0]["id"] == "leave"
            assert good.structured_content == {"results": results}

            too_many = await client.call_tool("search_handbook", {"query": "leave", "k": 500})
            assert too_many.is_error
            assert too_many.content[0].text == "'k' must be from 1 to 20, got 500"

            as_text = await client.call_tool("search_handbook", {"query": "leave", "k": "3"})
            assert as_text.is_error
            assert as_text.content[0].text == (
                "'k' must be an integer from 1 to 20, not string \"3\""
            )

            blank = await client.call_tool("search_handbook", {"query": " "})
            assert blank.is_error
            assert blank.content[0].text == "'query' is blank: say what to search for"

            # the SDK rejects a missing required argument itself, still as an isError result
            missing = await client.call_tool("search_handbook", {"k": 3})
            assert missing.is_error
            assert "query" in missing.content[0].text

            again = await client.call_tool("search_handbook", {"query": "laptops"})
            assert not again.is_error
            assert json.loads(again.content[0].text)["results"][0]["id"] == "laptops"

    asyncio.run(session())


class _BrokenModel(Embedder):
    """A custom embedder whose queries fail with its own exception (a crashed model server)."""

    def __init__(self) -> None:
        self.inner = Embedder.fake()
        self.broken = False

    @property
    def fingerprint(self) -> Any:
        return self.inner.fingerprint

    def _embed(self, texts: Any, kind: str) -> Any:
        if self.broken:
            raise RuntimeError("model server went away")
        return self.inner._embed(texts, kind)


def test_a_custom_embedder_s_exception_is_a_model_error_and_a_tool_error_result() -> None:
    from vrom import ModelError

    model = _BrokenModel()
    with Collection.open("handbook", embedder=model) as docs:
        docs.add(HANDBOOK)
        model.broken = True
        with pytest.raises(ModelError, match="model server went away"):
            docs.search("annual leave", mode="vector")
        with pytest.raises(ModelError, match="model server went away"):
            docs.add([{"id": "new", "text": "A new policy."}])
        result = docs.as_tool("handbook", "Search the handbook").call({"query": "leave"})
        assert result.is_error and "model server went away" in result.content
        assert "\n" not in result.content
