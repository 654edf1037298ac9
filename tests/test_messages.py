"""``POST /v1/messages`` through the real ``anthropic`` SDK: memory in, recording out, across the three APIs."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic
import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response

from tests.admin_helpers import admin
from tests.conftest import ANTHROPIC_KEY, PROXY_KEY, Proxy
from tests.fake_anthropic import anthropic_error, sse_events
from tests.fake_upstream import FakeUpstream, Scripted, stream_response

FACT = "My cat Biscuit is allergic to peanuts, remember that."
QUESTION = "Which food is my cat Biscuit allergic to?"
MODEL = "claude-sonnet-4-5"
WEATHER = {"name": "get_weather", "description": "The weather in a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}


def export(proxy: Proxy, user: str) -> dict[str, Any]:
    with admin(proxy) as http:
        return http.get(f"/paperclip/v1/users/{user}/export").json()  # type: ignore[no-any-return]


def forwarded(upstream: FakeUpstream) -> dict[str, Any]:
    return upstream.messages_requests()[-1].json()  # type: ignore[no-any-return]


def tell(proxy: Proxy, user: str, text: str = FACT) -> None:
    with proxy.anthropic() as client:
        client.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": text}],
                               metadata={"user_id": user})
    proxy.drain()


def test_create_goes_to_the_anthropic_upstream_with_its_key(proxy: Proxy, upstream: FakeUpstream) -> None:
    with proxy.anthropic() as client:
        raw = client.messages.with_raw_response.create(
            model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "Hi"}],
            extra_headers={"anthropic-beta": "prompt-caching-2024-07-31"},
        )
    reply = raw.parse()
    assert reply.content[0].type == "text" and reply.content[0].text == "Hello from upstream"
    assert raw.headers["x-paperclip-session"] and raw.headers["x-paperclip-trace"]
    assert raw.headers["request-id"] == "req_fake_anthropic"  # end-to-end headers come back
    seen = upstream.messages_requests()[-1]
    assert seen.path == "/v1/messages"
    assert seen.headers["x-api-key"] == ANTHROPIC_KEY  # the tenant's Anthropic key, never the client's
    assert PROXY_KEY not in json.dumps(seen.headers)
    assert seen.headers["anthropic-version"] == raw.http_request.headers["anthropic-version"]
    assert seen.headers["anthropic-beta"] == "prompt-caching-2024-07-31"
    assert "authorization" not in seen.headers


def test_a_fact_told_through_messages_is_recalled_through_chat_and_responses(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = make_proxy()
    tell(proxy, "mia")
    assert "Biscuit is allergic to peanuts" in json.dumps(export(proxy, "mia"))
    with proxy.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": QUESTION}], user="mia"
        )
        assert int(raw.headers["x-paperclip-memories"]) >= 1
        assert "peanuts" in str(upstream.chat_requests()[-1].json()["messages"][-1]["content"])
        client.responses.create(model="gpt-4o-mini", input=QUESTION, user="mia")
        assert "peanuts" in str(upstream.responses_requests()[-1].json()["input"])


DEVICE = "5dd07c33da27e6d2968d94ea20bf47a7b090b6b158b82328d54da2909a108e84"


def test_claude_code_runs_of_one_device_are_one_user(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    """Claude Code names its run in ``metadata.user_id`` (two forms, by version): every run is the same user."""
    proxy = make_proxy()
    tell(proxy, f"user_{DEVICE}_account__session_d2e70091-3007-41a3-a916-cb8b0d3098de")
    user = f"user_{DEVICE}_account_"
    assert "Biscuit is allergic to peanuts" in json.dumps(export(proxy, user))
    later_run = json.dumps({"device_id": DEVICE, "account_uuid": "", "session_id": "2c4e1cf0-7a67-4d2e-9a4b"})
    with proxy.anthropic() as client:
        raw = client.messages.with_raw_response.create(
            model=MODEL, max_tokens=64, metadata={"user_id": later_run}, messages=[{"role": "user", "content": QUESTION}],
        )
    assert int(raw.headers["x-paperclip-memories"]) >= 1
    sent = forwarded(upstream)
    assert "peanuts" in json.dumps(sent["messages"][-1]) and sent["metadata"] == {"user_id": later_run}


def test_a_fact_told_through_chat_is_recalled_as_a_text_block_of_the_latest_user_message(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = make_proxy()
    with proxy.client() as client:
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": FACT}], user="mia")
    proxy.drain()
    system = [{"type": "text", "text": "Be kind.", "cache_control": {"type": "ephemeral"}}]
    with proxy.anthropic() as client:
        raw = client.messages.with_raw_response.create(
            model=MODEL, max_tokens=64, system=system, metadata={"user_id": "mia"},
            messages=[{"role": "user", "content": QUESTION}],
        )
    assert int(raw.headers["x-paperclip-memories"]) >= 1
    sent = forwarded(upstream)
    assert sent["system"] == system  # the client's system, as sent
    first, second = sent["messages"][-1]["content"]
    assert first["type"] == "text" and first["text"].startswith("<paperclip-memory>") and "peanuts" in first["text"]
    assert second == {"type": "text", "text": QUESTION}
    assert sent["max_tokens"] == 64 and sent["metadata"] == {"user_id": "mia"}


def test_the_block_follows_tool_results_and_the_clients_cache_breakpoint(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = make_proxy()
    tell(proxy, "mia")
    results = [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny, 21 °C"},
        {"type": "text", "text": "Also: " + QUESTION, "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "(reminder)"},
    ]
    history = [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": [{"type": "text", "text": "Let me check."},
                                          {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                           "input": {"city": "Paris"}}]},
        {"role": "user", "content": results},
    ]
    with proxy.anthropic() as client:
        client.messages.create(model=MODEL, max_tokens=64, tools=[WEATHER], messages=history,  # type: ignore[arg-type]
                               metadata={"user_id": "mia"})
    sent = forwarded(upstream)["messages"]
    assert sent[:2] == history[:2]  # the earlier turns, byte for byte: the human's question carries no block
    last = sent[-1]["content"]
    assert last[:2] == results[:2] and last[3] == results[2]
    assert last[2]["type"] == "text" and "peanuts" in last[2]["text"]


def test_what_the_user_types_during_a_tool_loop_is_the_query_and_is_remembered(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = make_proxy()
    tell(proxy, "noa")
    history = [
        {"role": "user", "content": "Check the weather in Paris."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                           "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny, 21 °C"},
            {"type": "text", "text": QUESTION + " My daughter Priya turns seven on June 3rd."},
        ]},
    ]
    with proxy.anthropic() as client:
        raw = client.messages.with_raw_response.create(
            model=MODEL, max_tokens=64, tools=[WEATHER], messages=history,  # type: ignore[arg-type]
            metadata={"user_id": "noa"},
        )
    proxy.drain()
    assert raw.headers["x-paperclip-memories"] != "0"  # the question typed beside the results found the fact
    last = forwarded(upstream)["messages"][-1]["content"]
    assert last[0] == history[2]["content"][0] and "peanuts" in last[1]["text"] and last[2] == history[2]["content"][1]
    with admin(proxy) as http:
        turns = [f["text"] for f in http.get("/paperclip/v1/users/noa/fragments").json()["data"]]
    assert any("Priya turns seven" in t for t in turns)
    assert not any("Sunny" in t for t in turns)  # the tool's output is not what the user said


def test_context_claude_code_adds_to_the_users_message_is_not_their_words(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    """Claude Code puts ``<system-reminder>`` elements (its CLAUDE.md files, the todo list) in the user's
    message, resent with every message: forwarded as sent, never remembered nor searched as the user's words."""
    proxy = make_proxy()
    tell(proxy, "ora")
    reminder = ("<system-reminder>\nAs you answer the user's questions, you can use the following context:\n"
                "# claudeMd\nAlways run the linter. I live in Lisbon.\n</system-reminder>")
    content = [{"type": "text", "text": reminder},
               {"type": "text", "text": f"{reminder}\n{QUESTION} My bike is a green Brompton."}]
    with proxy.anthropic() as client:
        raw = client.messages.with_raw_response.create(
            model=MODEL, max_tokens=64, messages=[{"role": "user", "content": content}],  # type: ignore[arg-type]
            metadata={"user_id": "ora"},
        )
    proxy.drain()
    assert raw.headers["x-paperclip-memories"] != "0"  # the question, not the reminder, was the query
    last = forwarded(upstream)["messages"][-1]["content"]
    assert [b for b in last if "peanuts" not in b["text"]] == content  # the client's blocks, as sent
    with admin(proxy) as http:
        turns = [f["text"] for f in http.get("/paperclip/v1/users/ora/fragments").json()["data"]]
        memories = [m["content"] for m in http.get("/paperclip/v1/users/ora/memories").json()["data"]]
    assert any(t.endswith("My bike is a green Brompton.") for t in turns)
    assert not any("linter" in t or "claudeMd" in t for t in turns)
    assert not any("Lisbon" in m for m in memories)


