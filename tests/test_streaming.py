"""Server-sent events through the proxy: never buffered, never re-indexed, ended and cancelled on time (SPEC §8)."""

from __future__ import annotations

import asyncio
import itertools
import json
import statistics
import time
from typing import Any

import openai
import pytest
from starlette.requests import Request
from starlette.responses import Response

from tests.conftest import Direct, Proxy
from tests.fake_upstream import FakeUpstream, Scripted, chunk, sse

MODEL = "gpt-4o-mini"
HI: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
CHAT = {"model": MODEL, "messages": HI, "stream": True}


@pytest.fixture
def proxy(plain_proxy: Proxy) -> Proxy:
    """These tests look at the relay only: they share one proxy (memory off) per module."""
    return plain_proxy


def answer_with(fake: FakeUpstream, parts: list[bytes], **kw: Any) -> None:
    """Make the fake upstream answer every chat request with this script."""

    async def handler(request: Request, body: dict[str, Any]) -> Response:
        return Scripted(fake, parts, **kw)

    fake.chat = handler


async def stream_chunks(target: Proxy | Direct, mode: str, **kw: Any) -> list[Any]:
    if mode == "async":
        async with target.aclient() as aclient:
            return [c async for c in await aclient.chat.completions.create(model=MODEL, messages=HI, stream=True, **kw)]
    with target.client() as client:
        return list(client.chat.completions.create(model=MODEL, messages=HI, stream=True, **kw))


def assemble(chunks: list[Any]) -> dict[int, dict[str, Any]]:
    """Choices rebuilt from deltas, the way a client does: text joined, tool calls by their index."""
    out: dict[int, dict[str, Any]] = {}
    for c in chunks:
        for choice in c.choices:
            slot = out.setdefault(choice.index, {"content": "", "tool_calls": {}, "finish": None})
            slot["content"] += choice.delta.content or ""
            slot["finish"] = choice.finish_reason or slot["finish"]
            for tc in choice.delta.tool_calls or []:
                call = slot["tool_calls"].setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                call["id"] = tc.id or call["id"]
                if tc.function is not None:
                    call["name"] += tc.function.name or ""
                    call["arguments"] += tc.function.arguments or ""
    return out


def tool_call_delta(index: int, **fields: Any) -> dict[str, Any]:
    return {"tool_calls": [{"index": index, **fields}]}


PARALLEL_TOOLS = [
    chunk({"role": "assistant", "content": None, **tool_call_delta(0, id="call_a", type="function", function={"name": "get_weather", "arguments": ""})}),
    chunk(tool_call_delta(1, id="call_b", type="function", function={"name": "get_time", "arguments": ""})),
    chunk(tool_call_delta(0, function={"arguments": '{"city":'})),
    chunk(tool_call_delta(1, function={"arguments": '{"tz":'})),
    chunk(tool_call_delta(1, function={"arguments": '"CET"}'})),
    chunk(tool_call_delta(0, function={"arguments": '"Paris"}'})),
    chunk({}, finish="tool_calls"),
]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_parallel_tool_call_deltas_assemble_equally(
    proxy: Proxy, direct: Direct, upstream: FakeUpstream, mode: str
) -> None:
    answer_with(upstream, sse(PARALLEL_TOOLS))
    via_proxy = await stream_chunks(proxy, mode)
    via_direct = await stream_chunks(direct, mode)
    assert [c.model_dump() for c in via_proxy] == [c.model_dump() for c in via_direct]
    calls = assemble(via_proxy)[0]["tool_calls"]
    assert calls == {
        0: {"id": "call_a", "name": "get_weather", "arguments": '{"city":"Paris"}'},
        1: {"id": "call_b", "name": "get_time", "arguments": '{"tz":"CET"}'},
    }
    assert assemble(via_proxy)[0]["finish"] == "tool_calls"


