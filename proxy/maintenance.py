"""Lifecycle work (SPEC §5), hourly: expired items deleted, stale items archived, old traces pruned.

Hourly is plenty: expiry is also checked at retrieval time, so an expired item
never ranks even before the cleanup. "Stale" is each tenant's own
``memory.stale_days``; tenants derived from passthrough keys (and any rows of
a tenant no longer configured) get ``defaults.memory.stale_days``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from .config import Settings
from .metrics import Metrics
from .store import Store

log = logging.getLogger("paperclip.maintenance")

MAINTENANCE_EVERY_S = 3600.0
TRACE_RETENTION_S = 7 * 86400.0
STALE_IMPORTANCE = 0.3
DAY_S = 86400.0


@dataclass(frozen=True)
class StaleRule:
    """Archive items untouched since ``cutoff`` of the tenants ``only`` (None: all) except ``skip``."""

    cutoff: float
    only: tuple[str, ...] | None
    skip: tuple[str, ...] = ()


def stale_rules(settings: Settings, now: float) -> list[StaleRule]:
    """One rule per configured tenant, then the defaults' for every other tenant id."""
    configured = tuple(t.name for t in settings.tenants)
    rules = [StaleRule(now - t.memory.stale_days * DAY_S, (t.name,)) for t in settings.tenants]
    rules.append(StaleRule(now - settings.defaults.memory.stale_days * DAY_S, None, configured))
    return rules


async def run_maintenance(settings: Settings, store: Store, now: float | None = None) -> dict[str, int]:
    now = time.time() if now is None else now
    expired = await store.items.expire(dt.datetime.fromtimestamp(now, dt.UTC))
    archived = 0
    for rule in stale_rules(settings, now):
        archived += await store.items.archive_stale(
            rule.cutoff, STALE_IMPORTANCE, only=rule.only, skip=rule.skip
        )
    pruned = await store.traces.prune(TRACE_RETENTION_S)
    return {"expired": expired, "archived": archived, "traces_pruned": pruned}


async def maintain(
    settings: Settings,
    store: Callable[[], Store | None],
    metrics: Metrics,
    every_s: float = MAINTENANCE_EVERY_S,
) -> None:
    """Run maintenance every ``every_s`` once ``store()`` gives the opened store; never raises."""
    while True:
        await asyncio.sleep(every_s)
        opened = store()
        if opened is None:
            continue
        try:
            await run_maintenance(settings, opened)
        except Exception:
            log.exception("maintenance failed")
            metrics.background_errors.labels("maintenance").inc()
