"""Every note of the vault as an MCP resource: listed a page at a time, read by its URI.

A note's URI is ``vault://note/`` and its vault-relative path, percent-encoded except for
``/`` (``vault://note/Guides/Install%20vrom.md``). ``resources/list`` returns `PAGE_SIZE` notes
by path and a ``nextCursor`` while more follow; the cursor is opaque to clients (it names the
last path of the page, so notes added or removed between pages shift nothing). A cursor that
is not one of ours is refused with -32602 (invalid params), as the spec asks; so is a URI whose
path is refused (outside the vault, hidden) or names no note. A note is read as indexing reads
it: bytes that are not UTF-8 come out as replacement characters, never as a failed read.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from typing import Any
from urllib.parse import quote

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    ListResourcesResult,
    PaginatedRequestParams,
    Resource,
)

from vrom.errors import NotFoundError, ValidationError, VromError
from vrom.ingest.walk import read_note_text, read_regular_file
from vrom.server.base import VromMCPServer
from vrom.server.state import ServerState, client_roots
from vrom.vault import Vault

NOTE_URI = "vault://note/{+path}"
PAGE_SIZE = 100
"""Notes per ``resources/list`` page."""

MARKDOWN = "text/markdown"


def note_uri(path: str) -> str:
    """Return the resource URI of the note at a vault-relative path."""
    return "vault://note/" + quote(path, safe="/")


def register_note_resources(server: VromMCPServer, state: ServerState) -> None:
    """Serve the notes as resources: the ``vault://note/{+path}`` template and a paged list."""

    @server.resource(
        NOTE_URI,
        name="note",
        description="A note of the vault as Markdown, by its path relative to the vault root",
        mime_type=MARKDOWN,
    )
    async def note_resource(path: str, ctx: Context) -> str:
        def read(vault: Vault) -> str:
            note = vault.get_note(path, purpose="read")
            text, problem = read_note_text(read_regular_file(vault.root / note.path))
            if text is None:
                raise ResourceError(f"cannot read note {note.path!r}: {problem}")
            return text

        try:
            vault = await state.vault(client_roots(ctx.session))
            return await asyncio.to_thread(state.run, read, vault)
        except NotFoundError as exc:
            raise ResourceNotFoundError(str(exc)) from exc
        except ValidationError as exc:  # the client's request, not the server, is at fault
            message = f"cannot read note {path!r}: {exc}"
            raise MCPError(INVALID_PARAMS, message, {"uri": note_uri(path)}) from exc
        except (VromError, OSError) as exc:
            raise ResourceError(f"cannot read note {path!r}: {exc}") from exc

    async def list_notes(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams
    ) -> ListResourcesResult:
        after = _after(params.cursor)
        try:
            vault = await state.vault(client_roots(ctx.session))
            notes = await asyncio.to_thread(
                state.run, lambda vault: vault.notes(after, PAGE_SIZE + 1), vault
            )
        except VromError as exc:
            raise MCPError(code=INTERNAL_ERROR, message=str(exc)) from exc
        page = notes[:PAGE_SIZE]
        return ListResourcesResult(
            resources=[
                Resource(
                    uri=note_uri(note.path), name=note.path, title=note.title, mime_type=MARKDOWN
                )
                for note in page
            ],
            next_cursor=_cursor(page[-1].path) if len(notes) > PAGE_SIZE else None,
        )

    server.add_request_handler("resources/list", PaginatedRequestParams, list_notes)


def _cursor(last_path: str) -> str:
    data = json.dumps({"after": last_path}, ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _after(cursor: str | None) -> str:
    """Return the path a cursor continues after ("" for the first page)."""
    if cursor is None:
        return ""
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        after = data["after"]
        if not isinstance(after, str):
            raise TypeError
        return after
    except (binascii.Error, UnicodeDecodeError, ValueError, TypeError, KeyError) as exc:
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"invalid cursor {cursor[:40]!r}: pass the nextCursor of the last page",
        ) from exc
