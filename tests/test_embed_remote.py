"""OpenAIEmbedder against a real OpenAI-compatible HTTP server running on 127.0.0.1 in a thread.

The server hashes each text into a vector (deliberately not normalised), answers in shuffled order
with ``index`` fields, records every request, and can be told to fail or misbehave. Retries sleep
through an injected no-op, so nothing here waits for real.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

import httpx
import numpy as np
import numpy.typing as npt
import pytest

from vrom.embed import Embedder, Fingerprint
from vrom.embed.remote import MAX_DELAY, OpenAIEmbedder, _retry_after
from vrom.errors import ModelError, ValidationError

DIMS = 12
SECRET = "sk-test-0123456789abcdef"


def raw_vector(text: str, dims: int = DIMS) -> list[float]:
    """Return the server's vector for ``text``: hashed, scaled, not of unit length."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return [(digest[i % len(digest)] - 127.5) / 10.0 for i in range(dims)]


def unit(text: str) -> npt.NDArray[np.float64]:
    vector = np.array(raw_vector(text))
    result: npt.NDArray[np.float64] = vector / np.linalg.norm(vector)
    return result


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeServerState:
    """What the server has seen and how it should answer the next requests."""

    requests: list[Recorded] = field(default_factory=list)
    # Each queued failure answers one request: (status, headers, body).
    failures: list[tuple[int, dict[str, str], bytes]] = field(default_factory=list)
    # Turns one good response into a bad one, for every request while set.
    corrupt: Callable[[dict[str, Any]], Any] | None = None
    dims: int = DIMS
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail_next(
        self, count: int, status: int, headers: dict[str, str] | None = None, body: bytes = b""
    ) -> None:
        self.failures.extend([(status, headers or {}, body)] * count)


class FakeServer:
    def __init__(self) -> None:
        self.state = FakeServerState()
        state = self.state

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep pytest output clean

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                body = json.loads(raw)
                with state.lock:
                    state.requests.append(Recorded(self.path, dict(self.headers.items()), body))
                    failure = state.failures.pop(0) if state.failures else None
                if failure is not None:
                    self._send(*failure)
                elif self.path != "/v1/embeddings":
                    self._send(404, {}, b'{"error": {"message": "no such route"}}')
                else:
                    payload: Any = self._embeddings(body)
                    if state.corrupt is not None:
                        payload = state.corrupt(payload)
                    raw_out = payload if isinstance(payload, bytes) else json.dumps(payload)
                    self._send(200, {}, raw_out if isinstance(raw_out, bytes) else raw_out.encode())

            def _embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
                data = [
                    {"object": "embedding", "index": i, "embedding": raw_vector(text, state.dims)}
                    for i, text in enumerate(body["input"])
                ]
                random.Random(len(state.requests)).shuffle(data)
                return {"object": "list", "model": body["model"], "data": data}

            def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        host, port = self.httpd.server_address[:2]
        self.base_url = f"http://{host!s}:{port}/v1"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self.thread.start()
        self.running = True

    def stop(self) -> None:
        if self.running:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.thread.join()
            self.running = False

    @property
    def requests(self) -> list[Recorded]:
        return self.state.requests


@pytest.fixture
def server() -> Iterator[FakeServer]:
    running = FakeServer()
    yield running
    running.stop()


@pytest.fixture(autouse=True)
def _no_ambient_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


