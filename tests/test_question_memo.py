"""An agent's tool loop keeps its memory block while the question stands (``question_memo``), on both stores.

Through real sockets: what the fake upstream receives on each round of a loop is read for the block.
A memory learnt mid-loop waits for the user's next message; one deleted mid-loop leaves at once.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from proxy.config import Memory
from proxy.memory.recall.cards import Card
from proxy.memory.recall.question_memo import Asked, QuestionMemo
from proxy.memory.search.item_index import ItemScope
from proxy.memory.search.scope_index import ScopeIndex
from proxy.store.records import Fragment, ItemRow
from tests.admin_helpers import admin, teach
from tests.conftest import PROXY_KEY, Proxy, both_stores
from tests.fake_upstream import FakeUpstream
from tests.test_admin import add

backend = both_stores

NOW = dt.datetime(2026, 12, 7, tzinfo=dt.UTC)
QUESTION = "Plan snacks for my cat's trip, and check the weather tool first."
CALL = {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Oslo\"}"}}


def round_of(proxy: Proxy, upstream: FakeUpstream, session: str, rounds: int) -> str:
    """The loop after ``rounds`` tool rounds, sent as an agent sends it; the block the upstream got."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    for n in range(rounds):
        call = {**CALL, "id": f"call_{n}"}
        messages += [{"role": "assistant", "content": None, "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": call["id"], "content": f"Round {n}: 12 degrees, dry."}]
    proxy.client(PROXY_KEY).chat.completions.create(
        model="gpt-4o-mini", messages=messages,  # type: ignore[arg-type]
        extra_headers={"X-Paperclip-User": "tam", "X-Paperclip-Session": session},
    )
    proxy.drain()
    sent = json.loads(upstream.chat_requests()[-1].body)["messages"]
    return next(str(m["content"]) for m in sent if m["role"] == "user")


def test_a_tool_loop_keeps_its_block_until_a_memory_it_shows_is_gone(proxy: Proxy, upstream: FakeUpstream) -> None:
    teach(proxy, "tam")
    first = round_of(proxy, upstream, "loop-1", 0)
    assert "Zorblax" in first
    learnt = add(proxy, "tam", content="Tam's cat Zorblax travels in a blue carrier and gets carsick on trips.")
    assert round_of(proxy, upstream, "loop-1", 1) == first  # byte for byte: the client's cache holds
    assert round_of(proxy, upstream, "loop-1", 2) == first
    assert "blue carrier" in round_of(proxy, upstream, "loop-2", 0)  # a new question reads it
    with admin(proxy) as http:
        for memory in http.get("/paperclip/v1/users/tam/memories").json()["data"]:
            if memory["id"] != learnt["item"]["id"]:
                assert http.delete(f"/paperclip/v1/users/tam/memories/{memory['id']}").status_code in (200, 204)
    again = round_of(proxy, upstream, "loop-2", 1)
    assert again != first and "blue carrier" in again


REMINDER = ("<system-reminder>\nThe TodoWrite tool hasn't been used recently. Consider using it to track "
            "progress.\n</system-reminder>")


def anthropic_round(proxy: Proxy, upstream: FakeUpstream, rounds: int, reminders: bool = False) -> str:
    """The same loop through Anthropic's Messages API (results come back in user messages); its block.
    ``reminders``: every result comes with a Claude Code reminder beside it (a text block)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    for n in range(rounds):
        beside = [{"type": "text", "text": REMINDER}] if reminders else []
        messages += [
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{n}", "name": "weather",
                                               "input": {"city": "Oslo"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{n}",
                                          "content": f"Round {n}: 12 degrees, dry."}, *beside]},
        ]
    proxy.anthropic().messages.create(
        model="claude-sonnet-4-5", max_tokens=100, messages=messages,  # type: ignore[arg-type]
        extra_headers={"X-Paperclip-User": "tam", "X-Paperclip-Session": "loop-a"},
    )
    proxy.drain()
    sent = json.dumps(json.loads(upstream.messages_requests()[-1].body)["messages"])
    return sent[sent.index("<paperclip-memory>") : sent.index("</paperclip-memory>")]  # in the latest user message


def test_a_messages_loop_keeps_its_block_too(proxy: Proxy, upstream: FakeUpstream) -> None:
    teach(proxy, "tam")
    first = anthropic_round(proxy, upstream, 0)
    assert "Zorblax" in first
    add(proxy, "tam", content="Tam's cat Zorblax travels in a blue carrier and gets carsick on trips.")
    assert anthropic_round(proxy, upstream, 1) == first
    assert anthropic_round(proxy, upstream, 3) == first


def test_a_client_reminder_beside_the_results_asks_nothing_new(proxy: Proxy, upstream: FakeUpstream) -> None:
    """Claude Code puts its reminders beside tool results: a message of no words of the user's own. The
    question before it stands: the same block, found for the question, not for the model's last words."""
    teach(proxy, "tam")
    first = anthropic_round(proxy, upstream, 0)
    assert "Zorblax" in first
    add(proxy, "tam", content="Tam's cat Zorblax travels in a blue carrier and gets carsick on trips.")
    assert anthropic_round(proxy, upstream, 1, reminders=True) == first
    assert anthropic_round(proxy, upstream, 3, reminders=True) == first


