"""The upstream's own ``usage``, recorded per tenant, model and day; metrics by tenant and model."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.requests import Request
from starlette.responses import Response

from proxy.server.accounting import write_usage
from proxy.server.usage_ledger import HEAD_BYTES, TAIL_BYTES, Billed, billed
from tests.admin_helpers import admin, ask, teach
from tests.conftest import Proxy, both_stores
from tests.fake_upstream import FakeUpstream, chunk, sse, stream_response

backend = both_stores  # every test that starts a proxy runs on SQLite and on PostgreSQL

counts = st.integers(0, 10**9)


@given(counts, counts, counts, st.binary(max_size=200), st.sampled_from([True, False]))
def test_billed_finds_the_last_usage(prompt: int, completion: int, cached: int, noise: bytes, stream: bool) -> None:
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
             "prompt_tokens_details": {"cached_tokens": cached}}
    if stream:
        tail = noise + b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\ndata: [DONE]\n\n"
    else:
        tail = noise + json.dumps({"choices": [{"usage": "not this"}], "usage": usage}, indent=1).encode()
    assert billed(tail) == Billed(prompt, completion, cached)


@given(counts, counts, counts, st.binary(max_size=200))
def test_billed_reads_the_responses_api_names(prompt: int, completion: int, cached: int, noise: bytes) -> None:
    usage = {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": cached},
             "output_tokens": completion, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": prompt + completion}
    event = {"type": "response.completed", "response": {"output": [], "usage": usage, "user": None}}
    tail = noise + b"event: response.completed\ndata: " + json.dumps(event).encode() + b"\n\n"
    assert billed(tail) == Billed(prompt, completion, cached)


@given(counts, counts, counts, st.binary(max_size=200))
def test_billed_reads_the_messages_api_names(prompt: int, completion: int, cached: int, noise: bytes) -> None:
    usage = {"input_tokens": prompt, "output_tokens": completion, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": cached}
    message = {"type": "message", "content": [{"type": "text", "text": "hi"}], "usage": usage}
    assert billed(noise + json.dumps(message).encode()) == Billed(prompt, completion, cached)


@given(counts, counts, counts, st.binary(max_size=200), st.integers(0, 3))
def test_billed_reads_a_messages_api_stream_from_both_ends(
    prompt: int, completion: int, cached: int, noise: bytes, gap: int
) -> None:
    """message_start carries the input and a placeholder output; the last message_delta the output alone."""
    usage = {"input_tokens": prompt, "output_tokens": 1, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": cached}
    start = b"event: message_start\ndata: " + json.dumps(
        {"type": "message_start", "message": {"id": "msg_1", "content": [], "usage": usage}}).encode() + b"\n\n"
    delta = b"event: message_delta\ndata: " + json.dumps(
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": completion}}
    ).encode() + b"\n\nevent: message_stop\ndata: {\"type\": \"message_stop\"}\n\n"
    body = start + noise + b"x" * (5000 * gap) + delta
    assert billed(body[-TAIL_BYTES:], body[:HEAD_BYTES]) == Billed(prompt, completion, cached)
    assert billed(delta) is None  # the output alone, no start to take the input from


@pytest.mark.parametrize("tail", [
    b"", b'{"usage": null}', b'data: {"usage": {"prompt_tokens": "ten"}}', b'"usage": {"prompt_tokens": 3',
    b'{"choices": []}', b'"usage": {"prompt_tokens": -1, "completion_tokens": 2}',
])
def test_billed_none_without_a_usable_usage(tail: bytes) -> None:
    assert billed(tail) is None


def usage_stream(request: Request, body: dict[str, Any]) -> Response:
    events = [chunk({"role": "assistant", "content": "Hi"}), chunk({}, finish="stop")]
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": body["model"],
                       "choices": [], "usage": {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49}})
    return stream_response(sse(events))


async def streaming(request: Request, body: dict[str, Any]) -> Response:
    return usage_stream(request, body)


def rows(proxy: Proxy, **params: str) -> list[dict[str, Any]]:
    with admin(proxy) as http:
        r = http.get("/paperclip/v1/usage", params=params)
    assert r.status_code == 200, r.text
    return list(r.json()["data"])


def test_usage_per_tenant_model_and_day(proxy: Proxy, upstream: FakeUpstream) -> None:
    client = proxy.client()
    messages: Any = [{"role": "user", "content": "Hello there, how are you today?"}]
    client.chat.completions.create(model="gpt-4o-mini", messages=messages)  # usage 10 + 5
    upstream.chat = streaming
    try:
        list(client.chat.completions.create(model="gpt-4o", messages=messages, stream=True,
                                            stream_options={"include_usage": True}))
        list(client.chat.completions.create(model="gpt-4o", messages=messages, stream=True))  # no usage
    finally:
        upstream.chat = None  # the fake upstream outlives this test; later ones expect its default
    proxy.drain()
    got = {r["model"]: r for r in rows(proxy)}
    assert set(got) == {"gpt-4o", "gpt-4o-mini"}
    mini, four = got["gpt-4o-mini"], got["gpt-4o"]
    assert (mini["requests"], mini["billed_requests"], mini["prompt_tokens"], mini["completion_tokens"]) == (1, 1, 10, 5)
    assert (four["requests"], four["billed_requests"], four["prompt_tokens"], four["completion_tokens"]) == (2, 1, 42, 7)
    assert mini["tokens_client"] > 0 and mini["tokens_saved"] == mini["tokens_client"] - mini["tokens_forwarded"]
    assert mini["tenant"] == "acme" and mini["day"] == mini["id"].split("/")[0]
    # Written to the store, then counted once, not twice.
    rt = proxy.runtime
    proxy.server.call(write_usage(rt.accounting, rt.store(), rt.metrics))
    assert rt.accounting.ledger.unwritten() == []
    assert {r["model"]: r["requests"] for r in rows(proxy)} == {"gpt-4o": 2, "gpt-4o-mini": 1}
    assert rows(proxy, since="2000-01-01", until="2000-12-31") == []
    with proxy.http() as http:
        metrics = http.get("/metrics").text
    assert 'paperclip_tenant_tokens_total{kind="billed_prompt",model="gpt-4o",tenant="acme"} 42.0' in metrics
    assert 'paperclip_tenant_requests_total{model="gpt-4o-mini",tenant="acme"} 1.0' in metrics


def test_a_memory_block_that_costs_more_than_compression_saved_is_reported_not_hidden(proxy: Proxy) -> None:
    """A short chat is not compressed, so its injected memories make the forwarded prompt longer than the
    client's: the usage row's net ``tokens_saved`` goes negative, and the metrics count the growth."""
    teach(proxy, "bob")
    proxy.drain()
    before = rows(proxy)[0]
    headers = ask(proxy, "bob")
    grew = int(headers["x-paperclip-tokens-forwarded"]) - int(headers["x-paperclip-tokens-in"])
    assert int(headers["x-paperclip-memories"]) >= 1 and grew > 0
    proxy.drain()
    after = rows(proxy)[0]
    assert after["tokens_saved"] - before["tokens_saved"] == -grew  # net: compression's saving minus memory's cost
    with proxy.http() as http:
        metrics = {line.split(" ")[0]: float(line.split(" ")[1]) for line in http.get("/metrics").text.splitlines()
                   if line.startswith("paperclip_tokens_")}
    assert metrics["paperclip_tokens_added_total"] >= grew
    assert (metrics["paperclip_tokens_saved_total"] - metrics["paperclip_tokens_added_total"]
            == metrics["paperclip_tokens_in_total"] - metrics["paperclip_tokens_forwarded_total"])


def test_responses_api_usage_is_billed(proxy: Proxy) -> None:
    proxy.client().responses.create(model="gpt-4.1-mini", input="Hello there, how are you today?")  # usage 10 + 5
    proxy.drain()
    row = {r["model"]: r for r in rows(proxy)}["gpt-4.1-mini"]
    assert (row["requests"], row["billed_requests"], row["prompt_tokens"], row["completion_tokens"]) == (1, 1, 10, 5)


@pytest.mark.parametrize("words", [5, 4000])
def test_a_streamed_messages_api_reply_is_billed_its_output(proxy: Proxy, upstream: FakeUpstream, words: int) -> None:
    """Claude Code streams: the output is billed from the last message_delta, the input from message_start,
    however long the reply between them."""
    from tests.fake_anthropic import sse_events

    async def long_reply(request: Request, body: dict[str, Any]) -> Response:
        return stream_response(sse_events(body, " ".join(["word"] * words)))

    upstream.routes["/v1/messages"] = long_reply
    with proxy.anthropic().messages.stream(
        model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "Tell me a long story."}]
    ) as stream:
        final = stream.get_final_message()
    assert (final.usage.input_tokens, final.usage.output_tokens) == (10, 5)
    proxy.drain()
    row = {r["model"]: r for r in rows(proxy)}["claude-sonnet-4-5"]
    assert (row["billed_requests"], row["prompt_tokens"], row["completion_tokens"]) == (1, 10, 5)


def test_model_labels_are_bounded(proxy: Proxy) -> None:
    from proxy.server.accounting import MAX_MODELS

    client = proxy.client()
    for n in range(MAX_MODELS + 3):
        client.chat.completions.create(model=f"model-{n}", messages=[{"role": "user", "content": "hi"}],
                                       extra_headers={"X-Paperclip-Memory": "off"})
    proxy.drain()  # each request is accounted once its response has gone out
    with proxy.http() as http:
        metrics = http.get("/metrics").text
    labels = {line.split('model="')[1].split('"')[0] for line in metrics.splitlines()
              if line.startswith("paperclip_tenant_requests_total{")}
    assert len(labels) == MAX_MODELS + 1 and "other" in labels
    assert len(rows(proxy)) == MAX_MODELS + 3  # the usage table keeps every model
