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
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Message = Mapping[str, Any]

_GENESIS = "0" * 64


def canonical(message: Message) -> bytes:
    """The canonical JSON bytes of a message: sorted keys, no spaces, UTF-8."""
    return json.dumps(message, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def message_hash(message: Message) -> str:
    return hashlib.sha256(canonical(message)).hexdigest()


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def chain_step(parent: str, child_hash: str) -> str:
    return hashlib.sha256(f"{parent}:{child_hash}".encode()).hexdigest()


def chain_hashes(hashes: Iterable[str], parent: str = _GENESIS) -> list[str]:
    """Chain hashes of a sequence of message hashes: out[i] names hashes[: i + 1]."""
    out: list[str] = []
    for h in hashes:
        parent = chain_step(parent, h)
        out.append(parent)
    return out


def chain_of(messages: Sequence[Message]) -> list[str]:
    return chain_hashes(message_hash(m) for m in messages)
