"""What the MCP tools answer: one-line errors from every tool, bounded replies, and the tool
list's descriptions, output schemas and annotations, through the official SDK's client."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import Client

from vrom.errors import StorageError
from vrom.server.app import build_server
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