def test_stream_is_relayed_event_for_event_and_recorded(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = make_proxy()
    with proxy.anthropic() as client, client.messages.stream(
        model=MODEL, max_tokens=64, messages=[{"role": "user", "content": FACT}], metadata={"user_id": "mia"}
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    proxy.drain()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert final.content[0].type == "text" and final.content[0].text == "Hello from upstream"
    texts = json.dumps(export(proxy, "mia"))
    assert "Biscuit is allergic to peanuts" in texts and "Hello from upstream" in texts


def test_the_raw_stream_is_the_upstreams_byte_for_byte(plain_proxy: Proxy, upstream: FakeUpstream) -> None:
    body = {"model": MODEL, "max_tokens": 64, "stream": True, "messages": [{"role": "user", "content": "Hi"}]}
    events = sse_events(body)

    async def fixed(request: Request, parsed: dict[str, Any]) -> Response:
        return stream_response(events, delay=0.01)

    upstream.routes["/v1/messages"] = fixed
    with plain_proxy.http() as http, http.stream("POST", "/v1/messages", json=body) as response:
        got = list(response.iter_raw())
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-cache"
    assert b"".join(got) == b"".join(events)
    assert len(got) > 1  # relayed as it came, not gathered into one body


def test_tool_use_round_trip(proxy: Proxy, upstream: FakeUpstream) -> None:
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    with proxy.anthropic() as client:
        first = client.messages.create(model=MODEL, max_tokens=64, tools=[WEATHER], messages=messages)  # type: ignore[arg-type]
        call = first.content[0]
        assert first.stop_reason == "tool_use" and call.type == "tool_use" and call.input == {"city": "Paris"}
        messages += [{"role": "assistant", "content": [call.model_dump()]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "Sunny"}]}]
        second = client.messages.create(model=MODEL, max_tokens=64, tools=[WEATHER], messages=messages)  # type: ignore[arg-type]
    assert second.content[0].type == "text"
    sent = forwarded(upstream)["messages"]
    assert sent[1]["content"][0]["id"] == call.id and sent[2]["content"][0]["tool_use_id"] == call.id


