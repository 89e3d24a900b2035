"""Agent tools: a collection as a read-only search tool for OpenAI, Anthropic and MCP agents.

`SearchTool` wraps anything `Searchable` (a `Collection`) with a name, a description and a
JSON Schema for its arguments. `SearchTool.call` takes the arguments a model produced (a dict, or
the JSON text OpenAI sends) and always returns a `ToolResult`: a model's bad arguments and a
failed search come back as ``is_error`` results with a one-line reason it can act on, never as
exceptions that would end the agent loop. The adapters only reshape that one result::

    tool = SearchTool(docs, "search_handbook", "Search the employee handbook.")
    tools = [tool.openai_schema()]                 # Chat Completions ``tools=``
    result = tool.call(tool_call.function.arguments)
    messages.append(openai_tool_message(tool_call.id, result))

The MCP adapter imports the ``mcp`` package only when called; importing this module does not.
"""

# No `from __future__ import annotations`: the MCP SDK reads the annotations of the handler that
# `register_mcp` defines, and they name objects local to that function, so they must be real
# objects rather than strings the SDK would try to resolve in this module's globals.

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Protocol

from vrom._async import in_thread
from vrom.errors import ValidationError, VromError
from vrom.results import Hit, to_jsonable

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

DEFAULT_K = 5
MAX_K = 20
MAX_TEXT_CHARS = 2000
TRUNCATION_MARK = "…"

# The rule both OpenAI and Anthropic apply to tool names, so one name works everywhere.
_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_ARGUMENTS = ("query", "k")


class Searchable(Protocol):
    """What a tool searches: anything with a name and a ``search`` (a `Collection`)."""

    @property
    def name(self) -> str:
        """The collection's name."""
        ...

    def search(
        self, query: str, k: int = 5, where: Mapping[str, Any] | None = None
    ) -> Sequence[Hit]:
        """Return the ``k`` best hits for ``query``, best first (a `SearchReport`)."""
        ...


@dataclass(frozen=True)
class ToolResult:
    """What one tool call gave back, ready to hand to a model.

    Fields:
        is_error: True when the arguments were rejected or the search failed; ``content`` is
            then a one-line reason the model can act on, and ``hits`` is empty.
        content: the text for the model: the JSON text of ``{"results": hits}``, or the reason.
        hits: the results as JSON-ready dicts, best first: ``id`` (the document id), ``text``
            (cut to `MAX_TEXT_CHARS`, ending in `TRUNCATION_MARK` when cut), ``metadata``,
            ``score`` (rounded to 4 places), and ``"truncated": True`` on a cut text only.
    """

    is_error: bool
    content: str
    hits: Sequence[Mapping[str, Any]] = ()

    def to_dict(self) -> dict[str, Any]:
        """Return the result as a JSON-ready dict (``is_error``, ``content``, ``hits``)."""
        return {
            "is_error": self.is_error,
            "content": self.content,
            "hits": [dict(hit) for hit in self.hits],
        }


@dataclass(frozen=True, eq=False)
class SearchTool:
    """A read-only search over one collection, described so a model can call it.

    The model supplies ``query`` (a non-blank string, required) and optionally ``k`` (an integer
    from 1 to `MAX_K`, default `DEFAULT_K`). An integral float such as ``3.0`` counts as an
    integer, as it does in JSON Schema; ``true`` and ``"3"`` do not.

    Fields:
        searchable: the collection to search.
        name: the tool's name, matching ``^[a-zA-Z0-9_-]{1,64}$`` (what OpenAI and Anthropic
            both accept); anything else raises `ValidationError` here, not at the provider.
        description: what the tool searches and when to use it, for the model; not blank.
    """

    searchable: Searchable
    name: str
    description: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _TOOL_NAME.fullmatch(self.name):
            raise ValidationError(
                f"tool name {self.name!r} is not allowed: use 1 to 64 letters, digits, "
                "'_' or '-' (the rule OpenAI and Anthropic share)",
                code="invalid_tool_name",
            )
        if not isinstance(self.description, str) or not self.description.strip():
            raise ValidationError(
                f"tool {self.name!r} needs a description: say what it searches and when to use it"
            )

    @property
    def input_schema(self) -> dict[str, Any]:
        """The JSON Schema (draft 2020-12) of the tool's arguments; a fresh dict on each call."""
        return {
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
                    "maximum": MAX_K,
                    "default": DEFAULT_K,
                    "description": f"How many results to return (1 to {MAX_K}).",
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        }

    def call(self, arguments: Mapping[str, Any] | str) -> ToolResult:
        """Return the search results for a model's arguments (a dict or its JSON text).

        Bad arguments and a `VromError` from the search come back as an ``is_error`` result
        with a one-line reason; nothing the model sends makes this raise.
        """
        try:
            query, k = _parse_arguments(arguments)
            hits = self.searchable.search(query, k=k)
        except VromError as exc:
            return ToolResult(is_error=True, content=_one_line(str(exc)))
        results = tuple(_hit_for_model(hit) for hit in hits)
        content = json.dumps({"results": results}, ensure_ascii=False)
        return ToolResult(is_error=False, content=content, hits=results)

    async def acall(self, arguments: Mapping[str, Any] | str) -> ToolResult:
        """Return `call`'s result, run in a worker thread so the event loop keeps running."""
        return await in_thread(self.call, arguments)

    def openai_schema(self) -> dict[str, Any]:
        """Return the tool in the OpenAI Chat Completions format (an item of ``tools=``)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.input_schema,
            },
        }

    def openai_responses_schema(self) -> dict[str, Any]:
        """Return the tool in the OpenAI Responses API format (an item of ``tools=``)."""
        return {
            "type": "function",
            "name": self.name,
            "description": self.description,
            "parameters": self.input_schema,
        }

    def anthropic_schema(self) -> dict[str, Any]:
        """Return the tool in the Anthropic Messages format (an item of ``tools=``)."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }

    def register_mcp(self, server: "MCPServer[Any]") -> None:
        """Register the tool on an MCP server from the official SDK (``mcp`` 2.x `MCPServer`).

        ``MCPServer`` (FastMCP before mcp 2) builds a tool's input schema from a Python signature
        and validates arguments with it, so the handler's parameters carry this tool's JSON
        Schema for each argument and let every value through unchanged: `call` does the
        checking, and its one-line reasons come back as ``isError`` results. Two checks stay
        with the SDK: a missing ``query`` is rejected by it (still an ``isError`` result, in
        pydantic's words), and unknown arguments are dropped by it before the tool sees them.
        The handler is synchronous, so the SDK runs each search in a worker thread.
        """
        from mcp.types import CallToolResult, TextContent, ToolAnnotations
        from pydantic import PlainValidator, WithJsonSchema

        properties = self.input_schema["properties"]
        as_sent = PlainValidator(_as_sent)

        def search(
            query: Annotated[str, as_sent, WithJsonSchema(properties["query"])],
            k: Annotated[int, as_sent, WithJsonSchema(properties["k"])] = DEFAULT_K,
        ) -> CallToolResult:
            result = self.call({"query": query, "k": k})
            structured = None if result.is_error else {"results": [dict(h) for h in result.hits]}
            return CallToolResult(
                content=[TextContent(type="text", text=result.content)],
                structured_content=structured,
                is_error=result.is_error,
            )

        server.add_tool(
            search,
            name=self.name,
            description=self.description,
            annotations=ToolAnnotations(
                read_only_hint=True,
                destructive_hint=False,
                idempotent_hint=True,
                open_world_hint=False,
            ),
        )


