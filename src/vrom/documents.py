"""The documents a collection holds: the `Document` type and the checks every batch passes.

Every document of a batch is checked before anything is embedded or written; the first bad one
is a `ValidationError` with code ``invalid_value`` naming it (by id and position) and the limit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from vrom.errors import ValidationError
from vrom.store.storable import as_json_reads_it, check_text, check_value

MAX_ID_BYTES = 256
MAX_TEXT_CHARS = 100_000
MAX_METADATA_BYTES = 8 * 1024

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DOCUMENT_KEYS = frozenset({"id", "text", "metadata"})


@dataclass(frozen=True)
class Document:
    """A document to add: a unique ``id`` (≤ 256 bytes), its ``text`` and a ``metadata`` mapping.

    ``metadata`` (JSON-ready, ≤ 8 KiB as JSON) is returned with hits and filtered by ``where``.
    """

    id: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)


def validated_batch(documents: Iterable[Document | Mapping[str, Any]]) -> list[Document]:
    """Return the batch as `Document`s, or raise `ValidationError` for the first bad one."""
    if isinstance(documents, (str, bytes, Mapping, Document)):
        raise ValidationError(
            "add() takes a list of documents: wrap a single document in a list",
        )
    try:
        items = list(documents)
    except TypeError as exc:
        raise ValidationError(
            f"add() takes a list of documents, not {type(documents).__name__}"
        ) from exc
    batch: list[Document] = []
    seen: dict[str, int] = {}
    for number, item in enumerate(items, start=1):
        doc = _document(item, number)
        if doc.id in seen:
            raise ValidationError(
                f"document {doc.id!r} appears twice in the batch (#{seen[doc.id]} and #{number})"
            )
        seen[doc.id] = number
        batch.append(doc)
    return batch


def _document(item: Document | Mapping[str, Any], number: int) -> Document:
    where = f"document #{number}"
    if isinstance(item, Mapping):
        unknown = set(item) - _DOCUMENT_KEYS
        if unknown:
            raise ValidationError(
                f"{where}: unknown key(s) {', '.join(sorted(map(repr, unknown)))}: a document "
                "has 'id', 'text' and 'metadata'"
            )
        if "id" not in item or "text" not in item:
            raise ValidationError(f"{where}: a document needs an 'id' and a 'text'")
        item = Document(item["id"], item["text"], item.get("metadata") or {})
    elif not isinstance(item, Document):
        raise ValidationError(
            f"{where}: a document is a dict or a vrom.Document, not {type(item).__name__}"
        )
    doc_id, text, metadata = item.id, item.text, item.metadata
    if not isinstance(doc_id, str) or not doc_id:
        raise ValidationError(f"{where}: id must be a non-empty string, not {doc_id!r}")
    where = f"document {doc_id!r} (#{number})"
    try:
        id_bytes = len(doc_id.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ValidationError(f"{where}: id is not valid Unicode") from exc
    if id_bytes > MAX_ID_BYTES:
        raise ValidationError(
            f"document #{number}: id is {id_bytes} bytes, over the limit of {MAX_ID_BYTES} bytes"
        )
    if _CONTROL.search(doc_id):
        raise ValidationError(f"{where}: id holds control characters")
    if not isinstance(text, str):
        raise ValidationError(f"{where}: text must be a string, not {type(text).__name__}")
    if len(text) > MAX_TEXT_CHARS:
        raise ValidationError(
            f"{where}: text is {len(text):,} characters, over the limit of {MAX_TEXT_CHARS:,}"
        )
    if not text.strip():
        raise ValidationError(f"{where}: text is empty")
    check_text(text, f"{where}: text")
    if not isinstance(metadata, Mapping):
        raise ValidationError(f"{where}: metadata must be a mapping, not {type(metadata).__name__}")
    if not all(isinstance(key, str) for key in metadata):
        raise ValidationError(f"{where}: metadata keys must be strings")
    try:
        encoded = json.dumps(dict(metadata), ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError) as exc:
        raise ValidationError(f"{where}: metadata is not JSON-ready ({exc})") from exc
    check_value(metadata, f"{where}: metadata")
    if len(encoded) > MAX_METADATA_BYTES:
        raise ValidationError(
            f"{where}: metadata is {len(encoded):,} bytes as JSON, over the limit of "
            f"{MAX_METADATA_BYTES:,} bytes"
        )
    return Document(doc_id, text, as_json_reads_it(metadata, encoded))
