"""Opening the memory layer: database, embedding model, prompts — off the event loop."""

from __future__ import annotations

import asyncio
import gc
import logging

from ..config import Settings
from ..errors import MemoryNotReady
from ..memory.recall.rerank import load_rerankers
from ..memory.search import bm25
from ..memory.search.embedder import Embedder, load_embedder
from ..pipeline.bounded_pipeline import BoundedPipeline
from ..pipeline.chat_call import ChatCall, Reply
from ..pipeline.memory_layer import assemble
from ..prompts import Prompts
from ..store import Store, connect, urls
from ..tokens import encoding_for
from ..upstream.compression_client import compression_calls
from .readiness import FileIdentity, identity, watch_store
from .runtime import Ready, Runtime, Starting

log = logging.getLogger("paperclip.startup")

# A database that does not answer at start is tried again this often, doubling up to the max.
CONNECT_RETRY_S = 1.0
CONNECT_RETRY_MAX_S = 30.0
YOUNG_OBJECTS = 20_000  # the collector's first threshold once serving (Python's default: 700)


async def start_memory(runtime: Runtime, embedder: Embedder | None = None) -> None:
    """Load the memory layer and let it join; on failure the proxy goes on as a plain proxy."""
    settings = runtime.settings
    try:
        prompts = Prompts.load()
        if embedder is None:
            embedder = await asyncio.to_thread(
                load_embedder,
                settings.embedding.model,
                backend=settings.embedding.backend,
                cache_dir=settings.embedding.cache_dir,
            )
        await asyncio.to_thread(_warm_up)
        configured = [t.memory.rerank for t in (settings.defaults, *settings.tenants)]
        rerankers = await asyncio.to_thread(load_rerankers, configured)
    except Exception as exc:
        log.exception("the memory layer could not start; serving as a plain proxy")
        runtime.memory.offline(f"the memory layer could not start: {exc}")
        return
    store = await _connected(runtime, settings.storage.url, embedder.dim)
    try:
        layer = assemble(
            store, embedder, prompts, runtime.metrics, compression_calls(runtime.upstreams), rerankers,
            trace_candidates=settings.traces.candidates,
            store_timeout_s=settings.storage.timeout_s,
        )
        served = BoundedPipeline(layer.pipeline, on_covered=runtime.metrics.records_covered.inc)
        runtime.metrics.records.set_function(lambda: served.backlog)
        runtime.memory.ready(served, layer, database_file(settings))
    except Exception as exc:
        log.exception("the memory layer could not start; serving as a plain proxy")
        await store.aclose()
        runtime.memory.offline(f"the memory layer could not start: {exc}")
        return
    log.info("memory layer ready (embedding %s, dim %d)", settings.embedding.model, embedder.dim)
    runtime.background.spawn("record", record_held(runtime))


async def _connected(runtime: Runtime, url: str, dim: int) -> Store:
    """The store, once its database answers: a database down when the proxy starts (its container still
    starting, a network not up yet) is tried again, ``CONNECT_RETRY_S`` apart, doubling to
    ``CONNECT_RETRY_MAX_S``; meanwhile requests go out plainly (SPEC §9: it recovers without a restart)."""
    delay = CONNECT_RETRY_S
    while True:
        try:
            return await connect(url, dim)
        except Exception as exc:
            if runtime.memory.state == Starting():
                log.exception("the memory layer could not start: the database does not answer; trying again")
            else:
                log.warning("the database still does not answer (%s); trying again in %.0f s", exc, delay)
            runtime.memory.waiting(f"the memory layer could not start: {exc}; trying again every {delay:.0f} s")
        await asyncio.sleep(delay)
        delay = min(delay * 2, CONNECT_RETRY_MAX_S)


def hold(runtime: Runtime, call: ChatCall, reply: Reply, body_size: int) -> None:
    """A turn forwarded while the memory layer started: held to be recorded once it is ready."""
    held = runtime.memory.held.hold(call, reply, body_size)
    runtime.metrics.held_turns.labels("held" if held else "dropped").inc()
    if not held and not runtime.memory.held.full_logged:
        runtime.memory.held.full_logged = True
        log.warning(
            "%d turns forwarded while the memory layer starts are waiting (%d bytes): later ones are not held; "
            "their words are recorded with their session's next request", len(runtime.memory.held),
            runtime.memory.held.held_bytes,
        )
    if isinstance(runtime.memory.state, Ready):  # it became ready while this one was relayed
        runtime.background.spawn("record", record_held(runtime))


async def record_held(runtime: Runtime) -> None:
    """Record the turns forwarded while the memory layer started, one after the other, in their order."""
    state = runtime.memory.state
    if not isinstance(state, Ready) or state.layer is None:
        return
    held = runtime.memory.held.release()
    if held:
        log.info("recording %d turns forwarded while the memory layer started", len(held))
    for turn in held:
        try:
            prepared = await state.layer.pipeline.forwarded(turn.call, MemoryNotReady.reason)
            await state.pipeline.record(turn.call, prepared, turn.reply)
        except Exception:
            log.exception("a turn forwarded while the memory layer started could not be recorded")
            runtime.metrics.background_errors.labels("record").inc()


async def serve_memory(runtime: Runtime, embedder: Embedder | None = None, *, freeze_heap: bool = False) -> None:
    """Open the memory layer, then watch its database until shutdown (the app's lifespan task; ``readiness``).

    ``freeze_heap`` (``paperclip serve``): once the model and the indexes are
    loaded, move everything alive to the collector's permanent generation.
    Those objects live as long as the process, yet every full collection
    walked them all, stopping every thread (the server's loop too) for tens
    of ms under load (figures in docs/hardening.md, "Under load"). And the
    young generation is collected after ``YOUNG_OBJECTS`` new objects, not
    700: a request's objects die by reference counting, so at 700 the
    collector ran ~4 times a second under load to find little, each time
    stopping every thread.
    """
    await start_memory(runtime, embedder)
    if freeze_heap:
        settle_heap()
        log.info(
            "heap frozen after start: %d objects, the young generation collected after %d new ones",
            gc.get_freeze_count(), gc.get_threshold()[0],
        )
    await watch_store(runtime)


def database_file(settings: Settings) -> FileIdentity | None:
    """The SQLite file just opened, to watch (a PostgreSQL pool reconnects: nothing to watch)."""
    return identity(urls.sqlite_path(settings.storage.url)) if urls.is_sqlite(settings.storage.url) else None


def settle_heap() -> None:
    """What is alive now joins the collector's permanent generation; the young one is collected less often."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_OBJECTS, *gc.get_threshold()[1:])


def _warm_up() -> None:
    encoding_for(None)
    bm25.warm_up()
