"""When the replayed client sends each request: the eval's two clocks. Pure functions.

- ``dated``: each session at its ``session_N_date_time``, as the data set
  spreads a conversation over weeks and months; the questions a day after
  the last session.
- ``burst``: the whole history as fast as it comes, at the present time — a
  busy user's day or an agent's hour: one request a second from the moment
  the replay starts, the questions right after, whatever the data's dates.

A replay lists its requests and questions with their ``dated`` times, in the
order it sends them; ``at_clock`` gives the times it sends them at.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

ClockName = Literal["dated", "burst"]
CLOCKS: tuple[ClockName, ...] = ("dated", "burst")
# One request a second: faster than a person types, as slow as an agent's loop may be.
BURST_STEP_S = 1.0


def burst_times(count: int, start: float, step: float = BURST_STEP_S) -> list[float]:
    """``count`` times ``step`` apart from ``start``: a history replayed as fast as it comes."""
    return [start + i * step for i in range(count)]


def at_clock(clock: ClockName, dated: Sequence[float], start: float) -> list[float]:
    """The send times of events whose ``dated`` times are given, in sending order.

    ``dated`` returns them as they are; ``burst`` keeps only their order and
    sends them one ``BURST_STEP_S`` apart from ``start`` (the present time).
    """
    if clock == "dated":
        return list(dated)
    return burst_times(len(dated), start)
