"""A chat's last messages, extracted once it goes quiet or at the same user's next request.

Extraction runs on cadence (every ``memory.extract_every_messages`` messages):
what a chat says after its last batch would wait for a next batch that, at the
end of a chat, never comes. So each record arms, for its session, the work
that extracts what waits. It runs after ``memory.extract_quiet_s`` of silence
in that chat, or at once when the same user's next request is recorded in
another chat (``flush``), whichever comes first; a newer record of the same
chat arms it again in its place. The work itself finds nothing to do when the
turns were mined meanwhile (the extraction cursor says so).

Bounded: at most ``MAX_WAITING`` chats wait (arming one more starts the
oldest now) and at most ``AT_ONCE`` of these extractions run at once. Started
work is tracked (``background.Background``), never fire-and-forget; ``close``
cancels every timer, then drains what runs. What still waits at shutdown is
left unmined, its cursor where it was, for that chat's next extraction.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..background import Background

MAX_WAITING = 10_000
AT_ONCE = 4
CLOSE_GRACE_S = 10.0

Key = tuple[str, str, str]  # (tenant, user, session)
Work = Callable[[], Awaitable[None]]


@dataclass
class _Waiting:
    timer: asyncio.TimerHandle
    work: Work


class QuietExtraction:
    """The chats whose last messages wait to be extracted. Use from one event loop."""

    def __init__(
        self,
        *,
        max_waiting: int = MAX_WAITING,
        at_once: int = AT_ONCE,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.max_waiting = max_waiting
        self._waiting: OrderedDict[Key, _Waiting] = OrderedDict()
        self._slots = asyncio.Semaphore(at_once)
        self._running = Background(on_error)
        self._started: dict[Key, asyncio.Task[None]] = {}
        # Each user's chats with work waiting or started: a request asks about one user, never scans them all.
        self._chats: dict[tuple[str, str], set[str]] = {}
        self._closed = False

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def arm(self, key: Key, quiet_s: float, work: Work) -> None:
        """Run ``work`` once ``key``'s chat has been quiet ``quiet_s``, in place of what it waited with."""
        if self._closed:
            return
        self._cancel(key)
        timer = asyncio.get_running_loop().call_later(quiet_s, self._start, key)
        self._waiting[key] = _Waiting(timer, work)
        self._chats.setdefault(key[:2], set()).add(key[2])
        while len(self._waiting) > self.max_waiting:
            self._start(next(iter(self._waiting)))

    async def flush(self, tenant: str, user: str, *, besides: str) -> None:
        """Run now, and wait for, the work of the user's other chats (waiting or already started).

        Called before a record extracts its own turns, so a user's facts are
        extracted in the order they were said: a chat's last words before the next chat's.
        """
        started = self.start_others(tenant, user, besides=besides)
        if started:
            await asyncio.wait(started)

    def start_others(self, tenant: str, user: str, *, besides: str) -> list[asyncio.Task[None]]:
        """Start now the work of the user's chats other than ``besides``; all of theirs that runs."""
        others = [(tenant, user, chat) for chat in self._chats.get((tenant, user), ()) if chat != besides]
        for key in others:
            self._start(key)
        return [task for key in others if (task := self._started.get(key)) is not None]

    def _cancel(self, key: Key) -> None:
        waiting = self._waiting.pop(key, None)
        if waiting is not None:
            waiting.timer.cancel()
            self._settled(key)

    def _start(self, key: Key) -> None:
        waiting = self._waiting.pop(key, None)
        if waiting is None:
            return
        waiting.timer.cancel()
        task = self._running.spawn("quiet-extract", self._run(waiting.work))
        self._started[key] = task
        task.add_done_callback(lambda t: self._ended(key, t))

    def _ended(self, key: Key, task: asyncio.Task[None]) -> None:
        if self._started.get(key) is task:
            del self._started[key]
            self._settled(key)

    def _settled(self, key: Key) -> None:
        """``key``'s chat out of the user's index once nothing of it waits or runs."""
        if key in self._waiting or key in self._started:
            return
        chats = self._chats.get(key[:2])
        if chats is not None:
            chats.discard(key[2])
            if not chats:
                del self._chats[key[:2]]

    async def _run(self, work: Work) -> None:
        async with self._slots:
            await work()

    def cancel(self) -> None:
        """Cancel every timer and what started (for a caller that cannot await: the eval's harness)."""
        self._closed = True
        for key in list(self._waiting):
            self._cancel(key)
        for task in list(self._started.values()):
            task.cancel()

    async def close(self, grace_s: float = CLOSE_GRACE_S) -> None:
        """Cancel every timer, then drain the started work for up to ``grace_s`` (then cancel it)."""
        self._closed = True
        for key in list(self._waiting):
            self._cancel(key)
        await self._running.close(grace_s)
