"""What a user said last in their other chats, recorded and extracted before a new request's recall.

A record runs after its response, and a chat's last messages are extracted
once it goes quiet (``quiet_extraction``). A user who says "I'm celiac" at the
end of one chat and opens the next a few seconds later would then be
answered, in that next chat, without it: the fact is not in memory yet. So
before a request's recall, the user's other chats catch up: the records of
theirs still running are waited for, then what waits for the chat to go
quiet is extracted at once and waited for, all within
``memory.extract_wait_s`` (0: never wait; the work then lands after the
response, as before). Past that the request goes on without it, and the work
goes on, never cancelled: the next request has it. Work waited for in vain is
not waited for again: a record or an extraction held up (a slow compression
model, a store that times out) costs one request the wait, not each one.

The request's own chat never waits: its words are in the conversation the
client sends. Only a user who changes chats within ``memory.extract_quiet_s``
of their last words, with words not extracted yet, waits at all; a user of one
chat never does.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Iterator, Sequence

from .quiet_extraction import QuietExtraction

Key = tuple[str, str, str]  # (tenant, user, session)


class CatchUp:
    """The records running, per user and chat; and the wait before a recall. Use from one event loop."""

    def __init__(self, quiet: QuietExtraction | None) -> None:
        self.quiet = quiet
        self._running: dict[tuple[str, str], dict[asyncio.Future[None], str]] = {}
        self._given_up: weakref.WeakSet[asyncio.Future[None]] = weakref.WeakSet()  # waited for in vain

    @contextlib.contextmanager
    def recording(self, key: Key) -> Iterator[None]:
        """While a record of ``key``'s chat runs: a request of the same user in another chat waits for it."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        running = self._running.setdefault(key[:2], {})
        running[done] = key[2]
        try:
            yield
        finally:
            done.set_result(None)
            del running[done]
            if not running:
                del self._running[key[:2]]

    def records_of_others(self, tenant: str, user: str, session: str) -> list[asyncio.Future[None]]:
        """The records running of the user's chats other than ``session``."""
        return [done for done, chat in self._running.get((tenant, user), {}).items() if chat != session]

    async def wait(self, tenant: str, user: str, session: str, within_s: float) -> bool:
        """The user's other chats caught up, for at most ``within_s``: whether they did in time."""
        if within_s <= 0:
            return False
        deadline = asyncio.get_running_loop().time() + within_s
        # A record arms its chat's quiet extraction as it ends: the records first.
        recorded = await self._within(self.records_of_others(tenant, user, session), deadline)
        if self.quiet is None:
            return recorded
        extracted = await self._within(self.quiet.start_others(tenant, user, besides=session), deadline)
        return recorded and extracted

    async def _within(self, work: Sequence[asyncio.Future[None]], deadline: float) -> bool:
        """Whether ``work`` is done by ``deadline``, waited for but what was waited for in vain before; what
        is late then is given up on, never cancelled (``asyncio.wait`` cancels nothing): it goes on, and the
        next request has it. With no time left nothing is waited for, nor given up on."""
        pending = [w for w in work if not w.done()]
        fresh = [w for w in pending if w not in self._given_up]
        left = deadline - asyncio.get_running_loop().time()
        if fresh and left > 0:
            _, late = await asyncio.wait(fresh, timeout=left)
            self._given_up.update(late)
        return all(w.done() for w in pending)
