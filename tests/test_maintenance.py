"""Maintenance archives each tenant's stale items by that tenant's own ``memory.stale_days``."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import numpy as np

from proxy import config
from proxy.server.maintenance import DAY_S, run_if_due, run_maintenance, stale_rules
from proxy.store import Store, open_postgres, open_store, urls
from proxy.store.records import ItemRow, ItemWrite, NewItem

DIM = 8
TENANTS = ("acme", "globex", "key-0123456789abcdef01234567")  # the last: a passthrough-derived tenant


def settings(tmp_path: Path) -> config.Settings:
    return config.from_dict(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'm.db'}"},
            "defaults": {"upstream": {"base_url": "http://127.0.0.1:9/v1"}, "memory": {"stale_days": 180}},
            "tenants": {
                "acme": {"api_keys": ["pk-a"], "memory": {"stale_days": 30}},
                "globex": {"api_keys": ["pk-g"]},
            },
        },
        env={},
    )


def item(content: str, importance: float) -> NewItem:
    return NewItem(
        type="preference", key=content, content=content, terms=content, importance=importance,
        confidence=0.7, source="user-stated", expires_at=None, expires=None, turns=(), fragment_hashes=(),
    )


def insert(active: list[tuple[ItemRow, np.ndarray]]) -> ItemWrite:
    return ItemWrite()  # a new item, superseding nothing


async def statuses(store: Store) -> dict[str, set[str]]:
    rows = {t: await store.items.all(t, "u", include_inactive=True) for t in TENANTS}
    return {t: {r.status for r in found} for t, found in rows.items()}


def test_each_tenant_is_archived_by_its_own_stale_days(tmp_path: Path) -> None:
    st = settings(tmp_path)

    async def scenario() -> list[dict[str, set[str]]]:
        store = open_store(urls.sqlite_path(st.storage.url), DIM)
        try:
            for tenant in TENANTS:
                for content, importance in (("likes tea", 0.1), ("is a pilot", 0.9)):
                    vector = np.ones(DIM, np.float32)
                    await store.items.remember(tenant, "u", None, item(content, importance), vector, insert)
            seen = []
            for days in (29, 31, 181):
                await run_maintenance(st, store, now=time.time() + days * DAY_S)
                seen.append(await statuses(store))
            return seen
        finally:
            store.close()

    day29, day31, day181 = asyncio.run(scenario())
    assert day29 == {t: {"active"} for t in TENANTS}
    # acme's 30 days are honoured; globex and the passthrough tenant keep the defaults' 180.
    assert day31 == {"acme": {"active", "archived"}, "globex": {"active"}, TENANTS[2]: {"active"}}
    # Important items are never archived as stale.
    assert day181 == {t: {"active", "archived"} for t in TENANTS}


def test_traces_are_kept_for_traces_retention_days(tmp_path: Path) -> None:
    def kept_after(retention: dict[str, float]) -> set[str]:
        st = config.from_dict({"storage": {"url": f"sqlite:///{tmp_path / 'r.db'}"}, "traces": retention}, env={})

        async def scenario() -> set[str]:
            store = open_store(urls.sqlite_path(st.storage.url), DIM)
            try:
                for trace, age_days in (("hours", 0.5), ("days", 2.0), ("weeks", 8.0)):
                    await store.traces.save("acme", "u", "s", trace, {"trace": trace})
                    await store.db.write(lambda c, t=trace, a=age_days: c.execute(
                        "UPDATE traces SET created = created - ? WHERE id = ?", (a * DAY_S, t)
                    ))
                await run_maintenance(st, store)
                return {t for t in ("hours", "days", "weeks") if await store.traces.get("acme", t) is not None}
            finally:
                store.close()
                (tmp_path / "r.db").unlink()

        return asyncio.run(scenario())

    assert config.Traces().retention_days == 7
    assert kept_after({}) == {"hours", "days"}
    assert kept_after({"retention_days": 1}) == {"hours"}
    assert kept_after({"retention_days": 30}) == {"hours", "days", "weeks"}


def test_the_rules_cover_every_tenant_once(tmp_path: Path) -> None:
    st = settings(tmp_path)
    rules = stale_rules(st, now=1000 * DAY_S)
    assert [(r.only, r.skip, r.cutoff / DAY_S) for r in rules] == [
        (("acme",), (), 970.0),
        (("globex",), (), 820.0),
        (None, ("acme", "globex"), 820.0),
    ]


async def test_replicas_on_one_database_clean_up_once_per_period(tmp_path: Path, pg_url: str) -> None:
    st = settings(tmp_path)
    replicas = [await open_postgres(pg_url, DIM), await open_postgres(pg_url, DIM)]  # a pool each

    async def tick(i: int) -> bool:
        return await run_if_due(st, replicas[i], f"replica-{i}", 1.5) is not None

    try:
        together = await asyncio.gather(tick(0), tick(1))  # their hourly timers fire at the same moment
        winner = together.index(True)
        loser = 1 - winner
        loser_within_the_period = await tick(loser)
        await asyncio.sleep(1.6)  # a period passes without the winner running (it stopped)
        loser_after_it = await tick(loser)
        winner_back = await tick(winner)
    finally:
        for r in replicas:
            await r.aclose()
    assert sorted(together) == [False, True]
    assert not loser_within_the_period
    assert loser_after_it and not winner_back