def openai_tool_message(tool_call_id: str, result: ToolResult) -> dict[str, Any]:
    """Return the Chat Completions ``tool`` message that answers one tool call with ``result``.

    The Chat Completions format has no error flag; an error's ``content`` is its reason.
    """
    return {"role": "tool", "tool_call_id": tool_call_id, "content": result.content}


def anthropic_tool_result(tool_use_id: str, result: ToolResult) -> dict[str, Any]:
    """Return the Anthropic ``tool_result`` content block that answers one ``tool_use`` block."""
    return {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "content": result.content,
        "is_error": result.is_error,
    }


def _parse_arguments(arguments: Mapping[str, Any] | str) -> tuple[str, int]:
    """Return (query, k) from a model's arguments, or raise `ValidationError` saying what to fix."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError) as exc:
            raise ValidationError(
                f'arguments are not valid JSON ({exc}): send an object like {{"query": "..."}}'
            ) from exc
    if not isinstance(arguments, Mapping):
        raise ValidationError(
            f'arguments must be a JSON object like {{"query": "..."}}, not {_described(arguments)}'
        )
    unknown = sorted(str(key) for key in arguments if key not in _ARGUMENTS)
    if unknown:
        noun = "argument" if len(unknown) == 1 else "arguments"
        raise ValidationError(
            f"unknown {noun} {', '.join(map(repr, unknown))}: "
            "this tool takes only 'query' and optionally 'k'"
        )
    if "query" not in arguments:
        raise ValidationError("missing the required argument 'query': the text to search for")
    query = arguments["query"]
    if not isinstance(query, str):
        raise ValidationError(f"'query' must be a string, not {_described(query)}")
    if not query.strip():
        raise ValidationError("'query' is blank: say what to search for")
    return query, _parse_k(arguments.get("k", DEFAULT_K))


def _parse_k(k: Any) -> int:
    """Return ``k`` as an int from 1 to `MAX_K`, or raise `ValidationError`."""
    # JSON Schema counts 3.0 as an integer, so a model that writes it is within the schema.
    if isinstance(k, float) and math.isfinite(k) and k.is_integer():
        k = int(k)
    if isinstance(k, bool) or not isinstance(k, int):
        raise ValidationError(f"'k' must be an integer from 1 to {MAX_K}, not {_described(k)}")
    if not 1 <= k <= MAX_K:
        raise ValidationError(f"'k' must be from 1 to {MAX_K}, got {k}")
    return k


def _hit_for_model(hit: Hit) -> dict[str, Any]:
    """Return the JSON-ready dict a model sees for one hit: the passage that matched (a
    collection hit's best chunk, not its whole document), cut to `MAX_TEXT_CHARS`."""
    text = hit.chunk_text if hit.chunk_text is not None else hit.text
    result: dict[str, Any] = {
        "id": hit.id,
        "text": text,
        "metadata": to_jsonable(hit.metadata),
        "score": round(float(hit.score), 4),
    }
    if len(text) > MAX_TEXT_CHARS:
        result["text"] = text[: MAX_TEXT_CHARS - len(TRUNCATION_MARK)] + TRUNCATION_MARK
        result["truncated"] = True
    return result


def _described(value: Any) -> str:
    """Return a value as a model would name it: ``string "3"``, ``boolean true``, ``array``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {json.dumps(value)}"
    if isinstance(value, (int, float)):
        return f"number {json.dumps(value)}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:40] + TRUNCATION_MARK
        return f"string {json.dumps(shown, ensure_ascii=False)}"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    return type(value).__name__


def _one_line(message: str) -> str:
    """Return ``message`` on one line (a model reads it inside a tool result)."""
    return " ".join(message.split())


def _as_sent(value: object) -> object:
    """Return ``value`` unchanged (lets arguments reach `SearchTool.call` as the model sent them)."""
    return value
