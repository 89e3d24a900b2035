"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint over HTTP.

Works with OpenAI, NVIDIA NIM (which wants ``input_type`` query/passage), Ollama and vLLM. Texts
go in batches of at most 64; rows come back in each item's ``index`` order and are L2-normalised
here, because some servers do not normalise. Only what a retry can fix is retried, with capped
exponential backoff (honouring ``Retry-After``), up to ``max_retries`` times (5 by default): 429,
5xx, timeouts, and connections dropped mid-request. A connection that cannot be made (refused,
an unknown host), another 4xx, or a bad response fails at once.
Every failure is a `ModelError` that names the endpoint and the status, never the API key.

The key is passed in, never read here: `vrom.Embedder.openai` and the ``openai:`` spec look it up
in the environment (`vrom.settings`).
"""

from __future__ import annotations

import json
import math
import random
import re
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, NoReturn
from urllib.parse import urlsplit

import httpx
import numpy as np
import numpy.typing as npt

from vrom.embed import Embedder, Fingerprint
from vrom.errors import ModelError, ValidationError
from vrom.settings import OPENAI_API_KEY_ENV

DEFAULT_BASE_URL = "https://api.openai.com/v1"
MAX_BATCH_SIZE = 64
PROBE_TEXT = "dimension probe"
_RETRYABLE = (httpx.TimeoutException, httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)
"""Transport failures a later attempt can get past (a connection that cannot be made is not)."""
BACKOFF_BASE = 0.5  # seconds before the first retry; doubles with each retry
MAX_DELAY = 30.0  # the longest single wait, whether from backoff or from a server's Retry-After
_SPEC = re.compile(r"(?P<model>.+?)@(?P<url>https?://.+)")


class OpenAIEmbedder(Embedder):
    """An embedding model served over HTTP by an OpenAI-compatible ``/embeddings`` endpoint."""

    def __init__(
        self,
        model: str,
        base_url: str = DEFAULT_BASE_URL,
        *,
        api_key: str | None = None,
        api_key_env: str = OPENAI_API_KEY_ENV,
        dims: int | None = None,
        batch_size: int = MAX_BATCH_SIZE,
        max_retries: int = 5,
        timeout: float = 60.0,
        input_type: bool | None = None,
        query_prefix: str = "",
        document_prefix: str = "",
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """Prepare a client for ``{base_url}/embeddings``; nothing is sent until texts are embedded.

        Without ``api_key`` (a local Ollama or vLLM) no ``Authorization`` header is sent;
        ``api_key_env`` names the variable the key comes from, for the messages that say how to
        set it (`vrom.Embedder.openai` reads it from there). ``dims`` is learned from the
        first response when not given. ``input_type`` sends NVIDIA NIM's ``query``/``passage``
        field (``None``: only for ``*.nvidia.com`` hosts). The prefixes are prepended to query and
        document texts (e5's ``query: ``, nomic's ``search_query: ``). ``transport`` and
        ``sleep`` are for tests.
        """
        parts = urlsplit(base_url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValidationError(f"base_url must be an http(s) URL, not {base_url!r}")
        if not model.strip():
            raise ValidationError("an OpenAI-compatible embedder needs a model name")
        if not 1 <= batch_size <= MAX_BATCH_SIZE:
            raise ValidationError(f"batch_size must be between 1 and {MAX_BATCH_SIZE}")
        if dims is not None and dims < 1:
            raise ValidationError("dims must be at least 1")
        if max_retries < 0 or timeout <= 0:
            raise ValidationError("max_retries must be ≥ 0 and timeout > 0")
        path = parts.path.rstrip("/")
        port = f":{parts.port}" if parts.port else ""
        self._url = f"{base_url.strip().rstrip('/')}/embeddings"
        # Shown in messages: no user:password@ part, no query string.
        self._endpoint = f"{parts.scheme}://{parts.hostname}{port}{path}/embeddings"
        self._revision = f"remote:{parts.hostname}{path}"
        self._model = model
        self._api_key = api_key or None
        self._api_key_env = api_key_env
        self._dims = dims
        self._batch_size = batch_size
        self._max_retries = max_retries
        self._input_type = (
            input_type if input_type is not None else parts.hostname.endswith("nvidia.com")
        )
        self._query_prefix = query_prefix
        self._document_prefix = document_prefix
        self._sleep = sleep
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        self._client: httpx.Client | None = httpx.Client(
            headers=headers, timeout=timeout, transport=transport
        )

    @classmethod
    def from_argument(cls, argument: str, **options: Any) -> OpenAIEmbedder:
        """Return the embedder ``MODEL`` or ``MODEL@BASE_URL`` names (the part after ``openai:``).

        The model comes before the ``@`` that starts an ``http(s)://`` URL, so names such as
        ``nomic-embed-text:latest`` or ``@cf/baai/bge-base-en-v1.5`` survive.
        """
        match = _SPEC.fullmatch(argument.strip())
        if match:
            return cls(match["model"], match["url"], **options)
        return cls(argument.strip(), **options)

    @property
    def fingerprint(self) -> Fingerprint:
        """The model's fingerprint; without ``dims`` and before any call, one probe request."""
        dims = self._dims
        if dims is None:
            dims = int(self._embed([PROBE_TEXT], "document").shape[1])
        return Fingerprint(self._model, self._revision, dims, "remote", 0)

    def close(self) -> None:
        """Close the HTTP client; embedding afterwards raises `ModelError`."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def _embed(self, texts: Sequence[str], kind: str) -> npt.NDArray[np.float32]:
        prefix = self._query_prefix if kind == "query" else self._document_prefix
        inputs = [prefix + text for text in texts]
        if not inputs:
            return np.zeros((0, self._dims or 0), dtype=np.float32)
        batches = [
            self._embed_batch(inputs[start : start + self._batch_size], kind)
            for start in range(0, len(inputs), self._batch_size)
        ]
        return batches[0] if len(batches) == 1 else np.concatenate(batches)

    def _embed_batch(self, inputs: list[str], kind: str) -> npt.NDArray[np.float32]:
        body: dict[str, Any] = {"model": self._model, "input": inputs, "encoding_format": "float"}
        if self._input_type:
            body["input_type"] = "query" if kind == "query" else "passage"
        # "replace": a lone surrogate from a badly decoded file becomes "?" instead of an
        # UnicodeEncodeError escaping from deep inside httpx.
        content = json.dumps(body, ensure_ascii=False).encode("utf-8", "replace")
        return self._vectors(self._post(content), len(inputs))

    def _post(self, content: bytes) -> httpx.Response:
        if self._client is None:
            raise ModelError(f"the embedder for {self._endpoint} is closed")
        attempt = 0
        while True:
            cause: Exception | None = None
            retry_after: float | None = None
            try:
                response = self._client.post(self._url, content=content)
            except _RETRYABLE as exc:  # timed out or dropped mid-request: worth another go
                cause, last = exc, _one_line(f"{type(exc).__name__}: {exc}")
            except httpx.ConnectError as exc:  # refused, unknown host: a retry will not help
                raise ModelError(
                    f"embedding request to {self._endpoint} failed: cannot connect "
                    f"({_one_line(str(exc))}); is the server running and the URL right?"
                ) from exc
            except httpx.HTTPError as exc:  # e.g. a body that cannot be decoded
                raise ModelError(
                    f"embedding request to {self._endpoint} failed: {_one_line(str(exc))}"
                ) from exc
            else:
                status = response.status_code
                if 200 <= status < 300:
                    return response
                if status != 429 and status < 500:
                    raise ModelError(self._refusal(response))
                retry_after = _retry_after(response.headers)
                last = f"HTTP {status} {response.reason_phrase}".rstrip()
                detail = self._server_message(response)
                if detail:
                    last += f" ({detail})"
            if attempt >= self._max_retries:
                raise ModelError(
                    f"embedding request to {self._endpoint} failed after {attempt + 1} "
                    f"attempts; last: {last}"
                ) from cause
            self._sleep(_delay(attempt, retry_after))
            attempt += 1

    def _refusal(self, response: httpx.Response) -> str:
        """Return the message for a status that retrying will not fix (4xx other than 429)."""
        status = response.status_code
        message = f"embedding request to {self._endpoint} failed: HTTP {status}"
        message = f"{message} {response.reason_phrase}".rstrip()
        if status in (401, 403):
            # Servers may echo (part of) the key back in the body, so it is not shown.
            if self._api_key is None:
                return f"{message}: no API key is set; set {self._api_key_env} or pass api_key"
            return f"{message}: the API key was rejected; check it (api_key or {self._api_key_env})"
        detail = self._server_message(response)
        if detail:
            message = f"{message}: {detail}"
        if status == 404:
            message += f"; check the base URL and the model name {self._model!r}"
        return message

    def _server_message(self, response: httpx.Response, limit: int = 200) -> str:
        """Return the server's own error text, on one line, shortened, with the key masked."""
        text = response.text
        try:
            payload = json.loads(text)
        except ValueError:
            payload = None
        if isinstance(payload, dict):
            error = payload.get("error")
            if isinstance(error, dict):
                error = error.get("message")
            found = error or payload.get("message") or payload.get("detail")
            text = found if isinstance(found, str) else json.dumps(found)
        if self._api_key:
            text = text.replace(self._api_key, "***")
        text = _one_line(text)
        return text if len(text) <= limit else text[: limit - 1] + "…"

    def _vectors(self, response: httpx.Response, expected: int) -> npt.NDArray[np.float32]:
        """Return the normalised rows of a response in input order, or raise `ModelError`."""

        def bad(problem: str, cause: Exception | None = None) -> NoReturn:
            raise ModelError(
                f"bad response from {self._endpoint} (HTTP {response.status_code}): {problem}"
            ) from cause

        try:
            payload = response.json()
        except ValueError as exc:
            bad("the body is not JSON", exc)
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list):
            bad("no 'data' list")
        if len(data) != expected:
            bad(f"{len(data)} embeddings for {expected} texts")
        rows: list[list[Any] | None] = [None] * expected
        for item in data:
            index = item.get("index") if isinstance(item, dict) else None
            vector = item.get("embedding") if isinstance(item, dict) else None
            if type(index) is not int or not 0 <= index < expected or rows[index] is not None:
                bad("an item without a valid, distinct 'index'")
            if not isinstance(vector, list) or not vector:
                bad("an item without an 'embedding' list of numbers")
            rows[index] = vector
        dims = {len(row) for row in rows if row is not None}
        if len(dims) != 1:
            bad(f"vectors of different lengths {sorted(dims)}")
        (width,) = dims
        if self._dims is not None and width != self._dims:
            bad(f"{width}-d vectors where {self._dims}-d were expected")
        try:
            matrix: npt.NDArray[np.float64] = np.asarray(rows, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            bad("an embedding holds something other than numbers", exc)
        if not np.isfinite(matrix).all():
            bad("an embedding holds NaN or infinity")
        self._dims = width
        norms: npt.NDArray[np.float64] = np.linalg.norm(matrix, axis=1, keepdims=True)
        unit: npt.NDArray[np.float32] = (matrix / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit


def _retry_after(headers: httpx.Headers) -> float | None:
    """Return the wait in seconds a server asked for (``retry-after-ms`` or ``Retry-After``)."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if not value:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            try:
                when = parsedate_to_datetime(value)
            except (TypeError, ValueError):
                continue
            if when.tzinfo is None:
                when = when.replace(tzinfo=timezone.utc)
            seconds = (when - datetime.now(timezone.utc)).total_seconds()
        if math.isfinite(seconds):
            return max(seconds, 0.0)
    return None


def _delay(attempt: int, retry_after: float | None) -> float:
    """Return how long to wait before retry number ``attempt + 1``."""
    if retry_after is not None:
        return min(retry_after, MAX_DELAY)
    ceiling = min(BACKOFF_BASE * 2.0**attempt, MAX_DELAY)
    # Half fixed, half random: clients that failed together do not all come back together.
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def _one_line(text: str) -> str:
    return " ".join(text.split())
