"""How each MCP tool is declared: its description, its annotations, and the output schema
derived from the result dataclasses it returns.

`tool` registers a tool function with its docstring, dedented, as its description (the SDK
would keep the docstring's indentation), and the hints a client shows its user: whether the
tool only reads (`READ`), may rewrite or remove what is there (``destructiveHint``), and whether
calling it again with the same arguments changes nothing more (``idempotentHint``).

A tool returns a `CallToolResult` it builds (a text summary beside the data), so the SDK
cannot derive a schema from the return type alone: ``Annotated[CallToolResult, Model]`` names
the data's shape. Each `Model` here publishes the JSON schema pydantic derives from a result
dataclass (`vrom.results.to_jsonable` writes the same fields), plus the ``cut`` list every
reply may carry (`vrom.server.bounds.Cut`). A compact reply leaves null fields out, so there
a field that may be null is not required. Clients validate the structured content against
the schema; the server does not validate it a second time (the dataclass already holds it).

(No ``from __future__ import annotations``: the SDK reads the tool functions' annotations.)
"""

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from typing_extensions import NotRequired, TypedDict  # pydantic reads them on Python < 3.12

from vrom._background_embedding import EmbeddingProgress
from vrom.install import InstallResult
from vrom.memories import Memory, MemoryHit, MemoryStats
from vrom.results import (
    Context,
    DeleteResult,
    FolderListing,
    FormatReport,
    IndexSummary,
    Link,
    Note,
    NoteRef,
    Related,
    SearchReport,
    TagCount,
    VaultStats,
    WriteResult,
)
from vrom.server.bounds import Cut
from vrom.server.watch import WatcherStatus

F = TypeVar("F", bound=Callable[..., Any])

FILTER_GRAMMAR = (
    "a JSON object in the one filter grammar (Chroma's): {field: value} for equality (a list"
    " field: it holds the value), {field: {op: value}} with $eq $ne $gt $gte $lt $lte (numbers,"
    " or ISO 8601 dates compared as instants), $in $nin (a list), $contains (a list field"
    " holds it), and {$and: [...]}, {$or: [...]}; several keys must all hold"
)
"""What every tool's filter argument takes (docs/filters.md is the long version)."""


def where_argument(fields: str, example: str) -> Any:
    """Return the ``Field`` of a tool's ``where`` argument over ``fields``."""
    return Field(description=f"Filter on {fields}: {FILTER_GRAMMAR}. Example: {example}")


READ = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
REWRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
"""Rewrites or removes what a note holds (frontmatter keys, enrichment, a deletion); the same
call again changes nothing more."""
WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)
"""Overwrites a note, or appends to it: each call appends again."""
UPDATE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
"""Brings derived state up to date (the index, a memory's status); nothing a user wrote is lost."""
ADD = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
"""Adds something new (a memory) each call."""
INSTALL = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
"""Rewrites a file outside the vault (backed up first); running it twice changes nothing."""


def tool(
    server: MCPServer, annotations: ToolAnnotations, description: str | None = None
) -> Callable[[F], F]:
    """Return a decorator registering a tool function on ``server`` with ``annotations`` and
    its docstring, dedented, as its description (``description`` instead, when the text is
    made at start: paths on this machine); the SDK derives the input schema from the
    arguments and the output schema from the return annotation (one of the replies below)."""

    def register(fn: F) -> F:
        text = description or inspect.cleandoc(fn.__doc__ or "")
        server.tool(annotations=annotations, description=text)(fn)
        return fn

    return register


def declared(
    shape: Any, *, compact: bool = False, more: Mapping[str, Any] | None = None
) -> type[BaseModel]:
    """Return a model whose JSON schema is ``shape``'s (with ``cut``, the fields ``more``
    names with their types, and, when ``compact``, the fields that may be null optional) and
    that accepts any object (the client validates)."""
    schema = TypeAdapter(shape).json_schema()
    defs = schema.setdefault("$defs", {})
    for field, kind in {**(more or {}), "cut": list[Cut]}.items():
        added = TypeAdapter(kind).json_schema()
        defs.update(added.pop("$defs", {}))
        schema["properties"][field] = added
        if field != "cut":
            schema["required"].append(field)
    if compact:
        for shape_schema in (schema, *defs.values()):
            _nulls_optional(shape_schema)
    schema = _inlined(schema, schema.pop("$defs"), top=True)
    name = getattr(shape, "__name__", "Reply")

    class Declared(BaseModel):
        model_config = ConfigDict(extra="allow")

        @classmethod
        def __get_pydantic_json_schema__(cls, *_: Any) -> dict[str, Any]:
            return schema

    Declared.__name__ = Declared.__qualname__ = f"{name}Output"
    return Declared


