"""A small outbound HTTP proxy on loopback for tests: CONNECT tunnels and absolute-form forwarding.

``python -m tests.connect_proxy --port N`` runs one in a process of its own
(``bench/overhead.py --outbound-proxy``).

It records what it was asked (``tunnels``: CONNECT targets; ``forwarded``: the
request lines it forwarded) and can require ``Proxy-Authorization``. Bytes are
piped both ways as they come, so streaming through it is streaming.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from urllib.parse import urlsplit


class ConnectProxy:
    def __init__(self, require_auth: str | None = None, port: int = 0) -> None:
        self.require_auth = require_auth
        self.tunnels: list[str] = []
        self.forwarded: list[str] = []
        self.refused = 0
        self.connections = 0
        self.port = port
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ConnectProxy:
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", self.port))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()
        pending = asyncio.all_tasks(self._loop)
        for task in pending:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.run_until_complete(server.wait_closed())
        self._loop.run_until_complete(asyncio.sleep(0.01))  # the transports' own close callbacks
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        up_writer: asyncio.StreamWriter | None = None
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            line, *headers = head.decode("latin-1").split("\r\n")
            method, target, _ = line.split(" ", 2)
            auth = next((v.strip() for h in headers if ":" in h for k, v in [h.split(":", 1)] if k.lower() == "proxy-authorization"), None)
            if self.require_auth is not None and auth != self.require_auth:
                self.refused += 1
                writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
                return
            if method == "CONNECT":
                self.tunnels.append(target)
                host, _, port = target.rpartition(":")
                up_reader, up_writer = await asyncio.open_connection(host.strip("[]"), int(port))
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                self.forwarded.append(line)
                url = urlsplit(target)
                up_reader, up_writer = await asyncio.open_connection(url.hostname, url.port or 80)
                origin_form = f"{method} {url.path or '/'}{'?' + url.query if url.query else ''} HTTP/1.1"
                kept = [h for h in headers if not h.lower().startswith("proxy-authorization")]
                up_writer.write("\r\n".join([origin_form, *kept]).encode("latin-1"))
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except (OSError, asyncio.IncompleteReadError, ValueError, asyncio.CancelledError):
            pass  # a client or upstream gone, or the proxy stopping: the connection just ends
        finally:
            writer.close()
            if up_writer is not None:
                up_writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            writer.close()


if __name__ == "__main__":
    import argparse
    import signal

    parser = argparse.ArgumentParser(description="an HTTP CONNECT proxy on 127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    running = ConnectProxy(port=parser.parse_args().port).start()
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    running.stop()
