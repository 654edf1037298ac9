"""What the upstream receives is what the client sent (SPEC §2.5, §8): fields, messages, headers."""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable
from typing import Any

import openai
import pytest

from tests.admin_helpers import QUESTION, teach
from tests.conftest import PROXY_KEY, UPSTREAM_KEY, Direct, Proxy, base_config
from tests.fake_upstream import FakeUpstream, Seen, chunk, sse, stream_response

MODEL = "gpt-4o-mini"
HI: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]

# Unknown fields at every depth, explicit nulls, and strings that JSON escapes.
EXTRA: dict[str, Any] = {
    "x_vendor_option": {"nested": {"deep": [1, 2.5, None, "é 世界 🎉", {"k": None}]}, "empty": {}, "list": []},
    "x_null": None,
    "top_p": None,
    "reasoning_effort": "low",
    "prediction": {"type": "content", "content": "draft"},
}

MESSAGES: list[dict[str, Any]] = [
    {"role": "developer", "content": "Be terse."},
    {"role": "system", "content": [{"type": "text", "text": "System as parts."}]},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in this image?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"}},
        ],
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'},
    {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "12:00"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "21°C, noon."}], "name": "bot", "x_msg": {"a": None}},
    {"role": "user", "content": "Merci ! 谢谢 🎉", "name": "alice"},
]


def last_chat(upstream: FakeUpstream) -> Seen:
    return upstream.chat_requests()[-1]


async def send_chat(target: Proxy | Direct, mode: str, stream: bool, **kw: Any) -> list[Any]:
    """One chat call on a fresh sync or async SDK client; the chunks (or the one completion) it gave."""
    if mode == "async":
        async with target.aclient() as aclient:
            result = await aclient.chat.completions.create(stream=stream, **kw)
            return [c async for c in result] if stream else [result]
    with target.client() as client:
        result = client.chat.completions.create(stream=stream, **kw)
        return list(result) if stream else [result]


MODES = [("sync", False), ("sync", True), ("async", False), ("async", True)]


@pytest.mark.parametrize(("mode", "stream"), MODES)
async def test_unknown_fields_and_nulls_arrive_with_equal_values(
    proxy: Proxy, direct: Direct, upstream: FakeUpstream, mode: str, stream: bool
) -> None:
    kw = {"model": MODEL, "messages": [{"role": "user", "content": "hi", "x_in_msg": {"n": None}}]}
    await send_chat(direct, mode, stream, extra_body=EXTRA, **kw)
    sent = last_chat(upstream).json()
    await send_chat(proxy, mode, stream, extra_body=EXTRA, **kw)
    got = last_chat(upstream).json()

    assert got == sent
    assert list(got) == list(sent)  # key order kept too
    for key, value in EXTRA.items():
        assert key in got and got[key] == value
    assert got["x_null"] is None and got["top_p"] is None
    # Absent stays absent: nothing the client did not send appears upstream.
    for absent in ("temperature", "user", "stream_options", "n", "metadata", "tools"):
        assert absent not in got
    assert got["messages"][0]["x_in_msg"] == {"n": None}


@pytest.mark.parametrize(("mode", "stream"), MODES)
async def test_message_shapes_arrive_unchanged(
    proxy: Proxy, upstream: FakeUpstream, mode: str, stream: bool
) -> None:
    chunks = await send_chat(proxy, mode, stream, model=MODEL, messages=MESSAGES)
    assert chunks
    assert last_chat(upstream).json()["messages"] == MESSAGES


def raw_body() -> bytes:
    # Spacing, key order, escapes and number spellings that a re-serialisation would change.
    return (
        b'{ "x_first": 1.0, "model" : "gpt-4o-mini",\n "messages":[{"role":"user","content":"caf\\u00e9 '
        + "é 世界".encode()
        + b'", "x": 1e2}], "n": 1, "temperature": -0.0, "x_null": null, "x_big": 12345678901234567890 }'
    )


