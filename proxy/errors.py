"""Paperclip's exception tree, and the one place that renders its errors: OpenAI's envelope, Anthropic's.

    PaperclipError                 an error Paperclip itself answers with
    ├── ClientError                the client's request is wrong (4xx)
    │   ├── BadRequest             400 invalid_request_error (bad JSON, bad body)
    │   ├── Unauthorized           401 invalid_api_key
    │   ├── Forbidden              403 permission_denied (a key acting beyond its tenant or scope)
    │   ├── CsrfRefused            403 csrf_token_invalid (an inspector form not from the inspector)
    │   ├── NotFound               404
    │   ├── MethodNotAllowed       405 (a known admin path, another method)
    │   └── PayloadTooLarge        413
    ├── UpstreamError              the upstream could not be reached (5xx)
    │   ├── UpstreamUnreachable    502 (connect refused, DNS, protocol error)
    │   ├── UpstreamUnavailable    503 (pool exhausted)
    │   └── UpstreamTimeout        504 (connect or first-byte timeout)
    └── Degraded                   503: the memory layer cannot help this request, and says why
        │                          (``reason``): a chat request is forwarded plainly with
        │                          ``X-Paperclip-Degraded: <reason>``, an admin call answers 503
        ├── MemoryNotReady         reason ``starting``: the memory layer is still loading
        ├── MemoryUnavailable      reason ``memory_unavailable``: it is off (its database is gone)
        └── MemoryBusy             reason ``memory_busy``: recording is too far behind
    ClientGone                     the client disconnected: nobody is left to answer
    ConfigError                    a bad config file (every problem of it); the CLI exits 2
    └── PromptError                a prompt folder, file or variable is wrong
    InvalidExport                  a file that is not an export this version can read (import)
    OnnxUnavailable                a model that does not run on ONNX Runtime (the embedder falls back)

httpx exceptions are translated into this tree in ``upstream.clients.translate`` only.
An error goes out in the shape of the API the client speaks (``ErrorShape``):
OpenAI's ``{"error": {...}}`` everywhere but on Anthropic's Messages API,
whose clients read ``{"type": "error", "error": {"type", "message"}}``.
An upstream *response* with a 4xx/5xx status is never an exception here: it is
passed through to the client as it came.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


class PaperclipError(Exception):
    status = 500
    type = "server_error"
    code: str | None = None

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code

    def envelope(self) -> dict[str, Any]:
        return envelope(self.message, self.type, self.param, self.code)


class ClientError(PaperclipError):
    status = 400
    type = "invalid_request_error"


class BadRequest(ClientError):
    status = 400


class Unauthorized(ClientError):
    status = 401
    code = "invalid_api_key"


class Forbidden(ClientError):
    status = 403
    code = "permission_denied"


class CsrfRefused(ClientError):
    status = 403
    code = "csrf_token_invalid"


class NotFound(ClientError):
    status = 404
    code = "not_found"


class MethodNotAllowed(ClientError):
    status = 405
    code = "method_not_allowed"


class PayloadTooLarge(ClientError):
    status = 413
    code = "request_too_large"


class UpstreamError(PaperclipError):
    status = 502
    type = "upstream_error"


class UpstreamUnreachable(UpstreamError):
    status = 502
    code = "upstream_unreachable"


class UpstreamUnavailable(UpstreamError):
    status = 503
    code = "upstream_unavailable"


class UpstreamTimeout(UpstreamError):
    status = 504
    code = "upstream_timeout"


class Degraded(PaperclipError):
    """The memory layer steps aside for this request; ``reason`` is the ``X-Paperclip-Degraded`` value."""

    status = 503
    code = "degraded"
    reason = "degraded"

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message, code=reason)
        if reason is not None:
            self.reason = reason


class MemoryNotReady(Degraded):
    code = "memory_not_ready"
    reason = "starting"


class MemoryUnavailable(Degraded):
    code = "memory_unavailable"
    reason = "memory_unavailable"


class MemoryBusy(Degraded):
    code = "memory_busy"
    reason = "memory_busy"


class ClientGone(Exception):
    """The client disconnected while we were still reading its request."""


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong in a configuration: the file, the dotted key, what is wrong with it."""

    source: str
    key: str
    problem: str

    def __str__(self) -> str:
        return f"{self.source}: {self.key}: {self.problem}"


class ConfigError(Exception):
    """A configuration that cannot be served: every problem found in it, each naming file and key.

    ``source``, ``key`` and ``problem`` are the first problem's; ``problems``
    holds them all, in the order of the file.
    """

    def __init__(self, source: str, key: str, problem: str, *more: ConfigProblem) -> None:
        self.problems = (ConfigProblem(source, key, problem), *more)
        super().__init__("\n".join(map(str, self.problems)))
        self.source = source
        self.key = key
        self.problem = problem

    @classmethod
    def of(cls, problems: Sequence[ConfigProblem]) -> ConfigError:
        first, *more = problems
        return cls(first.source, first.key, first.problem, *more)


class PromptError(ConfigError):
    """A prompt folder, file or variable is wrong: ``<file>: <key>: <problem>``."""


class InvalidExport(ValueError):
    """The file is not an export this version of Paperclip can read; the message says where."""


class OnnxUnavailable(Exception):
    """The model does not run on ONNX Runtime; ``expected`` when its shape is simply not exportable."""

    def __init__(self, reason: str, *, expected: bool = False) -> None:
        super().__init__(reason)
        self.expected = expected


def envelope(message: str, type: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


# Anthropic's error types by status; any other status is an ``api_error``.
ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    429: "rate_limit_error",
}


def anthropic_envelope(exc: PaperclipError) -> dict[str, Any]:
    return {"type": "error", "error": {"type": ANTHROPIC_TYPES.get(exc.status, "api_error"), "message": exc.message}}


@dataclass(frozen=True)
class ErrorShape:
    """How one API says an error: its JSON body, and the same body as an SSE event in a stream."""

    body: Callable[[PaperclipError], dict[str, Any]]
    event_name: str | None = None  # Anthropic's streams name each event; OpenAI's send data only

    def event(self, exc: PaperclipError) -> bytes:
        head = f"event: {self.event_name}\n".encode() if self.event_name else b""
        return head + b"data: " + json.dumps(self.body(exc)).encode() + b"\n\n"


OPENAI_ERRORS = ErrorShape(PaperclipError.envelope)
ANTHROPIC_ERRORS = ErrorShape(anthropic_envelope, "error")
