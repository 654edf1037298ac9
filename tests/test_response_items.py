"""The Responses API's shape, pure: input items ↔ messages, the pipeline's answer written back, replies read."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.context import assembly, planner
from proxy.memory.recall.cards import inject
from proxy.pipeline.response_items import (
    Answer,
    answer_of,
    as_messages,
    message_of,
    rebuild,
    streamed_answer,
)
from tests.fake_responses import message_item, response_object, sse_events

BLOCK = "<paperclip-memory>\nNotes\n[preference · user said] Likes tea\n</paperclip-memory>"
WORDS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=30)
# Pure logic: its property is what counts, not how fast an example runs on a loaded machine
# (at load 10 the first example of one took 336 ms, past Hypothesis's 200 ms deadline).
UNTIMED = settings(deadline=None)
EXTRA = st.dictionaries(st.sampled_from(["id", "status", "x_unknown"]), st.none() | WORDS, max_size=2)


def _text_item(role: str) -> st.SearchStrategy[dict[str, Any]]:
    parts = st.lists(WORDS.map(lambda t: {"type": "input_text", "text": t}), min_size=1, max_size=3)
    content = WORDS | parts
    typed = st.booleans()
    return st.tuples(content, typed, EXTRA).map(
        lambda c: {**c[2], **({"type": "message"} if c[1] else {}), "role": role, "content": c[0]}
    )


def _call_pair() -> st.SearchStrategy[list[dict[str, Any]]]:
    return WORDS.map(lambda n: [
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": json.dumps({"q": n})},
        {"type": "function_call_output", "call_id": "c1", "output": n},
    ])


REASONING = st.just({"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "thinking"}]})
TURN = st.one_of(
    _text_item("user").map(lambda i: [i]),
    _text_item("assistant").map(lambda i: [i]),
    st.tuples(REASONING, _text_item("assistant")).map(list),
    _call_pair(),
)
INPUT = st.lists(TURN, min_size=1, max_size=6).map(lambda ts: [i for t in ts for i in t])
BODY = st.tuples(INPUT, st.sampled_from(["absent", "null", "text"])).map(
    lambda t: {
        "model": "gpt-4o-mini",
        **({"instructions": {"absent": None, "null": None, "text": "Be brief."}[t[1]]} if t[1] != "absent" else {}),
        "input": [*t[0], {"role": "user", "content": [{"type": "input_text", "text": "And now?"}]}],
        "store": False,
        "metadata": None,
    }
)


@given(BODY)
@UNTIMED
def test_messages_unchanged_give_the_body_back_unchanged(body: dict[str, Any]) -> None:
    conv = as_messages(body)
    assert conv is not None
    assert rebuild(body, conv, conv.messages, head_in_instructions=False) == body


@given(BODY)
@UNTIMED
def test_the_block_goes_first_in_the_latest_user_item_and_nothing_else_moves(body: dict[str, Any]) -> None:
    conv = as_messages(body)
    assert conv is not None
    out = rebuild(body, conv, inject(conv.messages, BLOCK, "last_user"), head_in_instructions=False)
    assert [k for k in out] == [k for k in body]  # key order, nulls and unknown fields kept
    assert {k: v for k, v in out.items() if k != "input"} == {k: v for k, v in body.items() if k != "input"}
    assert out["input"][:-1] == body["input"][:-1]
    last = out["input"][-1]
    assert last["content"] == [{"type": "input_text", "text": BLOCK}, *body["input"][-1]["content"]]


@given(BODY)
@UNTIMED
def test_system_tail_is_a_developer_item_right_before_the_latest_user_item(body: dict[str, Any]) -> None:
    conv = as_messages(body)
    assert conv is not None
    out = rebuild(body, conv, inject(conv.messages, BLOCK, "system_tail"), head_in_instructions=False)
    assert out["input"] == [*body["input"][:-1], {"role": "developer", "content": BLOCK}, body["input"][-1]]


@given(BODY)
@UNTIMED
def test_system_head_goes_into_instructions(body: dict[str, Any]) -> None:
    conv = as_messages(body)
    assert conv is not None
    lead = planner.split_leading(conv.messages)
    out_messages = assembly.assemble(conv.messages[:lead], [], conv.messages[lead:], BLOCK)
    out = rebuild(body, conv, out_messages, head_in_instructions=True)
    assert out["input"] == body["input"]
    before = body.get("instructions")
    assert out["instructions"] == (f"{before}\n\n{BLOCK}" if before else BLOCK)


def test_a_string_input_stays_a_string_with_the_block_in_front() -> None:
    body = {"model": "m", "input": "What do I like?", "instructions": None}
    conv = as_messages(body)
    assert conv is not None
    out = rebuild(body, conv, inject(conv.messages, BLOCK, "last_user"), head_in_instructions=False)
    assert out == {"model": "m", "input": f"{BLOCK}\n\nWhat do I like?", "instructions": None}
    tail = rebuild(body, conv, inject(conv.messages, BLOCK, "system_tail"), head_in_instructions=False)
    assert tail["input"] == [{"role": "developer", "content": BLOCK}, {"role": "user", "content": "What do I like?"}]


def test_an_input_we_cannot_read_is_left_to_the_upstream() -> None:
    assert as_messages({"input": 42}) is None
    assert as_messages({"input": ["not an item"]}) is None
    assert as_messages({"model": "m"}) is None


@given(BODY)
@UNTIMED
def test_calls_stay_with_their_outputs_and_reasoning_with_what_follows(body: dict[str, Any]) -> None:
    conv = as_messages(body)
    assert conv is not None
    lead = planner.split_leading(conv.messages)
    infos = planner.describe(conv.messages[lead:], [1] * (len(conv.messages) - lead))
    items = body["input"]
    for b in planner.cut_points(infos):
        if 0 < b < len(items):
            assert items[b - 1].get("type") not in ("function_call", "reasoning")
            assert items[b].get("type") != "function_call_output"


def test_items_read_as_chat_messages() -> None:
    call = message_of({"type": "function_call", "call_id": "c9", "name": "f", "arguments": "{}"})
    assert call["role"] == "assistant" and call["tool_calls"][0]["id"] == "c9"
    assert message_of({"type": "function_call_output", "call_id": "c9", "output": "ok"}) == {
        "role": "tool", "tool_call_id": "c9", "content": "ok"
    }
    assert message_of({"type": "item_reference", "id": "x"})["role"] == "item_reference"


def test_answers_are_read_from_json_and_from_the_event_stream() -> None:
    body = {"model": "m", "input": "hi"}
    done = response_object(body, [message_item("Tea, then.")])
    assert answer_of(done) == Answer(done["id"], "Tea, then.")
    streamed = streamed_answer(b"".join(sse_events(body, "Tea, then.")))
    assert streamed is not None and streamed.text == "Tea, then." and streamed.id
    # Cut before response.completed: no answer, as for a chat stream without its [DONE] (SPEC §9).
    assert streamed_answer(b"".join(sse_events(body, "Tea, then.")[:-1])) is None


def test_a_failed_response_has_no_answer() -> None:
    body = {"model": "m", "input": "hi"}
    assert answer_of(response_object(body, [], status="failed")) is None
    failed = b'event: response.failed\ndata: {"type": "response.failed", "response": {"status": "failed"}}\n\n'
    assert streamed_answer(b"".join(sse_events(body)[:3]) + failed) is None
    assert answer_of(["not", "a", "response"]) is None
