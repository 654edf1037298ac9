"""A body cut around its messages: the cut is where the parser puts them, and a resend is told only by equal bytes."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.context.resent_bytes import Sent, resent_messages, sent_messages

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=st.sampled_from('ab "\\/{}[],:\n\té中\u2028'), max_size=8),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=12,
)
others = st.dictionaries(st.text(max_size=6).filter(lambda k: k != "messages"), values, max_size=3)
ENCODERS = [
    lambda body: json.dumps(body).encode(),
    lambda body: json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode(),
    lambda body: json.dumps(body, indent=2).encode(),
    orjson.dumps,
]


def body_of(before: dict[str, Any], messages: list[Any], after: dict[str, Any]) -> dict[str, Any]:
    return {**before, "messages": messages, **{k: v for k, v in after.items() if k not in before}}


@settings(max_examples=300, deadline=None)
@given(others, st.lists(values, max_size=5), others, st.sampled_from(range(len(ENCODERS))))
def test_the_cut_is_where_the_parser_puts_the_messages(
    before: dict[str, Any], messages: list[Any], after: dict[str, Any], encoder: int
) -> None:
    raw = ENCODERS[encoder](body_of(before, messages, after))
    cut = sent_messages(raw)
    assert cut is not None
    assert cut.head.endswith(b"[") and cut.tail.lstrip(b" \n\t\r").startswith(b"]")
    assert raw.startswith(cut.head + cut.messages) and raw.endswith(cut.tail)
    assert json.loads(b"[" + cut.messages + b"]") == messages
    between = raw[len(cut.head) + len(cut.messages) : len(raw) - len(cut.tail)]
    assert between.strip() == b""  # nothing but space between the last message and the "]"


@settings(max_examples=300, deadline=None)
@given(others, st.lists(values, min_size=1, max_size=4), st.lists(values, max_size=3), others,
       st.sampled_from(range(len(ENCODERS))), st.sampled_from(["none", "model", "tail", "edit", "encoder"]))
def test_a_resend_is_told_by_equal_bytes_and_cut_as_if_new(
    before: dict[str, Any], first: list[Any], more: list[Any], after: dict[str, Any], encoder: int, change: str
) -> None:
    last_raw = ENCODERS[encoder](body_of(before, first, after))
    last = sent_messages(last_raw)
    assert last is not None
    messages = [*first, *more]
    if change == "edit":
        messages[0] = ["edited", messages[0]]
    head = {**before, "model": "another"} if change == "model" else before
    tail = {**after, "tools": [1, 2]} if change == "tail" else after
    encode = ENCODERS[(encoder + 1) % len(ENCODERS)] if change == "encoder" else ENCODERS[encoder]
    raw = encode(body_of(head, messages, tail))
    again = resent_messages(raw, last)
    assert sent_messages(raw) is not None
    if again is not None:  # resent: the last body's messages are the first of these, byte for byte
        assert again == sent_messages(raw)  # the same cut as from scratch
        assert raw[len(again.head):].startswith(last.messages)
        assert json.loads(b"[" + again.messages + b"]")[: len(first)] == first
    if change in ("none", "model", "tail"):
        assert again is not None
    if change == "edit":
        assert again is None


def test_a_body_with_the_key_twice_or_no_array_has_no_cut() -> None:
    for raw in (
        b'{"messages": [{"a": 1}], "messages": [{"b": 2}]}',
        b'{"messages": [{"a": 1}], "x": {"messages": 1}, "\\u006dessages": []}',
        b'{"\\u006dessages": [], "messages": [{"a": 1}]}',
        b'{"messages": {"a": 1}}',
        b'{"model": "m"}',
        b'[{"messages": []}]',
        b'"messages"',
    ):
        assert sent_messages(raw) is None, raw
    last = sent_messages(b'{"messages": [{"a": 1}], "x": 1}')
    assert last is not None
    assert resent_messages(b'{"messages": [{"a": 1}, {"b": 2}], "x": 1, "messages": []}', last) is None
    nested = b'{"x": {"messages": [1]}, "messages": [{"a": [1, {"b": "]"}]}, "c"]}'
    found = sent_messages(nested)
    assert found is not None and found.messages == b'{"a": [1, {"b": "]"}]}, "c"'


def test_a_number_the_last_message_was_cut_from_is_not_a_resend() -> None:
    found = sent_messages(b'{"messages": [{"a": 1}, 1]}')
    assert found is not None and found.messages == b'{"a": 1}, 1'
    raw = b'{"messages": [{"a": 1}, 12]}'
    assert raw.startswith(found.head + found.messages)  # its bytes start as the last body's did
    assert resent_messages(raw, found) is None
    assert sent_messages(raw) == Sent(b'{"messages": [', b'{"a": 1}, 12', b"]}")
