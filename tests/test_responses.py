"""``POST /v1/responses`` through the real SDK: memory in, recording out, across both APIs."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai
import pytest
from starlette.requests import Request
from starlette.responses import Response

from proxy.pipeline.chat_call import ChatCall
from proxy.pipeline.pipeline_protocol import Prepared
from proxy.pipeline.plain import CountingPipeline
from tests.admin_helpers import admin
from tests.conftest import Proxy
from tests.fake_responses import sse_events
from tests.fake_upstream import FakeUpstream, Scripted, error_json
from tests.test_errors_auth import RecordingPipeline

FACT = "My cat Biscuit is allergic to peanuts, remember that."
QUESTION = "Which food is my cat Biscuit allergic to?"


def export(proxy: Proxy, user: str) -> dict[str, Any]:
    with admin(proxy) as http:
        return http.get(f"/paperclip/v1/users/{user}/export").json()  # type: ignore[no-any-return]


def trace_of(proxy: Proxy, trace: str) -> dict[str, Any]:
    with admin(proxy) as http:
        return http.get(f"/paperclip/v1/traces/{trace}").json()  # type: ignore[no-any-return]


def forwarded(upstream: FakeUpstream) -> dict[str, Any]:
    return upstream.responses_requests()[-1].json()  # type: ignore[no-any-return]


def test_a_fact_told_through_chat_is_recalled_through_responses(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = make_proxy()
    with proxy.client() as client:
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": FACT}], user="mia")
        proxy.drain()
        raw = client.responses.with_raw_response.create(model="gpt-4o-mini", input=QUESTION, user="mia")
        proxy.drain()
        assert raw.parse().output_text == "Hello from upstream"
        assert int(raw.headers["x-paperclip-memories"]) >= 1
        for header in ("session", "trace", "tokens-in", "tokens-forwarded"):
            assert raw.headers["x-paperclip-" + header]
        sent = forwarded(upstream)["input"]
        assert isinstance(sent, str) and sent.startswith("<paperclip-memory>") and sent.endswith(QUESTION)
        assert "peanuts" in sent


def test_a_fact_told_through_a_responses_stream_is_recalled_through_chat(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = make_proxy()
    with proxy.client() as client:
        with client.responses.stream(
            model="gpt-4o-mini", input=[{"role": "user", "content": [{"type": "input_text", "text": FACT}]}],
            safety_identifier="mia",
        ) as stream:
            kinds = [event.type for event in stream]
            final = stream.get_final_response()
        proxy.drain()
        assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
        assert final.output_text == "Hello from upstream"
        # Recorded: the user's input item and the streamed answer, both as fragments of mia.
        texts = json.dumps(export(proxy, "mia"))
        assert "Biscuit is allergic to peanuts" in texts and "Hello from upstream" in texts
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": QUESTION}], extra_headers={"x-paperclip-user": "mia"}
        )
        assert int(raw.headers["x-paperclip-memories"]) >= 1
        assert "peanuts" in str(upstream.chat_requests()[-1].json()["messages"][-1]["content"])


def test_context_codex_adds_as_user_messages_is_not_the_users_words(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    """Codex sends its AGENTS.md and environment as user messages before the user's own, resent every turn:
    forwarded as sent, never recorded nor searched as the user's words."""
    proxy = make_proxy()
    agents = "# AGENTS.md instructions for /home/ada/shop\n\n<INSTRUCTIONS>\nI live in Lisbon. Run pytest.\n</INSTRUCTIONS>"
    environment = "<environment_context>\n  <cwd>/home/ada/shop</cwd>\n  <shell>zsh</shell>\n</environment_context>"
    said = [{"role": "user", "content": [{"type": "input_text", "text": text}]}
            for text in (agents, environment, f"{QUESTION} My bike is a green Brompton.")]
    with proxy.client() as client:
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": FACT}], user="ada")
        proxy.drain()
        raw = client.responses.with_raw_response.create(model="gpt-4o-mini", input=said, user="ada")  # type: ignore[arg-type]
        proxy.drain()
    assert int(raw.headers["x-paperclip-memories"]) >= 1
    sent = forwarded(upstream)["input"]
    assert [m["content"][0]["text"] for m in sent[:2]] == [agents, environment]  # as sent
    stored = export(proxy, "ada")
    texts = [f["text"] for f in stored["fragments"]]
    assert any(t.endswith("My bike is a green Brompton.") for t in texts)
    assert not any("Lisbon" in t or "cwd" in t or "AGENTS.md" in t for t in texts)
    assert stored["items"] and not any("Lisbon" in i["content"] for i in stored["items"])


