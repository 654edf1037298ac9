"""CPU work that grows with what a client sent: on the event loop when small, on a worker thread when large.

The proxy serves every socket from one event loop (docs/decisions/0012-one-event-loop.md),
so no step may hold it long. Parsing a body, describing new messages, analysing a query,
masking and tokenising new turns: each is a few µs for a chat turn and hundreds of ms for a
megabyte. ``off_loop(size, fn, *args)`` runs ``fn`` where it costs least: inline up to
``INLINE_BYTES`` of input (less than the hop to a thread), else on a worker thread — whose
Python still takes the GIL, but gives it back to the loop at every switch interval, so the
loop's other work goes on meanwhile.

``fn`` must be safe on another thread: it reads its arguments and writes only what it returns.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

# Under this many bytes of input, the work costs less than the hop to a thread.
INLINE_BYTES = 64 * 1024


async def off_loop(size: int, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, on a worker thread when ``size`` (the bytes it works through) is over ``INLINE_BYTES``."""
    return fn(*args) if size <= INLINE_BYTES else await asyncio.to_thread(fn, *args)