def test_memory_off_forwards_the_exact_bytes(proxy: Proxy, upstream: FakeUpstream) -> None:
    with proxy.http() as http:
        r = http.post(
            "/v1/chat/completions",
            content=raw_body(),
            headers={"content-type": "application/json", "x-paperclip-memory": "off"},
        )
    assert r.status_code == 200
    seen = last_chat(upstream)
    assert seen.body == raw_body()
    assert seen.headers["content-length"] == str(len(raw_body()))


def test_default_mode_forwards_equal_values(proxy: Proxy, upstream: FakeUpstream) -> None:
    with proxy.http() as http:
        r = http.post("/v1/chat/completions", content=raw_body(), headers={"content-type": "application/json"})
    assert r.status_code == 200
    assert last_chat(upstream).json() == json.loads(raw_body())


def test_default_mode_forwards_numbers_json_loads_reads_past_json_as_they_came(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    """A body the memory layer changes (the user's profile is injected) is written again: a NaN stays one."""
    teach(proxy, "nan-user")
    raw = (b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "' + QUESTION.encode()
           + b'"}], "x_nan": NaN, "x_inf": -1e999}')
    with proxy.http() as http:
        r = http.post("/v1/chat/completions", content=raw,
                      headers={"content-type": "application/json", "x-paperclip-user": "nan-user"})
    assert r.status_code == 200
    seen = last_chat(upstream).body
    assert "Zorblax" in json.loads(seen)["messages"][-1]["content"]  # changed, so written again
    assert b'"x_nan":NaN' in seen and b'"x_inf":-1e999' in seen  # valid JSON stays valid, as its digits came


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_compressed_request_body_is_accepted(proxy: Proxy, upstream: FakeUpstream, encoding: str) -> None:
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "zipped é"}]}).encode()
    packed = gzip.compress(body) if encoding == "gzip" else zlib.compress(body)
    with proxy.http() as http:
        r = http.post(
            "/v1/chat/completions",
            content=packed,
            headers={"content-type": "application/json", "content-encoding": encoding},
        )
    assert r.status_code == 200, r.text
    seen = last_chat(upstream)
    assert seen.json() == json.loads(body)
    assert "content-encoding" not in seen.headers  # it went out decoded
    assert seen.headers["content-length"] == str(len(seen.body))