class Sleeps(list[float]):
    """A no-op sleep that remembers what it was asked to wait."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def make(server: FakeServer) -> Iterator[Callable[..., tuple[OpenAIEmbedder, Sleeps]]]:
    """Return a factory of embedders pointed at the server, each with a recording no-op sleep."""
    made: list[OpenAIEmbedder] = []

    def build(**options: Any) -> tuple[OpenAIEmbedder, Sleeps]:
        sleeps = Sleeps()
        model, base_url = (
            options.pop("model", "test-embed"),
            options.pop("base_url", server.base_url),
        )
        # as user code makes one: Embedder.openai looks the API key up in the environment
        embedder = cast(OpenAIEmbedder, Embedder.openai(model, base_url, sleep=sleeps, **options))
        made.append(embedder)
        return embedder, sleeps

    yield build
    for embedder in made:
        embedder.close()


TEXTS = [f"note number {i} about topic {i % 7}" for i in range(150)]


def test_batches_of_at_most_64_in_order_and_normalised(make: Any, server: FakeServer) -> None:
    embedder, _ = make()
    matrix = embedder.embed_documents(TEXTS)
    assert [len(r.body["input"]) for r in server.requests] == [64, 64, 22]
    assert [t for r in server.requests for t in r.body["input"]] == TEXTS
    assert {r.path for r in server.requests} == {"/v1/embeddings"}
    assert {r.body["model"] for r in server.requests} == {"test-embed"}
    assert matrix.dtype == np.float32 and matrix.shape == (150, DIMS)
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(matrix, np.stack([unit(t) for t in TEXTS]), rtol=1e-5, atol=1e-6)


def test_smaller_batch_size(make: Any, server: FakeServer) -> None:
    embedder, _ = make(batch_size=10)
    embedder.embed_documents(TEXTS[:25])
    assert [len(r.body["input"]) for r in server.requests] == [10, 10, 5]


@pytest.mark.parametrize("batch_size", [0, 65])
def test_batch_size_is_bounded(batch_size: int) -> None:
    with pytest.raises(ValidationError, match="batch_size"):
        OpenAIEmbedder("m", batch_size=batch_size)


@pytest.mark.parametrize("url", ["ftp://example.com/v1", "localhost:11434", ""])
def test_base_url_must_be_http(url: str) -> None:
    with pytest.raises(ValidationError, match="base_url"):
        OpenAIEmbedder("m", url)


def test_query_is_one_vector(make: Any, server: FakeServer) -> None:
    embedder, _ = make()
    vector = embedder.embed_query("what is vrom?")
    assert vector.shape == (DIMS,) and vector.dtype == np.float32
    np.testing.assert_allclose(vector, unit("what is vrom?"), rtol=1e-5, atol=1e-6)


def test_input_type_query_versus_passage(make: Any, server: FakeServer) -> None:
    embedder, _ = make(input_type=True)
    embedder.embed_documents(["a document"])
    embedder.embed_query("a question")
    assert [r.body["input_type"] for r in server.requests] == ["passage", "query"]
    assert {r.body["encoding_format"] for r in server.requests} == {"float"}


def test_no_input_type_unless_asked(make: Any, server: FakeServer) -> None:
    embedder, _ = make()
    embedder.embed_documents(["a document"])
    embedder.embed_query("a question")
    assert all("input_type" not in r.body for r in server.requests)


def test_input_type_on_by_default_for_nvidia_hosts() -> None:
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        data = [{"index": i, "embedding": raw_vector(t)} for i, t in enumerate(body["input"])]
        return httpx.Response(200, json={"data": data})

    embedder = OpenAIEmbedder(
        "nvidia/nv-embedqa-e5-v5",
        "https://integrate.api.nvidia.com/v1",
        api_key="nvapi-x",
        transport=httpx.MockTransport(handler),
    )
    embedder.embed_query("q")
    assert bodies[0]["input_type"] == "query"
    assert embedder.fingerprint.revision == "remote:integrate.api.nvidia.com/v1"


def test_prefixes_are_applied(make: Any, server: FakeServer) -> None:
    embedder, _ = make(query_prefix="query: ", document_prefix="passage: ")
    documents = embedder.embed_documents(["alpha", "beta"])
    query = embedder.embed_query("gamma")
    assert server.requests[0].body["input"] == ["passage: alpha", "passage: beta"]
    assert server.requests[1].body["input"] == ["query: gamma"]
    np.testing.assert_allclose(documents[1], unit("passage: beta"), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(query, unit("query: gamma"), rtol=1e-5, atol=1e-6)


def test_api_key_from_the_environment(
    make: Any, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    embedder, _ = make()
    embedder.embed_query("q")
    assert server.requests[-1].headers["Authorization"] == f"Bearer {SECRET}"


def test_api_key_argument_and_custom_env(
    make: Any, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "from-openai-env")
    monkeypatch.setenv("NVIDIA_API_KEY", "from-nvidia-env")
    make(api_key="explicit")[0].embed_query("q")
    make(api_key_env="NVIDIA_API_KEY")[0].embed_query("q")
    assert [r.headers["Authorization"] for r in server.requests] == [
        "Bearer explicit",
        "Bearer from-nvidia-env",
    ]


def test_the_openai_spec_takes_the_key_from_the_environment(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    embedder = Embedder.from_spec(f"openai:test-embed@{server.base_url}")
    assert embedder is not None
    try:
        embedder.embed_query("q")
    finally:
        embedder.close()
    assert server.requests[-1].headers["Authorization"] == f"Bearer {SECRET}"


def test_the_embedder_itself_reads_no_environment(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    embedder = OpenAIEmbedder("test-embed", server.base_url)
    try:
        embedder.embed_query("q")
    finally:
        embedder.close()
    assert "Authorization" not in server.requests[-1].headers


def test_no_key_no_authorization_header(make: Any, server: FakeServer) -> None:
    embedder, _ = make()
    embedder.embed_query("q")
    assert "Authorization" not in server.requests[0].headers


def test_retries_429_honouring_retry_after(make: Any, server: FakeServer) -> None:
    embedder, sleeps = make()
    server.state.fail_next(2, 429, {"Retry-After": "7"})
    server.state.fail_next(1, 429)
    matrix = embedder.embed_documents(["x", "y"])
    assert len(server.requests) == 4
    assert sleeps[:2] == [7.0, 7.0]
    assert 0.5 <= sleeps[2] <= 2.0  # third try: backoff of 2 s with jitter in its upper half
    np.testing.assert_allclose(matrix[1], unit("y"), rtol=1e-5, atol=1e-6)


def test_retry_after_is_capped(make: Any, server: FakeServer) -> None:
    embedder, sleeps = make()
    server.state.fail_next(1, 429, {"Retry-After": "86400"})
    embedder.embed_query("q")
    assert sleeps == [MAX_DELAY]


@pytest.mark.parametrize("status", [500, 502, 503])
def test_retries_5xx_with_growing_backoff(make: Any, server: FakeServer, status: int) -> None:
    embedder, sleeps = make()
    server.state.fail_next(4, status)
    embedder.embed_query("q")
    assert len(server.requests) == 5
    for attempt, seconds in enumerate(sleeps):
        ceiling = 0.5 * 2**attempt
        assert ceiling / 2 <= seconds <= ceiling


def test_gives_up_after_max_retries(
    make: Any, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    embedder, sleeps = make(max_retries=2)
    server.state.fail_next(10, 503, body=f'{{"error": {{"message": "busy, {SECRET}"}}}}'.encode())
    with pytest.raises(ModelError) as caught:
        embedder.embed_query("q")
    message = str(caught.value)
    assert len(server.requests) == 3 and len(sleeps) == 2
    assert "503" in message and server.base_url in message and "3 attempts" in message
    assert "busy" in message and SECRET not in message and "\n" not in message


def test_400_fails_at_once(make: Any, server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    embedder, sleeps = make()
    server.state.fail_next(1, 400, body=b'{"error": {"message": "input too long"}}')
    with pytest.raises(ModelError, match="HTTP 400") as caught:
        embedder.embed_documents(["x"])
    assert len(server.requests) == 1 and sleeps == []
    assert "input too long" in str(caught.value) and SECRET not in str(caught.value)


def test_401_never_shows_the_key_even_when_the_server_echoes_it(
    make: Any, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    embedder, sleeps = make()
    echoed = f"Incorrect API key provided: {SECRET[:6]}****{SECRET[-4:]}"
    server.state.fail_next(1, 401, body=json.dumps({"error": {"message": echoed}}).encode())
    with pytest.raises(ModelError, match="401") as caught:
        embedder.embed_query("q")
    assert SECRET[-4:] not in str(caught.value) and "OPENAI_API_KEY" in str(caught.value)
    assert sleeps == []


def test_404_points_at_the_url_and_model(make: Any, server: FakeServer) -> None:
    embedder, _ = make(base_url=server.base_url.replace("/v1", "/v2"))
    with pytest.raises(ModelError, match=r"HTTP 404.*base URL and the model name 'test-embed'"):
        embedder.embed_query("q")


def _drop_one(payload: dict[str, Any]) -> Any:
    return {**payload, "data": payload["data"][:-1]}


def _no_index(payload: dict[str, Any]) -> Any:
    return {"data": [{"embedding": item["embedding"]} for item in payload["data"]]}


def _repeated_index(payload: dict[str, Any]) -> Any:
    return {"data": [{**item, "index": 0} for item in payload["data"]]}


def _no_embedding(payload: dict[str, Any]) -> Any:
    return {"data": [{"index": item["index"]} for item in payload["data"]]}


def _ragged(payload: dict[str, Any]) -> Any:
    data = payload["data"]
    return {"data": [{**data[0], "embedding": data[0]["embedding"][:-1]}, *data[1:]]}


def _text_in_vector(payload: dict[str, Any]) -> Any:
    data = payload["data"]
    return {"data": [{**item, "embedding": ["x"] * DIMS} for item in data]}


def _nan(payload: dict[str, Any]) -> Any:
    first, *rest = payload["data"]
    return {"data": [{**first, "embedding": [float("nan")] * DIMS}, *rest]}  # json writes NaN


@pytest.mark.parametrize(
    ("corrupt", "problem"),
    [
        (_drop_one, "2 embeddings for 3 texts"),
        (lambda payload: {"object": "list"}, "no 'data' list"),
        (lambda payload: b"<html>gateway</html>", "not JSON"),
        (_no_index, "index"),
        (_repeated_index, "index"),
        (_no_embedding, "'embedding'"),
        (_ragged, "different lengths"),
        (_text_in_vector, "other than numbers"),
        (_nan, "NaN"),
    ],
)
def test_bad_responses_are_model_errors(
    make: Any, server: FakeServer, corrupt: Callable[[dict[str, Any]], Any], problem: str
) -> None:
    embedder, sleeps = make()
    server.state.corrupt = corrupt
    with pytest.raises(ModelError, match="bad response from") as caught:
        embedder.embed_documents(["a", "b", "c"])
    assert problem in str(caught.value) and sleeps == []


def test_dims_other_than_configured_are_a_model_error(make: Any, server: FakeServer) -> None:
    embedder, _ = make(dims=DIMS + 1)
    with pytest.raises(ModelError, match=f"{DIMS}-d vectors where {DIMS + 1}-d"):
        embedder.embed_query("q")


def test_dims_that_change_between_calls_are_a_model_error(make: Any, server: FakeServer) -> None:
    embedder, _ = make()
    embedder.embed_query("q")
    server.state.dims = DIMS * 2
    with pytest.raises(ModelError, match="where 12-d were expected"):
        embedder.embed_query("q")


def test_connection_refused_fails_at_once(make: Any, server: FakeServer) -> None:
    embedder, sleeps = make(max_retries=3)
    embedder.embed_query("q")
    server.stop()
    with pytest.raises(ModelError, match=r"cannot connect.*is the server running") as caught:
        embedder.embed_query("q")
    assert sleeps == [], "a refused connection is not retried"
    assert server.base_url in str(caught.value)
    assert isinstance(caught.value.__cause__, httpx.ConnectError)


def test_an_unknown_host_fails_at_once() -> None:
    seen: list[httpx.Request] = []

    def unknown(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        raise httpx.ConnectError("[Errno -2] Name or service not known", request=request)

    sleeps = Sleeps()
    embedder = OpenAIEmbedder(
        "m", "http://no-such-host.invalid/v1", sleep=sleeps, transport=httpx.MockTransport(unknown)
    )
    with pytest.raises(ModelError, match=r"cannot connect.*Name or service not known"):
        embedder.embed_query("q")
    assert len(seen) == 1 and len(sleeps) == 0


def test_a_connection_dropped_mid_request_is_retried() -> None:
    seen: list[httpx.Request] = []

    def drops_once(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) == 1:
            raise httpx.RemoteProtocolError("server disconnected", request=request)
        body = json.loads(request.content)
        data = [{"index": i, "embedding": raw_vector(t)} for i, t in enumerate(body["input"])]
        return httpx.Response(200, json={"data": data})

    sleeps = Sleeps()
    embedder = OpenAIEmbedder(
        "m", "http://127.0.0.1:9/v1", sleep=sleeps, transport=httpx.MockTransport(drops_once)
    )
    assert embedder.embed_query("q").shape == (DIMS,)
    assert len(seen) == 2 and len(sleeps) == 1


def _timing_out(failures: int) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    """Return a transport that times out ``failures`` times, then answers, and its requests."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) <= failures:
            raise httpx.ReadTimeout("timed out", request=request)
        body = json.loads(request.content)
        data = [{"index": i, "embedding": raw_vector(t)} for i, t in enumerate(body["input"])]
        return httpx.Response(200, json={"data": data})

    return httpx.MockTransport(handler), seen


