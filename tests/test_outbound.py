"""``proxy.outbound``: which proxy reaches an origin, ``NO_PROXY`` as curl and Go read it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.config.outbound import OutboundProxy, ProxyRules, bypassed, parse_no_proxy, parse_proxy

label = st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9]", fullmatch=True)
domain = st.lists(label, min_size=1, max_size=4).map(".".join)
port = st.integers(1, 65535)


@given(domain, port)
def test_star_bypasses_everything_and_nothing_bypasses_nothing(host: str, p: int) -> None:
    assert bypassed(("*",), host, p)
    assert not bypassed((), host, p)


@given(domain, domain, port)
def test_an_entry_matches_its_host_and_subdomains_only(sub: str, name: str, p: int) -> None:
    for entry in (name, "." + name, "*." + name, name.upper()):
        (entry_norm,) = parse_no_proxy(entry)
        assert bypassed((entry_norm,), name, p)
        assert bypassed((entry_norm,), f"{sub}.{name}", p)
    assert not bypassed((name,), "x" + name, p)  # a suffix without a dot boundary is another host


@given(domain, port, port)
def test_a_port_in_an_entry_restricts_it_to_that_port(name: str, p: int, other: int) -> None:
    assert bypassed((f"{name}:{p}",), name, p)
    assert bypassed((f"{name}:{p}",), name, other) == (p == other)


@given(st.ip_addresses(v=4))
def test_cidr_entries_match_the_addresses_inside(address: object) -> None:
    text = str(address)
    first = text.split(".")[0]
    assert bypassed((f"{first}.0.0.0/8",), text, 443)
    assert bypassed((text,), text, 443)
    assert not bypassed((f"{first}.0.0.0/8",), "example.com", 443)


def test_ipv6_and_mixed_lists() -> None:
    entries = parse_no_proxy("localhost, 127.0.0.1 ::1,[fd00::1]:8443,.corp")
    assert entries == ("localhost", "127.0.0.1", "::1", "[fd00::1]:8443", ".corp")
    assert bypassed(entries, "[::1]", 80) and bypassed(entries, "fd00::1", 8443)
    assert not bypassed(entries, "fd00::1", 443)
    assert bypassed(entries, "llm.corp", 443) and not bypassed(entries, "corp.example", 443)


def test_rules_pick_the_proxy_by_scheme() -> None:
    web, secure = OutboundProxy("web", 80), OutboundProxy("secure", 3128)
    rules = ProxyRules(http=web, https=secure, no_proxy=("direct.example",))
    assert rules.for_origin("https", "api.openai.com", 443) is secure
    assert rules.for_origin("http", "vllm.local", 8000) is web
    assert rules.for_origin("https", "direct.example", 443) is None
    assert ProxyRules(http=web).for_origin("https", "api.openai.com", 443) is None


def test_parse_proxy() -> None:
    assert parse_proxy("proxy.corp:3128") == OutboundProxy("proxy.corp", 3128)
    assert parse_proxy("http://proxy.corp") == OutboundProxy("proxy.corp", 80)
    v6 = parse_proxy("http://us%40er:p%3Ass@[::1]:8080/")
    assert (v6.host, v6.url, v6.authorization) == ("::1", "http://[::1]:8080", "Basic dXNAZXI6cDpzcw==")
    for bad in ("socks5://h:1080", "https://h:443", "http://h:port", "http://h:1/path", "http://"):
        with pytest.raises(ValueError):
            parse_proxy(bad)
