"""``paperclip serve`` keeps an idle client connection open longer than clients keep theirs (server.keep_alive_s).

httpx, and so the openai and anthropic SDKs, keep an idle connection 5 s; uvicorn closes one after 5 s
too. A request sent on it as the server closes it fails with a connection error the app never sees
going straight to the vendor. The proxy keeps it longer (75 s, past load balancers' 60 s), so the client
always closes first.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import base_config
from tests.servers import ServeProcess

HEALTH = b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n"


@pytest.fixture
def serve(tmp_path: Path, upstream_url: str) -> Iterator[Callable[..., ServeProcess]]:
    started: list[ServeProcess] = []

    def start(**server: Any) -> ServeProcess:
        raw = base_config(upstream_url, tmp_path / "p.db", server=server,
                          defaults={"memory": {"enabled": False}, "context": {"enabled": False}})
        config = tmp_path / f"proxy-{len(started)}.yaml"
        config.write_text(yaml.safe_dump(raw))
        proc = ServeProcess(config, tmp_path / f"serve-{len(started)}.log").start()
        started.append(proc)
        proc.wait_ready()
        return proc

    yield start
    for proc in started:
        proc.stop()


def answered(s: socket.socket) -> bytes:
    s.sendall(HEALTH)
    got = b""
    while b'"ok"' not in got:
        chunk = s.recv(4096)
        if not chunk:
            return got
        got += chunk
    return got


def test_an_idle_connection_outlives_the_clients_pools(serve: Callable[..., ServeProcess]) -> None:
    proc = serve()
    with socket.create_connection(("127.0.0.1", proc.port)) as s:
        s.settimeout(10)
        assert answered(s).startswith(b"HTTP/1.1 200")
        time.sleep(6)  # past the 5 s an SDK's pool and uvicorn's default keep an idle connection
        assert answered(s).startswith(b"HTTP/1.1 200")  # the same connection, still open


def test_keep_alive_s_closes_an_idle_connection_after_it(serve: Callable[..., ServeProcess]) -> None:
    proc = serve(keep_alive_s=1)
    with socket.create_connection(("127.0.0.1", proc.port)) as s:
        s.settimeout(10)
        assert answered(s).startswith(b"HTTP/1.1 200")
        s.settimeout(4)  # before uvicorn's own 5 s
        assert s.recv(4096) == b""  # the server closed it
