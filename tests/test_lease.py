"""The short lease renewed while work runs (proxy/store/lease.py), over both leases that use it:
the compression lock and the claim on a session's extraction cursor, on a real database file."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from proxy.store import Store, lease, open_store
from proxy.store.lease import Release, Take


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = open_store(str(tmp_path / "lease.db"), 16)
    yield store
    store.close()


def compression_lock(store: Store, owner: str) -> tuple[Take, Release]:
    async def take(ttl_s: float) -> bool:
        return await store.sessions.acquire("compress:t:s", owner, ttl_s)

    return take, lambda: store.sessions.release("compress:t:s", owner)


def extraction_claim(store: Store, owner: str) -> tuple[Take, Release]:
    async def take(ttl_s: float) -> bool:
        return await store.cursors.claim("t", "s", 0, owner, ttl_s)

    return take, lambda: store.cursors.release("t", "s", owner)


KINDS = {"compression_lock": compression_lock, "extraction_claim": extraction_claim}


@pytest.mark.parametrize("kind", list(KINDS))
async def test_work_that_outlasts_its_lease_keeps_it_while_it_runs(store: Store, kind: str) -> None:
    take, release = KINDS[kind](store, "worker")
    other, _ = KINDS[kind](store, "other")
    async with lease.held(kind, take, release, 0.3) as mine:
        assert mine
        for _ in range(8):  # 1.2 s: four times the lease, renewed every 0.1 s
            await asyncio.sleep(0.15)
            assert not await other(0.3), "taken over while its work ran"
    assert await other(0.3)  # released at the end


@pytest.mark.parametrize("kind", list(KINDS))
async def test_a_lease_whose_holder_died_is_taken_over_once_it_runs_out(store: Store, kind: str) -> None:
    dead, _ = KINDS[kind](store, "dead")
    take, release = KINDS[kind](store, "next")
    assert await dead(0.3)  # taken, never renewed: its process was killed
    async with lease.held(kind, take, release, 0.3) as mine:
        assert not mine
    await asyncio.sleep(0.35)
    async with lease.held(kind, take, release, 0.3) as mine:
        assert mine
