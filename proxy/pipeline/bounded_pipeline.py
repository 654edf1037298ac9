"""The memory pipeline under load: how many requests prepare at once, how many records run and wait.

The proxy runs on one event loop (docs/decisions/0012-one-event-loop.md):
the work that lets go of Python's GIL (embeddings, the store's calls, large
bodies) goes to threads, and the memory layer's Python steps run on the loop
between awaits. What keeps each turn of the loop short under load — and so
``/healthz`` and every stream's next chunk prompt — is how many requests are
inside those steps at once, not where they run:

- at most ``PREPARES_AT_ONCE`` requests prepare at once; the others wait
  their turn in order (before their body is read into a plan, so a waiting
  request holds nothing but its socket);
- at most ``RECORDS_AT_ONCE`` records run at once; the rest wait in order.
  The client already has its answer, so a waiting record costs it nothing,
  and shutdown waits for them;
- under sustained load recording can fall behind the requests. When
  ``RECORDS_WAITING`` records are waiting, a new request waits before it is
  prepared until one finishes: the memory layer slows new requests rather
  than holding an ever longer queue or losing what was said. A request that
  found no room within ``ROOM_WAIT_S`` goes out without memory
  (``X-Paperclip-Degraded: memory_busy``), and its turns are indexed with the
  session's next request (clients resend the conversation).
"""

from __future__ import annotations

import asyncio

from ..errors import MemoryBusy
from .chat_call import ChatCall, Reply
from .pipeline_protocol import Pipeline, Prepared

PREPARES_AT_ONCE = 4
RECORDS_AT_ONCE = 4
RECORDS_WAITING = 100
ROOM_WAIT_S = 5.0


class BoundedPipeline:
    """``inner``'s prepare and record, so many at once; records that wait are bounded."""

    def __init__(
        self,
        inner: Pipeline,
        *,
        prepares: int = PREPARES_AT_ONCE,
        records: int = RECORDS_AT_ONCE,
        waiting: int = RECORDS_WAITING,
        room_wait_s: float = ROOM_WAIT_S,
    ) -> None:
        self.inner = inner
        self.limit = records + waiting
        self.room_wait_s = room_wait_s
        self.backlog = 0  # records queued or running
        self._preparing = asyncio.Semaphore(prepares)
        self._recording = asyncio.Semaphore(records)
        self._room = asyncio.Condition()

    async def prepare(self, call: ChatCall) -> Prepared:
        if self.backlog >= self.limit:
            try:
                async with asyncio.timeout(self.room_wait_s), self._room:
                    await self._room.wait_for(lambda: self.backlog < self.limit)
            except TimeoutError:
                raise MemoryBusy(f"{self.backlog} records are waiting") from None
        async with self._preparing:
            return await self.inner.prepare(call)

    async def record(self, call: ChatCall, prepared: Prepared, reply: Reply) -> None:
        self.backlog += 1
        try:
            async with self._recording:
                await self.inner.record(call, prepared, reply)
        finally:
            self.backlog -= 1
            async with self._room:
                self._room.notify_all()
