"""The body parser reads every body as ``json.loads`` does: the same values, the same refusals, the same messages."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.errors import BadRequest
from proxy.server.jsonbody import LONG_DIGITS, MAX_DEPTH, UNREAD, loads, read_exactly


def decode(raw: bytes) -> Any:
    """The value ``loads`` starts from: orjson's where ``read_exactly`` takes it, else ``json.loads``'s."""
    value = read_exactly(raw)
    return json.loads(raw) if value is UNREAD else value


def typed(value: Any) -> Any:
    """``value`` with every type and key order spelled out (``1``, ``1.0`` and ``True`` differ; NaN is itself)."""
    if isinstance(value, dict):
        return ("dict", [(k, typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [typed(v) for v in value])
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else repr(value))
    return (type(value).__name__, value)


def outcome(parse: Any, raw: bytes) -> Any:
    try:
        return ("value", typed(parse(raw)))
    except RecursionError:
        return ("recursion",)
    except (UnicodeDecodeError, ValueError) as exc:
        return ("error", type(exc).__name__, str(exc))


def refusal(raw: bytes) -> str | None:
    try:
        loads(raw)
    except BadRequest as exc:
        return exc.message
    return None


EDGES = [
    b"-0", b"-0.0", b"1e400", b"-1e400", b"1.5e-400", b"4.9e-324", b"1.7976931348623159e308", b"NaN", b"-Infinity",
    b"[NaN, Infinity]", b"9223372036854775807", b"9223372036854775808", b"18446744073709551615",
    b"18446744073709551616", b"-9223372036854775809", b"123456789012345678901234567890", b"[1" + b"0" * 30 + b"]",
    b'{"n": -99999999999999999999, "x": "1234567890123456789"}', b"1" * 5000,
    b'"\\ud800"', b'"\\ud83d\\ude00"', b'"\\udc00\\ud800"', b'{"\\ud800": 1}', b'"\xed\xa0\x80"', b'"\xc0\x80"',
    b'{"a": 1, "a": 2, "b": 3}', b'\xef\xbb\xbf{"a": 1}', '{"a": "é"}'.encode("utf-16"), '{"a": 1}'.encode("utf-32"),
    '{"a": "é"}'.encode("utf-16-le"), b'"a\x01b"', b'"\x00"', b"[1]\x00", b"[1,]", b"[1 2]", b"00", b".5", b"5.",
    b"", b" ", b"\xa0[1]", b'{"a":1}{', b"tru", b'"\\x"', b"\t\n\r [1] ",
    b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1), b"[" * 1100 + b"]" * 1100, b"[" * 100_000,
]


@pytest.mark.parametrize("raw", EDGES, ids=range(len(EDGES)))
def test_edge_bodies_read_as_json_loads_reads_them(raw: bytes) -> None:
    assert outcome(decode, raw) == outcome(json.loads, raw)


_SCALARS = (
    st.none() | st.booleans() | st.integers() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=6)
    | st.just("\ud800") | st.just("😀") | st.just("1" * LONG_DIGITS)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=16,
)


@settings(max_examples=400, deadline=None)
@given(_VALUES, st.booleans(), st.sampled_from(["utf-8", "utf-16", "utf-32"]))
def test_any_body_reads_as_json_loads_reads_it(value: Any, ascii_only: bool, encoding: str) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    raw = text.encode(encoding, "surrogatepass")
    assert outcome(decode, raw) == outcome(json.loads, raw)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=24))
def test_any_bytes_read_as_json_loads_reads_them(raw: bytes) -> None:
    assert outcome(decode, raw) == outcome(json.loads, raw)


def test_refusals_keep_their_messages() -> None:
    assert refusal(b"{") == "We could not parse the JSON body of your request: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    assert refusal(b"[" * 1100 + b"]" * 1100) == f"The JSON body is nested too deeply (at most {MAX_DEPTH} levels)."
    assert refusal(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)) == f"The JSON body is nested too deeply (at most {MAX_DEPTH} levels)."
    assert "surrogate" in (refusal(b'{"a": "\\ud800"}') or "")
    assert refusal(b'{"a": NaN, "b": 18446744073709551616}') is None
