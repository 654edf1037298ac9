"""Relaying one upstream exchange to the client, at the ASGI level.

Why not Starlette's ``StreamingResponse``: the upstream call must be cancelled
when the client goes away *before the first byte* too (while we still wait for
upstream headers), and the status must come from upstream before we commit to
anything. So the exchange runs beside a watcher of ``http.disconnect``; the
watcher cancels the exchange, and the exchange's end cancels the watcher.

Chunks are sent as they arrive (never buffered), as raw bytes: a gzip body
goes through with its header, a multibyte character split across chunks is
rejoined by the client; an event stream's chunks go out cut at their last
whole event, the rest following with the chunk that ends it. A
``data: [DONE]`` line of its own (not those bytes in an event's data) ends a
chat stream, and a passed-through one, at once even if the upstream holds its
socket open.

A reply that breaks is never ended cleanly (SPEC §9), so the client cannot
take it for a whole one: a stream ends with an error event; a plain body's
connection is closed without the body's end. A stream with no framing (no
length, not chunked: it ends where the connection does) has not ended unless
it stops at an event's end — and, for chat, after its ``[DONE]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import anyio
import httpx
from starlette.types import Message, Receive, Send

from ..errors import OPENAI_ERRORS, ClientGone, ErrorShape, PaperclipError, PayloadTooLarge
from ..upstream.clients import translate
from ..upstream.headers import response_headers
from .usage_ledger import HEAD_BYTES, TAIL_BYTES

log = logging.getLogger("paperclip.relay")

# The line that ends an OpenAI event stream: ``data: [DONE]`` on a line of its own (the space is optional
# in SSE), never those bytes inside an event's data ("…the line data: [DONE] and then", a tool's code). The
# bytes before a window of the stream are a line's end at its start (``_STREAM_START``).
_DONE_LINE = re.compile(rb"[\r\n]data: ?\[DONE\][ \t]*(?:\r\n|[\r\n]|$)")
_STREAM_START = b"\n"
_TAIL = len(b"\ndata: [DONE] \r\n")
_LINGER_S = 0.25
# A blank line, which ends an event (lines end in "\r\n", "\n" or "\r"), and any line break.
_EVENT_END = re.compile(rb"(?:\r\n|\r(?!\n)|\n)(?:\r\n|\r(?!\n)|\n)")
_LINE_BREAK = re.compile(rb"\r\n|\r|\n")
# An unfinished event held past this many bytes goes out by whole lines (``whole_events``).
EVENT_HELD_MAX = 64 * 1024


@dataclass
class Outcome:
    """What happened, for metrics and the background recording step."""

    status: int = 0
    streamed: bool = False
    disconnected: bool = False
    error: PaperclipError | None = None
    body: bytearray = field(default_factory=bytearray)  # empty when longer than the capture limit
    content_encoding: str | None = None
    tail: bytes = b""  # the last TAIL_BYTES of the body, where the upstream reports its usage
    head: bytes = b""  # the first HEAD_BYTES (a Messages API stream reports its input count there)
    complete: bool = False  # the whole response reached the client

    @property
    def succeeded(self) -> bool:
        """The upstream answered 2xx and nothing broke the exchange on its side."""
        return self.error is None and 200 <= self.status < 300


@dataclass
class Exchange:
    client: httpx.AsyncClient
    request: httpx.Request
    extra_headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    capture_limit: int = 0  # bytes of the response body to keep for recording
    stop_at_done: bool = False  # an event stream ends at its [DONE] line, and without it has not ended
    ends_at_done: bool = False  # an event stream ends at a [DONE] line if it has one (a pass-through path)
    body_done: anyio.Event = field(default_factory=anyio.Event)
    on_headers: Callable[[httpx.Response], None] | None = None
    errors: ErrorShape = OPENAI_ERRORS  # the client's API's shape of Paperclip's own errors


async def run(exchange: Exchange, receive: Receive, send: Send) -> Outcome:
    """Run the exchange; a client's ``http.disconnect`` cancels it wherever it is.

    Plain asyncio rather than an anyio task group: this runs on every request,
    and the group's cancel scopes cost more than the rest of the relay.
    """
    outcome = Outcome()
    task = asyncio.current_task()
    assert task is not None
    watcher = asyncio.ensure_future(_watch(exchange, receive, outcome, task))
    try:
        await _exchange(exchange, send, outcome)
    except asyncio.CancelledError:
        # Ours (the client left) is absorbed; anyone else's (shutdown) goes on.
        if not outcome.disconnected or task.uncancel() > 0:
            raise
    finally:
        watcher.cancel()
    return outcome


async def _watch(exchange: Exchange, receive: Receive, outcome: Outcome, task: asyncio.Task[object]) -> None:
    await exchange.body_done.wait()  # before that, the request body's reader owns receive()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            outcome.disconnected = True
            task.cancel()
            return


async def _exchange(ex: Exchange, send: Send, outcome: Outcome) -> None:
    try:
        response = await ex.client.send(ex.request, stream=True)
    except ClientGone:  # the client went away while its body was being streamed up
        outcome.disconnected = True
        return
    except (httpx.HTTPError, OSError) as exc:
        outcome.error = translate(exc)
        await send_error(send, outcome.error, ex.extra_headers, ex.errors)
        return
    try:
        await _relay(ex, response, send, outcome)
    finally:
        await response.aclose()


async def _relay(ex: Exchange, response: httpx.Response, send: Send, outcome: Outcome) -> None:
    outcome.status = response.status_code
    found = _find_headers(
        response.headers.raw, b"content-encoding", b"content-type", b"content-length", b"transfer-encoding"
    )
    outcome.content_encoding = found[0].decode("latin-1") if found[0] is not None else None
    if ex.on_headers is not None:
        ex.on_headers(response)
    sse = (found[1] or b"").startswith(b"text/event-stream")
    outcome.streamed = sse
    framed = found[2] is not None or found[3] is not None
    headers = response_headers(response.headers, keep_length=not sse)
    if sse:
        headers += [(b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]
        headers = _dedupe(headers)
    await send(
        {"type": "http.response.start", "status": response.status_code, "headers": headers + ex.extra_headers}
    )
    # Event streams go out a whole event at a time (no client acts on an event before the
    # blank line that ends it, so holding its first lines until then costs nothing): an
    # upstream dying mid-event then leaves no half event for the error event's break to
    # complete and the client to read as a whole one. Encoded bodies cannot be cut, so they
    # go as they come.
    lines = sse and outcome.content_encoding is None
    held = tail = b""
    capturing = ex.capture_limit > 0
    chunks = response.aiter_raw()
    try:
        async for chunk in chunks:
            outcome.tail = (outcome.tail + chunk)[-TAIL_BYTES:]
            if len(outcome.head) < HEAD_BYTES:
                outcome.head += chunk[: HEAD_BYTES - len(outcome.head)]
            if capturing:
                capturing = _capture(outcome.body, chunk, ex.capture_limit)
            if lines:
                chunk, held = whole_events(held, chunk)
                if held and _DONE_LINE.search(_STREAM_START + held):  # the last line, maybe without its break
                    chunk, held = chunk + held, b""
                if not chunk:
                    continue
            window = (tail or _STREAM_START) + chunk
            tail = window[-_TAIL:]
            if (ex.stop_at_done or ex.ends_at_done) and sse and _DONE_LINE.search(window):
                # The response ends here, in the same write as its last bytes.
                await send({"type": "http.response.body", "body": chunk + held, "more_body": False})
                outcome.complete = True
                await _finish_quietly(chunks)
                return
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        if lines and not framed and (ex.stop_at_done or held or event_break(tail)):
            # Only the connection's end ended it, and not at an event's end: cut (its last line unsent).
            raise httpx.RemoteProtocolError("the upstream closed the connection before the stream ended")
        if held:
            await send({"type": "http.response.body", "body": held, "more_body": True})
        outcome.complete = True
    except (httpx.HTTPError, OSError) as exc:
        outcome.error = translate(exc)
        if not sse:
            # A plain body cut short reads as whole if it ends cleanly: its connection is closed
            # instead, without the body's end (the server does that when the app returns).
            log.warning("the upstream's reply broke mid-body (%s); closing the client's connection", exc)
            return
        # Mid-stream: the only way left to tell the client is an error event, an event of its own.
        event = ex.errors.event(outcome.error)
        await send({"type": "http.response.body", "body": event_break(tail) + event, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _finish_quietly(chunks: AsyncIterator[bytes]) -> None:
    """After ``[DONE]`` (the client has its whole response), let the upstream end its message.

    The end of the chunked body usually follows ``[DONE]`` within milliseconds;
    waiting for it keeps the upstream connection (its TLS session) reusable.
    An upstream that holds the socket open is let go after ``_LINGER_S``.
    """
    with contextlib.suppress(httpx.HTTPError, OSError, TimeoutError):
        async with asyncio.timeout(_LINGER_S):
            async for _ in chunks:
                pass


def _capture(body: bytearray, chunk: bytes, limit: int) -> bool:
    """Keep ``chunk`` for recording; a reply past ``limit`` is dropped whole, never kept cut short."""
    if len(body) + len(chunk) > limit:
        body.clear()
        return False
    body += chunk
    return True


def whole_events(held: bytes, chunk: bytes) -> tuple[bytes, bytes]:
    """(the bytes up to the end of the last whole event, the unfinished event after it) of ``held + chunk``.

    An event ends at a blank line (SSE: a line break right after a line break).
    Whole lines after the last event that are only comments (``: keep-alive``)
    go too: they open no event, and an upstream may send them alone to keep the
    connection busy. An unfinished line is always held. An unfinished event of
    more than ``EVENT_HELD_MAX`` bytes (a server that ends its lines but never
    an event) goes out by whole lines: what is held, and read again with every
    chunk, stays bounded.
    """
    data, rest = whole_lines(held, chunk)
    if len(data) > EVENT_HELD_MAX or data.endswith((b"\n\n", b"\r\n\r\n")):  # the common case: whole events
        return data, rest
    ends = [m.end() for m in _EVENT_END.finditer(data)]
    cut = ends[-1] if ends else 0
    if all(not line or line.startswith(b":") for line in _LINE_BREAK.split(data[cut:])):
        return data, rest
    return data[:cut], data[cut:] + rest


def whole_lines(held: bytes, chunk: bytes) -> tuple[bytes, bytes]:
    """(the bytes up to the last line break, the unfinished line after it) of ``held + chunk``."""
    data = held + chunk if held else chunk
    cut = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
    return data[:cut], data[cut:]


def event_break(sent: bytes) -> bytes:
    """What to send after ``sent`` (the end of what went out) so the next line starts a new event."""
    if not sent or sent.endswith((b"\n\n", b"\r\r", b"\r\n\r\n")):
        return b""
    # After a line break, one more ends the event; "\r" + "\n" would be one break, hence two.
    return b"\n\n"


def _find_headers(raw: list[tuple[bytes, bytes]], *names: bytes) -> list[bytes | None]:
    """The first value of each name, in one pass (httpx's ``Headers.get`` scans and decodes each time)."""
    out: list[bytes | None] = [None] * len(names)
    for name, value in raw:
        low = name.lower()
        if low in names:
            i = names.index(low)
            if out[i] is None:
                out[i] = value
    return out


def _dedupe(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    seen: set[bytes] = set()
    out = []
    for name, value in reversed(headers):
        if name in (b"cache-control", b"x-accel-buffering"):
            if name in seen:
                continue
            seen.add(name)
        out.append((name, value))
    return list(reversed(out))


async def send_error(
    send: Send, exc: PaperclipError, extra: list[tuple[bytes, bytes]] | None = None,
    shape: ErrorShape = OPENAI_ERRORS,
) -> None:
    await send_json(send, exc.status, shape.body(exc), extra)


async def send_json(
    send: Send, status: int, payload: object, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps(payload).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def read_body(receive: Receive, limit: int) -> bytes:
    """The whole request body, refusing more than ``limit`` bytes (raises PayloadTooLarge)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"The request body exceeds {limit} bytes.")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)

