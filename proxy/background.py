"""Work that runs after a response: tracked, logged, awaited at shutdown.

Tasks are detached from the request's own task, so a client that disconnects
does not cancel the recording of its turn; they are never fire-and-forget: the
app awaits them in ``lifespan`` before closing the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("paperclip.background")


class Background:
    def __init__(self, on_error: Callable[[str], None] | None = None) -> None:
        self._tasks: set[asyncio.Task[None]] = set()
        self._on_error = on_error

    def spawn(self, name: str, work: Awaitable[None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(self._guard(name, work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _guard(self, name: str, work: Awaitable[None]) -> None:
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("background work %s failed", name)
            if self._on_error is not None:
                self._on_error(name)

    @property
    def pending(self) -> int:
        return len(self._tasks)

    async def drain(self) -> None:
        """Wait for every task spawned so far (and those they spawn)."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    async def close(self, grace_s: float = 30.0) -> None:
        """Drain for up to ``grace_s``, then cancel what is left (at shutdown only)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace_s):
                await self.drain()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
