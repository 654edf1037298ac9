"""A chat body's bytes around and of its messages: what the client's next body resends unchanged.

A client resends the whole conversation each time, and serialises the same
messages to the same bytes (one SDK, one encoder): its next body's messages
array starts with this body's, byte for byte, up to the end of its last
message, then says one answer and one question more. Comparing those bytes
(one ``memcmp``) tells a continuation where comparing the parsed messages,
object by object, walked a few hundred dicts the last request left cold in
memory.

Bytes equal up to the end of an element of a JSON array parse to equal values
up to there, key order, spacing and escapes included: a stricter test than the
messages' equality. It holds for the parsed body only if that array is the
body's ``messages`` (JSON lets a key repeat, the last one counting), so every
key of the top level is walked, and a body with the key twice has no
``Sent``. What comes before and after the array is walked only when it is not
the last body's, byte for byte (a model or a tool changed): a long list of
tools is walked once, not on every request.

The walk is linear in the bytes it reads (possessive patterns give nothing back:
a byte is read at most three times), partly in Python: the caller runs it off
the event loop when those bytes are many (``offload``). The body has parsed as
JSON already (``server.jsonbody``): the walk trusts its syntax and only finds
where values end. Pure, on bytes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_WS = rb"[ \t\n\r]*"
# Runs of plain characters in one step each (possessive: never given back), so the engine's loop is per run,
# not per character.
_STRING = rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
# An object that holds no object or array: a message of plain strings, null and numbers, in one C match.
_FLAT = rb'\{[^{}\[\]"]*+(?:' + _STRING + rb'[^{}\[\]"]*+)*+\}'
_FLAT_RUN = re.compile(rb"(?:" + _WS + rb",?" + _WS + _FLAT + rb")+")
_SPACE = re.compile(_WS)
_STRING_AT = re.compile(_STRING)
_FLAT_AT = re.compile(_FLAT)
_TOKEN = re.compile(_STRING + rb"|[\[\]{}]")
_SCALAR = re.compile(rb"[-+.\w]+")  # a number, true, false, null (and NaN, Infinity as json.loads reads them)
_KEY = b'"messages"'
_OPEN, _CLOSE, _ARRAY, _END, _COMMA, _QUOTE = (ord(c) for c in '{}[],"')


@dataclass(frozen=True)
class Sent:
    """A JSON object's bytes cut around its one ``messages`` array."""

    head: bytes  # up to the array's "[", included
    messages: bytes  # from there to the end of its last element (empty: no element)
    tail: bytes  # from the array's "]" on

    def __len__(self) -> int:
        return len(self.head) + len(self.messages) + len(self.tail)

    def unread(self, raw: bytes) -> int:
        """About how many bytes of ``raw`` ``resent_messages`` reads when it resends this body's messages:
        all but those messages and a tail sent again."""
        again = len(self.tail) if raw.endswith(self.tail) else 0
        return max(0, len(raw) - len(self.head) - len(self.messages) - again)


def sent_messages(raw: bytes) -> Sent | None:
    """``raw`` cut around its messages array; None when ``raw`` is not an object with one ``messages`` key
    whose value is an array."""
    try:
        return _cut(raw, None)
    except (IndexError, ValueError):  # not the JSON object it was said to be
        return None


def resent_messages(raw: bytes, last: Sent) -> Sent | None:
    """``raw`` cut around its messages array when that array starts with ``last``'s messages (not empty),
    byte for byte; else None (``sent_messages`` cuts it from scratch)."""
    try:
        return _cut(raw, last)
    except (IndexError, ValueError):
        return None


def _cut(raw: bytes, last: Sent | None) -> Sent | None:
    """``raw`` cut; with ``last``, only when it resends ``last``'s messages (the array's bytes before that
    end are not walked, nor those before the array when they are ``last``'s)."""
    if last is not None and raw.startswith(last.head):
        start = len(last.head)  # the keys before were walked in the last body
    else:
        found = _keys(raw, _after_open(raw))
        if found is None or raw[found] != _ARRAY:
            return None
        start = found + 1
    skipped = start
    if last is not None:
        skipped += len(last.messages)
        # Not a resend: other bytes, or a number the last body's was cut from ("1" of "12").
        if not last.messages or not raw.startswith(last.messages, start) or (
            raw[_end(_SPACE, raw, skipped)] not in (_COMMA, _END)
        ):
            return None
    close, end = _elements(raw, skipped, skipped)
    tail = raw[close:]
    if (last is None or tail != last.tail) and _keys(raw, close + 1) is not None:
        return None  # a second "messages" key after the array
    return Sent(raw[:start], raw[start:end], tail)


def _after_open(raw: bytes) -> int:
    i = _end(_SPACE, raw, 0)
    if raw[i] != _OPEN:
        raise ValueError("not an object")
    return i + 1


def _keys(raw: bytes, i: int) -> int | None:
    """The offset of the value of the first ``messages`` key among an object's keys from ``i`` on (its
    keys and values are walked to there, or to the object's end: None)."""
    while True:
        i = _end(_SPACE, raw, i)
        if raw[i] == _COMMA:
            i = _end(_SPACE, raw, i + 1)
        if raw[i] == _CLOSE:
            return None
        start, i = i, _end(_STRING_AT, raw, i)
        key = raw[start:i]
        i = _end(_SPACE, raw, _end(_SPACE, raw, i) + 1)  # past the colon
        if key == _KEY or (b"\\" in key and json.loads(key) == "messages"):
            return i
        i = _value_end(raw, i)


def _elements(raw: bytes, i: int, last: int) -> tuple[int, int]:
    """From ``i`` inside an array (after its ``[`` or an element, which ends at ``last``), the offset of the
    array's ``]`` and the end of its last element (``last`` when none follows)."""
    while True:
        run = _FLAT_RUN.match(raw, i)
        if run is not None:
            i = last = run.end()
        i = _end(_SPACE, raw, i)
        if raw[i] == _END:
            return i, last
        if raw[i] == _COMMA:
            i = _end(_SPACE, raw, i + 1)
        i = last = _value_end(raw, i)


def _value_end(raw: bytes, i: int) -> int:
    """The offset past the JSON value that starts at ``i``."""
    first = raw[i]
    if first == _QUOTE:
        return _end(_STRING_AT, raw, i)
    if first == _OPEN:
        flat = _FLAT_AT.match(raw, i)
        if flat is not None:
            return flat.end()
    elif first != _ARRAY:
        return _end(_SCALAR, raw, i)
    depth = 0
    for token in _TOKEN.finditer(raw, i):
        mark = raw[token.start()]
        if mark in (_OPEN, _ARRAY):
            depth += 1
        elif mark != _QUOTE:
            depth -= 1
            if depth == 0:
                return token.end()
    raise ValueError("an unclosed container")


def _end(pattern: re.Pattern[bytes], raw: bytes, i: int) -> int:
    """The offset past ``pattern`` matched at ``i`` (ValueError: it does not match there)."""
    found = pattern.match(raw, i)
    if found is None:
        raise ValueError(f"no {pattern.pattern!r} at {i}")
    return found.end()