def test_timeouts_are_retried() -> None:
    transport, seen = _timing_out(2)
    sleeps = Sleeps()
    embedder = OpenAIEmbedder("m", "http://127.0.0.1:9/v1", sleep=sleeps, transport=transport)
    assert embedder.embed_query("q").shape == (DIMS,)
    assert len(seen) == 3 and len(sleeps) == 2


def test_timeouts_give_up_after_max_retries() -> None:
    transport, seen = _timing_out(100)
    embedder = OpenAIEmbedder(
        "m", "http://127.0.0.1:9/v1", max_retries=1, sleep=Sleeps(), transport=transport
    )
    with pytest.raises(ModelError, match="after 2 attempts; last: ReadTimeout") as caught:
        embedder.embed_query("q")
    assert len(seen) == 2 and isinstance(caught.value.__cause__, httpx.ReadTimeout)


def test_dims_learned_from_the_first_response(make: Any, server: FakeServer) -> None:
    embedder, _ = make()
    embedder.embed_documents(["one", "two"])
    assert embedder.dim == DIMS
    assert embedder.fingerprint == Fingerprint(
        "test-embed", "remote:127.0.0.1/v1", DIMS, "remote", 0, True
    )
    assert len(server.requests) == 1  # the fingerprint needed no probe


def test_fingerprint_probes_once_when_dims_are_unknown(make: Any, server: FakeServer) -> None:
    embedder, _ = make()
    assert embedder.fingerprint.dims == DIMS
    assert embedder.fingerprint.dims == DIMS
    assert [r.body["input"] for r in server.requests] == [["dimension probe"]]


