"""One authenticated admin call, and the memory layer's admin view it acts through.

Shared by the admin API's handlers and the inspector's pages: both act with
a ``Grant`` on the data ``memory_admin`` reaches.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from starlette.requests import Request

from ...memory.curation.memory_admin import MemoryAdmin, finds_restatements
from ...memory.curation.turn_search import turn_search
from ...memory.recall.recall import turn_marks
from ...tenancy import Grant, Tenant
from ..runtime import Runtime

# A forget first lets the recording of the user's finished requests land, so
# none of it is written after the delete; bounded, as traffic never stops.
SETTLE_S = 10.0


@dataclass(frozen=True)
class AdminCall:
    """One authenticated admin call: its request, who may do what, and the running app."""

    request: Request
    grant: Grant | None  # None: an operator asking about every tenant, or a public path
    runtime: Runtime

    @property
    def tenant(self) -> Tenant:
        assert self.grant is not None, "only wide paths are called without a tenant"
        return self.grant.tenant

    @property
    def admin(self) -> MemoryAdmin:
        return memory_admin(self.runtime)


def memory_admin(runtime: Runtime) -> MemoryAdmin:
    """The admin view of the serving memory layer; 503 while it loads, or once it is off."""
    memory = runtime.memory.serving_layer()
    return MemoryAdmin(
        memory.store, memory.fragments.embed, [memory.forget_scope], lambda: _settle(runtime), memory.items,
        turn_search(memory.fragments), finds_restatements(memory.fragments.embedder.name),
        turn_marks(memory.fragments),
    )


async def _settle(runtime: Runtime) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(SETTLE_S):
            await runtime.background.drain()
