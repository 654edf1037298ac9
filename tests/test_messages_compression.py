"""A long tool-using conversation through ``POST /v1/messages``: bounded like chat, legal at every request.

The real ``anthropic`` SDK drives the agent loop (a question, a tool call, its
result, the answer) against the fake Anthropic upstream, with the compression
model behind Anthropic's API too (``compression.api: messages``). Budgets are
small, as in test_compression.py, so that many compressions and merges happen.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import anthropic
import pytest

from proxy.tokens import TokenCounter
from tests.admin_helpers import teach
from tests.conftest import ANTHROPIC_KEY, Proxy
from tests.fake_upstream import FakeUpstream
from tests.test_compression import CHAIN, WINDOW, sentence

MODEL = "claude-sonnet-4-5"
SYSTEM = [{"type": "text", "text": "You are a travel agent's assistant. Be brief.",
           "cache_control": {"type": "ephemeral"}}]
TOOL = {"name": "lookup", "description": "Look a booking up",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
SETTINGS = {"defaults": {
    "context": {"recent_window_tokens": WINDOW, "summary_budget_tokens": CHAIN},
    "compression": {"model": "claude-haiku", "api": "messages", "timeout_s": 5},
    "memory": {"enabled": False},
}}


class Agent:
    """A client that keeps its history, resends all of it, and answers every tool call."""

    def __init__(self, proxy: Proxy, client: anthropic.Anthropic) -> None:
        self.proxy, self.client = proxy, client
        self.messages: list[dict[str, Any]] = []
        self.forwarded: list[int] = []
        self.bounds: list[float] = []
        self.counter = TokenCounter(MODEL)

    def send(self) -> anthropic.types.Message:
        raw = self.client.messages.with_raw_response.create(
            model=MODEL, max_tokens=256, system=SYSTEM, tools=[TOOL],  # type: ignore[list-item]
            messages=self.messages,  # type: ignore[arg-type]
            extra_headers={"x-paperclip-session": "agent"},
        )
        self.proxy.drain()
        reply = raw.parse()
        self.forwarded.append(int(raw.headers["x-paperclip-tokens-forwarded"]))
        latest = self.counter.message({"role": "user", "content": json.dumps(self.messages[-1]["content"])})
        system = self.counter.text(SYSTEM[0]["text"])
        self.bounds.append((WINDOW + CHAIN + system + latest) * 1.1)  # as for chat (test_compression.py)
        self.messages.append({"role": "assistant", "content": [b.model_dump() for b in reply.content]})
        return reply

    def turn(self, text: str) -> None:
        """One question, its tool call and result, and the answer: four messages, two requests."""
        self.messages.append({"role": "user", "content": text})
        call = self.send().content[0]
        assert call.type == "tool_use"
        self.messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call.id, "content": "Booked: " + text[:60]},
        ]})
        assert self.send().content[0].type == "text"


def test_a_200_turn_tool_using_conversation_stays_bounded_and_legal(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = make_proxy(**SETTINGS)
    with proxy.anthropic() as client:
        agent = Agent(proxy, client)
        for i in range(50):  # 50 x (question, tool_use, tool_result, answer): 200 turns
            agent.turn(sentence(i))
    assert len(agent.messages) == 200

    # Bounded at every request, as a chat is: the budgets, the client's system and latest turn, + 10%.
    for n, (forwarded, limit) in enumerate(zip(agent.forwarded, agent.bounds, strict=True)):
        assert forwarded <= limit, (n, forwarded, limit)
    assert upstream.compression_calls >= 5

    # Compressed through Anthropic's API, with the tenant's Anthropic key.
    compressions = [r for r in upstream.requests if r.path == "/v1/messages" and r not in upstream.messages_requests()]
    assert compressions and all(r.headers["x-api-key"] == ANTHROPIC_KEY for r in compressions)
    assert all(r.headers["anthropic-version"] for r in compressions)

    seen = [r.json() for r in upstream.messages_requests()]
    summarised = [body for body in seen if len(body["system"]) > 1]
    assert len(summarised) > len(seen) / 2
    for body in seen:
        assert body["system"][0] == SYSTEM[0]  # the client's block, its cache_control untouched
        first = body["messages"][0]
        assert first["role"] == "user" and not _results(first)  # a window begins with the user's turn
        calls = {b["id"] for m in body["messages"] if m["role"] == "assistant" for b in _blocks(m, "tool_use")}
        answered = {b["tool_use_id"] for m in body["messages"] for b in _results(m)}
        assert answered <= calls  # every result's call is there: never separated
    for body in summarised:
        assert body["system"][1]["text"].startswith("Summary of the earlier conversation")


def _blocks(message: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    content = message["content"]
    return [b for b in content if b.get("type") == kind] if isinstance(content, list) else []


def _results(message: dict[str, Any]) -> list[dict[str, Any]]:
    return _blocks(message, "tool_result")


WORDS = "Also check the Porto group while you are at it."


@pytest.mark.parametrize(("words_at", "memory"), [(None, False), (3, False), (3, True)],
                         ids=["no words", "words beside results", "words beside results, memory on"])
def test_one_task_of_many_tool_calls_stays_bounded_and_is_always_led_by_its_question(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream, words_at: int | None, memory: bool
) -> None:
    """An agent's single task: one question, then round after round of tool calls and results, with no new
    user message. The rounds before the latest are compressed; the question leads every window. Words the
    user types during the loop (a text block beside a round's results) are no exception: they cannot lead
    a window, so once the loop has gone on past them they are compressed with their round. With memory on,
    the block the words asked for goes into the latest user message, every window still led by the task."""
    proxy = make_proxy(**{"defaults": {**SETTINGS["defaults"], "memory": {"enabled": memory}}})
    if memory:
        teach(proxy, "anonymous")  # a standing fact: the profile leads every block
        upstream.requests.clear()
    question = "Find every booking of the Lisbon group and check each hotel's cancellation terms."
    with proxy.anthropic() as client:
        agent = Agent(proxy, client)
        agent.messages.append({"role": "user", "content": question})
        for i in range(40):
            agent.send()
            agent.messages[-1] = {"role": "assistant", "content": [
                {"type": "text", "text": f"Checking booking {i}."},
                {"type": "tool_use", "id": f"toolu_{i}", "name": "lookup", "input": {"city": f"Lisbon {i}"}},
            ]}
            words = [{"type": "text", "text": WORDS}] if i == words_at else []
            agent.messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": sentence(i, 40)}, *words,
            ]})
    sent = agent.counter.messages(agent.messages)
    assert sum(sent) > 4 * (WINDOW + CHAIN)  # the task outgrew the budgets many times over
    round_tokens = max(agent.counter.message(m) for m in agent.messages[1:]) * 2
    limit = (WINDOW + CHAIN + agent.counter.text(SYSTEM[0]["text"]) + agent.counter.text(question) + round_tokens)
    assert max(agent.forwarded[-10:]) <= limit * 1.1, (agent.forwarded[-10:], limit)
    assert upstream.compression_calls >= 3
    for body in (r.json() for r in upstream.messages_requests()):
        first = body["messages"][0]
        assert first["role"] == "user" and question in json.dumps(first["content"])  # the task leads
        calls = {b["id"] for m in body["messages"] if m["role"] == "assistant" for b in _blocks(m, "tool_use")}
        answered = {b["tool_use_id"] for m in body["messages"] for b in _results(m)}
        assert answered <= calls and all(m["role"] != "user" or not _results(m) for m in body["messages"][:1])
        roles = [m["role"] for m in body["messages"]]
        assert all(a != b for a, b in itertools.pairwise(roles))  # turns alternate, as the API wants
    if words_at is not None:  # the words reached the model: verbatim while recent, then to be summarised
        sent_to = [json.dumps(r.json()["messages"]) for r in upstream.messages_requests()]
        assert WORDS in sent_to[words_at + 1]
        assert WORDS not in sent_to[-1] or memory  # (memory recalls them, as any compressed turn of the user's)
        compressions = [r.json() for r in upstream.requests
                        if r.path == "/v1/messages" and r not in upstream.messages_requests()]
        assert any(WORDS in json.dumps(body) for body in compressions)
    if memory:
        last = upstream.messages_requests()[-1].json()["messages"]
        assert "Zorblax" in json.dumps(last[-1]["content"]) and "Zorblax" not in json.dumps(last[:-1])