def test_upstream_errors_pass_through_in_anthropics_shape(plain_proxy: Proxy, upstream: FakeUpstream) -> None:
    async def overloaded(request: Request, body: dict[str, Any]) -> Response:
        return anthropic_error(529, "overloaded_error", "Overloaded")

    upstream.routes["/v1/messages"] = overloaded
    with plain_proxy.anthropic() as client, pytest.raises(anthropic.APIStatusError) as caught:
        client.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "Hi"}])
    assert caught.value.status_code == 529
    assert caught.value.body == {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    with plain_proxy.anthropic() as client, pytest.raises(anthropic.APIStatusError) as streamed:
        client.messages.create(model=MODEL, max_tokens=64, stream=True, messages=[{"role": "user", "content": "Hi"}])
    assert streamed.value.status_code == 529  # checked before committing to a 200


def test_paperclips_own_errors_are_in_anthropics_shape(plain_proxy: Proxy) -> None:
    with plain_proxy.anthropic(key="pk-wrong") as client, pytest.raises(anthropic.AuthenticationError) as caught:
        client.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "Hi"}])
    assert caught.value.body == {"type": "error", "error": {"type": "authentication_error",
                                                             "message": "Incorrect API key provided to the Paperclip proxy."}}
    with plain_proxy.http() as http:
        bad = http.post("/v1/messages", content=b"{not json", headers={"content-type": "application/json"})
    assert bad.status_code == 400 and bad.json()["type"] == "error"
    assert bad.json()["error"]["type"] == "invalid_request_error"


def test_an_unreachable_upstream_is_a_502_in_anthropics_shape(
    make_proxy: Callable[..., Proxy], closed_port_url: str
) -> None:
    proxy = make_proxy(defaults={"anthropic": {"base_url": closed_port_url.removesuffix("/v1")}})
    with proxy.anthropic() as client, pytest.raises(anthropic.APIStatusError) as caught:
        client.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "Hi"}])
    assert caught.value.status_code == 502
    assert caught.value.body["type"] == "error" and caught.value.body["error"]["type"] == "api_error"  # type: ignore[index]


