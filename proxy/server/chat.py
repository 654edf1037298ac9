"""``POST /v1/chat/completions``: the intercepted path (SPEC §2)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import repeat
from typing import Any, TypeVar

import httpx
from starlette.types import Receive, Scope, Send

from .. import json_bytes
from ..content_coding import decode
from ..errors import (
    BadRequest,
    BodyTooLarge,
    Degraded,
    MemoryNotReady,
    PayloadTooLarge,
    UndecodableBody,
)
from ..offload import off_loop
from ..pipeline.chat_call import ChatCall, Reply
from ..pipeline.pipeline_protocol import Pipeline, Prepared
from ..tenancy import Tenant, client_key, header_text, resolve_session, resolve_user
from ..upstream.headers import header_map, join_url, request_headers
from ..upstream.request import body_request
from .accounting import Finished
from .endpoint import Endpoint
from .jsonbody import parse_json
from .relay import Exchange, Outcome, read_body
from .startup import hold

log = logging.getLogger("paperclip.chat")
T = TypeVar("T")

# Bodies past this size, inline media aside, skip the memory layer: forwarded as they came,
# nothing recorded, tokens estimated. Counting, hashing, masking and embedding megabytes of
# new text would hold the CPU (and Python's GIL) for seconds while every other client waits;
# an image, an audio clip or a file sent inline is estimated, never read (``inline_media_bytes``).
MEMORY_MAX_BODY_BYTES = 2 * 1024 * 1024
BYTES_PER_TOKEN = 4  # a typical English ratio, for the estimate only
# A string this long under a media key, or a data URL, is inline media (base64), not words.
_MEDIA_MIN_CHARS = 1024
_MEDIA_KEYS = frozenset({"data", "file_data", "url", "image_url"})


@dataclass(frozen=True)
class Shaped:
    """A request body read as the pipeline's call, and how to write the pipeline's messages back into it."""

    call: ChatCall
    readable: bool  # False: not a body we understand; the upstream judges it, we only relay
    rebuild: Callable[[list[dict[str, Any]]], bytes]


@dataclass(frozen=True)
class Incoming:
    """A chat request as read: its tenant, its call, its bytes, and whether the memory layer stays out of it."""

    tenant: Tenant
    shaped: Shaped
    raw: bytes
    bypass: bool
    large: bool  # past MEMORY_MAX_BODY_BYTES: forwarded as it came, its tokens estimated

    @property
    def call(self) -> ChatCall:
        return self.shaped.call


@dataclass(frozen=True)
class Outgoing:
    """What goes upstream: the body to forward, what was prepared, and the pipeline that records it (None: none)."""

    prepared: Prepared
    body: bytes
    by: Pipeline | None


class ChatEndpoint(Endpoint):
    """The intercepted path; subclasses read another shape of body (``shape``) and share the rest.

    A request's walk (``serve``): read it, prepare what to forward, relay the
    exchange, record the turn after the response.
    """

    route = "chat"
    stop_at_done = True  # a chat stream ends at its [DONE], even if the upstream holds the socket open

    async def serve(self, scope: Scope, receive: Receive, send: Send, done: Finished) -> None:
        incoming = await self.read(scope, receive, done)
        outgoing = await self.prepare(incoming)
        _describe(done, incoming.call, outgoing.prepared, self.rt.settings.server.log_content)
        outcome = await self.relay(self.exchange(scope, incoming, outgoing), receive, send, done)
        self.record(incoming, outgoing, outcome)

    async def read(self, scope: Scope, receive: Receive, done: Finished) -> Incoming:
        """The body, decoded and parsed, shaped into the pipeline's call (a ``PaperclipError`` if bad)."""
        headers = header_map(scope["headers"])
        tenant = done.tenant = self.rt.keys.tenant_for(client_key(headers))
        limit = self.rt.settings.server.max_body_bytes
        raw = await read_body(receive, limit)
        if headers.get("content-encoding"):
            raw = await off_loop(len(raw), decode_request_body, raw, headers.get("content-encoding"), limit)
        body = await parse_body(raw)
        memory_off = headers.get("x-paperclip-memory", "").strip().lower() == "off"
        large = len(raw) > MEMORY_MAX_BODY_BYTES and len(raw) - inline_media_bytes(body) > MEMORY_MAX_BODY_BYTES
        bypass = memory_off or large or not self._enabled(tenant)
        shaped = await self.shape(scope, headers, tenant, body, raw=raw, bypass=bypass)
        # An unreadable body is not ours to judge: the upstream validates it and answers.
        return Incoming(tenant, shaped, raw, bypass or not shaped.readable, large)

    async def prepare(self, incoming: Incoming) -> Outgoing:
        """What to forward: the pipeline's messages written back into the body, or the body as it came."""
        served = None if incoming.bypass else self.rt.memory.pipeline  # None while loading, or once off
        if incoming.large:
            prepared = too_large(len(incoming.raw))
        else:
            prepared = await self._prepare(incoming.call, served, bypass=incoming.bypass)
        messages = prepared.messages
        body = incoming.raw if messages is None else await off_loop(len(incoming.raw), incoming.shaped.rebuild, messages)
        return Outgoing(prepared, body, served)

    def exchange(self, scope: Scope, incoming: Incoming, outgoing: Outgoing) -> Exchange:
        ex = Exchange(
            client=self.rt.upstreams.client(incoming.tenant.settings.upstream),
            request=self.upstream_request(scope, incoming.tenant, outgoing.body),
            extra_headers=self._headers(scope, incoming.call, outgoing.prepared),
            capture_limit=0 if incoming.bypass else self.rt.settings.server.max_record_bytes,
            stop_at_done=self.stop_at_done,
            errors=self.errors,
        )
        ex.body_done.set()
        return ex

    def record(self, incoming: Incoming, outgoing: Outgoing, outcome: Outcome) -> None:
        """After the response, in the background: the pipeline that prepared the turn records it.

        A turn forwarded while the memory layer started is held until it is ready (SPEC §9).
        """
        if not outcome.succeeded:  # a refused or broken exchange records nothing
            return
        reply = reply_of(outcome, self.rt.settings.server.max_record_bytes)
        if outgoing.by is not None:
            self.rt.background.spawn("record", outgoing.by.record(incoming.call, outgoing.prepared, reply))
        elif outgoing.prepared.degraded == MemoryNotReady.reason and not incoming.bypass:
            hold(self.rt, incoming.call, reply, len(incoming.raw))

    async def shape(
        self, scope: Scope, headers: Mapping[str, str], tenant: Tenant, body: dict[str, Any], *, raw: bytes, bypass: bool
    ) -> Shaped:
        """The chat completions body (``raw``, parsed: ``body``): its ``messages`` are the pipeline's."""
        found = body.get("messages")
        readable = isinstance(found, list) and all(map(isinstance, found, repeat(dict)))
        messages: list[dict[str, Any]] = found if readable and isinstance(found, list) else []
        user, session = await user_and_session(headers, tenant, body, messages, len(raw))
        call = new_call(tenant, user, session, body, messages, headers, deployment_or_model(scope, body),
                        raw=raw if readable else b"")
        return Shaped(call, readable, lambda out: rebuild_body(body, out))

    def _enabled(self, tenant: Tenant) -> bool:
        st = tenant.settings
        return bool(st.context.enabled or st.memory.enabled)

    async def _prepare(self, call: ChatCall, served: Pipeline | None, *, bypass: bool) -> Prepared:
        try:
            if bypass:
                prepared = await self.rt.bypass.prepare(call)
            elif served is None:
                raise self.rt.memory.unavailable()
            else:
                prepared = await served.prepare(call)
        except asyncio.CancelledError:
            raise
        except Degraded as exc:
            log.warning("memory layer stepped aside, forwarding unchanged: %s (%s)", exc.reason, exc.message)
            prepared = await self.rt.bypass.prepare(call)
            prepared.degraded = exc.reason
        except Exception as exc:
            log.warning("memory layer failed, forwarding unchanged: %s", type(exc).__name__, exc_info=True)
            prepared = await self.rt.bypass.prepare(call)
            prepared.degraded = type(exc).__name__
        if prepared.degraded:
            self.rt.metrics.degraded.labels(prepared.degraded).inc()
        m = self.rt.metrics
        m.tokens_in.inc(prepared.tokens_in)
        m.tokens_forwarded.inc(prepared.tokens_forwarded)
        shrank = prepared.tokens_in - prepared.tokens_forwarded
        (m.tokens_saved if shrank > 0 else m.tokens_added).inc(abs(shrank))
        m.memories_injected.inc(prepared.memories)
        return prepared

    def upstream_request(self, scope: Scope, tenant: Tenant, body: bytes) -> httpx.Request:
        """The request to the tenant's upstream: the client's path and query under its ``base_url``."""
        up = tenant.settings.upstream
        headers = request_headers(
            [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]],
            tenant,
            ours=self.rt.keys.is_ours,
            drop=frozenset({"content-encoding"}),  # the body goes out decoded
        )
        headers.append(("content-length", str(len(body))))
        url = join_url(up.base_url, scope["path"], scope.get("query_string", b""))
        return body_request("POST", url, headers, body)

    def _headers(self, scope: Scope, call: ChatCall, prepared: Prepared) -> list[tuple[bytes, bytes]]:
        sent = next((v.strip() for k, v in scope["headers"] if k == b"x-paperclip-session"), None)
        out = [  # a session the client named goes back byte for byte, whatever its charset
            (b"x-paperclip-session",
             sent if sent and header_text("x-paperclip-session", sent) == call.session else call.session.encode()),
            (b"x-paperclip-trace", call.trace_id.encode()),
            (b"x-paperclip-tokens-in", str(prepared.tokens_in).encode()),
            (b"x-paperclip-tokens-forwarded", str(prepared.tokens_forwarded).encode()),
            (b"x-paperclip-memories", str(prepared.memories).encode()),
        ]
        if prepared.degraded:
            out.append((b"x-paperclip-degraded", prepared.degraded.encode("ascii", "replace")))
        return out