def test_sdk_stream_helper_gets_the_same_final_completion(
    proxy: Proxy, direct: Direct, upstream: FakeUpstream
) -> None:
    answer_with(upstream, sse(PARALLEL_TOOLS))
    finals = []
    for target in (proxy, direct):
        with target.client() as client, client.chat.completions.stream(model=MODEL, messages=HI) as stream:  # type: ignore[arg-type]
            finals.append(stream.get_final_completion().model_dump())
    assert finals[0] == finals[1]
    calls = finals[0]["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == ['{"city":"Paris"}', '{"tz":"CET"}']


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_n2_choices_assemble_equally(proxy: Proxy, direct: Direct, upstream: FakeUpstream, mode: str) -> None:
    events = [
        chunk({"role": "assistant", "content": ""}, index=0),
        chunk({"role": "assistant", "content": ""}, index=1),
        chunk({"content": "Red"}, index=1),
        chunk({"content": "Blue"}, index=0),
        chunk({"content": " sky"}, index=0),
        chunk({"content": " rose"}, index=1),
        chunk({}, index=1, finish="stop"),
        chunk({}, index=0, finish="length"),
    ]
    answer_with(upstream, sse(events))
    via_proxy = await stream_chunks(proxy, mode, n=2)
    via_direct = await stream_chunks(direct, mode, n=2)
    assert assemble(via_proxy) == assemble(via_direct)
    assert {i: (c["content"], c["finish"]) for i, c in assemble(via_proxy).items()} == {
        0: ("Blue sky", "length"),
        1: ("Red rose", "stop"),
    }
    assert upstream.chat_requests()[-1].json()["n"] == 2


ERROR_EVENT = b'data: {"error": {"message": "The server is overloaded", "type": "server_error", "param": null, "code": "overloaded"}}\n\n'


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_mid_stream_error_event_raises_api_error(proxy: Proxy, upstream: FakeUpstream, mode: str) -> None:
    answer_with(upstream, [*sse([chunk({"role": "assistant", "content": "Hel"})], done=False), ERROR_EVENT])
    with pytest.raises(openai.APIError) as caught:
        await stream_chunks(proxy, mode)
    assert caught.value.message == "The server is overloaded"
    assert caught.value.code == "overloaded"


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_upstream_dropping_mid_stream_becomes_an_error_event(
    proxy: Proxy, upstream: FakeUpstream, mode: str
) -> None:
    parts = sse([chunk({"role": "assistant", "content": "Hel"}), chunk({"content": "lo"})], done=False)
    answer_with(upstream, [*parts, b"never sent"], abort_after=len(parts))
    with pytest.raises(openai.APIError) as caught:
        await stream_chunks(proxy, mode)
    assert "upstream" in caught.value.message.lower()
    # Raw: the chunks before the failure went out as they were, then one error event.
    with proxy.http() as http:
        r = http.post("/v1/chat/completions", json=CHAT)
    assert r.status_code == 200
    assert r.content.startswith(b"".join(parts))
    tail = r.content[len(b"".join(parts)) :]
    assert tail.startswith(b"data: ") and tail.endswith(b"\n\n")
    assert set(json.loads(tail.removeprefix(b"data: "))["error"]) == {"message", "type", "param", "code"}


def test_done_ends_the_stream_although_upstream_holds_the_socket(proxy: Proxy, upstream: FakeUpstream) -> None:
    answer_with(upstream, sse([chunk({"role": "assistant", "content": "Hi"}), chunk({}, finish="stop")]), hold_open=10)
    started = time.monotonic()
    with proxy.http() as http, http.stream("POST", "/v1/chat/completions", json=CHAT) as r:
        body = b"".join(r.iter_raw())
    elapsed = time.monotonic() - started
    assert elapsed < 1.0, f"the stream ended {elapsed:.2f}s after the request"
    assert body.rstrip().endswith(b"data: [DONE]")
    wait_for(lambda: len(upstream.disconnects) == 1)  # and the held upstream socket was let go


def test_done_ends_a_stream_whose_events_end_in_one_line_break(proxy: Proxy, upstream: FakeUpstream) -> None:
    """Some servers end each ``data:`` line with one break, never a blank line: the relay holds an event
    until its blank line, but a ``[DONE]`` line among what it holds still ends the response at once."""
    parts = [line.replace(b"\n\n", b"\n") for line in sse([chunk({"role": "assistant", "content": "Hi"})])]
    answer_with(upstream, parts, hold_open=10)
    started = time.monotonic()
    with proxy.http() as http, http.stream("POST", "/v1/chat/completions", json=CHAT) as r:
        body = b"".join(r.iter_raw())
    assert time.monotonic() - started < 1.0
    assert body == b"".join(parts)


def test_sdk_stream_ends_at_done_with_a_held_socket(proxy: Proxy, upstream: FakeUpstream) -> None:
    answer_with(upstream, sse([chunk({"role": "assistant", "content": "Hi"}), chunk({}, finish="stop")]), hold_open=10)
    started = time.monotonic()
    with proxy.client() as client:
        text = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(**CHAT))  # type: ignore[call-overload]
    assert text == "Hi"
    assert time.monotonic() - started < 1.0