def scopes(fragments: Sequence[int], facts: dict[int, str], changed: frozenset[int] = frozenset(),
           expires: str | None = None) -> tuple[ScopeIndex, ItemScope]:
    turns = ScopeIndex(4)
    for i in fragments:
        add_turn(turns, i)
    rows = [ItemRow(i, "s", "entity", "user.facts", c, 0.5, 0.9, "user-stated", expires, "active", None, [], [], 1,
                    0, None, 0.0, 0.0) for i, c in facts.items()]
    return turns, ItemScope(rows=rows, changed=changed)


def add_turn(turns: ScopeIndex, position: int, i: int | None = None, session: str = "s") -> None:
    i = position if i is None else i
    turns.add(Fragment(id=i, session=session, hash=f"h{i}", role="user", text="x", position=position, tokens=1,
                       created=0.0), ["x"], np.zeros(4, dtype=np.float32))


def test_a_kept_recall_holds_only_while_each_memory_it_shows_stands_as_shown() -> None:
    memo: QuestionMemo[str] = QuestionMemo()
    asked = Asked("cat snacks", 3, Memory())
    cards = [Card("entity", "user said", None, "Zorblax is allergic to peanuts.", "i7"),
             Card("fragment", "user said", None, "User: …", "f1,f2")]
    turns, facts = scopes([1, 2, 5], {7: "Zorblax is allergic to peanuts.", 8: "New."})
    memo.keep(("t", "u", "s"), asked, cards, turns, facts, 2, "the block")
    assert memo.last(("t", "u", "s"), asked) == "the block"
    assert memo.last(("t", "u", "s"), Asked("cat snacks", 5, Memory())) is None  # a new message, the same words
    assert memo.last(("t", "u", "other"), asked) is None
    assert memo.holds(("t", "u", "s"), turns, facts, 2, (), NOW)  # a fact learnt since (8) changes nothing
    assert not memo.holds(("t", "u", "s"), turns, facts, 3, (), NOW)  # a turn said a change since: it may mark one
    assert not memo.holds(("t", "u", "s"), *scopes([1, 5], {7: "Zorblax is allergic to peanuts."}), 2, (), NOW)  # a turn gone
    edited = scopes([1, 2], {7: "Zorblax is allergic to peanuts and fish."})
    assert not memo.holds(("t", "u", "s"), *edited, 2, (), NOW)
    assert not memo.holds(("t", "u", "s"), *scopes([1, 2], {}), 2, (), NOW)  # deleted or superseded
    expiring = scopes([1, 2, 5], {7: "Zorblax is allergic to peanuts."}, expires="2026-12-07T10:00:00+00:00")
    assert memo.holds(("t", "u", "s"), *expiring, 2, (), NOW)
    assert not memo.holds(("t", "u", "s"), *expiring, 2, (), NOW + dt.timedelta(hours=11))  # past its expiry
    marked = scopes([1, 2], {7: "Zorblax is allergic to peanuts."}, frozenset({7}))
    assert not memo.holds(("t", "u", "s"), *marked, 2, (), NOW)
    add_turn(turns, 6)  # a turn stored since: the loop's own round (after the question's message at 3)
    assert memo.holds(("t", "u", "s"), turns, facts, 2, (), NOW)
    add_turn(turns, 2, 9)  # one from before the question (a history indexed for the first time)
    assert memo.holds(("t", "u", "s"), turns, facts, 2, {"h9"}, NOW)  # in the verbatim window: never shown
    assert not memo.holds(("t", "u", "s"), turns, facts, 2, (), NOW)
    add_turn(turns, 8, 10, session="other")  # another chat's: recall may show it
    assert not memo.holds(("t", "u", "s"), turns, facts, 2, {"h9"}, NOW)


def test_the_memo_forgets_the_least_recently_asked_sessions() -> None:
    memo: QuestionMemo[int] = QuestionMemo(sessions=2)
    asked = Asked("q", 0, Memory())
    for n in range(3):
        memo.keep(("t", "u", f"s{n}"), asked, [], ScopeIndex(4), None, 0, n)
    assert memo.last(("t", "u", "s0"), asked) is None and memo.last(("t", "u", "s2"), asked) == 2