@pytest.mark.parametrize("ending", ["error_event", "no_message_stop"])
def test_an_incomplete_stream_records_the_question_not_the_reply(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream, ending: str
) -> None:
    async def broken(request: Request, body: dict[str, Any]) -> Response:
        events = sse_events(body, "Peanut butter is fine for cats", stop=False)
        if ending == "error_event":
            events.append(b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"x"}}\n\n')
        return stream_response(events)

    upstream.routes["/v1/messages"] = broken
    proxy = make_proxy()
    body = {"model": MODEL, "max_tokens": 64, "stream": True, "messages": [{"role": "user", "content": FACT}],
            "metadata": {"user_id": "mia"}}
    with proxy.http() as http, http.stream("POST", "/v1/messages", json=body) as response:
        b"".join(response.iter_raw())
    proxy.drain()
    texts = json.dumps(export(proxy, "mia"))
    assert "Biscuit is allergic to peanuts" in texts
    assert "Peanut butter" not in texts


def test_a_key_in_x_api_key_picks_the_tenant_and_never_goes_upstream(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    with httpx.Client(base_url=proxy.url, timeout=30, headers={"x-api-key": PROXY_KEY}) as http:
        chat = http.post("/v1/chat/completions",
                         json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}]})
        messages = http.post("/v1/messages",
                             json={"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "Hi"}]})
    assert chat.status_code == 200 and messages.status_code == 200
    seen = upstream.chat_requests()[-1].headers
    assert "x-api-key" not in seen and seen["authorization"] == "Bearer sk-upstream-acme"
    assert upstream.messages_requests()[-1].headers["x-api-key"] == ANTHROPIC_KEY


def test_passthrough_keys_reach_anthropic_as_they_came(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = make_proxy(passthrough_keys=True)
    body = {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": "Hi"}]}
    with httpx.Client(base_url=proxy.url, timeout=30) as http:  # as Claude Code sends its key
        assert http.post("/v1/messages", json=body, headers={"x-api-key": "sk-ant-users-own"}).status_code == 200
    seen = upstream.messages_requests()[-1].headers
    assert seen["x-api-key"] == "sk-ant-users-own" and "authorization" not in seen
    with proxy.anthropic(key="sk-ant-oauth-token") as client:  # today's SDK: Authorization: Bearer
        client.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "Hi"}])
    seen = upstream.messages_requests()[-1].headers
    assert seen["authorization"] == "Bearer sk-ant-oauth-token" and "x-api-key" not in seen


def test_count_tokens_and_models_pass_through_to_anthropic_with_the_tenants_key(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    with proxy.anthropic() as client:
        counted = client.messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": "Hi"}])
    assert counted.input_tokens == 42
    seen = upstream.requests[-1]
    assert seen.path == "/v1/messages/count_tokens" and seen.headers["x-api-key"] == ANTHROPIC_KEY


def test_memory_off_forwards_the_body_unchanged(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    proxy = make_proxy()
    tell(proxy, "mia")
    body = {"model": MODEL, "max_tokens": 64, "system": "Be brief.", "metadata": {"user_id": "mia"},
            "messages": [{"role": "user", "content": QUESTION}], "x_unknown": None}
    raw = json.dumps(body).encode()
    with proxy.http() as http:
        got = http.post("/v1/messages", content=raw,
                        headers={"content-type": "application/json", "x-paperclip-memory": "off"})
    assert got.status_code == 200
    assert upstream.messages_requests()[-1].body == raw


def test_an_upstream_dropping_mid_stream_ends_it_with_anthropics_error_event(
    plain_proxy: Proxy, upstream: FakeUpstream
) -> None:
    body = {"model": MODEL, "max_tokens": 64, "stream": True, "messages": [{"role": "user", "content": "Hi"}]}
    parts = sse_events(body)[:4]

    async def dropping(request: Request, parsed: dict[str, Any]) -> Response:
        return Scripted(upstream, [*parts, b"never sent"], abort_after=len(parts))  # type: ignore[return-value]

    upstream.routes["/v1/messages"] = dropping
    with plain_proxy.http() as http:
        got = http.post("/v1/messages", json=body)
    assert got.status_code == 200 and got.content.startswith(b"".join(parts))
    tail = got.content[len(b"".join(parts)) :].decode()
    name, data = tail.strip().split("\n")
    assert name == "event: error"
    error = json.loads(data.removeprefix("data: "))
    assert error["type"] == "error" and error["error"]["type"] == "api_error"
    with plain_proxy.anthropic() as client, pytest.raises(anthropic.APIStatusError), client.messages.stream(
        model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "Hi"}]
    ) as stream:
        stream.get_final_message()  # the SDK reads the event as the error it is