def new_call(
    tenant: Tenant,
    user: str,
    session: str,
    body: dict[str, Any],
    messages: list[dict[str, Any]],
    headers: Mapping[str, str],
    model: str | None,
    **shape: Any,
) -> ChatCall:
    return ChatCall(
        tenant=tenant, user=user, session=session, trace_id="t-" + uuid.uuid4().hex, body=body,
        messages=messages, model=model, headers=headers, **shape,
    )


def _describe(done: Finished, call: ChatCall, prepared: Prepared, content: bool) -> None:
    done.user, done.session, done.trace, done.model = call.user, call.session, call.trace_id, call.model
    done.tokens_in, done.tokens_forwarded = prepared.tokens_in, prepared.tokens_forwarded
    done.memories, done.degraded = prepared.memories, prepared.degraded
    if content:
        last = next((m for m in reversed(call.messages) if m.get("role") == "user"), None)
        done.content = str(last.get("content")) if last is not None else None


def deployment_or_model(scope: Scope, body: dict[str, Any]) -> str | None:
    """The model tokens are counted for: Azure's deployment in the path, else the body's ``model``."""
    deployment = scope.get("path_params", {}).get("deployment")
    if isinstance(deployment, str) and deployment:
        return deployment
    model = body.get("model")
    return model if isinstance(model, str) else None