def test_gzip_bomb_beyond_the_limit_is_413(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    proxy = make_proxy(server={"max_body_bytes": 64 * 1024})
    filler = "a" * (4 * 1024 * 1024)
    bomb = gzip.compress(json.dumps({"model": MODEL, "messages": [{"role": "user", "content": filler}]}).encode())
    assert len(bomb) < 64 * 1024  # small on the wire, large once inflated
    with proxy.http() as http:
        r = http.post(
            "/v1/chat/completions",
            content=bomb,
            headers={"content-type": "application/json", "content-encoding": "gzip"},
        )
    assert r.status_code == 413
    assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    assert upstream.chat_requests() == []


# --- headers -------------------------------------------------------------------------------------


def all_header_text(seen: Seen) -> str:
    return json.dumps(seen.headers)


@pytest.mark.parametrize("stream", [False, True])
def test_proxy_key_and_control_headers_never_reach_upstream(
    proxy: Proxy, upstream: FakeUpstream, stream: bool
) -> None:
    with proxy.client(
        default_headers={
            "X-Paperclip-User": "u1",
            "X-Paperclip-Session": "s1",
            "X-Paperclip-Memory": "on",
            "X-Paperclip-Anything": "x",
            "X-Custom-Header": "kept",
        }
    ) as client:
        chunks = client.chat.completions.create(model=MODEL, messages=HI, stream=stream)
        if stream:
            list(chunks)
    seen = last_chat(upstream)
    assert PROXY_KEY not in all_header_text(seen)
    assert seen.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert not [h for h in seen.headers if h.startswith("x-paperclip-")]
    assert seen.headers["x-custom-header"] == "kept"
    assert seen.headers["user-agent"].startswith("OpenAI/Python")  # end-to-end headers go through


def test_api_key_header_is_accepted_and_not_forwarded(proxy: Proxy, upstream: FakeUpstream) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    with proxy.http(key=None) as http:
        r = http.post("/v1/chat/completions", json=body, headers={"api-key": PROXY_KEY})
        models = http.get("/v1/models", headers={"api-key": PROXY_KEY})
    assert r.status_code == 200 and models.status_code == 200
    for seen in upstream.requests:
        assert "api-key" not in seen.headers
        assert PROXY_KEY not in all_header_text(seen)
        assert seen.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"


def test_client_organization_and_project_dropped_when_key_swapped(proxy: Proxy, upstream: FakeUpstream) -> None:
    with proxy.client(organization="org-client", project="proj-client") as client:
        client.chat.completions.create(model=MODEL, messages=HI)
        client.models.list()
    for seen in upstream.requests:
        assert "openai-organization" not in seen.headers
        assert "openai-project" not in seen.headers


def test_tenant_organization_replaces_the_clients(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = make_proxy(defaults={"upstream": {"organization": "org-tenant", "project": "proj-tenant"}})
    with proxy.client(organization="org-client", project="proj-client") as client:
        client.chat.completions.create(model=MODEL, messages=HI)
    seen = last_chat(upstream)
    assert seen.headers["openai-organization"] == "org-tenant"
    assert seen.headers["openai-project"] == "proj-tenant"
    assert "org-client" not in all_header_text(seen)


def test_passthrough_key_is_forwarded_as_is_with_its_account_headers(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = make_proxy(passthrough_keys=True)
    with proxy.client(key="sk-client-own", organization="org-client") as client:
        client.chat.completions.create(model=MODEL, messages=HI)
    seen = last_chat(upstream)
    assert seen.headers["authorization"] == "Bearer sk-client-own"
    assert seen.headers["openai-organization"] == "org-client"  # not swapped, so not dropped
    # A configured tenant key is still swapped, even with passthrough on.
    with proxy.client() as client:
        client.chat.completions.create(model=MODEL, messages=HI)
    assert last_chat(upstream).headers["authorization"] == f"Bearer {UPSTREAM_KEY}"


def test_passthrough_keys_get_separate_scopes(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    proxy = make_proxy(passthrough_keys=True)
    messages = [{"role": "user", "content": "the same first message"}]

    def session(key: str) -> str:
        with proxy.client(key=key) as client:
            raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=messages)
        return raw.headers["x-paperclip-session"]

    assert session("sk-alpha") == session("sk-alpha")
    assert session("sk-alpha") != session("sk-beta")


def test_sha256_keys_work(make_proxy: Callable[..., Proxy], upstream: FakeUpstream, upstream_url: str, tmp_path: Any) -> None:
    import hashlib

    digest = hashlib.sha256(b"pk-hashed-key").hexdigest().upper()  # hex case does not matter
    raw = base_config(upstream_url, tmp_path / "p.db")
    raw["tenants"]["hashed"] = {"api_keys": [f"sha256:{digest}"], "upstream": {"api_key": "sk-up-hashed"}}
    proxy = make_proxy(raw)
    with proxy.client(key="pk-hashed-key") as client:
        reply = client.chat.completions.create(model=MODEL, messages=HI)
    assert reply.choices[0].message.content == "Hello from upstream"
    assert last_chat(upstream).headers["authorization"] == "Bearer sk-up-hashed"
    with proxy.client(key="sha256:" + digest) as client, pytest.raises(openai.AuthenticationError):
        client.models.list()  # the digest itself is not a key


def test_hop_by_hop_request_headers_are_stripped(proxy: Proxy, upstream: FakeUpstream) -> None:
    hop = {
        "connection": "keep-alive, x-listed-in-connection",
        "x-listed-in-connection": "secret",
        "keep-alive": "timeout=5",
        "te": "trailers",
        "trailer": "x-foo",
        "proxy-authorization": "Basic abc",
        "proxy-connection": "keep-alive",
        "x-end-to-end": "kept",
    }
    with proxy.http() as http:
        chat = http.post(
            "/v1/chat/completions", json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}, headers=hop
        )
        other = http.get("/v1/models", headers=hop)
    assert chat.status_code == 200 and other.status_code == 200
    for seen in upstream.requests:
        for name in ("x-listed-in-connection", "keep-alive", "te", "trailer", "proxy-authorization", "proxy-connection"):
            assert name not in seen.headers, (seen.path, name)
        assert seen.headers.get("connection", "keep-alive") == "keep-alive"  # httpx's own, not the client's
        assert seen.headers["x-end-to-end"] == "kept"


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/things"])
def test_hop_by_hop_response_headers_are_stripped(proxy: Proxy, upstream: FakeUpstream, path: str) -> None:
    from starlette.requests import Request
    from starlette.responses import Response

    payload = b'{"ok": true}'

    async def answer(request: Request, body: dict[str, Any]) -> Response:
        return Response(
            payload,
            media_type="application/json",
            headers={
                "keep-alive": "timeout=99",
                "proxy-authenticate": "Basic",
                "trailer": "x-checksum",
                "x-request-id": "req_hop",
                "set-cookie": "a=1",
            },
        )

    upstream.routes["/v1" + path.removeprefix("/v1")] = answer
    with proxy.http() as http:
        r = http.post(path, json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200
    assert r.content == payload
    for name in ("keep-alive", "proxy-authenticate", "trailer"):
        assert name not in r.headers
    assert r.headers["x-request-id"] == "req_hop"
    assert r.headers["set-cookie"] == "a=1"
    assert r.headers["content-length"] == str(len(payload))


def test_stream_options_are_never_added(proxy: Proxy, upstream: FakeUpstream) -> None:
    with proxy.client() as client:
        list(client.chat.completions.create(model=MODEL, messages=HI, stream=True))
        assert "stream_options" not in last_chat(upstream).json()
        options = {"include_usage": True}
        list(client.chat.completions.create(model=MODEL, messages=HI, stream=True, stream_options=options))
    assert last_chat(upstream).json()["stream_options"] == {"include_usage": True}


def test_gzip_from_upstream_is_read_by_the_sdk(proxy: Proxy, direct: Direct, upstream: FakeUpstream) -> None:
    from tests.fake_upstream import completion, gzip_json

    text = "Compressed reply, é 世界 " * 50

    async def zipped(request: Any, body: dict[str, Any]) -> Any:
        return gzip_json(completion(text), **{"x-request-id": "req_gz"})

    upstream.chat = zipped
    with proxy.client() as client:
        via_proxy = client.chat.completions.with_raw_response.create(model=MODEL, messages=HI)
    assert via_proxy.parse().choices[0].message.content == text
    assert via_proxy.headers["x-request-id"] == "req_gz"
    with direct.client() as client:
        reply_direct = client.chat.completions.create(model=MODEL, messages=HI)
    assert via_proxy.parse().model_dump() == reply_direct.model_dump()
    # Raw: the proxy passes the compressed bytes with their header (and a matching length).
    with proxy.http() as http:
        r = http.post(
            "/v1/chat/completions",
            json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}]},
            headers={"accept-encoding": "gzip"},
        )
    assert r.headers["content-encoding"] == "gzip"
    assert json.loads(r.content)["choices"][0]["message"]["content"] == text  # httpx decoded it
    assert int(r.headers["content-length"]) < len(r.content)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_streamed_chunks_equal_through_proxy_and_direct(
    proxy: Proxy, direct: Direct, upstream: FakeUpstream, mode: str
) -> None:
    events = [chunk({"role": "assistant", "content": ""}), chunk({"content": "One"}), chunk({}, finish="stop")]

    async def answer(request: Any, body: dict[str, Any]) -> Any:
        return stream_response(sse(events))

    upstream.chat = answer
    via_proxy = await send_chat(proxy, mode, True, model=MODEL, messages=HI)
    via_direct = await send_chat(direct, mode, True, model=MODEL, messages=HI)
    assert [c.model_dump() for c in via_proxy] == [c.model_dump() for c in via_direct]
    assert [c.model_dump(exclude_unset=True) for c in via_proxy] == events


def test_httpx_errors_do_not_leak_the_upstream_key(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream, closed_port_url: str
) -> None:
    proxy = make_proxy(defaults={"upstream": {"base_url": closed_port_url}})
    with proxy.http() as http:
        r = http.post("/v1/chat/completions", json={"model": MODEL, "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 502
    assert UPSTREAM_KEY not in r.text and UPSTREAM_KEY not in json.dumps(dict(r.headers))

