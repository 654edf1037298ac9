"""One structured line per request, on the ``paperclip.request`` logger, and the log formats.

The line names the request (tenant, hashed user, session, trace, route,
status) and what Paperclip did to it (tokens in and forwarded, memories,
added and upstream milliseconds, degraded reason). Message text appears only
with ``server.log_content: true``. ``server.log_format`` picks ``json`` (one
object a line, for a collector) or ``text`` (``key=value``, for a terminal);
every line of the process is written the same way: ``paperclip.*``,
uvicorn's loggers (``serve`` passes uvicorn no logging config of its own),
the libraries', Python's warnings and uncaught exceptions.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import sys
import threading
from types import TracebackType
from typing import Any

from ..config import Server

log = logging.getLogger("paperclip.request")
FIELDS = "paperclip"  # the attribute of a LogRecord holding the line's fields


def hashed_user(user: str | None) -> str | None:
    """A user id in logs: stable, so one user's lines can be followed, but not the id itself."""
    return None if user is None else "u-" + hashlib.sha256(user.encode()).hexdigest()[:12]


def emit(fields: dict[str, Any]) -> None:
    if log.isEnabledFor(logging.INFO):
        log.info("request", extra={FIELDS: fields})


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": _time(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            **getattr(record, FIELDS, {}),
        }
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str, separators=(",", ":"))


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, FIELDS, {})
        pairs = " ".join(f"{k}={_text(v)}" for k, v in fields.items() if v is not None)
        line = f"{_time(record)} {record.levelname} {record.name}: {record.getMessage()}"
        line = f"{line} {pairs}" if pairs else line
        if record.exc_info:
            line = f"{line}\n{self.formatException(record.exc_info)}"
        return line


def configure(server: Server, level: str = "info") -> logging.Handler:
    """Send every logger of the process to stderr in ``server.log_format``; returns the handler.

    The handler is the root logger's, at ``level``: ``paperclip.*``, uvicorn's
    and every library's records reach it, and so do warnings and uncaught
    exceptions, so that in ``json`` every line is one object.
    """
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if server.log_format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    ours = logging.getLogger("paperclip")
    for old in list(ours.handlers):
        ours.removeHandler(old)
    ours.setLevel(level.upper())
    ours.propagate = True
    logging.captureWarnings(True)
    sys.excepthook = _log_uncaught
    threading.excepthook = lambda hook: _log_uncaught(hook.exc_type, hook.exc_value, hook.exc_traceback)
    return handler


def _log_uncaught(kind: type[BaseException], error: BaseException | None, trace: TracebackType | None) -> None:
    """Python's hooks for an exception nothing caught (in the main thread, in another): one critical line."""
    logging.getLogger("paperclip").critical("uncaught %s", kind.__name__, exc_info=error)


def _time(record: logging.LogRecord) -> str:
    return dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds")


def _text(value: Any) -> str:
    text = str(value)
    return json.dumps(text, ensure_ascii=False) if (" " in text or '"' in text or not text) else text
