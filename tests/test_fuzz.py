"""Fuzzing the proxy over a real loopback server (issues 14, 26): no 500s of its own, every error in the envelope.

Bounded to about a minute in all; ``bench/fuzz.py`` runs the same inputs
10,000 times. The upstream behind it never answers 500, so any 500 is the
proxy's; every 4xx/5xx must be in OpenAI's envelope; the proxy must be alive
after. The upstream's side is fuzzed too: a hostile upstream on a real socket
answers each request with a drawn status line, headers, framing and encoding.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import Proxy, base_config
from tests.fuzz_inputs import (
    Probe,
    Reply,
    admin_probes,
    chat_probes,
    hostile_tenant,
    judge,
    judge_reply,
    path_probes,
    send,
    send_for_reply,
    upstream_replies,
)
from tests.hostile_upstream import HostileUpstream

FUZZ = settings(
    max_examples=300, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture
def fuzzed(make_proxy: Callable[..., Proxy]) -> Iterator[httpx.Client]:
    proxy = make_proxy()
    with httpx.Client(base_url=proxy.url, timeout=30) as client:
        yield client
    settled(proxy)


def settled(proxy: Proxy) -> None:
    """Alive after it all, and the recording after each response never failed either."""
    with httpx.Client(base_url=proxy.url, timeout=30) as client:
        assert client.get("/healthz").status_code == 200
    proxy.drain()
    failures = proxy.runtime.metrics.background_errors.collect()[0].samples
    assert [s for s in failures if s.name.endswith("_total") and s.value] == []


@pytest.fixture
def fuzzed_upstream(
    make_proxy: Callable[..., Proxy], upstream_url: str, tmp_path: Path
) -> Iterator[tuple[httpx.Client, list[Reply]]]:
    playing: list[Reply] = []  # the reply the hostile upstream plays to every request
    with HostileUpstream(lambda request: playing[0].steps) as hostile:
        raw = base_config(upstream_url, tmp_path / "p.db")
        raw["tenants"]["hostile"] = hostile_tenant(upstream_url, hostile.base_url)
        proxy = make_proxy(raw)
        with httpx.Client(base_url=proxy.url, timeout=20) as client:
            yield client, playing
        settled(proxy)


def check(client: httpx.Client, probe: Probe) -> None:
    problem = judge(probe, send(client, probe))
    assert problem is None, problem


@FUZZ
@given(probe=chat_probes())
def test_fuzzed_chat_requests(fuzzed: httpx.Client, probe: Probe) -> None:
    check(fuzzed, probe)


@FUZZ
@given(probe=path_probes())
def test_fuzzed_paths_and_methods(fuzzed: httpx.Client, probe: Probe) -> None:
    check(fuzzed, probe)


@FUZZ
@given(probe=admin_probes())
def test_fuzzed_admin_calls(fuzzed: httpx.Client, probe: Probe) -> None:
    check(fuzzed, probe)


@settings(FUZZ, max_examples=250)
@given(reply=upstream_replies())
def test_fuzzed_upstream_replies(fuzzed_upstream: tuple[httpx.Client, list[Reply]], reply: Reply) -> None:
    client, playing = fuzzed_upstream
    playing[:] = [reply]
    problem = judge_reply(reply, *send_for_reply(client, reply))
    assert problem is None, problem


@settings(FUZZ, max_examples=40)
@given(size=st.integers(0, 3 * 1024 * 1024), char=st.sampled_from(["a", "é", "世", "🎉", "\\ud800", "\\n"]))
def test_fuzzed_sizes(fuzzed: httpx.Client, size: int, char: str) -> None:
    text = char * (size // max(len(char.encode()), 1))
    body = ('{"model": "m", "messages": [{"role": "user", "content": "' + text + '"}]}').encode()
    check(fuzzed, Probe("POST", "/v1/chat/completions", body, {"authorization": b"Bearer pk-test-acme"}))
