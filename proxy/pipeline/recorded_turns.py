"""Each session's indexable turns as last recorded, and how many of its messages are indexed already.

``record`` indexes a request's turns after the response. Clients resend the
whole conversation, so all but its newest turns were indexed by the
session's earlier records; finding that out again (each message's text, its
fragment hash, the store asked which hashes it knows) cost time on every
request, growing with the chat. So a session's turns are kept as last
recorded, named by the chain hash of the messages they came from: a request
that continues them (the same chain hash at that length) takes them as they
are, and only its newer turns are offered to the index. The same turns,
with their fragment hashes, tell recall what the verbatim window holds
(``window_hashes``) without hashing the window again on every request.

Kept only while nothing of the user's fragments was deleted or hidden: the
store's generation of them, as the search last read it, must be the one
they were recorded under. After a forget, a supersede or a deleted turn, the
whole conversation is offered again and the store sorts out what it knows.
Bounded like the window's ``HistoryMemo``: ``SESSIONS`` sessions and
``KEPT_CHARS`` of text.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from dataclasses import dataclass

from ..context.history_memo import text_size
from ..context.watermark import View
from ..memory.recall.query import fragment_hash, indexable
from ..offload import off_loop

Turn = tuple[int, str, str]  # (conversation position, role, text)
Key = tuple[str, str, str]  # (tenant, user, session)

SESSIONS = 10_000
KEPT_CHARS = 32 * 1024 * 1024


@dataclass(frozen=True)
class Recorded:
    length: int  # conversation messages the turns came from
    chain_hash: str  # the chain hash of the last of them
    turns: tuple[Turn, ...]
    hashes: tuple[str, ...]  # each turn's fragment hash
    generation: int
    size: int  # characters of text
    answer: str | None  # the fragment hash of the reply indexed after them (the next position), if any


class RecordedTurns:
    def __init__(self, sessions: int = SESSIONS, size: int = KEPT_CHARS) -> None:
        self.sessions = sessions
        self.size = size
        self.kept_chars = 0
        self._seen: OrderedDict[Key, Recorded] = OrderedDict()

    async def turns(self, key: Key, view: View, generation: int | None) -> tuple[list[Turn], int]:
        """The indexable turns of ``view.conv``, and the position from which they are not indexed yet.

        0: none is known to be indexed (the store is asked about all of them). Past 0, the turns
        from there on are new to the conversation: the reply the last record indexed, resent by
        the client at its place, is not among them.
        """
        seen = self._continued(key, view)
        if seen is None or generation != seen.generation:
            return await turns_from(view, 0), 0
        new = await turns_from(view, seen.length)
        fresh = seen.length
        if new and new[0][0] == fresh and seen.answer == fragment_hash(new[0][1], new[0][2]):
            fresh += 1
        return [*seen.turns, *new], fresh

    async def window_hashes(self, key: Key, view: View) -> frozenset[str]:
        """The fragment hashes of the turns in ``view``'s verbatim window, its anchor included."""
        start = view.state.upto
        seen = self._continued(key, view)
        known = start if seen is None else max(start, seen.length)
        rest = [fragment_hash(role, text) for _, role, text in await turns_from(view, known)]
        lead = view.anchor
        if lead is not None:
            rest += [fragment_hash(role, text) for _, role, text in indexable(view.conv[lead : lead + 1], lead)]
        if seen is None:
            return frozenset(rest)
        first = bisect.bisect_left(seen.turns, start, key=lambda t: t[0])
        return frozenset((*seen.hashes[first:], *rest))

    def _continued(self, key: Key, view: View) -> Recorded | None:
        seen = self._seen.get(key)
        if seen is None or seen.length > len(view.chain) or view.chain[seen.length - 1] != seen.chain_hash:
            return None
        return seen

    def recorded(
        self, key: Key, view: View, turns: list[Turn], generation: int | None, answer: str | None = None
    ) -> None:
        """``turns`` (of ``view.conv``) and the reply ``answer`` after them are indexed, under the
        store's ``generation`` of the user's fragments."""
        seen = self._continued(key, view)
        self.forget(key)
        if generation is None or not view.chain:
            return
        kept = tuple(t for t in turns if t[0] < len(view.conv))
        hashed = seen.hashes if seen is not None and kept[: len(seen.turns)] == seen.turns else ()
        hashes = hashed + tuple(fragment_hash(role, text) for _, role, text in kept[len(hashed) :])
        reply = fragment_hash("assistant", answer) if answer else None
        entry = Recorded(len(view.conv), view.chain[-1], kept, hashes, generation, sum(len(t[2]) for t in kept), reply)
        self._seen[key] = entry
        self.kept_chars += entry.size
        while self._seen and (len(self._seen) > self.sessions or self.kept_chars > self.size):
            _, dropped = self._seen.popitem(last=False)
            self.kept_chars -= dropped.size

    def forget(self, key: Key) -> None:
        dropped = self._seen.pop(key, None)
        if dropped is not None:
            self.kept_chars -= dropped.size

    def forget_user(self, tenant: str, user: str) -> None:
        for key in [k for k in self._seen if k[:2] == (tenant, user)]:
            self.forget(key)


async def turns_from(view: View, start: int) -> list[Turn]:
    """The indexable turns of ``view.conv`` from position ``start`` (read off the loop when they are long)."""
    rest = view.conv[start:]
    return await off_loop(sum(map(text_size, rest)), indexable, rest, start)
