"""Paperclip's own keys and cookies never reach the upstream, in any header (SPEC §9); who reads /metrics."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import ADMIN_KEY, PROXY_KEY, UPSTREAM_KEY, Proxy
from tests.fake_upstream import FakeUpstream

OPERATOR_KEY = "op-test-operator-key"
METRICS_KEY = "mk-test-scrape-key-123"
OWN_KEY = "sk-user-own-openai-key-0123456789abcdef"
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def keyed(make_proxy: Callable[..., Proxy]) -> Callable[..., Proxy]:
    def make(**overrides: object) -> Proxy:
        return make_proxy(server={"admin_keys": [OPERATOR_KEY], "metrics_keys": [METRICS_KEY]}, **overrides)

    return make


def sent(upstream: FakeUpstream, name: str) -> list[str]:
    return [r.headers[name] for r in upstream.requests if name in r.headers]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/embeddings"])
def test_keys_in_other_headers_and_paperclip_cookies_are_not_forwarded(
    keyed: Callable[..., Proxy], upstream: FakeUpstream, path: str
) -> None:
    proxy = keyed()
    cookies = (f"paperclip_ui=sid123; session=abc; token={ADMIN_KEY}; Paperclip_UI_x=1; near={PROXY_KEY[:-1]}; "
               f"__Host-paperclip_ui=z; m={METRICS_KEY}; op=\"{OPERATOR_KEY}\"; =paperclip_ui=sid123")
    headers = {"x-api-key": ADMIN_KEY, "api-key": OPERATOR_KEY, "cookie": cookies}
    with proxy.http() as http:
        assert http.post(path, json=CHAT, headers=headers).status_code == 200
    [seen] = upstream.requests
    assert seen.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert "x-api-key" not in seen.headers and "api-key" not in seen.headers
    assert seen.headers["cookie"] == "session=abc"
    everything = " ".join(seen.headers.values())
    for secret in (PROXY_KEY, ADMIN_KEY, OPERATOR_KEY, METRICS_KEY, "sid123"):
        assert secret not in everything


def test_only_paperclip_cookies_gone_means_no_cookie_header(keyed: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    proxy = keyed()
    with proxy.http() as http:
        http.post("/v1/chat/completions", json=CHAT, headers={"cookie": "paperclip_ui=sid123"})
    assert sent(upstream, "cookie") == []


def test_a_passthrough_key_is_forwarded_but_an_admin_key_beside_it_is_not(
    keyed: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = keyed(passthrough_keys=True)
    with proxy.http(OWN_KEY) as http:
        r = http.post("/v1/chat/completions", json=CHAT, headers={"x-api-key": ADMIN_KEY, "cookie": f"k={OWN_KEY}"})
    assert r.status_code == 200
    assert sent(upstream, "authorization") == [f"Bearer {OWN_KEY}"]
    assert sent(upstream, "x-api-key") == []
    assert sent(upstream, "cookie") == [f"k={OWN_KEY}"]  # the client's own key is theirs to send


def test_a_metrics_key_is_refused_not_forwarded_in_passthrough_mode(
    keyed: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = keyed(passthrough_keys=True)
    for key in (METRICS_KEY, METRICS_KEY[:-1]):
        with proxy.http(key) as http:
            assert http.post("/v1/chat/completions", json=CHAT).status_code == 401
    assert upstream.requests == []


# Keys as long as real ones: a near miss by containment needs 16 characters (proxy.tenancy.NEAR_CONTAINED).
LONG_CLIENT_KEY = "pk-live-acme-7f3a9c2e4b1d8f6a0c5e"
LONG_ADMIN_KEY = "ak-live-acme-1b2c3d4e5f6a7b8c9d0e"
ASK = {"model": "claude-x", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        ("/v1/chat/completions", {"api-key": f"Bearer {LONG_CLIENT_KEY}"}),
        ("/v1/chat/completions", {"api-key": f"bearer  BEARER\t{LONG_CLIENT_KEY}"}),
        ("/v1/messages", {"x-api-key": f"Bearer {LONG_CLIENT_KEY}"}),
        ("/v1/chat/completions", {"authorization": f"Bearer {LONG_CLIENT_KEY.upper()}"}),
        ("/v1/chat/completions", {"authorization": f"Bearer {LONG_ADMIN_KEY.upper()}"}),
        ("/v1/chat/completions", {"authorization": f"Bearer {LONG_CLIENT_KEY}-old"}),
        ("/v1/chat/completions", {"authorization": f"Bearer {LONG_CLIENT_KEY[:-4]}"}),
        ("/v1/chat/completions", {"authorization": f"Bearer tok.{LONG_ADMIN_KEY}.v2-rotated"}),
        ("/v1/models", {"authorization": f"Bearer {OPERATOR_KEY.upper()}"}),
    ],
    ids=["api-key-bearer", "api-key-bearer-twice", "x-api-key-bearer", "upper", "admin-upper", "four-more",
         "four-fewer", "admin-inside", "operator-upper"],
)
def test_near_misses_of_paperclips_keys_are_refused_not_forwarded_in_passthrough_mode(
    keyed: Callable[..., Proxy], upstream: FakeUpstream, path: str, headers: dict[str, str]
) -> None:
    proxy = keyed(passthrough_keys=True,
                  tenants={"acme": {"api_keys": [LONG_CLIENT_KEY], "admin_keys": [LONG_ADMIN_KEY]}})
    with proxy.http(key=None) as http:
        r = http.request("GET" if path == "/v1/models" else "POST", path, headers=headers,
                         json=None if path == "/v1/models" else ASK)
    assert r.status_code == 401, r.text
    assert upstream.requests == []


def test_a_clients_own_key_that_merely_shares_a_prefix_is_forwarded(
    keyed: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = keyed(passthrough_keys=True, tenants={"acme": {"api_keys": [LONG_CLIENT_KEY]}})
    own = "pk-live-" + "0123456789abcdefghijklmnopqrstuv"
    with proxy.http(own) as http:
        assert http.post("/v1/chat/completions", json=CHAT).status_code == 200
    assert sent(upstream, "authorization") == [f"Bearer {own}"]


def test_a_cookie_holding_a_key_url_encoded_is_not_forwarded(keyed: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    proxy = keyed()
    cookies = (f"t=Bearer%20{PROXY_KEY}; a=%22{ADMIN_KEY}%22; o={OPERATOR_KEY.replace('-', '%2D')}; "
               f"m=Bearer+{METRICS_KEY}; twice=Bearer%2520{PROXY_KEY}; keep=a%20b")
    with proxy.http() as http:
        assert http.post("/v1/chat/completions", json=CHAT, headers={"cookie": cookies}).status_code == 200
    assert sent(upstream, "cookie") == ["keep=a%20b"]


def test_the_inspector_session_cookie_is_not_forwarded(keyed: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    proxy = keyed()
    with proxy.http(key=None) as browser:
        signed_in = browser.post("/paperclip/ui/login", data={"key": ADMIN_KEY})
        assert signed_in.status_code == 303 and browser.cookies.get("paperclip_ui")
        browser.headers["authorization"] = f"Bearer {PROXY_KEY}"
        browser.cookies.set("paperclip_ui", browser.cookies["paperclip_ui"], path="/")  # as a careless page might
        assert browser.post("/v1/chat/completions", json=CHAT).status_code == 200
    assert sent(upstream, "cookie") == []


def test_metrics_keys_guard_metrics(keyed: Callable[..., Proxy]) -> None:
    proxy = keyed()
    for key, status in [(None, 401), (PROXY_KEY, 401), (ADMIN_KEY, 401), (METRICS_KEY, 200), (OPERATOR_KEY, 200)]:
        with proxy.http(key) as http:
            r = http.get("/metrics")
        assert r.status_code == status, key
        if status == 401:
            assert r.json()["error"]["code"] == "invalid_api_key"
        else:
            assert "paperclip_requests_total" in r.text


def test_metrics_are_open_when_no_metrics_keys_are_set(make_proxy: Callable[..., Proxy]) -> None:
    with make_proxy(server={"admin_keys": [OPERATOR_KEY]}).http(key=None) as http:
        assert http.get("/metrics").status_code == 200