def _inlined(schema: Any, defs: Mapping[str, Any], *, top: bool = False) -> Any:
    """Return ``schema`` with each ``$ref`` replaced by its definition (pydantic would try to
    resolve a reference in a schema a model publishes; the result shapes are not recursive),
    without the titles pydantic makes up and the nested shapes' docstrings (the tool's
    description and the top shape's say what the fields are: the list of tools stays small)."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str):
            return _inlined(defs[ref.removeprefix("#/$defs/")], defs)
        dropped = {"title"} if top else {"title", "description"}
        return {
            key: _fields_inlined(value, defs) if key == "properties" else _inlined(value, defs)
            for key, value in schema.items()
            if key not in dropped
        }
    if isinstance(schema, list):
        return [_inlined(value, defs) for value in schema]
    return schema


def _fields_inlined(properties: Mapping[str, Any], defs: Mapping[str, Any]) -> dict[str, Any]:
    """Return a shape's ``properties``, each inlined (a field may be called ``title``)."""
    return {name: _inlined(field, defs) for name, field in properties.items()}


def _nulls_optional(schema: dict[str, Any]) -> None:
    properties = schema.get("properties", {})
    required = [name for name in schema.get("required", ()) if not _nullable(properties[name])]
    if required:
        schema["required"] = required
    else:
        schema.pop("required", None)


def _nullable(schema: Mapping[str, Any]) -> bool:
    return schema.get("type") == "null" or any(_nullable(arm) for arm in schema.get("anyOf", ()))


class FrontmatterData(TypedDict):
    """A note's path and its frontmatter."""

    path: str
    frontmatter: dict[str, Any]


class TagsData(TypedDict):
    """Every tag with its count, or one ``tag`` and its notes."""

    tags: NotRequired[list[TagCount]]
    tag: NotRequired[str]
    notes: NotRequired[list[NoteRef]]


class LinksData(TypedDict):
    """A note and the links it makes."""

    note: NoteRef
    links: Sequence[Link]


class BacklinksData(TypedDict):
    """A note and the notes linking to it."""

    note: NoteRef
    backlinks: Sequence[NoteRef]


class RecallData(TypedDict):
    """The memories recalled, best first."""

    results: list[MemoryHit]


SearchReply = Annotated[CallToolResult, declared(SearchReport, compact=True)]
FormatReply = Annotated[CallToolResult, declared(FormatReport, compact=True)]
ContextReply = Annotated[CallToolResult, declared(Context)]
NoteReply = Annotated[CallToolResult, declared(Note)]
FrontmatterReply = Annotated[CallToolResult, declared(FrontmatterData)]
FolderReply = Annotated[CallToolResult, declared(FolderListing)]
LinksReply = Annotated[CallToolResult, declared(LinksData)]
BacklinksReply = Annotated[CallToolResult, declared(BacklinksData)]
RelatedReply = Annotated[CallToolResult, declared(Related)]
TagsReply = Annotated[CallToolResult, declared(TagsData)]
StatsReply = Annotated[
    CallToolResult,
    declared(VaultStats, more={"embedding": EmbeddingProgress | None, "watcher": WatcherStatus}),
]
WriteReply = Annotated[CallToolResult, declared(WriteResult)]
DeleteReply = Annotated[CallToolResult, declared(DeleteResult)]
IndexReply = Annotated[CallToolResult, declared(IndexSummary)]
MemoryReply = Annotated[CallToolResult, declared(Memory)]
RecallReply = Annotated[CallToolResult, declared(RecallData)]
MemoryStatsReply = Annotated[CallToolResult, declared(MemoryStats)]
InstallReply = Annotated[CallToolResult, declared(InstallResult)]
