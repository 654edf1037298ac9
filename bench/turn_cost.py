"""CPU per chat turn in one process: the whole app over ASGI, the background work it causes included.

Usage (from the repo root, in its virtualenv)::

    python bench/turn_cost.py                          # 50 users x 60 turns, memory on, bundled model
    python bench/turn_cost.py --memory off
    ../before/.venv/bin/python bench/turn_cost.py --repo ../before   # another checkout's proxy
    py-spy record --format raw -o turns.txt -- python bench/turn_cost.py   # where it goes

The workload is ``bench/load.py``'s: ``--users`` conversations, each growing
by one user message and the streamed answer per turn (so the memory layer
indexes, extracts and compresses as it would). Each round, every user sends
its next turn at once (``--users`` requests in flight, as under load). The
app is ``create_app`` (as ``paperclip serve`` makes it) with an in-process upstream (an ``httpx`` transport
answering ``bench/upstream.py``'s stream), called over ASGI: no sockets, no
other process, so the figure is the proxy's own work — parsing, preparing,
relaying, recording, its threads' too (``time.process_time``) — without the
noise of a shared machine. Bodies are built before each round is timed; what
is left of the client (the ASGI calls) is the same for every build. CPU is
counted until the background work of the last round is done, so what a turn
causes after its response (indexing, extraction, compression) is in it.

Printed: CPU per turn overall and per band of rounds (the conversations grow,
so a band later in the run shows what a longer history costs), wall time,
and the share of it on the event loop's thread.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from load import FACTS, MODEL  # noqa: E402
from upstream import COMPLETION, STREAM  # noqa: E402

# Out of the way once they are imported: bench/profile.py would stand in for the standard
# library's ``profile`` (torch imports cProfile), and the repo these put first may not be the one
# measured (--repo).
sys.path[:] = [p for p in sys.path if p not in (str(HERE), str(HERE.parent))]

KEY = "pk-bench"


async def chunks(parts: list[bytes]) -> AsyncIterator[bytes]:
    for part in parts:  # each a chunk of its own, as the upstream writes them
        yield part


def upstream() -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        # Not parsed: the upstream's own work is not the proxy's, and it grows with the chat.
        if b'"stream":true' in request.content or b'"stream": true' in request.content:
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=chunks(STREAM))
        return httpx.Response(200, headers={"content-type": "application/json"}, content=chunks([COMPLETION]))

    return httpx.MockTransport(answer)


def settings(folder: Path, memory: bool, embedding: str) -> Any:
    from proxy import config

    return config.from_dict(
        {
            "storage": {"url": f"sqlite:///{folder / 'turns.db'}"},
            "embedding": {"model": embedding},
            "defaults": {
                "upstream": {"base_url": "http://upstream.invalid/v1", "api_key": "sk-bench"},
                "context": {"enabled": memory},
                "memory": {"enabled": memory},
            },
            "tenants": {"bench": {"api_keys": [KEY]}},
        },
        env={},
    )


def app_factory() -> Any:
    try:
        from proxy.server.app import create_app
    except ImportError:  # a checkout from before the folders by layer
        from proxy.app import create_app  # type: ignore[no-redef]
    return create_app


async def one_request(app: Any, body: bytes) -> bytes:
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions",
        "root_path": "", "query_string": b"", "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 8787),
        "headers": [(b"authorization", f"Bearer {KEY}".encode()), (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())],
        "state": {},
    }
    sent = False
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    out: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await never  # the client stays until the response ends
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            out.append(message.get("body", b""))

    await app(scope, receive, send)
    never.cancel()
    return b"".join(out)


def answer_of(stream: bytes) -> str:
    text = ""
    for line in stream.split(b"\n"):
        if line.startswith(b"data: {"):
            delta = json.loads(line[6:])["choices"][0]["delta"]
            text += delta.get("content") or ""
    return text


async def run(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    # As ``paperclip serve`` runs it: the collector tuned once the memory layer is loaded, and the
    # interpreter's switch interval (a checkout from before the one event loop sets its own).
    app = app_factory()(settings(folder, args.memory == "on", args.embedding), transport=upstream(), freeze_heap=True)
    with contextlib.suppress(ImportError, AttributeError):
        sys.setswitchinterval(importlib.import_module("proxy.commands.main").SWITCH_INTERVAL_S)
    runtime = app.state.runtime
    async with app.router.lifespan_context(app):
        for _ in range(2400):  # the memory layer loads in the background (at most 2 minutes)
            if args.memory == "off" or runtime.store() is not None:
                break
            await asyncio.sleep(0.05)
        else:
            raise SystemExit("the memory layer did not load")
        chats: list[list[dict[str, str]]] = [
            [{"role": "system", "content": "You are a helpful travel assistant."}] for _ in range(args.users)
        ]
        bands: list[tuple[int, float]] = []
        cpu_total = wall_total = loop_total = 0.0
        band_cpu, band_start = 0.0, 1
        for turn in range(1, args.turns + 1):
            bodies = []
            for n, messages in enumerate(chats):
                text = f"Turn {turn}: {FACTS[(n + turn) % len(FACTS)]}. What should I pack for a trip to city {turn % 17}?"
                messages.append({"role": "user", "content": text})
                bodies.append(json.dumps({"model": MODEL, "messages": messages, "stream": True,
                                          "user": f"load-user-{n}"}).encode())
            cpu, wall, loop = time.process_time(), time.perf_counter(), time.thread_time()
            replies = await asyncio.gather(*(one_request(app, b) for b in bodies))
            if turn == args.turns:
                await runtime.background.drain()
            spent = time.process_time() - cpu
            cpu_total += spent
            band_cpu += spent
            wall_total += time.perf_counter() - wall
            loop_total += time.thread_time() - loop
            for messages, reply in zip(chats, replies, strict=True):
                messages.append({"role": "assistant", "content": answer_of(reply)})
            if turn % args.band == 0 or turn == args.turns:
                bands.append((band_start, 1000 * band_cpu / ((turn - band_start + 1) * args.users)))
                band_cpu, band_start = 0.0, turn + 1
        turns = args.turns * args.users
        return {
            "memory": args.memory, "users": args.users, "turns_each": args.turns, "embedding": args.embedding,
            "cpu_ms_per_turn": round(1000 * cpu_total / turns, 2),
            "loop_thread_share": round(loop_total / cpu_total, 2) if cpu_total else None,
            "wall_s": round(wall_total, 1),
            "cpu_ms_per_turn_by_rounds": {f"{a}-{a + args.band - 1}": round(ms, 2) for a, ms in bands},
            "load_average": round(os.getloadavg()[0], 2),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--band", type=int, default=20, help="rounds per band of the by-rounds figure")
    parser.add_argument("--memory", choices=("on", "off"), default="on")
    parser.add_argument("--embedding", default="bundled")
    parser.add_argument("--repo", type=Path, default=HERE.parent, help="the checkout whose proxy is measured")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(args.repo.resolve()))
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(asyncio.run(run(args, Path(tmp)))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
