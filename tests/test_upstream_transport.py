"""The upstream hop's HTTP/1.1 transport (``proxy.upstream.wire.transport``), on real sockets."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from proxy.config import Upstream
from proxy.config.tls import TlsSettings
from proxy.upstream.clients import Upstreams
from proxy.upstream.wire.transport import LeanTransport, Timeouts
from tests.conftest import Proxy
from tests.fake_upstream import FakeUpstream, Scripted, chunk, sse
from tests.hostile_upstream import HANG_UP, HostileUpstream, RawRequest, Step
from tests.servers import ServerThread

MODEL = "gpt-4o-mini"
HI: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
FAST = Timeouts(connect=2, read=5, write=5, pool=2)


def test_keep_alive_connections_are_reused(proxy: Proxy, upstream: FakeUpstream) -> None:
    with proxy.client() as client:
        for _ in range(5):
            client.chat.completions.create(model=MODEL, messages=HI)
        client.models.list()
        assert len({seen.peer for seen in upstream.requests}) == 1
        for _ in range(5):
            list(client.chat.completions.create(model=MODEL, messages=HI, stream=True))
    # After [DONE] the proxy waits briefly for the end of the chunked body before it can reuse
    # the connection; a client quicker than that gets a second one, never one per request.
    assert len(upstream.requests) == 11
    assert len({seen.peer for seen in upstream.requests}) <= 3


def test_large_bodies_both_ways(proxy: Proxy, upstream: FakeUpstream) -> None:
    blob = os.urandom(3 * 1024 * 1024)

    async def echo(request: Request, body: dict[str, Any]) -> Response:
        return Response(await request.body(), media_type="application/octet-stream")

    upstream.routes["/v1/echo"] = echo
    text = "long message é " * 20_000  # > 64 KiB: the head and the body go out in two writes
    with proxy.http() as http:
        r = http.post("/v1/echo", content=blob, headers={"content-type": "application/octet-stream"})
        chat = http.post("/v1/chat/completions", json={"model": MODEL, "messages": [{"role": "user", "content": text}]})
    assert r.content == blob
    assert chat.status_code == 200
    assert upstream.chat_requests()[-1].json()["messages"][0]["content"] == text


def test_head_and_no_content_responses(proxy: Proxy, upstream: FakeUpstream) -> None:
    async def deleted(request: Request, body: dict[str, Any]) -> Response:
        return Response(status_code=204, headers={"x-request-id": "req_204"})

    upstream.routes["/v1/files/f1"] = deleted
    with proxy.http() as http:
        head = http.head("/v1/models")
        gone = http.delete("/v1/files/f1")
        after = http.get("/v1/models")  # the connection that carried the 204 is still good
    assert head.status_code == 200 and head.content == b""
    assert int(head.headers["content-length"]) > 0
    assert (gone.status_code, gone.content, gone.headers["x-request-id"]) == (204, b"", "req_204")
    assert after.json()["data"][0]["id"] == "gpt-4o-mini"


def test_read_timeout_between_chunks_ends_the_stream_with_an_error_event(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = make_proxy(defaults={"upstream": {"read_timeout_s": 0.3}})

    async def stalls(request: Request, body: dict[str, Any]) -> Response:
        return Scripted(upstream, sse([chunk({"content": "a"}), chunk({"content": "b"})]), delay=2)

    upstream.chat = stalls
    with proxy.client() as client, pytest.raises(openai.APIError) as info:
        list(client.chat.completions.create(model=MODEL, messages=HI, stream=True))
    assert info.value.code == "upstream_timeout"


# --- the transport on its own -------------------------------------------------------------------


class RawServer(HostileUpstream):
    """Answers each request with ``answer(n)``: (the response's bytes, close the connection after it)."""

    def __init__(self, answer: Callable[[int], tuple[bytes, bool]]) -> None:
        def script(request: RawRequest) -> list[Step]:
            response, close = answer(request.number)
            return [response, HANG_UP] if close else [response]

        super().__init__(script, keep_alive=True)

    def url(self, path: str = "/x") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
def raw_server() -> Iterator[Callable[[Callable[[int], tuple[bytes, bool]]], RawServer]]:
    servers: list[RawServer] = []

    def make(answer: Callable[[int], tuple[bytes, bool]]) -> RawServer:
        servers.append(RawServer(answer))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def ok(body: bytes = b"ok", extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n%b\r\n%b" % (len(body), extra, body)


async def test_a_kept_alive_socket_closed_by_the_upstream_is_replaced(raw_server: Any) -> None:
    # The server answers with keep-alive, then drops the socket: the next request finds it dead.
    server = raw_server(lambda n: (ok(b"answer %d" % n), True))
    async with httpx.AsyncClient(transport=LeanTransport(FAST)) as client:
        first = await client.post(server.url(), content=b"{}")
        await asyncio.sleep(0.1)
        second = await client.post(server.url(), content=b"{}")
    assert (first.content, second.content) == (b"answer 1", b"answer 2")
    assert server.connections == 2


async def test_a_request_the_upstream_may_have_received_is_never_resent(raw_server: Any) -> None:
    # The second request reaches the upstream on the kept-alive socket, which then closes without
    # a byte of answer (as a crash or a keep-alive race does): resending it could bill it twice.
    server = raw_server(lambda n: (ok(b"answer %d" % n), False) if n == 1 else (b"", True))
    async with httpx.AsyncClient(transport=LeanTransport(FAST)) as client:
        first = await client.post(server.url(), content=b"{}")
        with pytest.raises(httpx.RemoteProtocolError):
            await client.post(server.url(), content=b"{}")
    assert first.content == b"answer 1"
    assert (len(server.requests), server.connections) == (2, 1)


async def test_an_idle_socket_is_checked_before_reuse(raw_server: Any) -> None:
    # The upstream closes the idle socket while the event loop is blocked, so the loop has not
    # seen the close yet when the next request takes the connection: the check must.
    server = raw_server(lambda n: (ok(b"answer %d" % n), True))
    async with httpx.AsyncClient(transport=LeanTransport(FAST)) as client:
        await client.post(server.url(), content=b"{}")
        time.sleep(0.2)  # noqa: ASYNC251 -- blocks the loop on purpose: the close lies unread
        second = await client.post(server.url(), content=b"{}")
    assert second.content == b"answer 2"
    assert (len(server.requests), server.connections) == (2, 2)


async def test_idle_connections_expire_before_common_upstream_keep_alive_timeouts(raw_server: Any) -> None:
    server = raw_server(lambda n: (ok(b"answer %d" % n), False))
    transport = LeanTransport(FAST, keepalive_expiry=0.2)
    async with httpx.AsyncClient(transport=transport) as client:
        await client.post(server.url(), content=b"{}")
        await client.post(server.url(), content=b"{}")  # reused
        await asyncio.sleep(0.3)
        await client.post(server.url(), content=b"{}")  # expired: a new connection
    assert server.connections == 2
    assert LeanTransport.__init__.__kwdefaults__["keepalive_expiry"] < 5  # uvicorn's and Node's timeout


async def test_a_body_delimited_by_the_end_of_the_connection(raw_server: Any) -> None:
    server = raw_server(lambda n: (b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nuntil the end", True))
    async with httpx.AsyncClient(transport=LeanTransport(FAST)) as client:
        r = await client.get(server.url())
    assert r.content == b"until the end"


async def test_a_truncated_body_is_an_error(raw_server: Any) -> None:
    server = raw_server(lambda n: (b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nshort", True))
    async with httpx.AsyncClient(transport=LeanTransport(FAST)) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            await client.get(server.url())


async def test_interim_responses_are_skipped(raw_server: Any) -> None:
    server = raw_server(lambda n: (b"HTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n" + ok(b"final"), False))
    async with httpx.AsyncClient(transport=LeanTransport(FAST)) as client:
        r = await client.get(server.url())
    assert (r.status_code, r.content) == (200, b"final")


@pytest.mark.parametrize("framing", [b"content-length: 100\r\n", b"transfer-encoding: chunked\r\n", b""],
                         ids=["sized", "chunked", "unframed"])
async def test_a_response_to_head_ends_with_its_head(raw_server: Any, framing: bytes) -> None:
    # Whatever its framing says, a response to HEAD has no body: it ends at once, on this
    # transport like any other (not a second one without its bounds), and the connection that
    # carried it is not reused (an upstream that sends a body anyway cannot poison the next answer).
    def answer(n: int) -> tuple[bytes, bool]:
        if n == 1:
            return b"HTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\nHTTP/1.1 200 OK\r\n%bx-h: 1\r\n\r\n" % framing, False
        return ok(b"answer %d" % n), False

    server = raw_server(answer)
    async with httpx.AsyncClient(transport=LeanTransport(FAST)) as client:
        head = await asyncio.wait_for(client.head(server.url()), 2)
        after = await client.get(server.url())
    assert (head.status_code, head.content, head.headers["x-h"]) == (200, b"", "1")
    assert after.content == b"answer 2"
    assert server.connections == 2


async def test_a_protocol_upgrade_is_refused(raw_server: Any) -> None:
    server = raw_server(lambda n: (ok(), False))
    async with httpx.AsyncClient(transport=LeanTransport(FAST)) as client:
        with pytest.raises(httpx.UnsupportedProtocol):
            await client.get(server.url(), headers={"upgrade": "websocket", "connection": "upgrade"})
    assert server.requests == []


async def test_connect_refused_and_pool_limit(raw_server: Any) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with httpx.AsyncClient(transport=LeanTransport(FAST)) as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(f"http://127.0.0.1:{port}/")

    def slow(n: int) -> tuple[bytes, bool]:
        time.sleep(0.2)
        return ok(b"%d" % n), False

    server = raw_server(slow)
    transport = LeanTransport(FAST, max_connections=1)
    async with httpx.AsyncClient(transport=transport) as client:
        answers = await asyncio.gather(*(client.get(server.url()) for _ in range(3)))
    assert sorted(r.content for r in answers) == [b"1", b"2", b"3"]
    assert server.connections == 1  # they waited for the one connection in turn

    tight = LeanTransport(FAST, max_connections=1)
    async with httpx.AsyncClient(transport=tight, timeout=httpx.Timeout(5, pool=0.05)) as client:
        results = await asyncio.gather(*(client.get(server.url()) for _ in range(2)), return_exceptions=True)
    assert any(isinstance(r, httpx.PoolTimeout) for r in results)  # the call's pool timeout applies


async def test_shared_client_keeps_no_cookies_and_honours_call_timeouts(upstream: FakeUpstream, upstream_url: str) -> None:
    async def sets_cookie(request: Request, body: dict[str, Any]) -> Response:
        response = JSONResponse({"ok": True})
        response.set_cookie("__cf_bm", "tenant-a-cookie")
        return response

    async def slow(request: Request, body: dict[str, Any]) -> Response:
        return Scripted(upstream, [b"{}"], media_type="application/json", first_byte_delay=3)

    upstream.routes["/v1/cookie"] = sets_cookie
    upstream.routes["/v1/slow"] = slow
    upstreams = Upstreams()
    profile = Upstream(base_url=upstream_url, api_key=None, connect_timeout_s=5, read_timeout_s=30)
    client = upstreams.client(profile)
    try:
        await client.post(upstream_url + "/cookie", json={})
        await client.post(upstream_url + "/cookie", json={})
        assert "cookie" not in upstream.requests[-1].headers
        started = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            await client.post(upstream_url + "/slow", json={}, timeout=httpx.Timeout(0.3))
        assert time.monotonic() - started < 2  # the call's own timeout, not the profile's 30 s
    finally:
        await upstreams.aclose()


def self_signed(folder: Path) -> tuple[Path, Path]:
    key, cert = folder / "key.pem", folder / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )
    return key, cert


@pytest.mark.skipif(not any(Path(p, "openssl").exists() for p in os.environ.get("PATH", "").split(":")), reason="no openssl")
async def test_tls_upstream(tmp_path: Path, upstream: FakeUpstream) -> None:
    key, cert = self_signed(tmp_path)
    server = ServerThread(upstream.app(), ssl_keyfile=str(key), ssl_certfile=str(cert)).start()
    try:
        transport = LeanTransport(FAST, tls=TlsSettings(ca_file=str(cert)))
        async with httpx.AsyncClient(transport=transport) as client:
            r = await client.get(f"https://127.0.0.1:{server.port}/v1/models")
            again = await client.get(f"https://127.0.0.1:{server.port}/v1/models")
        assert r.json()["data"][0]["id"] == again.json()["data"][0]["id"] == "gpt-4o-mini"
        untrusted = LeanTransport(FAST)  # the system's CAs do not know this certificate
        async with httpx.AsyncClient(transport=untrusted) as client:
            with pytest.raises(httpx.ConnectError):
                await client.get(f"https://127.0.0.1:{server.port}/v1/models")
    finally:
        server.stop()
