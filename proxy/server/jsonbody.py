"""Parsing a client's JSON body into something every later step can handle.

``json.loads`` accepts three things that crash code further on, so they are
refused here with a 400 in OpenAI's envelope instead of a 500 later:

- nesting deeper than ``MAX_DEPTH``: hashing, re-serialising and walking a
  message recurse, and a body nested ~1,000 deep exhausts the stack;
- integers of more than 4,300 digits (Python's conversion limit);
- lone UTF-16 surrogates (``"\\ud800"``): a string holding one cannot be
  encoded as UTF-8, so it could not be hashed, counted, stored or forwarded.

The body is parsed by orjson (about twice as fast on a chat body) only where
its value is ``json.loads``'s: it reads an integer past 64 bits as a float, so a body
holding a run of ``LONG_DIGITS`` digits anywhere goes to ``json.loads``, and
so does every body orjson refuses (NaN and Infinity, numbers out of a
float's range, UTF-16/32 or a BOM, surrogates, nesting past its own limit,
bad JSON): what is accepted, the values and the error messages are
``json.loads``'s (a float that is not finite is read as a ``json_bytes.NonFinite``,
so that it is written back as it came). A body orjson read holds no lone surrogate (it refuses
them), so only its nesting is left to check.

Large bodies are parsed on a worker thread, so the event loop keeps serving.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from ..errors import BadRequest
from ..hashing import LONE_SURROGATE
from ..json_bytes import non_finite_constant, parsed_float
from ..offload import off_loop

MAX_DEPTH = 128

# Any surrogate escape, paired or not; only bodies holding one are searched for lone ones.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")

# Integers of up to 18 digits fit 64 bits, which orjson reads exactly. A run of digits is found
# by mapping every digit to "0" and everything else to " " (translate and ``in`` are C loops).
LONG_DIGITS = 19
_DIGIT_CLASS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_DIGIT_RUN = b"0" * LONG_DIGITS

_CONTAINERS = frozenset({dict, list})  # exactly: json.loads and orjson build no subclasses


async def parse_json(raw: bytes) -> Any:
    """The parsed body, or ``BadRequest`` saying what is wrong with it."""
    return await off_loop(len(raw), loads, raw)


def loads(raw: bytes) -> Any:
    value = read_exactly(raw)
    if value is not UNREAD:  # orjson refuses lone surrogates: only the nesting is left to check
        if too_deep(value):
            raise BadRequest(f"The JSON body is nested too deeply (at most {MAX_DEPTH} levels).")
        return value
    try:
        value = json.loads(raw, parse_constant=non_finite_constant, parse_float=parsed_float)
    except RecursionError as exc:
        raise BadRequest(f"The JSON body is nested too deeply (at most {MAX_DEPTH} levels).") from exc
    except (UnicodeDecodeError, ValueError) as exc:  # ValueError: bad JSON, or an integer too long
        raise BadRequest(f"We could not parse the JSON body of your request: {exc}") from exc
    if _SURROGATE_ESCAPE.search(raw) is not None:
        check(value)  # every string read for a lone surrogate, and the nesting on the way
    elif too_deep(value):
        raise BadRequest(f"The JSON body is nested too deeply (at most {MAX_DEPTH} levels).")
    return value


UNREAD = object()  # what ``read_exactly`` gives for a body it leaves to json.loads


def read_exactly(raw: bytes) -> Any:
    """orjson's value of ``raw`` where it is ``json.loads``'s, else ``UNREAD``."""
    if _DIGIT_RUN in raw.translate(_DIGIT_CLASS):
        return UNREAD
    try:
        return orjson.loads(raw)
    except Exception:  # whatever orjson refuses, json.loads judges
        return UNREAD


def too_deep(value: Any) -> bool:
    """Whether containers nest past ``MAX_DEPTH`` in ``value`` (as ``json.loads`` built it).

    A chat body is mostly strings; ``check`` handles every value, this only
    looks at each one's type. It goes one level at a time, each level one
    comprehension over the containers of the one above: at a few hundred
    messages, a third of the time of a stack of (container, depth) pairs.
    """
    level = [value] if type(value) in _CONTAINERS else []
    depth = 0
    while level:
        depth += 1
        if depth > MAX_DEPTH:
            return True
        level = [
            child
            for item in level
            for child in (item.values() if type(item) is dict else item)
            if type(child) in _CONTAINERS
        ]
    return False


def check(value: Any, *, strings: bool = True) -> None:
    """Refuse nesting past ``MAX_DEPTH`` and (when ``strings``) text holding a lone surrogate.

    Iterative, so the check itself cannot overflow the stack it protects.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
            if strings:
                for key in item:
                    _check_text(key)
        elif isinstance(item, list):
            children = item
        else:
            if strings and isinstance(item, str):
                _check_text(item)
            continue
        if depth > MAX_DEPTH:
            raise BadRequest(f"The JSON body is nested too deeply (at most {MAX_DEPTH} levels).")
        stack.extend((child, depth + 1) for child in children)


def _check_text(text: str) -> None:
    if not text.isascii() and LONE_SURROGATE.search(text):
        raise BadRequest(
            "The JSON body holds a lone UTF-16 surrogate (such as \\ud800), which is not valid Unicode."
        )
