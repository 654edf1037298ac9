"""Paperclip's exception tree, and the one place that renders OpenAI's error envelope.

    PaperclipError                 an error Paperclip itself answers with
    ├── ClientError                the client's request is wrong (4xx)
    │   ├── BadRequest             400 invalid_request_error (bad JSON, bad body)
    │   ├── Unauthorized           401 invalid_api_key
    │   ├── NotFound               404
    │   └── PayloadTooLarge        413
    ├── UpstreamError              the upstream could not be reached (5xx)
    │   ├── UpstreamUnreachable    502 (connect refused, DNS, protocol error)
    │   ├── UpstreamUnavailable    503 (pool exhausted)
    │   └── UpstreamTimeout        504 (connect or first-byte timeout)
    └── MemoryNotReady             503 memory_not_ready: the memory layer is still loading
                                   (admin calls answer it; a chat request degrades to
                                   plain forwarding with reason ``starting``)
    ClientGone                     the client disconnected: nobody is left to answer
    ConfigError                    a bad config file; the CLI exits 2

httpx exceptions are translated into this tree in ``upstream.translate`` only.
An upstream *response* with a 4xx/5xx status is never an exception here: it is
passed through to the client as it came.
"""

from __future__ import annotations

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


class NotFound(ClientError):
    status = 404
    code = "not_found"


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


class MemoryNotReady(PaperclipError):
    status = 503
    code = "memory_not_ready"
    reason = "starting"  # the X-Paperclip-Degraded reason of a chat request meanwhile


class ClientGone(Exception):
    """The client disconnected while we were still reading its request."""


class ConfigError(Exception):
    """A configuration problem: which file, which key, what is wrong."""

    def __init__(self, source: str, key: str, problem: str) -> None:
        super().__init__(f"{source}: {key}: {problem}")
        self.source = source
        self.key = key
        self.problem = problem


def envelope(message: str, type: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}