def test_a_reply_that_writes_the_done_line_as_text_arrives_whole(proxy: Proxy, upstream: FakeUpstream) -> None:
    """Only a ``data: [DONE]`` line of its own ends the stream, not those bytes inside an event's data."""
    said = ["An SSE stream ends with the line data: [DONE] and then", " the client stops reading."]
    events = [chunk({"role": "assistant", "content": said[0]}), chunk({"content": said[1]}), chunk({}, finish="stop")]
    answer_with(upstream, sse(events), delay=0.05)  # each event its own write
    with proxy.client() as client:
        got = list(client.chat.completions.create(**CHAT))  # type: ignore[call-overload]
    assert "".join(c.choices[0].delta.content or "" for c in got) == "".join(said)
    assert got[-1].choices[0].finish_reason == "stop"
    # A tool call's arguments may hold it too (code that writes an event stream).
    call = {"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "write", "arguments": json.dumps({"code": "print('data: [DONE]')"})}}
    answer_with(upstream, sse([chunk({"role": "assistant", "tool_calls": [call]}), chunk({}, finish="tool_calls")]),
                delay=0.05)
    with proxy.http() as http:
        body = http.post("/v1/chat/completions", json=CHAT).content
    assert body == b"".join(sse([chunk({"role": "assistant", "tool_calls": [call]}), chunk({}, finish="tool_calls")]))


def test_a_passed_through_stream_ends_at_its_done_although_upstream_holds_the_socket(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    """``[DONE]`` ends the response at once on any path, legacy completions' streams too (SPEC §8)."""
    parts = sse([{"id": "cmpl-1", "object": "text_completion", "choices": [{"index": 0, "text": "Hi"}]}])

    async def completions(request: Request, body: dict[str, Any]) -> Response:
        return Scripted(upstream, parts, hold_open=10)

    upstream.routes["/v1/completions"] = completions
    started = time.monotonic()
    with proxy.http() as http, http.stream("POST", "/v1/completions", json={"model": MODEL, "prompt": "hi",
                                                                           "stream": True}) as r:
        body = b"".join(r.iter_raw())
    assert time.monotonic() - started < 2.0
    assert body == b"".join(parts)


def split_inside_characters(data: bytes, text: str) -> list[bytes]:
    """Cut ``data`` in the middle of the UTF-8 encoding of every non-ASCII character of ``text``."""
    cuts = []
    for ch in dict.fromkeys(c for c in text if ord(c) > 127):
        at = data.find(ch.encode())
        assert at >= 0
        cuts.append(at + 1)
    cuts.sort()
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_multibyte_characters_split_across_chunks_arrive_intact(
    proxy: Proxy, upstream: FakeUpstream, mode: str
) -> None:
    text = "héllo 世界 🎉 ok"
    events = [chunk({"role": "assistant", "content": ""}), chunk({"content": text}), chunk({}, finish="stop")]
    # ensure_ascii=False: the characters travel as raw UTF-8, as most providers send them.
    data = b"".join(f"data: {json.dumps(e, ensure_ascii=False)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"
    parts = split_inside_characters(data, text)
    assert len(parts) == 5
    answer_with(upstream, parts, delay=0.02)
    chunks = await stream_chunks(proxy, mode)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == text
    with proxy.http() as http:
        assert http.post("/v1/chat/completions", json=CHAT).content == data


def test_streaming_responses_carry_no_buffering_headers(proxy: Proxy, upstream: FakeUpstream) -> None:
    answer_with(
        upstream,
        sse([chunk({"content": "x"})]),
        headers={"x-request-id": "req_stream", "cache-control": "public, max-age=60", "x-ratelimit-remaining-tokens": "5"},
    )
    with proxy.http() as http, http.stream("POST", "/v1/chat/completions", json=CHAT) as r:
        r.read()
    assert r.headers.get_list("cache-control") == ["no-cache"]
    assert r.headers["x-accel-buffering"] == "no"
    assert r.headers["x-request-id"] == "req_stream"
    assert r.headers["x-ratelimit-remaining-tokens"] == "5"
    assert r.headers["content-type"].startswith("text/event-stream")
    assert "content-length" not in r.headers


def test_passthrough_streams_carry_no_buffering_headers(proxy: Proxy, upstream: FakeUpstream) -> None:
    async def responses(request: Request, body: dict[str, Any]) -> Response:
        return Scripted(upstream, [b"event: response.created\ndata: {}\n\n", b"event: response.completed\ndata: {}\n\n"])

    upstream.routes["/v1/responses"] = responses
    with proxy.http() as http, http.stream("POST", "/v1/responses", json={"model": MODEL, "stream": True}) as r:
        body = r.read()
    assert body.count(b"event: response.") == 2
    assert r.headers["cache-control"] == "no-cache"
    assert r.headers["x-accel-buffering"] == "no"


def arrivals(proxy: Proxy, path: str = "/v1/chat/completions", **kw: Any) -> list[tuple[float, int]]:
    """(time, total bytes so far) at every read of a raw streamed response."""
    seen: list[tuple[float, int]] = []
    total = 0
    with proxy.http() as http, http.stream("POST", path, **kw) as r:
        assert r.status_code == 200
        for piece in r.iter_raw():
            total += len(piece)
            seen.append((time.monotonic(), total))
    return seen


def first_time_with(seen: list[tuple[float, int]], size: int) -> float:
    return next(t for t, total in seen if total >= size)


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses"])
def test_no_buffering_each_chunk_arrives_before_the_next_is_written(
    proxy: Proxy, upstream: FakeUpstream, path: str
) -> None:
    parts = sse([chunk({"content": f"word{i} "}) for i in range(5)])

    async def handler(request: Request, body: dict[str, Any]) -> Response:
        return Scripted(upstream, parts, delay=0.2)

    upstream.chat = handler
    upstream.routes["/v1/responses"] = handler
    seen = arrivals(proxy, path, json=CHAT)
    # The upstream stamps a write once its send returns, on its own loop: the client can hold the last
    # chunk (the proxy relays up to [DONE]) before that stamp is taken.
    wait_for(lambda: len(upstream.writes) >= len(parts))
    writes = list(upstream.writes)
    assert len(writes) == len(parts)
    sizes = [sum(len(p) for p in parts[: i + 1]) for i in range(len(parts))]
    got = [first_time_with(seen, size) for size in sizes]
    for i in range(len(parts) - 1):
        assert got[i] < writes[i + 1], f"chunk {i} arrived after chunk {i + 1} was written"
    assert got[0] < writes[-1] - 0.5
    gaps = [b - a for a, b in itertools.pairwise(got)]
    assert statistics.median(gaps) > 0.1  # chunks came apart, as they were written


def wait_for(condition: Any, timeout: float = 2.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


async def await_for(condition: Any, within: float) -> None:
    """``wait_for`` for async tests: the fake upstream lives on another thread, so polling it is the way."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("stream", [False, True])
def test_client_gone_before_first_byte_cancels_upstream(proxy: Proxy, upstream: FakeUpstream, stream: bool) -> None:
    answer_with(upstream, sse([chunk({"content": "late"})]), first_byte_delay=10)
    with proxy.client(timeout=0.5) as client, pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(model=MODEL, messages=HI, stream=stream)
    gave_up = time.monotonic()
    wait_for(lambda: bool(upstream.disconnects), timeout=3)
    assert upstream.disconnects[0] - gave_up < 1.0
    assert upstream.writes == []


async def test_async_client_cancelled_before_first_byte_cancels_upstream(proxy: Proxy, upstream: FakeUpstream) -> None:
    answer_with(upstream, sse([chunk({"content": "late"})]), first_byte_delay=10)
    async with proxy.aclient() as client:
        task = asyncio.ensure_future(client.chat.completions.create(model=MODEL, messages=HI, stream=True))
        # The request reaches upstream and waits there (a fixed 0.3 s was too short on a busy machine).
        await await_for(lambda: bool(upstream.chat_requests()), within=3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        gave_up = time.monotonic()
        await await_for(lambda: bool(upstream.disconnects), within=3)
    assert upstream.disconnects and upstream.disconnects[0] - gave_up < 1.0


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_client_gone_mid_stream_cancels_upstream(proxy: Proxy, upstream: FakeUpstream, mode: str) -> None:
    answer_with(upstream, sse([chunk({"content": f"w{i} "}) for i in range(100)]), delay=0.05)
    if mode == "async":
        async with proxy.aclient() as aclient:
            stream = await aclient.chat.completions.create(model=MODEL, messages=HI, stream=True)
            got = [await stream.__anext__() for _ in range(2)]
            await stream.close()
    else:
        with proxy.client() as client:
            sync_stream = client.chat.completions.create(model=MODEL, messages=HI, stream=True)
            got = [next(sync_stream) for _ in range(2)]
            sync_stream.close()
    gave_up = time.monotonic()
    assert [c.choices[0].delta.content for c in got] == ["w0 ", "w1 "]
    await await_for(lambda: bool(upstream.disconnects), within=3)
    assert upstream.disconnects[0] - gave_up < 1.0
    assert len(upstream.writes) < 50  # it stopped writing long before the end


def test_client_gone_mid_passthrough_stream_cancels_upstream(proxy: Proxy, upstream: FakeUpstream) -> None:
    async def responses(request: Request, body: dict[str, Any]) -> Response:
        return Scripted(upstream, [b"data: {}\n\n"] * 100, delay=0.05)

    upstream.routes["/v1/responses"] = responses
    with proxy.http() as http, http.stream("POST", "/v1/responses", json={"stream": True}) as r:
        next(r.iter_raw())
    gave_up = time.monotonic()
    wait_for(lambda: bool(upstream.disconnects), timeout=3)
    assert upstream.disconnects[0] - gave_up < 1.0


async def test_concurrent_streams_do_not_mix(proxy: Proxy, upstream: FakeUpstream) -> None:
    async def handler(request: Request, body: dict[str, Any]) -> Response:
        tag = body["messages"][0]["content"]
        return Scripted(upstream, sse([chunk({"content": f"{tag}-{i} "}) for i in range(5)]), delay=0.01)

    upstream.chat = handler
    async with proxy.aclient() as client:

        async def one(tag: str) -> str:
            stream = await client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": tag}], stream=True
            )
            return "".join([c.choices[0].delta.content or "" async for c in stream])

        results = await asyncio.gather(*(one(f"t{i}") for i in range(8)))
    assert results == [" ".join(f"t{i}-{j}" for j in range(5)) + " " for i in range(8)]

