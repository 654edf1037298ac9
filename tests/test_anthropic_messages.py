"""Anthropic's Messages API's shape, pure: messages ↔ the pipeline's, its answer written back, replies read."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.context import assembly, planner
from proxy.memory.recall.cards import inject
from proxy.memory.recall.query import asked_index, build_query, indexable
from proxy.pipeline.anthropic_messages import (
    as_messages,
    block_position,
    message_text,
    rebuild,
    streamed_text,
    with_block,
)
from proxy.tokens import IMAGE_DEFAULT_TOKENS, TokenCounter
from tests.fake_anthropic import message, sse_events

BLOCK = "<paperclip-memory>\nNotes\n[preference · user said] Likes tea\n</paperclip-memory>"
WORDS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=30)
UNTIMED = settings(deadline=None)  # pure logic: its property counts, not how fast an example runs
CACHE = {"type": "ephemeral"}


def _text_block(marked: bool) -> st.SearchStrategy[dict[str, Any]]:
    return WORDS.map(lambda t: {"type": "text", "text": t, **({"cache_control": CACHE} if marked else {})})


USER_CONTENT = WORDS | st.lists(st.booleans().flatmap(_text_block), min_size=1, max_size=3)
THINKING = {"type": "thinking", "thinking": "Let me think.", "signature": "sig=="}
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}


def _tool_turn(n: int) -> list[dict[str, Any]]:
    call = {"type": "tool_use", "id": f"toolu_{n}", "name": "lookup", "input": {"q": n}}
    result = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": f"result {n}"}
    return [
        {"role": "assistant", "content": [THINKING, {"type": "text", "text": "Looking."}, call]},
        {"role": "user", "content": [result, {"type": "text", "text": f"and more {n}"}]},
    ]


def _loop(rounds: int) -> list[dict[str, Any]]:
    """An agent's rounds: a call and its results, again and again, with no new question."""
    out: list[dict[str, Any]] = []
    for n in range(rounds):
        out += [{"role": "assistant", "content": [THINKING, {"type": "tool_use", "id": f"toolu_l{n}", "name": "lookup",
                                                             "input": {"q": n}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_l{n}",
                                              "content": f"result l{n}"}]}]
    return out


TURN = st.one_of(
    st.tuples(WORDS, st.integers(1, 4)).map(lambda t: [{"role": "user", "content": t[0]}, *_loop(t[1]),
                                                       {"role": "assistant", "content": "Done."}]),
    st.tuples(USER_CONTENT, WORDS).map(lambda t: [
        {"role": "user", "content": t[0]}, {"role": "assistant", "content": [{"type": "text", "text": t[1]}]},
    ]),
    st.integers(0, 99).map(_tool_turn),
    st.just([{"role": "user", "content": [IMAGE, {"type": "text", "text": "What is this?"}]},
             {"role": "assistant", "content": "A cat."}]),
)
SYSTEM = st.sampled_from([None, "Be brief.", [{"type": "text", "text": "Be brief.", "cache_control": CACHE}]])
BODY = st.tuples(st.lists(TURN, min_size=1, max_size=5), SYSTEM, USER_CONTENT).map(
    lambda t: {
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        **({"system": t[1]} if t[1] is not None else {}),
        "messages": [m for turn in t[0] for m in turn] + [{"role": "user", "content": t[2]}],
        "metadata": None,
        "x_unknown": {"kept": True},
    }
)


def _conv(body: dict[str, Any]) -> Any:
    conv = as_messages(body)
    assert conv is not None
    return conv


@given(BODY)
@UNTIMED
def test_messages_unchanged_give_the_body_back_unchanged(body: dict[str, Any]) -> None:
    conv = _conv(body)
    assert rebuild(body, conv, conv.messages) == body


@given(BODY)
@UNTIMED
def test_the_block_goes_into_the_latest_user_message_and_nothing_else_moves(body: dict[str, Any]) -> None:
    conv = _conv(body)
    out = rebuild(body, conv, inject(conv.messages, BLOCK, "last_user"))
    assert list(out) == list(body)  # key order, nulls and unknown fields kept
    assert {k: v for k, v in out.items() if k != "messages"} == {k: v for k, v in body.items() if k != "messages"}
    assert out["messages"][:-1] == body["messages"][:-1]
    sent, before = out["messages"][-1]["content"], body["messages"][-1]["content"]
    block = {"type": "text", "text": BLOCK}
    if isinstance(before, str):
        assert sent == [block, {"type": "text", "text": before}]
    else:
        at = block_position(before)
        assert sent == [*before[:at], block, *before[at:]]


def test_the_block_follows_leading_tool_results_and_the_last_cache_breakpoint() -> None:
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}
    marked = {"type": "text", "text": "marked", "cache_control": CACHE}
    plain = {"type": "text", "text": "plain"}
    assert block_position([result, result, plain]) == 2
    assert block_position([result, marked, plain]) == 2
    assert block_position([plain, marked, plain]) == 2
    assert block_position([marked]) == 1
    assert block_position([plain]) == 0
    messages = [{"role": "user", "content": [result, marked, plain]}, {"role": "assistant", "content": "Sure:"}]
    out = with_block(messages, BLOCK)
    assert out[0]["content"] == [result, marked, {"type": "text", "text": BLOCK}, plain]
    assert out[1] is messages[1]  # a prefill after the latest user message stays where it is


@given(BODY)
@UNTIMED
def test_summaries_follow_the_clients_system_as_one_more_text_block(body: dict[str, Any]) -> None:
    conv = _conv(body)
    lead = planner.split_leading(conv.messages)
    window = conv.messages[lead:][-1:]
    out = rebuild(body, conv, assembly.assemble(conv.messages[:lead], [("Turns 1–4: earlier.", 1, 4)], window))
    system = body.get("system")
    before = [{"type": "text", "text": system}] if isinstance(system, str) else list(system or [])
    assert out["system"][:-1] == before  # the client's own blocks, cache_control untouched
    assert out["system"][-1]["type"] == "text" and "Turns 1–4: earlier." in out["system"][-1]["text"]
    assert out["messages"] == body["messages"][-1:]


