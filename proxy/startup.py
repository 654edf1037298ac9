"""Opening the memory layer: database, embedding model, prompts — off the event loop."""

from __future__ import annotations

import asyncio
import logging

from .context.engine import ContextEngine
from .engine import MemoryPipeline
from .memory import textindex
from .memory.embedder import Embedder, load_embedder
from .memory.index import FragmentIndex
from .memory.items import Extractor, ItemIndex
from .pipeline import ChatCall, Prepared
from .prompts import Prompts
from .readiness import take_memory_offline, watch_database
from .relay import Outcome
from .services import Services
from .store import open_store
from .tokens import TokenCounter, encoding_for

log = logging.getLogger("paperclip.startup")


class NotReady(Exception):
    reason = "starting"


class StartingPipeline:
    """Stands in until the memory layer is loaded: every request degrades to plain forwarding."""

    async def prepare(self, call: ChatCall) -> Prepared:
        raise NotReady("the memory layer is still loading")

    async def record(self, call: ChatCall, prepared: Prepared, outcome: Outcome) -> None:
        return None


async def start_memory(services: Services, embedder: Embedder | None = None) -> None:
    settings = services.settings
    try:
        prompts = Prompts.load()
        if embedder is None:
            embedder = await asyncio.to_thread(load_embedder, settings.embedding_model)
        services.embedder = embedder
        await asyncio.to_thread(_warm_up)
        store = await asyncio.to_thread(open_store, settings.sqlite_path, embedder.dim)
        services.store = store
    except Exception as exc:
        log.exception("the memory layer could not start; serving as a plain proxy")
        take_memory_offline(services, f"the memory layer could not start: {exc}")
        return
    counter = TokenCounter(None)
    index = FragmentIndex(store.fragments, embedder, counter)
    services.pipeline = MemoryPipeline(
        context=ContextEngine(store.sessions, services.metrics),
        index=index,
        items=ItemIndex(store.items),
        traces=store.traces,
        prompts=prompts,
        upstreams=services.upstreams,
        metrics=services.metrics,
        extractor=Extractor(store.items, store.fragments, prompts, index.embed, services.metrics),
    )
    # Ready only once requests can use it: /readyz turns 200 here.
    services.ready.update(database=True, embedding=True)
    log.info("memory layer ready (embedding %s, dim %d)", settings.embedding_model, embedder.dim)


async def serve_memory(services: Services, embedder: Embedder | None = None) -> None:
    """Open the memory layer, then watch its database until shutdown (the app's lifespan task)."""
    await start_memory(services, embedder)
    if services.store is not None and services.problem is None:
        await watch_database(services, services.settings.sqlite_path)


def _warm_up() -> None:
    encoding_for(None)
    textindex.warm_up()


# Lifecycle work (SPEC §5): expired items deleted, stale low-importance items
# archived, old traces pruned. Hourly is plenty: expiry is also checked at
# retrieval time, so an expired item never ranks even before the cleanup.
MAINTENANCE_EVERY_S = 3600.0
TRACE_RETENTION_S = 7 * 86400.0
STALE_IMPORTANCE = 0.3


async def maintain(services: Services, every_s: float = MAINTENANCE_EVERY_S) -> None:
    while True:
        await asyncio.sleep(every_s)
        store = services.store
        if store is None:
            continue
        try:
            await run_maintenance(services)
        except Exception:
            log.exception("maintenance failed")
            services.metrics.background_errors.labels("maintenance").inc()


async def run_maintenance(services: Services) -> dict[str, int]:
    import datetime as dt
    import time

    store = services.store
    now = dt.datetime.now(dt.UTC)
    expired = await store.items.expire(now)
    stale_days = services.settings.defaults.memory.stale_days
    archived = await store.items.archive_stale(time.time() - stale_days * 86400.0, STALE_IMPORTANCE)
    pruned = await store.traces.prune(TRACE_RETENTION_S)
    return {"expired": expired, "archived": archived, "traces_pruned": pruned}
