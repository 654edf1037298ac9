"""Errors: the upstream's pass through untouched; Paperclip's own use OpenAI's envelope (SPEC §8).

Also who is asking: keys, users and sessions (SPEC §4).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest
from starlette.requests import Request
from starlette.responses import Response

from proxy.pipeline.chat_call import ChatCall, Reply
from proxy.pipeline.pipeline_protocol import Prepared
from proxy.pipeline.plain import CountingPipeline
from tests.conftest import PROXY_KEY, Direct, Proxy
from tests.fake_upstream import FakeUpstream, Scripted, chunk, error_json, sse

MODEL = "gpt-4o-mini"
HI: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
ENVELOPE_KEYS = {"message", "type", "param", "code"}

UPSTREAM_ERRORS = [
    (400, openai.BadRequestError, "invalid_request_error"),
    (401, openai.AuthenticationError, "invalid_request_error"),
    (403, openai.PermissionDeniedError, "invalid_request_error"),
    (404, openai.NotFoundError, "invalid_request_error"),
    (422, openai.UnprocessableEntityError, "invalid_request_error"),
    (429, openai.RateLimitError, "rate_limit_exceeded"),
    (500, openai.InternalServerError, "server_error"),
    (503, openai.InternalServerError, "server_error"),
]


async def call(client: openai.OpenAI | openai.AsyncOpenAI, stream: bool, **kw: Any) -> Any:
    kw = {"model": MODEL, "messages": HI, **kw}
    if isinstance(client, openai.AsyncOpenAI):
        result = await client.chat.completions.create(stream=stream, **kw)
        return [c async for c in result] if stream else result
    result = client.chat.completions.create(stream=stream, **kw)
    return list(result) if stream else result


async def raised(client: openai.OpenAI | openai.AsyncOpenAI, stream: bool, **kw: Any) -> openai.APIStatusError:
    with pytest.raises(openai.APIStatusError) as info:
        await call(client, stream, **kw)
    return info.value


@pytest.mark.parametrize(("mode", "stream"), [("sync", False), ("sync", True), ("async", False), ("async", True)])
async def test_upstream_errors_pass_through_like_direct(
    proxy: Proxy, direct: Direct, upstream: FakeUpstream, mode: str, stream: bool
) -> None:
    proxy_client = proxy.aclient() if mode == "async" else proxy.client()
    direct_client = direct.aclient() if mode == "async" else direct.client()
    for status, exc, type_ in UPSTREAM_ERRORS:
        headers = {"x-request-id": f"req_{status}", "retry-after": "7", "x-ratelimit-remaining-requests": "0"}

        async def failing(
            request: Request, body: dict[str, Any], status: int = status, type_: str = type_, headers: Any = headers
        ) -> Response:
            return error_json(status, f"upstream says {status}", type_, f"code_{status}", **headers)

        upstream.chat = failing
        via_proxy = await raised(proxy_client, stream)
        via_direct = await raised(direct_client, stream)
        assert type(via_proxy) is type(via_direct) is exc
        assert via_proxy.status_code == status
        assert via_proxy.request_id == via_direct.request_id == f"req_{status}"
        assert via_proxy.body == via_direct.body
        assert via_proxy.message == via_direct.message
        for name, value in headers.items():
            assert via_proxy.response.headers[name] == value
        assert via_proxy.response.content == via_direct.response.content
    for client in (proxy_client, direct_client):
        if isinstance(client, openai.AsyncOpenAI):
            await client.close()
        else:
            client.close()


def test_upstream_error_on_stream_is_not_committed_as_200(proxy: Proxy, upstream: FakeUpstream) -> None:
    async def failing(request: Request, body: dict[str, Any]) -> Response:
        return error_json(429, "slow down", "requests", "rate_limit_exceeded", **{"retry-after": "2"})

    upstream.chat = failing
    with proxy.http() as http:
        r = http.post("/v1/chat/completions", json={"model": MODEL, "messages": HI, "stream": True})
    assert r.status_code == 429
    assert r.headers["content-type"] == "application/json"
    assert r.json()["error"]["message"] == "slow down"
    assert r.headers["retry-after"] == "2"
    assert "x-accel-buffering" not in r.headers


def test_streamed_upstream_error_body_passes_through(proxy: Proxy, upstream: FakeUpstream) -> None:
    # Some providers answer a failed stream with an error status and an SSE body.
    body = [b'data: {"error": {"message": "bad", "type": "x", "param": null, "code": null}}\n\n']

    async def failing(request: Request, _: dict[str, Any]) -> Response:
        return Scripted(upstream, body, status=500, headers={"x-request-id": "req_sse_err"})

    upstream.chat = failing
    with proxy.http() as http:
        r = http.post("/v1/chat/completions", json={"model": MODEL, "messages": HI, "stream": True})
    assert (r.status_code, r.content, r.headers["x-request-id"]) == (500, body[0], "req_sse_err")


# --- errors Paperclip itself produces ------------------------------------------------------------


def assert_envelope(r: httpx.Response, status: int, type_: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    error = r.json()["error"]
    assert set(error) == ENVELOPE_KEYS
    assert isinstance(error["message"], str) and error["message"]
    if type_ is not None:
        assert error["type"] == type_
    return dict(error)


BAD_BODIES = [b'{"model": ', b"not json", b"\xff\xfe", b"[1, 2]", b'"text"', b"", b'{"a": NaN'[:-1]]


def test_bad_json_is_400(proxy: Proxy, upstream: FakeUpstream) -> None:
    with proxy.http() as http:
        for body in BAD_BODIES:
            r = http.post("/v1/chat/completions", content=body, headers={"content-type": "application/json"})
            assert_envelope(r, 400, "invalid_request_error")
    assert upstream.requests == []


@pytest.mark.parametrize("stream", [False, True])
def test_oversize_is_413(make_proxy: Callable[..., Proxy], upstream: FakeUpstream, stream: bool) -> None:
    proxy = make_proxy(server={"max_body_bytes": 2048})
    with proxy.client() as client, pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x" * 4096}], stream=stream)
    assert info.value.status_code == 413
    assert set(info.value.body) == ENVELOPE_KEYS  # type: ignore[arg-type]
    with proxy.http() as http:
        r = http.post("/v1/chat/completions", json={"model": MODEL, "messages": [{"role": "user", "content": "x" * 4096}]})
        assert_envelope(r, 413)
        small = http.post("/v1/chat/completions", json={"model": MODEL, "messages": HI})
    assert small.status_code == 200
    assert len(upstream.chat_requests()) == 1


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_unknown_key_is_401(proxy: Proxy, upstream: FakeUpstream, mode: str) -> None:
    if mode == "async":
        async with proxy.aclient(key="sk-wrong") as aclient:
            with pytest.raises(openai.AuthenticationError) as info:
                await aclient.chat.completions.create(model=MODEL, messages=HI)
    else:
        with proxy.client(key="sk-wrong") as client, pytest.raises(openai.AuthenticationError) as info:
            client.chat.completions.create(model=MODEL, messages=HI)
    assert info.value.status_code == 401
    assert info.value.code == "invalid_api_key"
    assert "sk-wrong" not in info.value.message  # a rejected key is not echoed back
    with proxy.http(key=None) as http:
        assert_envelope(http.post("/v1/chat/completions", json={"model": MODEL, "messages": HI}), 401)
        assert_envelope(http.post("/v1/chat/completions", json={}, headers={"authorization": "Basic abc"}), 401)
    assert upstream.requests == []


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_down_is_502(make_proxy: Callable[..., Proxy], closed_port_url: str, stream: bool) -> None:
    proxy = make_proxy(defaults={"upstream": {"base_url": closed_port_url, "connect_timeout_s": 2}})
    with proxy.client() as client, pytest.raises(openai.InternalServerError) as info:
        client.chat.completions.create(model=MODEL, messages=HI, stream=stream)
    assert info.value.status_code == 502
    assert set(info.value.body) == ENVELOPE_KEYS  # type: ignore[arg-type]
    with proxy.client() as client, pytest.raises(openai.InternalServerError) as info:
        client.models.list()
    assert info.value.status_code == 502
    with proxy.http() as http:
        assert_envelope(http.post("/v1/chat/completions", json={"model": MODEL, "messages": HI}), 502)


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_first_byte_timeout_is_504(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream, stream: bool
) -> None:
    proxy = make_proxy(defaults={"upstream": {"read_timeout_s": 0.3}})

    async def slow(request: Request, body: dict[str, Any]) -> Response:
        return Scripted(upstream, sse([chunk({"content": "late"})]), first_byte_delay=5)

    upstream.chat = slow
    with proxy.client() as client, pytest.raises(openai.InternalServerError) as info:
        client.chat.completions.create(model=MODEL, messages=HI, stream=stream)
    assert info.value.status_code == 504
    assert set(info.value.body) == ENVELOPE_KEYS  # type: ignore[arg-type]
    # The proxy gave up on the upstream request; it did not leave it hanging.
    deadline = time.monotonic() + 2
    while not upstream.disconnects:
        assert time.monotonic() < deadline, "the timed-out upstream request was left open"
        time.sleep(0.01)


def test_read_timeout_is_between_chunks_not_a_total_deadline(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = make_proxy(defaults={"upstream": {"read_timeout_s": 0.5}})

    async def slow_stream(request: Request, body: dict[str, Any]) -> Response:
        return Scripted(upstream, sse([chunk({"content": f"{i} "}) for i in range(6)]), delay=0.25)

    upstream.chat = slow_stream
    with proxy.client() as client:
        text = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(model=MODEL, messages=HI, stream=True))
    assert text == "0 1 2 3 4 5 "  # 1.5 s in all, each gap under the 0.5 s read timeout


def test_proxy_does_not_retry(proxy: Proxy, upstream: FakeUpstream) -> None:
    async def failing(request: Request, body: dict[str, Any]) -> Response:
        return error_json(503, "down", "server_error", None, **{"retry-after": "0"})

    upstream.chat = failing
    with proxy.http() as http:
        assert http.post("/v1/chat/completions", json={"model": MODEL, "messages": HI}).status_code == 503
    assert len(upstream.chat_requests()) == 1


# --- users, sessions, memory off -----------------------------------------------------------------


class RecordingPipeline(CountingPipeline):
    """The real counting pipeline, remembering what it was asked to prepare and record."""

    def __init__(self) -> None:
        super().__init__()
        self.prepared: list[ChatCall] = []
        self.recorded: list[tuple[ChatCall, Reply]] = []

    async def prepare(self, call: ChatCall) -> Prepared:
        self.prepared.append(call)
        return await super().prepare(call)

    async def record(self, call: ChatCall, prepared: Prepared, reply: Reply) -> None:
        self.recorded.append((call, reply))


def session_of(proxy: Proxy, body: dict[str, Any], headers: dict[str, str] | None = None) -> str:
    with proxy.http() as http:
        r = http.post("/v1/chat/completions", json={"model": MODEL, **body}, headers=headers or {})
    assert r.status_code == 200
    return r.headers["x-paperclip-session"]


USER_SOURCES: list[tuple[str, dict[str, Any], dict[str, str]]] = [
    ("from-header", {"user": "from-user", "safety_identifier": "from-safety", "metadata": {"user_id": "from-meta"}}, {"x-paperclip-user": "from-header"}),
    ("from-user", {"user": "from-user", "safety_identifier": "from-safety", "metadata": {"user_id": "from-meta"}}, {}),
    ("from-safety", {"safety_identifier": "from-safety", "metadata": {"user_id": "from-meta"}}, {}),
    ("from-meta", {"metadata": {"user_id": "from-meta"}}, {}),
    # Claude Code's, in both forms: the device and account, not the run it names too.
    (f"user_{'ab' * 32}_account_", {"metadata": {"user_id": f"user_{'ab' * 32}_account__session_0a1b-2c3d"}}, {}),
    (f"user_{'ab' * 32}_account_9f0e", {"metadata": {"user_id": json.dumps(
        {"device_id": "ab" * 32, "account_uuid": "9f0e", "session_id": "2c4e1cf0"})}}, {}),
    ("user_abc_session_x", {"user": "user_abc_session_x"}, {}),  # not Claude Code's: taken whole
    ("anonymous", {"metadata": {"other": "x"}}, {}),
    ("anonymous", {"user": "  ", "metadata": {"user_id": 42}}, {}),
]


def test_user_resolution_order(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    pipeline = RecordingPipeline()
    proxy = make_proxy(pipeline=pipeline)
    for expected, fields, headers in USER_SOURCES:
        got = session_of(proxy, {"messages": HI, **fields}, headers)
        assert pipeline.prepared[-1].user == expected
        assert upstream.chat_requests()[-1].json() == {"model": MODEL, "messages": HI, **fields}
        # The same user by the strongest route gives the same derived session: the user is part of it.
        assert got == session_of(proxy, {"messages": HI}, {"x-paperclip-user": expected})


def test_session_header_wins_and_derived_sessions_are_stable(proxy: Proxy, upstream: FakeUpstream) -> None:
    first = [{"role": "system", "content": "sys"}, {"role": "user", "content": "Plan my trip to Lisbon"}]
    later = [*first, {"role": "assistant", "content": "Sure."}, {"role": "user", "content": "In May."}]
    other = [{"role": "system", "content": "sys"}, {"role": "user", "content": "Write a poem"}]
    derived = session_of(proxy, {"messages": first})
    assert derived.startswith("s-")
    assert session_of(proxy, {"messages": later}) == derived  # the same conversation, grown
    assert session_of(proxy, {"messages": [{"role": "system", "content": "other sys"}, *first[1:]]}) == derived
    assert session_of(proxy, {"messages": other}) != derived
    assert session_of(proxy, {"messages": first, "user": "bob"}) != derived  # sessions are per user
    assert session_of(proxy, {"messages": first}, {"x-paperclip-session": "my-session"}) == "my-session"


def test_memory_off_is_a_pure_pass_through(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    pipeline = RecordingPipeline()
    proxy = make_proxy(pipeline=pipeline)
    body = b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "secret, do not keep"}], "x": null}'
    with proxy.http() as http:
        r = http.post(
            "/v1/chat/completions",
            content=body,
            headers={"content-type": "application/json", "x-paperclip-memory": "off"},
        )
        assert r.status_code == 200
        on = http.post("/v1/chat/completions", json={"model": MODEL, "messages": HI})
        assert on.status_code == 200
    proxy.drain()
    assert upstream.chat_requests()[0].body == body
    assert r.headers["x-paperclip-memories"] == "0"
    assert [c.messages for c in pipeline.prepared] == [HI]  # the memory layer never saw the first request
    assert [c.messages for c, _ in pipeline.recorded] == [HI]
    assert pipeline.recorded[0][1].status == 200


def test_recording_happens_even_when_the_client_disconnects(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    pipeline = RecordingPipeline()
    proxy = make_proxy(pipeline=pipeline)

    async def long_stream(request: Request, body: dict[str, Any]) -> Response:
        return Scripted(upstream, sse([chunk({"content": f"{i} "}) for i in range(50)]), delay=0.05)

    upstream.chat = long_stream
    with proxy.http() as http, http.stream("POST", "/v1/chat/completions", json={"model": MODEL, "messages": HI, "stream": True}) as r:
        next(r.iter_raw())
    deadline = time.monotonic() + 3
    while not pipeline.recorded and time.monotonic() < deadline:
        time.sleep(0.02)
    proxy.drain()
    assert len(pipeline.recorded) == 1
    assert pipeline.recorded[0][1].disconnected


def test_proxy_key_is_not_echoed_in_responses(proxy: Proxy, upstream: FakeUpstream) -> None:
    with proxy.http() as http:
        r = http.post("/v1/chat/completions", json={"model": MODEL, "messages": HI})
    assert PROXY_KEY not in r.text and PROXY_KEY not in json.dumps(dict(r.headers))
    assert hashlib.sha256(PROXY_KEY.encode()).hexdigest()[:24] not in json.dumps(dict(r.headers))
