"""A changed body's bytes (``proxy/json_bytes.py``): the values ``json.dumps`` would write, every one of them."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.json_bytes import NonFinite, dumps
from proxy.server.jsonbody import loads
from tests.test_jsonbody import typed

_SCALARS = (
    st.none() | st.booleans() | st.integers() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8)
    | st.just("😀") | st.just("\u2028\x1f</script>")
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=16,
)


def _encodable(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:  # a lone surrogate: the body parser refuses it before anything is written
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(_VALUES.filter(_encodable))
def test_any_value_is_written_as_json_dumps_would_write_it(value: Any) -> None:
    expected = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    assert typed(json.loads(dumps(value))) == typed(json.loads(expected))


def test_what_orjson_refuses_or_would_change_is_written_by_json_dumps() -> None:
    raw = b'{"a": NaN, "b": Infinity, "c": -Infinity, "d": 1e999, "e": 18446744073709551616, "f": 0.5}'
    body = loads(raw)
    assert all(type(body[k]) is NonFinite for k in "abcd") and type(body["f"]) is float
    assert dumps(body) == b'{"a":NaN,"b":Infinity,"c":-Infinity,"d":1e999,"e":18446744073709551616,"f":0.5}'
    assert math.isnan(json.loads(dumps(body))["a"])
