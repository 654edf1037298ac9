"""Upstreams as companies have them: behind an outbound proxy, on a private CA, behind mTLS (SPEC §7).

Every piece is real and on loopback: the fake upstream under uvicorn with
TLS, certificates made by ``openssl`` for the test, a CONNECT proxy
(``tests/connect_proxy.py``), Paperclip under uvicorn and the openai SDK.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import uvloop

from proxy import config
from proxy.config.outbound import ProxyRules, parse_proxy
from proxy.config.tls import TlsSettings
from proxy.server.app import create_app
from proxy.upstream.wire.transport import LeanTransport, Timeouts
from tests.conftest import Proxy, base_config
from tests.connect_proxy import ConnectProxy
from tests.fake_upstream import FakeUpstream
from tests.pki import issue, make_ca, needs_openssl
from tests.servers import ServerThread

pytestmark = needs_openssl
HI: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
PLAIN = {"memory": {"enabled": False}, "context": {"enabled": False}}


class Pki:
    def __init__(self, folder: Path) -> None:
        self.ca = make_ca(folder / "ca")
        self.other_ca = make_ca(folder / "other", "other")
        self.server = issue(self.ca, "server", server=True)
        self.client = issue(self.ca, "client", server=False)

    @property
    def ca_file(self) -> str:
        return str(self.ca[0])


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_upstream(pki: Pki, upstream_server: tuple[FakeUpstream, ServerThread]) -> Iterator[str]:
    """The fake upstream over TLS, its certificate from the test CA; its /v1 URL."""
    cert, key = pki.server
    server = ServerThread(upstream_server[0].app(), ssl_certfile=str(cert), ssl_keyfile=str(key)).start()
    yield f"https://127.0.0.1:{server.port}/v1"
    server.stop()


@pytest.fixture(scope="module")
def mtls_upstream(pki: Pki, upstream_server: tuple[FakeUpstream, ServerThread]) -> Iterator[str]:
    """The same, requiring a client certificate signed by the test CA."""
    cert, key = pki.server
    server = ServerThread(
        upstream_server[0].app(),
        ssl_certfile=str(cert),
        ssl_keyfile=str(key),
        ssl_ca_certs=pki.ca_file,
        ssl_cert_reqs=ssl.CERT_REQUIRED,
    ).start()
    yield f"https://127.0.0.1:{server.port}/v1"
    server.stop()


@pytest.fixture
def outbound() -> Iterator[Callable[..., ConnectProxy]]:
    started: list[ConnectProxy] = []

    def make(require_auth: str | None = None) -> ConnectProxy:
        started.append(ConnectProxy(require_auth).start())
        return started[-1]

    yield make
    for p in started:
        p.stop()


@pytest.fixture
def paperclip(tmp_path: Path) -> Iterator[Callable[..., Proxy]]:
    """Paperclip in front of ``url`` with these upstream settings and this environment."""
    made: list[Proxy] = []

    def make(url: str, env: dict[str, str] | None = None, **upstream: Any) -> Proxy:
        raw = base_config(url, tmp_path / f"p{len(made)}.db", defaults={"upstream": upstream, **PLAIN})
        app = create_app(config.from_dict(raw, env=env or {}))
        made.append(Proxy(ServerThread(app, server_header=False, date_header=False).start(), app))
        return made[-1]

    yield make
    for proxy in made:
        proxy.stop()


def chat_and_stream(proxy: Proxy) -> tuple[str, str]:
    with proxy.client() as client:
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=HI)
        streamed = "".join(
            c.choices[0].delta.content or ""
            for c in client.chat.completions.create(model="gpt-4o-mini", messages=HI, stream=True)
            if c.choices
        )
    return reply.choices[0].message.content or "", streamed


def test_https_upstream_through_a_connect_proxy_streams(
    paperclip: Callable[..., Proxy], outbound: Callable[..., ConnectProxy], tls_upstream: str, pki: Pki, upstream: FakeUpstream
) -> None:
    relay = outbound()
    proxy = paperclip(tls_upstream, proxy=relay.url, ca_file=pki.ca_file)
    assert chat_and_stream(proxy) == ("Hello from upstream", "Hello from upstream")
    port = tls_upstream.split(":")[2].split("/")[0]
    assert set(relay.tunnels) == {f"127.0.0.1:{port}"}
    assert len(relay.tunnels) <= 2  # the tunnel is a kept-alive connection like any other
    with proxy.http() as http:
        assert http.head("/v1/models").status_code == 200  # the same transport, proxy and CA as any request
    assert set(relay.tunnels) == {f"127.0.0.1:{port}"}
    assert [r.method for r in upstream.requests if r.path == "/v1/models"] == ["HEAD"]
    assert len(upstream.chat_requests()) == 2
    assert upstream.chat_requests()[0].headers["authorization"] == "Bearer sk-upstream-acme"


def test_environment_proxies_and_no_proxy(
    paperclip: Callable[..., Proxy], outbound: Callable[..., ConnectProxy], tls_upstream: str, pki: Pki, upstream: FakeUpstream
) -> None:
    relay = outbound()
    via_env = paperclip(tls_upstream, env={"HTTPS_PROXY": relay.url}, ca_file=pki.ca_file)
    assert chat_and_stream(via_env)[1] == "Hello from upstream"
    assert len(relay.tunnels) >= 1
    before = relay.connections
    bypass = paperclip(tls_upstream, env={"https_proxy": relay.url, "NO_PROXY": "localhost,127.0.0.0/8"}, ca_file=pki.ca_file)
    assert chat_and_stream(bypass)[0] == "Hello from upstream"
    assert relay.connections == before  # NO_PROXY: straight to the upstream


def test_plain_http_upstream_through_the_proxy(
    paperclip: Callable[..., Proxy], outbound: Callable[..., ConnectProxy], upstream_url: str, upstream: FakeUpstream
) -> None:
    relay = outbound(require_auth="Basic dXNlcjpzM2NyZXQ=")
    proxy = paperclip(upstream_url, proxy=f"http://user:s3cret@127.0.0.1:{_port(relay.url)}")
    with proxy.http() as http:
        assert http.head("/v1/models").status_code == 200  # HEAD goes the same way, through the proxy
    assert chat_and_stream(proxy) == ("Hello from upstream", "Hello from upstream")
    # A HEAD's connection is not reused (``http11``): the chat goes on a connection of its own.
    assert relay.forwarded[:2] == [f"HEAD {upstream_url}/models HTTP/1.1",
                                   f"POST {upstream_url}/chat/completions HTTP/1.1"]
    assert relay.tunnels == []
    assert "proxy-authorization" not in upstream.chat_requests()[0].headers  # the proxy's, not the upstream's


def test_a_refusing_proxy_is_an_upstream_error_in_openai_envelope(
    paperclip: Callable[..., Proxy], outbound: Callable[..., ConnectProxy], tls_upstream: str, pki: Pki, upstream: FakeUpstream
) -> None:
    relay = outbound(require_auth="Basic c29tZW9uZTplbHNl")
    proxy = paperclip(tls_upstream, proxy=relay.url, ca_file=pki.ca_file)
    with proxy.client() as client, pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="gpt-4o-mini", messages=HI)
    assert info.value.status_code == 502
    assert "407" in info.value.message and "outbound proxy" in info.value.message
    assert relay.refused == 1 and upstream.requests == []


def test_private_ca_and_wrong_ca(paperclip: Callable[..., Proxy], tls_upstream: str, pki: Pki, upstream: FakeUpstream) -> None:
    trusted = paperclip(tls_upstream, ca_file=pki.ca_file)
    assert chat_and_stream(trusted)[0] == "Hello from upstream"
    wrong = paperclip(tls_upstream, ca_file=str(pki.other_ca[0]))
    with wrong.http() as http:
        refused = http.post("/v1/chat/completions", json={"model": "m", "messages": HI})
    assert refused.status_code == 502 and refused.json()["error"]["code"] == "upstream_unreachable"
    unchecked = paperclip(tls_upstream, ca_file=str(pki.other_ca[0]), verify=False)
    assert chat_and_stream(unchecked)[0] == "Hello from upstream"


def test_mutual_tls(paperclip: Callable[..., Proxy], outbound: Callable[..., ConnectProxy], mtls_upstream: str, pki: Pki, upstream: FakeUpstream) -> None:
    cert, key = pki.client
    shown = paperclip(mtls_upstream, ca_file=pki.ca_file, client_cert=str(cert), client_key=str(key))
    assert chat_and_stream(shown) == ("Hello from upstream", "Hello from upstream")
    tunnelled = paperclip(mtls_upstream, proxy=outbound().url, ca_file=pki.ca_file, client_cert=str(cert), client_key=str(key))
    assert chat_and_stream(tunnelled)[1] == "Hello from upstream"
    anonymous = paperclip(mtls_upstream, ca_file=pki.ca_file)
    with anonymous.http() as http:
        refused = http.post("/v1/chat/completions", json={"model": "m", "messages": HI})
    assert refused.status_code == 502


@pytest.mark.parametrize("run", [asyncio.run, uvloop.run], ids=["asyncio", "uvloop"])
def test_the_tunnel_on_both_event_loops(run: Callable[..., Any], outbound: Callable[..., ConnectProxy], tls_upstream: str, pki: Pki, upstream: FakeUpstream) -> None:
    # `paperclip serve` runs on uvloop, whose start_tls is its own code: the tunnel works on both.
    relay = outbound()
    via = parse_proxy(relay.url)
    transport = LeanTransport(
        Timeouts(connect=5, read=5, write=5, pool=5),
        tls=TlsSettings(ca_file=pki.ca_file),
        routes=ProxyRules(http=via, https=via),
    )

    async def twice() -> list[Any]:
        async with httpx.AsyncClient(transport=transport) as client:
            return [(await client.get(tls_upstream + "/models")).json() for _ in range(2)]

    first, second = run(twice())
    assert first["data"][0]["id"] == second["data"][0]["id"] == "gpt-4o-mini"
    assert len(relay.tunnels) == 1


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])
