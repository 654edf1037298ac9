"""What the window knows of each message of a session's conversation, kept: a resent history costs one comparison.

Clients resend the whole conversation on every request. Counting each
message's tokens, hashing it into the chain and describing it for the planner
cost a few µs a message — a millisecond a request at a few hundred messages,
on every request, growing with the chat. So the description of each session's
conversation is kept, and a request that starts with the messages last seen
(the common case: one answer and one question more) describes only the
messages after them.

A body of ``RESENT_MIN_BYTES`` or more whose messages start with the last
body's messages' bytes continues it (``resent_bytes``): one ``memcmp``. Once
a session's bodies have done so, its message objects are not kept: they were
the largest part of what was kept, and freeing them a request later, cold in
memory, cost more than the comparison. Otherwise, or when the caller has no
bytes to give (a body of another API, converted), the messages are compared:
list equality, done in C (a client that sends the same messages in other
bytes is not walked for them again). It is exact for messages whose values
are all strings or null (most of a chat). Python holds ``1 == 1.0 == True``
where their canonical JSON does not, so messages of other shapes (tool calls,
parts, numbers) are compared by their memo key too. A history that is not a
continuation of the last one (an edit, a regenerated turn, another tab) is
described in full, as if new.

New messages of more than ``offload.INLINE_BYTES`` of text are described
on a worker thread. Bounded: the conversations of at most ``SESSIONS``
sessions and ``KEPT_BYTES`` of their messages' canonical JSON and body bytes
are kept, the least recently seen dropped first.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from ..hashing import GENESIS, canonical, chain_step, memo_key
from ..offload import off_loop
from ..tokens import TokenCounter
from .planner import MsgInfo, msg_info
from .resent_bytes import Sent, resent_messages, sent_messages

SESSIONS = 10_000
# Bodies shorter than this are compared as objects only: a few dozen short messages take microseconds, less
# than cutting a body that may never come again.
RESENT_MIN_BYTES = 16 * 1024
KEPT_BYTES = 16 * 1024 * 1024  # of canonical JSON: the objects kept take a few times that


@dataclass(frozen=True)
class History:
    """A conversation as described: per message its planner info (tokens included) and chain hash."""

    conv: list[dict[str, Any]]  # the client's message objects, as they came ([] once kept by their bytes)
    infos: list[MsgInfo]
    chain: list[str]
    tokens: int  # the messages' tokens, all together
    encoding: str  # what ``tokens`` were counted in
    shaped: tuple[tuple[int, Hashable], ...]  # (position, memo key) of the messages not all strings/null
    size: int  # bytes of the messages' canonical JSON
    # The body's bytes cut around its messages, when the caller gave them and they may serve (else None):
    # a body whose messages start with these resends them unchanged.
    sent: Sent | None = None
    reworded: bool = False  # the session's client resent its messages in other bytes: its bodies are not cut

    @property
    def kept(self) -> int:
        """Bytes this description keeps of the conversation (its canonical JSON and body bytes)."""
        return self.size + (len(self.sent) if self.sent is not None else 0)


class HistoryMemo:
    def __init__(self, sessions: int = SESSIONS, size: int = KEPT_BYTES, cut_from: int = RESENT_MIN_BYTES) -> None:
        self.sessions = sessions
        self.size = size
        self.cut_from = cut_from  # bytes of a body from which it is cut (``RESENT_MIN_BYTES``)
        self.kept_bytes = 0
        self._seen: OrderedDict[Hashable, History] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seen)

    async def describe(
        self, key: Hashable, conv: list[dict[str, Any]], counter: TokenCounter, raw: bytes = b""
    ) -> History:
        """``conv`` described, reusing what was described of the session's last conversation it continues.

        ``raw``: the JSON body ``conv`` was parsed from, when ``conv`` is the end of its ``messages``
        array as parsed (the messages after the leading ones); empty otherwise.
        """
        seen = self._seen.get(key)
        cut, start, reworded = None, 0, False
        if seen is not None:
            encoding = counter.encoding.name
            # What a resend leaves to walk (its new messages, a changed tail) may be long: off the loop then.
            unread = seen.sent.unread(raw) if seen.sent is not None else 0
            cut = await off_loop(unread, resent, seen, conv, raw, encoding)
            start = len(seen.infos) if cut is not None else continued(seen, conv, encoding)
            reworded = bool(raw) and cut is None and start > 0 and (seen.sent is not None or seen.reworded)
        # A long body that does not resend the last one's bytes is cut (a walk about as long as reading its
        # new text), unless it resent the last one's messages in other bytes: its client does not keep them.
        walk = bool(raw) and len(raw) >= self.cut_from and cut is None and not reworded
        work = sum(map(text_size, conv[start:])) + (len(raw) if walk else 0)
        history = await off_loop(work, extend, seen if start else None, conv, counter, raw if walk else b"")
        kept = history
        if cut is not None:  # kept by its bytes, its message objects are freed with their request, not cold later
            history = dataclasses.replace(history, sent=cut)
            kept = dataclasses.replace(history, conv=[])
        elif reworded:
            history = kept = dataclasses.replace(history, reworded=True)
        self.forget(key)
        self._seen[key] = kept
        self.kept_bytes += history.kept
        while self._seen and (len(self._seen) > self.sessions or self.kept_bytes > self.size):
            _, dropped = self._seen.popitem(last=False)
            self.kept_bytes -= dropped.kept
        return history

    def forget(self, key: Hashable) -> None:
        dropped = self._seen.pop(key, None)
        if dropped is not None:
            self.kept_bytes -= dropped.kept


def resent(seen: History, conv: Sequence[dict[str, Any]], raw: bytes, encoding: str) -> Sent | None:
    """``raw`` cut around its messages (``resent_messages``) when they start with ``seen``'s, byte for byte;
    else None."""
    last = seen.sent
    if not raw or last is None or seen.encoding != encoding or len(conv) < len(seen.infos):
        return None
    return resent_messages(raw, last)


def continued(seen: History, conv: Sequence[dict[str, Any]], encoding: str) -> int:
    """How many of ``conv``'s first messages are ``seen``'s, exactly (0: not a continuation)."""
    n = len(seen.conv)
    if n < len(seen.infos):  # kept by their bytes: the objects are gone
        return 0
    if seen.encoding != encoding or len(conv) < n or conv[:n] != seen.conv:
        return 0
    if any(memo_key(conv[position]) != key for position, key in seen.shaped):
        return 0
    return n


def text_size(message: dict[str, Any]) -> int:
    """About how many characters of text ``message`` holds (its string content or text parts)."""
    content = message.get("content")
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(p["text"]) for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return 0


def extend(seen: History | None, conv: list[dict[str, Any]], counter: TokenCounter, raw: bytes = b"") -> History:
    """``seen`` (the description of ``conv``'s first messages, or None) carried on over the rest of ``conv``;
    ``raw``: its body's bytes, as ``HistoryMemo.describe`` takes them, to be walked for its messages'."""
    start = len(seen.infos) if seen is not None else 0
    infos = list(seen.infos) if seen is not None else []
    chain = list(seen.chain) if seen is not None else []
    shaped = list(seen.shaped) if seen is not None else []
    tokens = seen.tokens if seen is not None else 0
    size = seen.size if seen is not None else 0
    parent = chain[-1] if chain else GENESIS
    for position in range(start, len(conv)):
        message = conv[position]
        data = canonical(message)
        parent = chain_step(parent, hashlib.sha256(data).hexdigest())
        chain.append(parent)
        count = counter.message(message)
        infos.append(msg_info(message, count))
        tokens += count
        size += len(data)
        if any(value is not None and type(value) is not str for value in message.values()):
            shaped.append((position, memo_key(message)))
    cut = sent_messages(raw) if raw else None
    return History(conv, infos, chain, tokens, counter.encoding.name, tuple(shaped), size, cut)
