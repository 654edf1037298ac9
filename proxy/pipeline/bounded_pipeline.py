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
- a session's records run one after the other, and a session has at most
  one record waiting. A client that resends its conversation sends again
  all its older request said, the older answer included, so when a newer
  record of the session comes, the waiting one gives way to it (the newer
  covers it): of the older, only what is its own is kept, at once (its
  trace, its response id, the memories it used: ``record(...,
  covered=True)``), and the newer indexes, extracts and compresses for
  both. A session whose records fall behind (the turns it sent while the
  database was down, indexed with its first request after) so holds one
  waiting record, not one per request. A conversation the provider holds
  (``previous_response_id``) resends nothing: each of its records runs
  whole;
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
import contextlib
from dataclasses import dataclass

from ..errors import MemoryBusy
from .chat_call import ChatCall, Reply
from .pipeline_protocol import Pipeline, Prepared

PREPARES_AT_ONCE = 4
RECORDS_AT_ONCE = 4
RECORDS_WAITING = 100
ROOM_WAIT_S = 5.0

SessionKey = tuple[str, str, str]  # (tenant, user, session)


@dataclass
class _Session:
    """A session's record running (``running`` is set when it ends) and the one waiting for it."""

    running: asyncio.Event | None = None
    waiting: asyncio.Future[None] | None = None  # done: a newer record of the session took its place


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
        self.covered = 0  # records that gave way to their session's newer one
        self._preparing = asyncio.Semaphore(prepares)
        self._recording = asyncio.Semaphore(records)
        self._room = asyncio.Condition()
        self._sessions: dict[SessionKey, _Session] = {}

    @property
    def sessions_recording(self) -> int:
        """How many sessions have a record running or waiting."""
        return len(self._sessions)

    async def prepare(self, call: ChatCall) -> Prepared:
        if self.backlog >= self.limit:
            try:
                async with asyncio.timeout(self.room_wait_s), self._room:
                    await self._room.wait_for(lambda: self.backlog < self.limit)
            except TimeoutError:
                raise MemoryBusy(f"{self.backlog} records are waiting") from None
        async with self._preparing:
            return await self.inner.prepare(call)

    async def record(self, call: ChatCall, prepared: Prepared, reply: Reply, *, covered: bool = False) -> None:
        self.backlog += 1
        try:
            key = resent(call)
            if covered:  # the caller knows a newer record of the session covers this one
                await self.inner.record(call, prepared, reply, covered=True)
            elif key is None:
                async with self._recording:
                    await self.inner.record(call, prepared, reply)
            elif await self._turn(key):
                try:
                    await self.inner.record(call, prepared, reply)
                finally:
                    self._recording.release()
                    self._ended(key)
            else:
                self.covered += 1
                await self.inner.record(call, prepared, reply, covered=True)
        finally:
            self.backlog -= 1
            async with self._room:
                self._room.notify_all()

    async def _turn(self, key: SessionKey) -> bool:
        """Wait for the session's running record and a free slot: True, holding the slot; False when a
        newer record of the session took this one's place meanwhile."""
        session = self._sessions.setdefault(key, _Session())
        if session.waiting is not None:
            session.waiting.set_result(None)
        ticket = session.waiting = asyncio.get_running_loop().create_future()

        async def take() -> bool:
            while session.running is not None:
                await session.running.wait()
            await self._recording.acquire()
            if ticket.done():  # given way while the slot was granted
                self._recording.release()
                return False
            session.waiting, session.running = None, asyncio.Event()
            return True

        taking = asyncio.ensure_future(take())
        try:
            await asyncio.wait({taking, ticket}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # shutdown: neither wait nor hold a slot
            taking.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                if await taking:
                    self._recording.release()
                    self._ended(key)
            if session.waiting is ticket:
                session.waiting = None
                self._forget_if_idle(key, session)
            raise
        if taking.done():
            return taking.result()
        taking.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await taking  # it checks the ticket after taking a slot: cancelled or False, never holding one
        self._forget_if_idle(key, session)
        return False

    def _ended(self, key: SessionKey) -> None:
        session = self._sessions[key]
        ended, session.running = session.running, None
        if ended is not None:
            ended.set()
        self._forget_if_idle(key, session)

    def _forget_if_idle(self, key: SessionKey, session: _Session) -> None:
        if session.running is None and session.waiting is None and self._sessions.get(key) is session:
            del self._sessions[key]


def resent(call: ChatCall) -> SessionKey | None:
    """The session whose newer requests resend all of this one's conversation; None when the provider holds it."""
    if call.provider_state is not None or call.offset:
        return None
    return (call.tenant.id, call.user, call.session)
