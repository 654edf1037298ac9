"""The compression backoff's rule (proxy/context/backoff.py), as properties."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from proxy.context.backoff import MAX_DELAY_S, MAX_SESSIONS, Backoff, retry_delay_s


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@given(st.integers(min_value=-5, max_value=100_000))
def test_the_delay_grows_by_doubling_up_to_five_minutes(failures: int) -> None:
    delay = retry_delay_s(failures)
    assert 0 <= delay <= MAX_DELAY_S == 300
    assert retry_delay_s(failures + 1) >= delay
    if failures <= 1:
        assert delay == 0  # a single failure is retried at the very next request
    elif delay < MAX_DELAY_S:
        assert delay == 2 ** (failures - 1)
        assert retry_delay_s(failures + 1) == min(2 * delay, MAX_DELAY_S)


# An event: ("fail", 0) | ("ok", 0) | ("wait", seconds).
events = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["fail", "ok"]), st.just(0.0)),
        st.tuples(st.just("wait"), st.floats(min_value=0, max_value=400)),
    ),
    max_size=40,
)


@given(events)
def test_a_session_may_try_exactly_when_its_streak_has_waited_long_enough(history: list[tuple[str, float]]) -> None:
    clock = Clock()
    backoff = Backoff(clock)
    streak, last = 0, 0.0  # the model the backoff must agree with
    for kind, seconds in history:
        if kind == "fail":
            backoff.failed("s", "compression_failed")
            streak, last = streak + 1, clock.now
        elif kind == "ok":
            backoff.succeeded("s")
            streak = 0
        else:
            clock.now += seconds
        assert backoff.allows("s") == (streak == 0 or clock.now >= last + retry_delay_s(streak))
        assert backoff.reason("s") == ("compression_failed" if streak else None)
        assert backoff.allows("other") and backoff.reason("other") is None


def test_it_remembers_a_bounded_number_of_failing_sessions() -> None:
    backoff = Backoff(Clock())
    for n in range(MAX_SESSIONS + 10):
        backoff.failed(n, "compression_failed")
    assert backoff.reason(0) is None  # the oldest are forgotten
    assert backoff.reason(MAX_SESSIONS + 9) == "compression_failed"
