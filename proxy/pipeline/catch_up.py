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
goes on, never cancelled: the next request has it.

The request's own chat never waits: its words are in the conversation the
client sends. Only a user who changes chats within ``memory.extract_quiet_s``
of their last words, with words not extracted yet, waits at all; a user of one
chat never does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

from .quiet_extraction import QuietExtraction

Key = tuple[str, str, str]  # (tenant, user, session)


class CatchUp:
    """The records running, per user and chat; and the wait before a recall. Use from one event loop."""

    def __init__(self, quiet: QuietExtraction | None) -> None:
        self.quiet = quiet
        self._running: dict[tuple[str, str], dict[asyncio.Future[None], str]] = {}

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
        try:
            async with asyncio.timeout(within_s):
                records = self.records_of_others(tenant, user, session)
                if records:
                    await asyncio.wait(records)  # a record arms its chat's quiet extraction as it ends
                if self.quiet is not None:
                    await self.quiet.flush(tenant, user, besides=session)
        except TimeoutError:
            return False  # what runs goes on (``asyncio.wait`` cancels nothing): the next request has it
        return True
