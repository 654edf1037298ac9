"""The kept description of a session's conversation is the description made from scratch, whatever comes next."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.context.history_memo import HistoryMemo
from proxy.context.planner import describe
from proxy.hashing import chain_of
from proxy.tokens import TokenCounter

COUNTER = TokenCounter("gpt-4o-mini")

# Values that are equal in Python and different in JSON (1, 1.0, True), strings, parts and tool calls.
values = st.one_of(
    st.sampled_from(["hi", "hello there", "", None, 1, 1.0, True, 0, False]),
    st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": st.sampled_from(["a", "b"])}), max_size=2),
)
messages = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool"]), "content": values},
    optional={"x": values, "name": st.sampled_from(["ana", None])},
)


def described(memo: HistoryMemo, key: str, conv: list[dict[str, Any]], counter: TokenCounter) -> Any:
    return asyncio.run(memo.describe(key, conv, counter))


def from_scratch(conv: list[dict[str, Any]]) -> tuple[list[Any], list[str]]:
    return describe(conv, COUNTER.messages(conv)), chain_of(conv)


@settings(max_examples=200, deadline=None)
@given(st.lists(messages, max_size=8), st.lists(st.tuples(st.sampled_from(["append", "edit", "cut"]), messages,
                                                        st.integers(0, 10)), max_size=8))
def test_every_request_of_a_session_is_described_as_if_new(start: list[dict[str, Any]], steps: list[Any]) -> None:
    memo = HistoryMemo(sessions=2, size=10_000)
    conv = start
    for kind, message, at in steps:
        if kind == "append":
            conv = [*conv, message]
        elif kind == "edit" and conv:
            conv = [*conv[: at % len(conv)], message, *conv[at % len(conv) + 1 :]]
        else:
            conv = conv[: at % (len(conv) + 1)]
        conv = [dict(m) for m in conv]  # each request parses new objects
        history = described(memo, "s", conv, COUNTER)
        infos, chain = from_scratch(conv)
        assert (history.infos, history.chain) == (infos, chain)
        assert history.tokens == sum(i.tokens for i in infos)


class Counting(TokenCounter):
    def __init__(self) -> None:
        super().__init__("gpt-4o-mini")
        self.counted: list[str] = []

    def message(self, message: Any) -> int:
        self.counted.append(str(message.get("content")))
        return super().message(message)


def test_a_continuation_is_described_from_where_the_last_conversation_ended() -> None:
    memo, counter = HistoryMemo(), Counting()
    first = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    described(memo, "s", first, counter)
    again = [dict(m) for m in first] + [{"role": "user", "content": "and now?"}]
    history = described(memo, "s", again, counter)
    assert counter.counted == ["hi", "hello", "and now?"]  # the resent two are not counted again
    assert history.conv is again and history.chain == chain_of(again)
    # A number that equals a boolean in Python is not the same message: described again.
    flipped = [{"role": "user", "content": "hi", "x": 1}]
    described(memo, "t", flipped, COUNTER)
    assert described(memo, "t", [{"role": "user", "content": "hi", "x": True}], COUNTER).chain == chain_of(
        [{"role": "user", "content": "hi", "x": True}]
    )


def test_the_memo_keeps_few_sessions_and_bytes() -> None:
    memo = HistoryMemo(sessions=2, size=200)
    for session in ("a", "b", "c"):
        described(memo, session, [{"role": "user", "content": "x" * 50}], COUNTER)
    assert memo.kept_bytes <= 200 and len(memo) == 2
    described(memo, "d", [{"role": "user", "content": "y" * 300}], COUNTER)
    assert memo.kept_bytes == 0 and len(memo) == 0  # one conversation larger than the bound is not kept
