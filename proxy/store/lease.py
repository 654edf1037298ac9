"""A short lease held while work runs: renewed in the background, released at the end.

Both kinds of background work that must run once per session take one: the
compression lock (``SessionStore.acquire``) and the claim on a session's
extraction cursor (``ExtractionCursorStore.claim``). The lease is short
(``ttl_s``, seconds) so that a process killed mid-work frees it soon — after a
restart, or on another replica, the work is taken over within ``ttl_s`` — and
its holder renews it every third of that while it works, so long work is
never taken over while its process is alive. Taking a lease one already holds
renews it: that is the renewal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

log = logging.getLogger("paperclip.lease")

# How long a lease outlives a process killed mid-work. A third of it between
# renewals leaves room for a busy database to answer a renewal late.
TTL_S = 10.0

Take = Callable[[float], Awaitable[bool]]
"""Take (or renew) the lease for this many seconds; False when another holds it."""
Release = Callable[[], Awaitable[None]]


@contextlib.asynccontextmanager
async def held(name: str, take: Take, release: Release, ttl_s: float = TTL_S) -> AsyncIterator[bool]:
    """Yields whether the lease was taken; while it is held, it is renewed every ``ttl_s / 3``."""
    if not await take(ttl_s):
        yield False
        return
    renewing = asyncio.ensure_future(_renew(name, take, ttl_s))
    try:
        yield True
    finally:
        renewing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewing
        await release()


async def _renew(name: str, take: Take, ttl_s: float) -> None:
    while True:
        await asyncio.sleep(ttl_s / 3)
        try:
            if not await take(ttl_s):
                log.warning("lease %s was taken over while its work ran", name)
                return
        except Exception:  # a busy database: the next renewal may succeed before the lease runs out
            log.exception("renewing lease %s failed; it runs out in %.0f s", name, ttl_s)
