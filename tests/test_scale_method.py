"""bench/scale.py's method (bench/replica_windows.py): 1- and 3-replica windows interleaved in pairs, medians and the pairs' ratios."""

from __future__ import annotations

import statistics

from hypothesis import given
from hypothesis import strategies as st

from bench.replica_windows import arms, summary


@given(st.integers(min_value=1, max_value=20))
def test_every_pair_holds_one_window_of_each_and_the_order_alternates(samples: int) -> None:
    order = arms(samples)
    assert len(order) == 2 * samples
    pairs = [order[i:i + 2] for i in range(0, len(order), 2)]
    assert all(sorted(p) == [1, 3] for p in pairs)
    # 1, 3 / 3, 1 / 1, 3: each arm runs as often first as second (± one), so a drift over the run cancels.
    firsts = [p[0] for p in pairs]
    assert abs(firsts.count(1) - firsts.count(3)) <= 1


@given(st.lists(st.tuples(st.floats(1, 1000), st.floats(1, 1000)), min_size=1, max_size=9))
def test_the_summary_is_each_arms_median_and_the_ratio_of_each_pair(per_core: list[tuple[float, float]]) -> None:
    windows: list[dict[str, float]] = []
    order = arms(len(per_core))
    values = {1: [one for one, _ in per_core], 3: [three for _, three in per_core]}
    taken = {1: iter(values[1]), 3: iter(values[3])}
    for n in order:
        windows.append({"replicas": n, "rps_per_core": next(taken[n]), "rps": 1.0, "unit_us": 300.0 if n == 1 else 360.0})
    out = summary(windows)
    assert out["rps_per_core_1"] == statistics.median(values[1])
    assert out["rps_per_core_3"] == statistics.median(values[3])
    assert out["pairs"] == [three / one for one, three in per_core]
    assert out["windows"] == windows
    # A CPU second that bought 20% less work in the 3-replica windows: at equal speed, 20% more per core.
    assert out["pairs_at_equal_speed"] == [three / one * 1.2 for one, three in per_core]
