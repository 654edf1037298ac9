"""When a session whose compression keeps failing may try again.

A compression model that is down would otherwise be asked twice (an attempt
and its retry) by every request past the watermark, forever. One failure is
retried at the next request (a blip must not leave a session uncompressed);
from the second failure in a row on, the session waits 2, 4, 8 … seconds, at
most ``MAX_DELAY_S``, before it tries again. A success clears the slate.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

MAX_DELAY_S = 300.0
MAX_SESSIONS = 10_000  # failing sessions remembered; the oldest are forgotten first


def retry_delay_s(failures: int) -> float:
    """Seconds to wait after ``failures`` consecutive failures before the next attempt."""
    if failures <= 1:
        return 0.0
    # min() before the power: 2.0 ** 10_000 overflows a float.
    return min(2.0 ** min(failures - 1, 16), MAX_DELAY_S)


@dataclass(frozen=True)
class Failing:
    reason: str  # what X-Paperclip-Degraded says meanwhile
    failures: int  # consecutive failures
    since: float  # the clock's reading at the last failure

    def retry_at(self) -> float:
        return self.since + retry_delay_s(self.failures)


class Backoff:
    """Per-session failure counts of one process (each replica backs off on its own)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._failing: dict[Hashable, Failing] = {}

    def allows(self, key: Hashable) -> bool:
        """May the session try to compress now?"""
        failing = self._failing.get(key)
        return failing is None or self.clock() >= failing.retry_at()

    def reason(self, key: Hashable) -> str | None:
        """Why the session's compression is failing, or None when it is not."""
        failing = self._failing.get(key)
        return failing.reason if failing else None

    def failed(self, key: Hashable, reason: str) -> None:
        before = self._failing.pop(key, None)
        self._failing[key] = Failing(reason, (before.failures if before else 0) + 1, self.clock())
        while len(self._failing) > MAX_SESSIONS:
            del self._failing[next(iter(self._failing))]

    def succeeded(self, key: Hashable) -> None:
        self._failing.pop(key, None)
