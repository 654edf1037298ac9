"""The memory pipeline on an event loop of its own thread, so the server's loop stays free for sockets.

Reading a request (its JSON, its session), preparing it (token counting,
hashing the history, recall's search, fusion and packing) and recording it
(masking, tokenising, BM25 terms, extraction) are CPU work in many small steps between awaits of the store
and the embedder. On the server's loop, fifty clients' steps queue up one
behind the other, and ``/healthz`` waits behind all of them (385 ms at p99
under 50 streams). Here each request crosses to the pipeline's loop once to
be read and prepared (``beside``) and once to be recorded; the server's loop
only receives, relays and writes. The other thread still takes Python's GIL,
but the interpreter hands it to a waiting thread every
``sys.getswitchinterval()`` (set to 1 ms when the layer is served), so the
server's loop waits for the GIL, not behind a queue of other requests' work.

Recording is bounded: at most ``RECORDS_AT_ONCE`` records run at once, the
rest wait their turn in order (the client already has its answer: a waiting
record costs it nothing). Under sustained load recording can fall behind
the requests (each record indexes, extracts and compresses); when
``RECORDS_WAITING`` records are waiting, a new request waits before it is
prepared until one finishes: the memory layer slows new requests rather than
holding an ever longer queue or losing what was said. A request that found
no room within ``ROOM_WAIT_S`` goes out without memory (``X-Paperclip-Degraded:
memory_busy``), and its turns are indexed with the session's next request
(clients resend the conversation).

What runs on the pipeline's loop must not touch what belongs to the server's:
the compression model's calls go out over the server's HTTP clients, so
``home_calls`` sends each one back to the server's loop. A PostgreSQL pool
belongs to the loop that opened it, so only a SQLite store (reached from any
thread) is served from this thread (``memory_layer.py``), and its calls made here
run here, without a hand-off to the store's threads (``Database.serve_inline``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ..errors import MemoryBusy
from ..memory.extraction.extractor import Complete
from .chat_call import ChatCall, Reply
from .pipeline_protocol import CompleteFor, Pipeline, Prepared

log = logging.getLogger("paperclip.pipeline")
T = TypeVar("T")

RECORDS_AT_ONCE = 16
RECORDS_WAITING = 100
ROOM_WAIT_S = 5.0



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
        except TimeoutError:
            log.error("the pipeline's thread did not wind down within %.0f s; stopping it", timeout_s)
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
        room_wait_s: float = ROOM_WAIT_S,
    ) -> None:
        self.inner = inner
        self.thread = thread
        self.limit = at_once + waiting
        self.room_wait_s = room_wait_s
        # All three are used on the pipeline's loop only.
        self.backlog = 0  # records queued or running
        self._slots = asyncio.Semaphore(at_once)
        self._room = asyncio.Condition()

    async def prepare(self, call: ChatCall) -> Prepared:
        return await self.thread.run(self._prepare(call))

    async def record(self, call: ChatCall, prepared: Prepared, reply: Reply) -> None:
        await self.thread.run(self._record(call, prepared, reply))

    async def _prepare(self, call: ChatCall) -> Prepared:
        if self.backlog >= self.limit:
            try:
                async with asyncio.timeout(self.room_wait_s), self._room:
                    await self._room.wait_for(lambda: self.backlog < self.limit)
            except TimeoutError:
                raise MemoryBusy(f"{self.backlog} records are waiting") from None
        return await self.inner.prepare(call)

    async def _record(self, call: ChatCall, prepared: Prepared, reply: Reply) -> None:
        self.backlog += 1
        try:
            async with self._slots:
                await self.inner.record(call, prepared, reply)
        finally:
            self.backlog -= 1
            async with self._room:
                self._room.notify_all()


async def beside(pipeline: Pipeline | None, work: Coroutine[Any, Any, T]) -> T:
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

        async def complete(
            messages: list[dict[str, Any]], /, *, response_format: dict[str, Any] | None = None
        ) -> str:
            async def there() -> str:
                return await send(messages, response_format=response_format)

            if asyncio.get_running_loop() is home:
                return await there()
            return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(there(), home))

        return complete

    return on_home
