"""Every other ``/v1/*`` path: method, path, query, headers, body, status and streaming pass through (SPEC §6)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tests.conftest import PROXY_KEY, UPSTREAM_KEY, Direct, Proxy
from tests.fake_upstream import FakeUpstream, b64_floats, error_json, gzip_json


@pytest.fixture
def proxy(plain_proxy: Proxy) -> Proxy:
    """These tests look at the relay only: they share one proxy (memory off) per module."""
    return plain_proxy


VECTORS = [[0.1, -0.25, 3.5, 1e-3], [2.0, 0.0, -1.5, 0.333]]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_models_list_and_retrieve(proxy: Proxy, direct: Direct, upstream: FakeUpstream, mode: str) -> None:
    if mode == "async":
        async with proxy.aclient() as aclient:
            ids = [m.id async for m in aclient.models.list()]
    else:
        with proxy.client() as client:
            ids = [m.id for m in client.models.list()]
    assert ids == ["gpt-4o-mini"]
    seen = upstream.requests[-1]
    assert (seen.method, seen.path) == ("GET", "/v1/models")
    assert seen.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"


def embeddings_route(upstream: FakeUpstream) -> None:
    async def embeddings(request: Request, body: dict[str, Any]) -> Response:
        base64 = body.get("encoding_format") == "base64"
        data = [
            {"object": "embedding", "index": i, "embedding": b64_floats(v) if base64 else v}
            for i, v in enumerate(VECTORS)
        ]
        usage = {"prompt_tokens": 4, "total_tokens": 4}
        return JSONResponse({"object": "list", "data": data, "model": body["model"], "usage": usage})

    upstream.routes["/v1/embeddings"] = embeddings


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_embeddings_base64_decode_to_equal_values(
    proxy: Proxy, direct: Direct, upstream: FakeUpstream, mode: str
) -> None:
    embeddings_route(upstream)
    results = []
    for target in (proxy, direct):
        if mode == "async":
            async with target.aclient() as aclient:
                results.append(await aclient.embeddings.create(model="text-embedding-3-small", input=["a", "b"]))
        else:
            with target.client() as client:
                results.append(client.embeddings.create(model="text-embedding-3-small", input=["a", "b"]))
    via_proxy, via_direct = ([d.embedding for d in r.data] for r in results)
    assert via_proxy == via_direct
    assert via_proxy == [pytest.approx(v, rel=1e-6) for v in VECTORS]
    assert upstream.requests[-2].json()["encoding_format"] == "base64"  # the SDK's default, sent as is
    assert upstream.requests[-2].json() == upstream.requests[-1].json()


@pytest.fixture
def upload() -> Iterator[bytes]:
    # Every byte value, CRLFs and something that looks like a multipart boundary.
    yield bytes(range(256)) * 40 + b"\r\n--boundary\r\n" + os.urandom(4096)


def multipart_fields(content_type: str, body: bytes) -> dict[str, tuple[str | None, bytes]]:
    """name -> (filename, exact bytes) of a multipart/form-data body (no parser library needed)."""
    boundary = content_type.split("boundary=", 1)[1].strip('"').encode()
    out: dict[str, tuple[str | None, bytes]] = {}
    for part in body.split(b"--" + boundary)[1:-1]:
        head, _, data = part.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        disposition = next(h for h in head.decode().split("\r\n") if h.lower().startswith("content-disposition"))
        params = dict(
            p.strip().split("=", 1) for p in disposition.split(";")[1:] if "=" in p
        )
        filename = params.get("filename")
        out[params["name"].strip('"')] = (filename.strip('"') if filename else None, data.removesuffix(b"\r\n"))
    return out


def files_route(upstream: FakeUpstream) -> None:
    async def files(request: Request, body: dict[str, Any]) -> Response:
        form = multipart_fields(request.headers["content-type"], await request.body())
        filename, data = form["file"]
        return JSONResponse(
            {
                "id": "file-abc",
                "object": "file",
                "bytes": len(data),
                "created_at": 1700000000,
                "filename": filename,
                "purpose": form["purpose"][1].decode(),
                "status": "uploaded",
            }
        )

    upstream.routes["/v1/files"] = files


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_multipart_upload_arrives_intact(proxy: Proxy, upstream: FakeUpstream, upload: bytes, mode: str) -> None:
    files_route(upstream)
    file = ("data.bin", upload, "application/octet-stream")
    if mode == "async":
        async with proxy.aclient() as aclient:
            created = await aclient.files.create(file=file, purpose="batch")
    else:
        with proxy.client() as client:
            created = client.files.create(file=file, purpose="batch")
    assert (created.id, created.bytes, created.filename, created.purpose) == ("file-abc", len(upload), "data.bin", "batch")
    seen = upstream.requests[-1]
    content_type = seen.headers["content-type"]
    assert content_type.startswith("multipart/form-data; boundary=")
    assert multipart_fields(content_type, seen.body)["file"] == ("data.bin", upload)
    assert seen.headers["content-length"] == str(len(seen.body))


def test_chunked_upload_is_streamed_through(proxy: Proxy, upstream: FakeUpstream, upload: bytes) -> None:
    def body() -> Iterator[bytes]:
        for i in range(0, len(upload), 1000):
            yield upload[i : i + 1000]

    with proxy.http() as http:
        r = http.post("/v1/audio/transcriptions?x=1", content=body(), headers={"content-type": "audio/wav"})
    assert r.status_code == 200
    seen = upstream.requests[-1]
    assert seen.body == upload
    assert seen.query == "x=1"
    assert seen.headers["content-type"] == "audio/wav"


QUERIES = ["limit=2&after=file-1&order=desc", "a=1&a=2&b=%E2%82%AC%20x&c=", "purpose=fine-tune&q=a%2Bb%26c%3Dd"]


def test_query_strings_are_preserved(proxy: Proxy, upstream: FakeUpstream) -> None:
    with proxy.http() as http:
        for query in QUERIES:
            assert http.get(f"/v1/files?{query}").status_code == 200
            assert upstream.requests[-1].query == query
            assert upstream.requests[-1].path == "/v1/files"


def test_sdk_query_parameters_arrive(proxy: Proxy, upstream: FakeUpstream) -> None:
    async def listing(request: Request, body: dict[str, Any]) -> Response:
        return JSONResponse({"object": "list", "data": [], "has_more": False})

    upstream.routes["/v1/files"] = listing
    with proxy.client() as client:
        client.files.list(limit=3, order="asc", purpose="batch")
    assert dict(pair.split("=") for pair in upstream.requests[-1].query.split("&")) == {
        "limit": "3",
        "order": "asc",
        "purpose": "batch",
    }


def test_methods_and_deep_paths_pass_through(proxy: Proxy, upstream: FakeUpstream) -> None:
    with proxy.http() as http:
        for method in ["GET", "POST", "PUT", "PATCH", "DELETE"]:
            content = b'{"x": 1}' if method in ("POST", "PUT", "PATCH") else None
            r = http.request(method, "/v1/vector_stores/vs_1/files/f 2", content=content)
            assert r.status_code == 200
            expected = {"path": "/v1/vector_stores/vs_1/files/f 2", "method": method, "bytes": len(content or b"")}
            assert r.json() == expected
            seen = upstream.requests[-1]
            assert seen.method == method and seen.body == (content or b"")


PASSTHROUGH_ERRORS = [
    (400, openai.BadRequestError),
    (404, openai.NotFoundError),
    (429, openai.RateLimitError),
    (500, openai.InternalServerError),
]


def test_passthrough_errors_keep_status_body_and_headers(proxy: Proxy, direct: Direct, upstream: FakeUpstream) -> None:
    for status, exc in PASSTHROUGH_ERRORS:

        async def failing(request: Request, body: dict[str, Any], status: int = status) -> Response:
            headers = {"x-request-id": f"req_{status}", "retry-after": "3"}
            return error_json(status, f"failed {status}", "invalid_request_error", "x", **headers)

        upstream.routes["/v1/models/gpt-x"] = failing
        caught = []
        for target in (proxy, direct):
            with target.client() as client, pytest.raises(exc) as info:
                client.models.retrieve("gpt-x")
            caught.append(info.value)
        assert caught[0].status_code == caught[1].status_code == status
        assert caught[0].request_id == caught[1].request_id == f"req_{status}"
        assert caught[0].body == caught[1].body
        assert caught[0].response.headers["retry-after"] == "3"


def test_gzip_passthrough_response(proxy: Proxy, upstream: FakeUpstream) -> None:
    payload = {"object": "list", "data": [{"id": f"m{i}", "object": "model", "created": 1, "owned_by": "x"} for i in range(50)]}

    async def zipped(request: Request, body: dict[str, Any]) -> Response:
        return gzip_json(payload)

    upstream.routes["/v1/models"] = zipped
    with proxy.client() as client:
        assert [m.id for m in client.models.list()] == [f"m{i}" for i in range(50)]
    with proxy.http() as http:
        r = http.get("/v1/models")
    assert r.headers["content-encoding"] == "gzip"
    assert json.loads(r.content) == payload


def test_passthrough_needs_a_known_key(proxy: Proxy, upstream: FakeUpstream) -> None:
    with proxy.client(key="sk-unknown") as client, pytest.raises(openai.AuthenticationError) as info:
        client.models.list()
    assert info.value.status_code == 401
    assert upstream.requests == []
    with proxy.http(key=None) as http:
        assert http.get("/v1/models").status_code == 401


def test_passthrough_strips_control_headers_and_the_proxy_key(proxy: Proxy, upstream: FakeUpstream) -> None:
    with proxy.http() as http:
        http.post("/v1/responses", json={"input": "hi"}, headers={"x-paperclip-user": "u", "x-other": "o"})
    seen = upstream.requests[-1]
    assert PROXY_KEY not in json.dumps(seen.headers)
    assert "x-paperclip-user" not in seen.headers
    assert seen.headers["x-other"] == "o"


def test_unknown_non_v1_path_is_404_in_openai_envelope(proxy: Proxy, upstream: FakeUpstream) -> None:
    with proxy.http() as http:
        r = http.get("/nope")
    assert r.status_code == 404
    assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    assert upstream.requests == []
