"""Lifecycle work (SPEC §5), hourly: expired items deleted, stale items archived, traces past ``traces.retention_days`` pruned.

Hourly is plenty: expiry is also checked at retrieval time, so an expired item
never ranks even before the cleanup. "Stale" is each tenant's own
``memory.stale_days``; tenants derived from passthrough keys (and any rows of
a tenant no longer configured) get ``defaults.memory.stale_days``.

Replicas on one database clean up once per period between them, not once
each: a run first takes the ``maintenance`` lease for the whole period and
never releases it. The replica holding it renews it at its next run; the
others find it held and skip, until a period passes without its holder (a
replica that stopped): then the next to ask takes it over.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from ..config import Settings
from ..metrics import Metrics
from ..store import Store

log = logging.getLogger("paperclip.maintenance")

MAINTENANCE_EVERY_S = 3600.0
STALE_IMPORTANCE = 0.3
DAY_S = 86400.0
MAINTENANCE_LEASE = "maintenance"


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
    pruned = await store.traces.prune(settings.traces.retention_days * DAY_S)
    return {"expired": expired, "archived": archived, "traces_pruned": pruned}


async def run_if_due(settings: Settings, store: Store, owner: str, every_s: float) -> dict[str, int] | None:
    """Run maintenance unless another replica holds this period's lease (then None)."""
    if not await store.sessions.acquire(MAINTENANCE_LEASE, owner, every_s):
        return None
    return await run_maintenance(settings, store)


async def maintain(
    settings: Settings,
    store: Callable[[], Store | None],
    metrics: Metrics,
    every_s: float = MAINTENANCE_EVERY_S,
) -> None:
    """Every ``every_s``, once ``store()`` gives the opened store, run maintenance if due; never raises."""
    owner = "maintenance-" + uuid.uuid4().hex
    while True:
        await asyncio.sleep(every_s)
        opened = store()
        if opened is None:
            continue
        try:
            await run_if_due(settings, opened, owner, every_s)
        except Exception:
            log.exception("maintenance failed")
            metrics.background_errors.labels("maintenance").inc()
