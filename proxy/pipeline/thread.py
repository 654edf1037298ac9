"""The memory pipeline on an event loop of its own thread, so the server's loop stays free for sockets.

Preparing a request (token counting, hashing the history, recall's search,
fusion and packing) and recording it (masking, tokenising, BM25 terms,
extraction) are CPU work in many small steps between awaits of the store
and the embedder. On the server's loop, fifty clients' steps queue up one
behind the other, and ``/healthz`` waits behind all of them (385 ms at p99
under 50 streams). Here each request crosses to the pipeline's loop once to
prepare and once to record; the server's loop only reads, relays and
writes. The other thread still takes Python's GIL, but the interpreter hands
it back to a waiting thread every ``sys.getswitchinterval()`` (5 ms), so the
server's loop waits for the GIL, not behind a queue of other requests' work.

Recording is bounded: at most ``RECORDS_AT_ONCE`` records run at once, the
rest wait their turn in order (the client already has its answer: a waiting
record costs it nothing). When ``RECORDS_WAITING`` records are already
waiting, the memory layer has fallen minutes behind: a further record is not
queued but dropped: logged, and counted as a failed record
(``paperclip_background_errors{stage="record"}``). Little is lost:
clients resend the conversation, so the dropped exchange's turns are indexed
with the session's next request; only a session's last answer can go unseen.

What runs on the pipeline's loop must not touch what belongs to the server's:
the compression model's calls go out over the server's HTTP clients, so
``home_calls`` sends each one back to the server's loop. A PostgreSQL pool
belongs to the loop that opened it, so only a SQLite store (reached through
its own threads from any loop) is served from this thread (``layer.py``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ..context.compressor import Complete
from .call import ChatCall, Reply
from .protocol import CompleteFor, Pipeline, Prepared

T = TypeVar("T")

RECORDS_AT_ONCE = 4
RECORDS_WAITING = 1000


class RecordDropped(Exception):
    """The record queue was full: this exchange is not recorded (see the module's docstring)."""


class PipelineThread:
    """An asyncio loop running on a thread of its own until ``close``."""

    def __init__(self, name: str = "paperclip-pipeline") -> None:
        self.loop = new_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    async def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on this thread's loop; cancelling the caller cancels it there too."""
        if asyncio.get_running_loop() is self.loop:
            return await work
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, self.loop))

    def call_soon(self, fn: Callable[..., object], *args: Any) -> None:
        self.loop.call_soon_threadsafe(fn, *args)

    @property
    def ident(self) -> int | None:
        return self._thread.ident

    def close(self, timeout_s: float = 10.0) -> None:
        """Cancel what still runs there (the server drained its records before), stop, join."""
        if not self._thread.is_alive():
            return
        done = asyncio.run_coroutine_threadsafe(_cancel_the_rest(), self.loop)
        try:
            done.result(timeout_s)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout_s)
            if not self._thread.is_alive():
                self.loop.close()


def new_loop() -> asyncio.AbstractEventLoop:
    """uvloop's when installed (as the server's is): its hand-offs from threads cost less."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


async def _cancel_the_rest() -> None:
    me = asyncio.current_task()
    rest = [t for t in asyncio.all_tasks() if t is not me]
    for task in rest:
        task.cancel()
    await asyncio.gather(*rest, return_exceptions=True)


class ThreadedPipeline:
    """``inner``'s prepare and record, each run on ``thread`` in one crossing; records bounded."""

    def __init__(
        self,
        inner: Pipeline,
        thread: PipelineThread,
        *,
        at_once: int = RECORDS_AT_ONCE,
        waiting: int = RECORDS_WAITING,
    ) -> None:
        self.inner = inner
        self.thread = thread
        self.limit = at_once + waiting
        self.backlog = 0  # records queued or running; counted on the server's loop
        self._slots = asyncio.Semaphore(at_once)  # used on the pipeline's loop only

    async def prepare(self, call: ChatCall) -> Prepared:
        return await self.thread.run(self.inner.prepare(call))

    async def record(self, call: ChatCall, prepared: Prepared, reply: Reply) -> None:
        if self.backlog >= self.limit:
            raise RecordDropped(f"recording is {self.backlog} exchanges behind: trace {call.trace_id} is not recorded")
        self.backlog += 1
        try:
            await self.thread.run(self._record(call, prepared, reply))
        finally:
            self.backlog -= 1

    async def _record(self, call: ChatCall, prepared: Prepared, reply: Reply) -> None:
        async with self._slots:
            await self.inner.record(call, prepared, reply)


async def beside(pipeline: Pipeline, work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` where ``pipeline`` runs: on its thread when it has one, else here.

    The edge hands a request's whole CPU phase over at once (parsing its body,
    preparing it, writing the body to forward), one crossing per request.
    """
    if isinstance(pipeline, ThreadedPipeline):
        return await pipeline.thread.run(work)
    return await work


def home_calls(complete_for: CompleteFor, home: asyncio.AbstractEventLoop) -> CompleteFor:
    """``complete_for`` whose calls, made from any loop, run on ``home`` (where its HTTP clients live)."""

    def on_home(settings: Any, upstream_key: str | None) -> Complete:
        send = complete_for(settings, upstream_key)

        async def complete(messages: list[dict[str, Any]]) -> str:
            async def there() -> str:
                return await send(messages)

            if asyncio.get_running_loop() is home:
                return await there()
            return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(there(), home))

        return complete

    return on_home