def test_given_dims_need_no_request(make: Any, server: FakeServer) -> None:
    embedder, _ = make(dims=DIMS)
    assert embedder.fingerprint.dims == DIMS and server.requests == []


def test_empty_input_sends_nothing(make: Any, server: FakeServer) -> None:
    embedder, _ = make(dims=DIMS)
    assert embedder.embed_documents([]).shape == (0, DIMS)
    assert server.requests == []


def test_closed_embedder_raises_model_error(make: Any) -> None:
    embedder, _ = make()
    embedder.close()
    embedder.close()  # twice is fine
    with pytest.raises(ModelError, match="closed"):
        embedder.embed_query("q")


def test_is_an_embedder_and_parses_spec_arguments() -> None:
    plain = OpenAIEmbedder.from_argument("text-embedding-3-small")
    local = OpenAIEmbedder.from_argument("nomic-embed-text:latest@http://localhost:11434/v1/")
    workers = OpenAIEmbedder.from_argument("@cf/baai/bge-base-en-v1.5@https://example.com/ai/v1")
    try:
        assert isinstance(plain, Embedder)
        assert plain._model == "text-embedding-3-small"
        assert plain._url == "https://api.openai.com/v1/embeddings"
        assert local._model == "nomic-embed-text:latest"
        assert local._url == "http://localhost:11434/v1/embeddings"
        assert local._revision == "remote:localhost/v1"
        assert workers._model == "@cf/baai/bge-base-en-v1.5"
        assert workers._url == "https://example.com/ai/v1/embeddings"
    finally:
        for embedder in (plain, local, workers):
            embedder.close()


def test_retry_after_forms() -> None:
    assert _retry_after(httpx.Headers({"retry-after": "3"})) == 3.0
    assert _retry_after(httpx.Headers({"retry-after-ms": "250", "retry-after": "9"})) == 0.25
    assert _retry_after(httpx.Headers({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0
    assert _retry_after(httpx.Headers({"retry-after": "soon"})) is None
    assert _retry_after(httpx.Headers({})) is None
