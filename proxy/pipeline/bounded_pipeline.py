"""The memory pipeline under load: how many requests prepare at once, how many records run and wait.

The proxy runs on one event loop (docs/decisions/0012-one-event-loop.md):
the work that lets go of Python's GIL (embeddings, the store's calls, large
bodies) goes to threads, and the memory layer's Python steps run on the loop
between awaits. What keeps each turn of the loop short under load — and so
``/healthz`` and every stream's next chunk prompt — is how many requests are
inside those steps at once, not where they run:

- at most ``PREPARES_AT_ONCE`` requests prepare at once; the others wait
  their turn in order (before their body is read into a plan, so a waiting
  request holds nothing but its socket). A request that waits for the user's
  other chats to catch up (``Pipeline.catch_up``) waits before its turn: a
  wait is no work;
- at most ``RECORDS_AT_ONCE`` records run at once; the rest wait in order.
  The client already has its answer, so a waiting record costs it nothing,
  and shutdown waits for them;
- a session's records run one after the other, in the order they came. A
  client that resends its conversation sends again all an older request
  said, the older answer included: a waiting record whose conversation the
  newer one continues (``Pipeline.covers``: the same messages up to the
  older's last) gives way to it. Of the older, only what is its own is kept,
  at once (its trace, its response id, the memories it used:
  ``record(..., covered=True)``), and the newer indexes, extracts and
  compresses for both. A session whose records fall behind (the turns it
  sent while the database was down, indexed with its first request after)
  so holds one waiting record, not one per request. Two chats that share a
  session id but not their history (two tabs that both began "hi") cover
  nothing of each other: each record runs whole. A conversation the
  provider holds (``previous_response_id``) resends nothing: each of its
  records runs whole;
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
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import MemoryBusy
from .chat_call import ChatCall, Reply
from .pipeline_protocol import Pipeline, Prepared

PREPARES_AT_ONCE = 4
RECORDS_AT_ONCE = 4
RECORDS_WAITING = 100
ROOM_WAIT_S = 5.0

SessionKey = tuple[str, str, str]  # (tenant, user, session)


@dataclass(eq=False)
class _Waiting:
    """A record waiting for its session's turn."""

    prepared: Prepared
    covered: asyncio.Future[None]  # done: a newer record of the session covers it


@dataclass(eq=False)
class _Session:
    """A session's records: whether one runs, and those waiting, in the order they came."""

    moved: asyncio.Condition = field(default_factory=asyncio.Condition)
    running: bool = False
    waiting: list[_Waiting] = field(default_factory=list)


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
        on_covered: Callable[[], object] | None = None,
    ) -> None:
        self.inner = inner
        self.on_covered = on_covered  # told of each record that gave way (a metric)
        self.limit = records + waiting
        self.room_wait_s = room_wait_s
        self.backlog = 0  # records queued or running
        self.covered = 0  # records that gave way to a newer one of their session
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
        await self.inner.catch_up(call)  # a wait, not work: outside the bound on requests preparing
        async with self._preparing:
            return await self.inner.prepare(call)

    async def catch_up(self, call: ChatCall) -> None:
        return None  # ``prepare`` has its inner pipeline catch up

    def due(self, call: ChatCall) -> contextlib.AbstractContextManager[None]:
        return self.inner.due(call)

    def covers(self, newer: Prepared, older: Prepared) -> bool:
        return self.inner.covers(newer, older)

    async def record(self, call: ChatCall, prepared: Prepared, reply: Reply, *, covered: bool = False) -> None:
        # Due from now, not from its turn: a record waiting behind its session's earlier one holds the chat's
        # last words, and a request of the user in another chat must wait for it too (``catch_up``).
        with self.inner.due(call):
            await self._record(call, prepared, reply, covered=covered)

    async def _record(self, call: ChatCall, prepared: Prepared, reply: Reply, *, covered: bool) -> None:
        self.backlog += 1
        try:
            key = resent(call)
            if covered:  # the caller knows a newer record covers this one
                await self.inner.record(call, prepared, reply, covered=True)
            elif key is None:
                async with self._recording:
                    await self.inner.record(call, prepared, reply)
            else:
                await self._in_turn(key, call, prepared, reply)
        finally:
            self.backlog -= 1
            async with self._room:
                self._room.notify_all()

    async def _in_turn(self, key: SessionKey, call: ChatCall, prepared: Prepared, reply: Reply) -> None:
        """Record when the session's earlier records are done and a slot is free, or, once a newer
        record covers this one, keep only what is this one's own, at once."""
        session = self._sessions.get(key)
        if session is None:
            session = self._sessions[key] = _Session()
        ticket = _Waiting(prepared, asyncio.get_running_loop().create_future())
        async with session.moved:
            for older in session.waiting:
                if self.inner.covers(prepared, older.prepared):
                    older.covered.set_result(None)
            session.waiting = [w for w in session.waiting if not w.covered.done()]
            alone = not session.running and not session.waiting  # the common case: its turn at once
            if alone:
                session.running = True
            else:
                session.waiting.append(ticket)
                session.moved.notify_all()
        try:
            first = alone or await self._first(session, ticket)
        except asyncio.CancelledError:  # shutdown: leave nothing waiting behind
            if ticket in session.waiting:
                session.waiting.remove(ticket)
            await self._moved(key, session)
            raise
        if not first:
            self.covered += 1
            if self.on_covered is not None:
                self.on_covered()
            self._forget_if_idle(key, session)
            await self.inner.record(call, prepared, reply, covered=True)
            return
        try:
            async with self._recording:
                await self.inner.record(call, prepared, reply)
        finally:
            session.running = False
            await self._moved(key, session)

    @staticmethod
    async def _first(session: _Session, ticket: _Waiting) -> bool:
        """True once ``ticket`` is the session's next record and none runs (it then runs: no newer one
        can cover it); False when a newer one covers it first."""

        async def its_turn() -> None:
            async with session.moved:
                await session.moved.wait_for(
                    lambda: not session.running and bool(session.waiting) and session.waiting[0] is ticket
                )
                session.waiting.pop(0)
                session.running = True

        turn = asyncio.ensure_future(its_turn())
        try:
            await asyncio.wait({turn, ticket.covered}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            turn.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await turn
            if turn.done() and not turn.cancelled():  # it had begun: its turn passes on
                session.running = False
            raise
        if turn.done():
            turn.result()
            return True
        turn.cancel()  # covered: it left the queue, so its turn can never come
        with contextlib.suppress(asyncio.CancelledError):
            await turn
        return False

    async def _moved(self, key: SessionKey, session: _Session) -> None:
        """The session's queue moved: its next record may run; a session with none left is forgotten."""
        async with session.moved:
            session.moved.notify_all()
        self._forget_if_idle(key, session)

    def _forget_if_idle(self, key: SessionKey, session: _Session) -> None:
        if not session.running and not session.waiting and self._sessions.get(key) is session:
            del self._sessions[key]


def resent(call: ChatCall) -> SessionKey | None:
    """The session whose newer requests resend all of this one's conversation; None when the provider holds it."""
    if call.provider_state is not None or call.offset:
        return None
    return (call.tenant.id, call.user, call.session)
