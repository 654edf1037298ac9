"""A lease held while work runs: renewed in the background, released at the end.

The lease is short (``ttl_s``) so that a replica that dies mid-work frees it
soon — another replica takes the work over once it has run out — and the
holder renews it every third of that while it works, so a long compression
is never taken over while its replica is alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Protocol

log = logging.getLogger("paperclip.lease")


class Leases(Protocol):
    async def acquire(self, name: str, owner: str, ttl_s: float) -> bool: ...
    async def release(self, name: str, owner: str) -> None: ...


@contextlib.asynccontextmanager
async def held(leases: Leases, name: str, owner: str, ttl_s: float) -> AsyncIterator[bool]:
    """Yields whether ``owner`` got the lease; while it is held, it is renewed every ``ttl_s / 3``."""
    if not await leases.acquire(name, owner, ttl_s):
        yield False
        return
    renewing = asyncio.ensure_future(_renew(leases, name, owner, ttl_s))
    try:
        yield True
    finally:
        renewing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewing
        await leases.release(name, owner)


async def _renew(leases: Leases, name: str, owner: str, ttl_s: float) -> None:
    while True:
        await asyncio.sleep(ttl_s / 3)
        try:
            if not await leases.acquire(name, owner, ttl_s):
                log.warning("lease %s was taken over while its work ran", name)
                return
        except Exception:
            log.exception("renewing lease %s failed; it will run out in %.0f s", name, ttl_s)
