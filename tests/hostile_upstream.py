"""An upstream that writes whatever bytes a test scripts: broken framing, header floods, bombs.

A real TCP server on loopback, a thread per connection, so a script that
never ends (an endless header section) holds its own connection only. Each
request is read whole (``content-length`` or chunked) and kept in
``requests``; ``script(request)`` then yields what goes back: ``bytes`` are
written as they come, a ``float`` is a pause in seconds, ``HANG_UP`` closes
the connection. The connection is also closed when the script ends
(``keep_alive``: kept for the next request instead), or as soon as the
proxy stops reading.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

HANG_UP = None  # a script's step: close the connection here
Step = bytes | float | None
Script = Callable[["RawRequest"], Iterable[Step]]


@dataclass
class RawRequest:
    head: bytes
    body: bytes
    number: int  # 1 for the first request this server took

    @property
    def headers(self) -> list[tuple[str, str]]:
        """Every header line as (lower-case name, value), repeated names kept."""
        out = []
        for line in self.head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            out.append((name.decode("latin-1").strip().lower(), value.decode("latin-1").strip()))
        return out

    def header(self, name: str) -> list[str]:
        return [v for n, v in self.headers if n == name]


@dataclass
class HostileUpstream:
    script: Script
    keep_alive: bool = False
    requests: list[RawRequest] = field(default_factory=list)
    connections: int = 0

    def __post_init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def base_url(self) -> str:
        """What a tenant's ``upstream.base_url`` is set to."""
        return f"http://127.0.0.1:{self.port}/v1"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            reader = _Reader(conn)
            while (request := self._read(reader)) is not None:
                if not self._play(conn, self.script(request)) or not self.keep_alive:
                    return

    def _read(self, reader: _Reader) -> RawRequest | None:
        head = reader.until(b"\r\n\r\n")
        if head is None:
            return None
        lines = head.lower().split(b"\r\n")
        length = next((int(ln.split(b":")[1]) for ln in lines if ln.startswith(b"content-length:")), 0)
        if any(ln.startswith(b"transfer-encoding:") and b"chunked" in ln for ln in lines):
            body = b""
            while (size_line := reader.until(b"\r\n")) not in (None, b"0"):
                assert size_line is not None
                body += reader.exactly(int(size_line.split(b";")[0], 16) + 2)[:-2]
            reader.until(b"\r\n")  # the empty trailer section
        else:
            body = reader.exactly(length)
        with self._lock:
            request = RawRequest(head, body, len(self.requests) + 1)
            self.requests.append(request)
        return request

    @staticmethod
    def _play(conn: socket.socket, steps: Iterable[Step]) -> bool:
        try:
            for step in steps:
                if step is HANG_UP:
                    return False
                if isinstance(step, float):
                    time.sleep(step)
                else:
                    conn.sendall(step)
        except OSError:  # the proxy stopped reading and closed: what a flood should meet
            return False
        return True

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> HostileUpstream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Reader:
    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.buffer = b""

    def _more(self) -> bool:
        try:
            part = self.conn.recv(65536)
        except OSError:
            return False
        self.buffer += part
        return bool(part)

    def until(self, mark: bytes) -> bytes | None:
        while mark not in self.buffer:
            if not self._more():
                return None
        found, _, self.buffer = self.buffer.partition(mark)
        return found

    def exactly(self, n: int) -> bytes:
        while len(self.buffer) < n and self._more():
            pass
        found, self.buffer = self.buffer[:n], self.buffer[n:]
        return found


def head(status: bytes = b"200 OK", *headers: bytes) -> bytes:
    """A response head: the status line, the header lines given, the blank line."""
    return b"HTTP/1.1 " + status + b"\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n"


def chunked(*parts: bytes) -> Iterator[bytes]:
    """Body parts in chunked framing, then the last chunk."""
    for part in parts:
        yield b"%x\r\n%b\r\n" % (len(part), part)
    yield b"0\r\n\r\n"
