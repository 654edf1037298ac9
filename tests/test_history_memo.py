"""The kept description of a session's conversation is the description made from scratch, whatever comes next."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.context import history_memo
from proxy.context.history_memo import RESENT_MIN_BYTES, HistoryMemo
from proxy.context.planner import describe
from proxy.hashing import chain_of
from proxy.offload import INLINE_BYTES
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


def described(memo: HistoryMemo, key: str, conv: list[dict[str, Any]], counter: TokenCounter, raw: bytes = b"") -> Any:
    return asyncio.run(memo.describe(key, conv, counter, raw))


# How clients write a body: the same messages in the same bytes each time, or in other bytes.
ENCODERS = {
    "compact": lambda body: json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode(),
    "spaced": lambda body: json.dumps(body).encode(),
    "indented": lambda body: json.dumps(body, indent=2).encode(),
    "orjson": orjson.dumps,
}


def changed(conv: list[dict[str, Any]], kind: str, message: dict[str, Any], at: int) -> list[dict[str, Any]]:
    """The next request's conversation: one message more, one edited, or cut short."""
    if kind == "append":
        return [*conv, message]
    if kind == "edit" and conv:
        return [*conv[: at % len(conv)], message, *conv[at % len(conv) + 1 :]]
    return conv[: at % (len(conv) + 1)]


def from_scratch(conv: list[dict[str, Any]]) -> tuple[list[Any], list[str]]:
    return describe(conv, COUNTER.messages(conv)), chain_of(conv)


@settings(max_examples=200, deadline=None)
@given(st.lists(messages, max_size=8), st.lists(st.tuples(st.sampled_from(["append", "edit", "cut"]), messages,
                                                        st.integers(0, 10)), max_size=8))
def test_every_request_of_a_session_is_described_as_if_new(start: list[dict[str, Any]], steps: list[Any]) -> None:
    memo = HistoryMemo(sessions=2, size=10_000)
    conv = start
    for kind, message, at in steps:
        conv = changed(conv, kind, message, at)
        conv = [dict(m) for m in conv]  # each request parses new objects
        history = described(memo, "s", conv, COUNTER)
        infos, chain = from_scratch(conv)
        assert (history.infos, history.chain) == (infos, chain)
        assert history.tokens == sum(i.tokens for i in infos)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(messages, max_size=6),
    st.lists(st.tuples(st.sampled_from(["append", "edit", "cut"]), messages, st.integers(0, 10),
                       st.sampled_from(sorted(ENCODERS)), st.sampled_from(["system", None])), max_size=8),
)
def test_every_body_of_a_session_is_described_as_if_new_whatever_its_bytes(
    start: list[dict[str, Any]], steps: list[Any]
) -> None:
    """With the body's bytes given: bytes that resend the last body's, or not (another encoder, an edit, a
    number that equals another in Python), and leading messages the memo is not given."""
    memo = HistoryMemo(sessions=2, size=100_000, cut_from=0)
    conv = start
    for kind, message, at, encoder, lead in steps:
        conv = changed(conv, kind, message, at)
        leading = [{"role": "system", "content": "be brief"}] if lead else []
        raw = ENCODERS[encoder]({"model": "m", "messages": [*leading, *conv], "stream": True})
        parsed = orjson.loads(raw)["messages"][len(leading):]  # each request parses new objects
        history = described(memo, "s", parsed, COUNTER, raw)
        infos, chain = from_scratch(conv)
        assert (history.infos, history.chain) == (infos, chain)
        assert history.tokens == sum(i.tokens for i in infos)
        assert history.conv == parsed


def test_a_body_that_resends_the_last_ones_bytes_is_described_from_where_it_ended() -> None:
    memo, counter = HistoryMemo(cut_from=0), Counting()
    first = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    raw = ENCODERS["orjson"]({"messages": first, "model": "m"})
    described(memo, "s", orjson.loads(raw)["messages"], counter, raw)
    again = [*first, {"role": "user", "content": "and now?"}]
    raw = ENCODERS["orjson"]({"messages": again, "model": "other"})  # another model: the bytes before differ
    history = described(memo, "s", orjson.loads(raw)["messages"], counter, raw)
    assert counter.counted == ["hi", "hello", "and now?"]  # the resent two are not counted again
    assert history.chain == chain_of(again) and history.sent is not None
    kept = memo._seen["s"]
    assert kept.conv == [] and kept.infos == history.infos  # kept by its bytes, not its objects
    # The same messages in other bytes: compared as objects, then no longer cut.
    raw = ENCODERS["indented"]({"messages": [*again, {"role": "user", "content": "ok"}]})
    history = described(memo, "s", orjson.loads(raw)["messages"], counter, raw)
    assert counter.counted == ["hi", "hello", "and now?", "hi", "hello", "and now?", "ok"]
    assert history.sent is not None  # its objects were gone: described in full, and cut
    raw = ENCODERS["spaced"]({"messages": [*again, {"role": "user", "content": "ok"}, {"role": "user", "content": "x"}]})
    history = described(memo, "s", orjson.loads(raw)["messages"], counter, raw)
    assert counter.counted[-1:] == ["x"] and history.reworded and history.sent is None


def test_a_short_body_is_compared_as_objects_only() -> None:
    memo = HistoryMemo()
    conv = [{"role": "user", "content": "hi"}]
    raw = ENCODERS["orjson"]({"messages": conv})
    assert described(memo, "s", conv, COUNTER, raw).sent is None
    long = [{"role": "user", "content": "x" * RESENT_MIN_BYTES}]
    raw = ENCODERS["orjson"]({"messages": long})
    assert described(memo, "s", long, COUNTER, raw).sent is not None


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


def test_a_resend_with_much_left_to_walk_is_walked_off_the_event_loop(monkeypatch: Any) -> None:
    """A body that resends the last one's messages but sends a long new tail (or long new messages) is
    walked on a worker thread; the usual resend (one answer and one question more) on the loop."""
    threads: list[str] = []
    walk = history_memo.resent

    def watched(*args: Any) -> Any:
        threads.append(threading.current_thread().name)
        return walk(*args)

    monkeypatch.setattr(history_memo, "resent", watched)
    memo = HistoryMemo(cut_from=0)
    conv = [{"role": "user", "content": "x" * 1000}]
    body = {"messages": conv, "junk": [[0]]}
    described(memo, "s", conv, COUNTER, ENCODERS["compact"](body))
    conv = [*conv, {"role": "assistant", "content": "ok"}]
    raw = ENCODERS["compact"]({"messages": conv, "junk": [[i] for i in range(INLINE_BYTES // 4)]})
    assert described(memo, "s", orjson.loads(raw)["messages"], COUNTER, raw).sent is not None
    conv = [*conv, {"role": "user", "content": "and?"}]
    raw = ENCODERS["compact"]({"messages": conv, "junk": [[i] for i in range(INLINE_BYTES // 4)]})
    assert described(memo, "s", orjson.loads(raw)["messages"], COUNTER, raw).sent is not None
    assert threads[0] != threading.main_thread().name  # the long tail, walked on a worker
    assert threads[1] == threading.main_thread().name  # the same tail again: only the new message walked