def reply_of(outcome: Outcome, max_bytes: int) -> Reply:
    """The pipeline's view of what the relay saw (``max_bytes``: ``server.max_record_bytes``)."""
    return Reply(
        status=outcome.status,
        # A reply the client did not get whole (it left; it outgrew the capture) is not the assistant's.
        body=bytes(outcome.body) if outcome.complete else b"",
        streamed=outcome.streamed,
        content_encoding=outcome.content_encoding,
        disconnected=outcome.disconnected,
        max_bytes=max_bytes,
    )


def inline_media_bytes(value: Any) -> int:
    """The characters of the inline media in a request body: images, audio and files sent as data URLs or
    base64 ``data`` (OpenAI's ``image_url``, ``input_audio``, ``file_data``; Anthropic's ``source``)."""
    total = 0
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, item in node.items():
                if isinstance(item, str):
                    if len(item) >= _MEDIA_MIN_CHARS and (key in _MEDIA_KEYS or item.startswith("data:")):
                        total += len(item)
                elif isinstance(item, (dict, list)):
                    stack.append(item)
        elif isinstance(node, list):
            stack.extend(n for n in node if isinstance(n, (dict, list)))
    return total


def too_large(size: int) -> Prepared:
    estimate = size // BYTES_PER_TOKEN
    return Prepared(messages=None, tokens_in=estimate, tokens_forwarded=estimate, degraded="too_large")


async def parse_body(raw: bytes) -> dict[str, Any]:
    body = await parse_json(raw)
    if not isinstance(body, dict):
        raise BadRequest("The request body must be a JSON object.")
    return body


def rebuild_body(body: dict[str, Any], messages: list[dict[str, Any]]) -> bytes:
    """The client's body with only ``messages`` replaced: key order, nulls and unknown fields kept."""
    out = dict(body)
    out["messages"] = messages
    return json_bytes.dumps(out)


def decode_request_body(raw: bytes, encoding: str | None, limit: int) -> bytes:
    """Decode a gzip/deflate request body, refusing to inflate past ``limit`` (zip bombs)."""
    try:
        return decode(raw, encoding, limit)
    except BodyTooLarge as exc:
        raise PayloadTooLarge(f"The decoded request body exceeds {limit} bytes.") from exc
    except UndecodableBody as exc:
        raise BadRequest(f"The request body cannot be read: {exc}.") from exc


async def user_and_session(
    headers: Mapping[str, str], tenant: Tenant, body: Mapping[str, Any], messages: list[dict[str, Any]], size: int
) -> tuple[str, str]:
    """Who is asking and in which conversation (SPEC §4), whatever the shape of the body."""
    user = resolve_user(headers, body)
    return user, await off_loop(size, resolve_session, headers, tenant.id, user, messages)
