"""``paperclip serve`` drops clients that do not send their request headers in time (server.header_timeout_s)."""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import PROXY_KEY, base_config
from tests.servers import ServeProcess

TIMEOUT_S = 0.5
TRICKLERS = 50


@pytest.fixture
def served(tmp_path: Path, upstream_url: str) -> Iterator[ServeProcess]:
    raw = base_config(upstream_url, tmp_path / "p.db", server={"header_timeout_s": TIMEOUT_S},
                      defaults={"memory": {"enabled": False}, "context": {"enabled": False}})
    config = tmp_path / "proxy.yaml"
    config.write_text(yaml.safe_dump(raw))
    proc = ServeProcess(config, tmp_path / "serve.log").start()
    try:
        proc.wait_ready()
        yield proc
    finally:
        proc.stop()


def trickle_until_dropped(socks: list[socket.socket], rounds: int = 300) -> set[int]:
    """Send each socket one more header byte every 0.1 s; the indexes of those the server closed."""
    dropped: set[int] = set()
    for _ in range(rounds):  # 30 s at most: sixty times the timeout
        readable, _, _ = select.select([s for i, s in enumerate(socks) if i not in dropped], [], [], 0)
        for s in readable:
            if s.recv(1024) == b"":
                dropped.add(socks.index(s))
        if len(dropped) == len(socks):
            break
        for i, s in enumerate(socks):
            if i not in dropped:
                try:
                    s.sendall(b"x")
                except OSError:
                    dropped.add(i)
        time.sleep(0.1)
    return dropped


def test_clients_trickling_their_headers_are_dropped_and_others_served(served: ServeProcess) -> None:
    socks = [socket.create_connection(("127.0.0.1", served.port)) for _ in range(TRICKLERS)]
    try:
        for s in socks:
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nx-slow: ")
        with httpx.Client(base_url=served.url, timeout=10) as http:
            assert http.get("/healthz").status_code == 200  # while they trickle
            chat = http.post("/v1/chat/completions", headers={"authorization": f"Bearer {PROXY_KEY}"},
                             json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
            assert chat.status_code == 200
        assert trickle_until_dropped(socks) == set(range(TRICKLERS))
    finally:
        for s in socks:
            s.close()


def test_a_connection_that_sends_nothing_is_dropped(served: ServeProcess) -> None:
    with socket.create_connection(("127.0.0.1", served.port)) as s:
        s.settimeout(30)
        assert s.recv(1024) == b""  # closed by the server, not by this timeout


def test_a_kept_alive_connections_next_head_has_its_own_deadline(served: ServeProcess) -> None:
    with socket.create_connection(("127.0.0.1", served.port)) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        s.settimeout(10)
        assert one_response(s).startswith(b"HTTP/1.1 200")
        time.sleep(TIMEOUT_S * 2)  # idle between requests: kept alive (uvicorn's own 5 s)
        s.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        assert one_response(s).startswith(b"HTTP/1.1 200")
        s.sendall(b"GET /healthz HTTP/1.1\r\n")  # the next head never ends
        assert trickle_until_dropped([s]) == {0}


def one_response(s: socket.socket) -> bytes:
    """One whole response off ``s``: its head, then as many body bytes as its content-length says."""
    data = b""
    while b"\r\n\r\n" not in data:
        part = s.recv(65536)
        assert part, f"closed after {data!r}"
        data += part
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        part = s.recv(65536)
        assert part, f"closed after {data!r}"
        body += part
    return head + b"\r\n\r\n" + body