def test_codexs_context_is_forwarded_whole_however_long_the_task(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    """The AGENTS.md and environment messages lead the input like a system prompt: compression summarises the
    task's turns after them, never them."""
    proxy = make_proxy(defaults={"context": {"recent_window_tokens": 120, "summary_budget_tokens": 100}})
    agents = "# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\nNever touch vendor/.\n</INSTRUCTIONS>"
    environment = "<environment_context>\n  <cwd>/repo</cwd>\n  <shell>bash</shell>\n</environment_context>"
    items: list[Any] = [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Sandboxed."}]},
                        *({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
                          for text in (agents, environment))]
    with proxy.client() as client:
        for i in range(8):
            items.append({"role": "user", "content": f"Task {i}: rename f{i} to g{i} in module m{i}, carefully."})
            client.responses.create(model="gpt-4o-mini", input=items, user="ada")
            proxy.drain()
            items.append({"type": "message", "role": "assistant",
                          "content": [{"type": "output_text", "text": f"Renamed f{i} to g{i} in m{i}."}]})
    sent = forwarded(upstream)["input"]
    assert sent[:3] == items[:3]  # as sent, in their place
    assert "Summary of the earlier conversation" in json.dumps(sent[3])
    assert items[3] not in sent  # the task's first turn, summarised


def test_items_it_cannot_read_are_forwarded_however_long_the_input(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    """A compaction (the conversation before it, encrypted) and an item_reference hold what Paperclip cannot
    read: a summary of them would be empty. The compaction leads the input; nothing from the reference on is
    summarised; the turns between them are."""
    proxy = make_proxy(defaults={"context": {"recent_window_tokens": 120, "summary_budget_tokens": 100}})
    compaction = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA" + "x" * 40}
    reference = {"type": "item_reference", "id": "msg_earlier"}
    items: list[Any] = [compaction]
    with proxy.client() as client:
        for i in range(8):
            items.append({"role": "user", "content": f"Step {i}: rename f{i} to g{i} in module m{i}, carefully."})
            if i == 5:
                items.append(reference)
            client.responses.create(model="gpt-4o-mini", input=items, user="ada")
            proxy.drain()
            items.append({"type": "message", "role": "assistant",
                          "content": [{"type": "output_text", "text": f"Renamed f{i} to g{i} in m{i}."}]})
    sent = forwarded(upstream)["input"]
    assert sent[0] == compaction and reference in sent
    assert "Summary of the earlier conversation" in json.dumps(sent[1])
    assert items[1] not in sent  # the first step, summarised
    # From the reference on, as sent (the latest user message with the memory block before its words).
    assert sent[sent.index(reference) : -1] == items[items.index(reference) : -2]


def test_the_stream_is_relayed_event_for_event(plain_proxy: Proxy, direct: Any, upstream: FakeUpstream) -> None:
    def events(target: Any) -> list[str]:
        with target.client() as client, client.responses.stream(model="gpt-4o-mini", input="hi") as stream:
            return [e.type for e in stream]

    assert events(plain_proxy) == events(direct)
    with plain_proxy.http() as http:
        raw = http.post("/responses", json={"model": "gpt-4o-mini", "input": "hi", "stream": True})
    assert raw.headers["cache-control"] == "no-cache" and raw.headers["x-paperclip-session"]
    assert upstream.responses_requests()[-1].path == "/v1/responses"  # the bare path too


@pytest.mark.parametrize("sent", ["its event line", "its event and data lines"])
def test_a_stream_cut_inside_an_event_ends_with_the_error_event_alone(
    proxy: Proxy, upstream: FakeUpstream, sent: str
) -> None:
    """An upstream dying between an event's first line and the blank line that ends it: the half event
    never reaches the client, so the error event that follows is read alone. Glued to the half event's
    ``event:`` line by the error's own blank line, it made the SDK parse an empty event and raise a bare
    ``JSONDecodeError`` instead of its ``APIError``."""
    body = {"model": "gpt-4o-mini", "input": "hi", "stream": True}
    events = sse_events(body)
    whole, cut = events[:3], events[3]
    lines = cut.split(b"\n")
    half = lines[0] + b"\n" if sent == "its event line" else lines[0] + b"\n" + lines[1] + b"\n"

    async def dying(request: Request, parsed: dict[str, Any]) -> Response:
        return Scripted(upstream, [*whole, half, b"never sent"], abort_after=len(whole) + 1)

    upstream.routes["/v1/responses"] = dying
    with proxy.client() as client, pytest.raises(openai.APIError) as caught:
        for _ in client.responses.create(model="gpt-4o-mini", input="hi", stream=True):
            pass
    assert "upstream" in caught.value.message.lower()
    with proxy.http() as http:
        raw = http.post("/v1/responses", json=body)
    assert raw.status_code == 200 and raw.content.startswith(b"".join(whole))
    tail = raw.content[len(b"".join(whole)) :]
    assert tail.startswith(b"data: ") and tail.endswith(b"\n\n")  # the error event, nothing of the half one
    assert set(json.loads(tail.removeprefix(b"data: "))["error"]) == {"message", "type", "param", "code"}


def test_nothing_added_sends_the_original_bytes(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    proxy = make_proxy()
    body = b'{"model":"gpt-4o-mini", "input":[{"role":"user","content":"hi"}],"metadata":null,"x_new":{"a":1}}'
    with proxy.http() as http:
        r = http.post("/v1/responses", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 200 and r.headers["x-paperclip-memories"] == "0"
    assert upstream.responses_requests()[-1].body == body


def test_previous_response_id_keeps_the_session_and_is_not_compressed(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = make_proxy(defaults={"context": {"recent_window_tokens": 50}})
    with proxy.client() as client:
        first = client.responses.with_raw_response.create(model="gpt-4o-mini", input=FACT, user="mia")
        proxy.drain()
        second = client.responses.with_raw_response.create(
            model="gpt-4o-mini", input="And what else? " * 40, previous_response_id=first.parse().id, user="mia"
        )
        proxy.drain()
        session = first.headers["x-paperclip-session"]
        assert second.headers["x-paperclip-session"] == session
        assert forwarded(upstream)["previous_response_id"] == first.parse().id
        trace = trace_of(proxy, second.headers["x-paperclip-trace"])
        assert "previous_response_id" in trace["compression"]
        assert trace["summaries"] == []
        # Both turns of the chain are in one session, in order (the second, same answer is one fragment).
        fragments = [f for f in export(proxy, "mia")["fragments"] if f["session"] == session]
        assert [f["position"] for f in sorted(fragments, key=lambda f: f["position"])] == [0, 1, 2]


@pytest.mark.parametrize("conversation", ["conv_68a1", {"id": "conv_68a1"}])
def test_a_conversation_the_provider_holds_is_one_session_and_its_turns_are_not_recalled_into_it(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream, conversation: Any
) -> None:
    """With ``conversation``, each request sends only its new items: the session is the conversation's, and
    its earlier turns, which the provider adds itself, are not injected back as memories."""
    proxy = make_proxy()
    sessions = []
    with proxy.client() as client:
        for text in (FACT, "What should I pack for the weekend?", "And what should I cook on Sunday?"):
            raw = client.responses.with_raw_response.create(
                model="gpt-4o-mini", input=text, conversation=conversation, user="mia")
            proxy.drain()
            sessions.append(raw.headers["x-paperclip-session"])
            sent = forwarded(upstream)
            assert sent["conversation"] == conversation
            assert f"User: {FACT}" not in json.dumps(sent["input"])  # the profile may say it; the turn is held
    assert len(set(sessions)) == 1
    fragments = [f for f in export(proxy, "mia")["fragments"] if f["session"] == sessions[0]]
    # Three turns and their answers in order (the fake's answers are one text, stored once, at 1).
    assert sorted(f["position"] for f in fragments) == [0, 1, 2, 4]
    with proxy.client() as client:  # a fresh chat of hers recalls it
        raw = client.responses.with_raw_response.create(model="gpt-4o-mini", input=QUESTION, user="mia")
    assert int(raw.headers["x-paperclip-memories"]) >= 1


def test_tool_calls_with_their_outputs(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    proxy = make_proxy()
    with proxy.client() as client:
        tools: Any = [{"type": "function", "name": "weather", "parameters": {"type": "object", "properties": {}}}]
        history: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
        first = client.responses.create(model="gpt-4o-mini", input=history, tools=tools)
        call = first.output[0]
        assert call.type == "function_call"
        history += [call.model_dump(exclude_none=True),
                    {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}]
        second = client.responses.create(model="gpt-4o-mini", input=history, tools=tools)
        assert second.output_text == "Hello from upstream"
        sent = forwarded(upstream)["input"]
        assert [i.get("type") for i in sent[-2:]] == ["function_call", "function_call_output"]


def test_whole_histories_are_compressed_keeping_calls_with_outputs(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = make_proxy(defaults={"context": {"recent_window_tokens": 200, "compression_mode": "background"}})
    with proxy.client() as client:
        history: list[Any] = []
        for i in range(12):
            history.append({"role": "user", "content": f"Tell me about station {i} on the northern railway line."})
            history.append({"type": "function_call", "call_id": f"c{i}", "name": "lookup", "arguments": f'{{"n":{i}}}'})
            history.append({"type": "function_call_output", "call_id": f"c{i}", "output": f"station {i}: open"})
            history.append({"type": "message", "role": "assistant",
                            "content": [{"type": "output_text", "text": f"Station {i} is open daily."}]})
        history.append({"role": "user", "content": "Which stations are open?"})
        for _ in range(2):
            raw = client.responses.with_raw_response.create(model="gpt-4o-mini", input=history)
            proxy.drain()
        assert int(raw.headers["x-paperclip-tokens-forwarded"]) < int(raw.headers["x-paperclip-tokens-in"])
        sent = forwarded(upstream)["input"]
        assert sent[0]["role"] == "developer" and "Summary of the earlier conversation" in sent[0]["content"]
        calls = [i["call_id"] for i in sent[1:] if i.get("type") == "function_call"]
        outputs = [i["call_id"] for i in sent[1:] if i.get("type") == "function_call_output"]
        assert calls == outputs and sent[-1]["content"].endswith(history[-1]["content"])


def test_a_failed_response_records_nothing(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    async def failing(request: Request, body: dict[str, Any]) -> Response:
        return error_json(500, "The server had an error", "server_error")

    proxy = make_proxy()
    upstream.routes["/v1/responses"] = failing
    with proxy.http() as http:
        r = http.post("/v1/responses", json={"model": "gpt-4o-mini", "input": FACT, "user": "zoe"})
    proxy.drain()
    assert r.status_code == 500 and r.json()["error"]["type"] == "server_error"
    assert export(proxy, "zoe")["fragments"] == []


class FailingPipeline(CountingPipeline):
    async def prepare(self, call: ChatCall) -> Prepared:
        raise RuntimeError("the memory layer is down")


def test_a_failing_memory_layer_forwards_the_original_bytes_degraded(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = make_proxy(pipeline=FailingPipeline())
    body = b'{"model":"gpt-4o-mini","input":"hi","instructions":null}'
    with proxy.http() as http:
        r = http.post("/v1/responses", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 200 and r.headers["x-paperclip-degraded"] == "RuntimeError"
    assert upstream.responses_requests()[-1].body == body


def test_users_and_sessions_resolve_as_for_chat(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    pipeline = RecordingPipeline()
    proxy = make_proxy(pipeline=pipeline)
    with proxy.client() as client:
        for fields, expected in [({"user": "u1"}, "u1"), ({"safety_identifier": "u2"}, "u2"),
                                 ({"metadata": {"user_id": "u3"}}, "u3"), ({}, "anonymous")]:
            raw = client.responses.with_raw_response.create(model="gpt-4o-mini", input="Plan my trip", **fields)
            assert pipeline.prepared[-1].user == expected and pipeline.prepared[-1].api == "responses"
            assert raw.headers["x-paperclip-session"].startswith("s-")
        raw = client.responses.with_raw_response.create(
            model="gpt-4o-mini", input="Plan my trip", extra_headers={"x-paperclip-session": "mine"}
        )
        assert raw.headers["x-paperclip-session"] == "mine"
        client.responses.create(model="gpt-4o-mini", input="More", conversation="conv_1")
        assert pipeline.prepared[-1].provider_state == "conversation"


def test_system_head_puts_the_memory_in_instructions(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    proxy = make_proxy(defaults={"memory": {"position": "system_head"}})
    with proxy.client() as client:
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": FACT}], user="mia")
        proxy.drain()
        client.responses.create(model="gpt-4o-mini", input=QUESTION, instructions="Be brief.", user="mia")
    sent = forwarded(upstream)
    assert sent["input"] == QUESTION
    assert sent["instructions"].startswith("Be brief.\n\n") and "<paperclip-memory>" in sent["instructions"]


def test_a_chain_is_not_reminded_of_its_own_turns(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    """The provider holds a previous_response_id chain: its turns are not injected into it, only elsewhere."""
    proxy = make_proxy()
    with proxy.client() as client:
        first = client.responses.create(model="gpt-4o-mini", input=FACT, user="mia")
        proxy.drain()
        second = client.responses.create(
            model="gpt-4o-mini", input="Tell me a joke.", previous_response_id=first.id, user="mia"
        )
        proxy.drain()
        third = client.responses.with_raw_response.create(
            model="gpt-4o-mini", input=QUESTION, previous_response_id=second.id, user="mia"
        )
        proxy.drain()
        assert "peanuts" not in json.dumps(forwarded(upstream)["input"])
        trace = trace_of(proxy, third.headers["x-paperclip-trace"])
        assert not any("peanuts" in c["text"] for c in trace["candidates"])
        # A new chain and a chat are other conversations: there the fact is recalled.
        fresh = client.responses.with_raw_response.create(model="gpt-4o-mini", input=QUESTION, user="mia")
        assert fresh.headers["x-paperclip-session"] != third.headers["x-paperclip-session"]
        assert "peanuts" in json.dumps(forwarded(upstream)["input"])
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": QUESTION}], user="mia"
        )
        assert "peanuts" in str(upstream.chat_requests()[-1].json()["messages"][-1]["content"])


def test_a_branch_of_a_chain_recalls_what_the_other_branch_said(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    """Only the turns up to the response chained from are the provider's: a sibling branch's are not."""
    proxy = make_proxy()
    with proxy.client() as client:
        root = client.responses.create(model="gpt-4o-mini", input="Tell me a joke.", user="mia")
        proxy.drain()
        client.responses.create(model="gpt-4o-mini", input=FACT, previous_response_id=root.id, user="mia")
        proxy.drain()
        client.responses.create(model="gpt-4o-mini", input=QUESTION, previous_response_id=root.id, user="mia")
    assert "peanuts" in json.dumps(forwarded(upstream)["input"])