@given(BODY)
@UNTIMED
def test_a_range_never_separates_a_tool_use_from_its_result_nor_leaves_a_window_without_a_user_turn(
    body: dict[str, Any],
) -> None:
    conv = _conv(body)
    lead = planner.split_leading(conv.messages)
    infos = planner.describe(conv.messages[lead:], [1] * (len(conv.messages) - lead))
    for b in planner.cut_points(infos):
        if 0 < b < len(conv.origins):
            assert conv.origins[b - 1] is not conv.origins[b]  # never inside a message read as two
            anchor = planner.anchor(infos, b)  # a window begun inside a tool loop is led by its question
            starts = conv.origins[b] if anchor is None else conv.origins[anchor]
            assert starts["role"] == "user"
            content = starts["content"]
            assert not (isinstance(content, list) and any(c.get("type") == "tool_result" for c in content))


@given(BODY)
@UNTIMED
def test_tool_results_are_never_the_users_words(body: dict[str, Any]) -> None:
    conv = _conv(body)
    texts = " ".join(text for _, _, text in indexable(conv.items))
    assert "result " not in texts  # tool results are not indexed as what the user said
    assert "Let me think." not in texts  # nor is the model's reasoning
    assert "result " not in build_query(conv.items)


def test_a_clients_reminder_beside_tool_results_leaves_the_question_asked() -> None:
    reminder = {"type": "text", "text": "<system-reminder>\nYour todo list is empty.\n</system-reminder>"}
    body = {"model": "claude-sonnet-4-5", "max_tokens": 256, "messages": [
        {"role": "user", "content": "Check the weather in Paris."},
        {"role": "assistant", "content": [{"type": "text", "text": "On it."},
                                          {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny"}, reminder]},
    ]}
    conv = _conv(body)
    assert [m["role"] for m in conv.items] == ["user", "assistant", "tool", "user"]
    assert asked_index(conv.items) == 0 and build_query(conv.items) == "Check the weather in Paris."
    assert indexable(conv.items) == [(0, "user", "Check the weather in Paris."), (1, "assistant", "On it.")]


def test_what_the_user_says_beside_tool_results_is_theirs_and_the_block_follows_the_results() -> None:
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny, 24 C"}
    said = {"type": "text", "text": "Also, what breed is my dog Pixel?"}
    body = {"model": "claude-sonnet-4-5", "max_tokens": 256, "messages": [
        {"role": "user", "content": "Check the weather in Paris."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}]},
        {"role": "user", "content": [result, said]},
    ]}
    conv = _conv(body)
    assert [m["role"] for m in conv.items] == ["user", "assistant", "tool", "user"]
    assert build_query(conv.items) == "Also, what breed is my dog Pixel?"
    texts = [text for _, _, text in indexable(conv.items)]
    assert "Also, what breed is my dog Pixel?" in texts and not any("Sunny" in t for t in texts)
    assert rebuild(body, conv, conv.messages) == body  # written back as the one message it came in
    out = rebuild(body, conv, inject(conv.messages, BLOCK, "last_user"))
    assert out["messages"][:2] == body["messages"][:2] and len(out["messages"]) == 3
    assert out["messages"][2]["content"] == [result, {"type": "text", "text": BLOCK}, said]
    lead = planner.split_leading(conv.messages)
    infos = planner.describe(conv.messages[lead:], [1] * len(conv.items))
    assert 3 not in planner.cut_points(infos)  # the words never go without their results


def test_blocks_that_are_not_text_are_counted_not_dropped() -> None:
    counter = TokenCounter()
    body = {"messages": [
        {"role": "user", "content": [IMAGE, {"type": "text", "text": "What is this?"}]},
        {"role": "assistant", "content": [THINKING, {"type": "redacted_thinking", "data": "x" * 400}]},
        {"role": "user", "content": [{"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                                                      "data": "one two three"}}]},
    ]}
    conv = _conv(body)
    image, thinking, document = (counter.message(m) for m in conv.messages)
    assert image >= IMAGE_DEFAULT_TOKENS
    assert thinking >= 100 + counter.text("Let me think.")
    assert document == counter.message({"role": "user", "content": "one two three"})
    assert conv.messages[0]["content"][0] is IMAGE  # the client's own block, carried with its turn


def test_a_body_we_cannot_read_is_left_to_the_upstream() -> None:
    assert as_messages({"messages": "hi"}) is None
    assert as_messages({"messages": ["not a message"]}) is None
    assert as_messages({"model": "m"}) is None
    assert as_messages({"messages": [], "system": 42}) is None


def test_replies_are_read_from_json_and_from_a_complete_event_stream() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert message_text(message(body, [{"type": "text", "text": "Tea, then."}])) == "Tea, then."
    assert message_text({"type": "error", "error": {"type": "overloaded_error", "message": "x"}}) is None
    events = sse_events(body, "Tea, then.")
    assert streamed_text(b"".join(events)) == "Tea, then."
    assert streamed_text(b"".join(events[:-1])) is None  # no message_stop: cut, not recorded
    error = b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"x"}}\n\n'
    assert streamed_text(b"".join(events[:4]) + error + events[-1]) is None
    two = [json.dumps({"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": t}})
           for i, t in ((0, "One."), (1, "Two."))]
    stream = "".join(f"data: {e}\n\n" for e in [*two, json.dumps({"type": "message_stop"})]).encode()
    assert streamed_text(stream) == "One.\nTwo."
