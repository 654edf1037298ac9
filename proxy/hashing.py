"""Content addresses for messages.

A message's hash is the SHA-256 of its canonical JSON form; a *chain hash*
folds in the previous message's chain hash, so it names a whole prefix of a
conversation. Clients resend their full history on every request: the chain
hash of message i is how Paperclip recognises "the same first i messages".

The canonical form is part of every stored key (summaries, session ids,
fragment ids): changing it changes every one of them. tests/test_hashing.py
freezes it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

Message = Mapping[str, Any]

GENESIS = "0" * 64


# A UTF-16 surrogate alone (JSON's "\ud800") is not Unicode: text holding one cannot be
# encoded as UTF-8, so it can be neither hashed nor stored.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub(text: str) -> str:
    """``text`` with any lone surrogate replaced by U+FFFD: for text the proxy did not choose (replies)."""
    return text if text.isascii() else LONE_SURROGATE.sub("\ufffd", text)


def canonical(message: Message) -> bytes:
    """The canonical JSON bytes of a message: sorted keys, no spaces, UTF-8."""
    return json.dumps(message, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def message_hash(message: Message) -> str:
    return hashlib.sha256(canonical(message)).hexdigest()


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def chain_step(parent: str, child_hash: str) -> str:
    return hashlib.sha256(f"{parent}:{child_hash}".encode()).hexdigest()


def chain_hashes(hashes: Iterable[str], parent: str = GENESIS) -> list[str]:
    """Chain hashes of a sequence of message hashes: out[i] names hashes[: i + 1]."""
    out: list[str] = []
    for h in hashes:
        parent = chain_step(parent, h)
        out.append(parent)
    return out


def chain_of(messages: Sequence[Message]) -> list[str]:
    return chain_hashes(message_hash(m) for m in messages)


def memo_key(message: Message) -> Hashable:
    """A cheap in-memory key, equal exactly when two messages' canonical forms are equal.

    Plain messages (string or null values: most of a chat) key on their sorted
    items, without serialising; structured ones on the digest of their canonical
    form. Process-local: for caches only, never stored.
    """
    for value in message.values():  # a plain loop: this runs for every message of every request
        if value is not None and type(value) is not str:
            return hashlib.sha256(canonical(message)).digest()
    return tuple(sorted(message.items()))
