"""What happens when a request is done: its log line, its usage, its labelled metrics.

Runs on the request path after the response (a dict update, a counter, a
log line: microseconds); the usage ledger is written to the store later, by
``flush`` in the maintenance loop and at shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..config import Settings
from ..metrics import Metrics
from ..store import Store
from ..store.interface import Usage
from ..tenancy import Tenant
from .requestlog import emit, hashed_user
from .usage_ledger import Billed, UsageLedger, billed

log = logging.getLogger("paperclip.accounting")

# Label values kept per metric: past these, a new model is counted as "other".
MAX_MODELS = 32
TOKEN_KINDS = ("client", "forwarded", "billed_prompt", "billed_completion")


@dataclass
class Finished:
    """One request, as the endpoint saw it end."""

    route: str
    status: str
    started: float  # perf_counter at arrival
    tenant: Tenant | None = None
    user: str | None = None
    session: str | None = None
    trace: str | None = None
    model: str | None = None
    tokens_in: int | None = None
    tokens_forwarded: int | None = None
    memories: int | None = None
    degraded: str | None = None
    added_s: float | None = None
    upstream_s: float | None = None
    tail: bytes = b""  # the response's last bytes (for its usage), when not encoded
    head: bytes = b""  # its first bytes (a Messages API stream's input count)
    content: str | None = None  # the latest user text, logged only with log_content
    extra: dict[str, Any] = field(default_factory=dict)


class Accounting:
    def __init__(self, settings: Settings, metrics: Metrics, ledger: UsageLedger | None = None) -> None:
        self.settings = settings
        self.metrics = metrics
        self.ledger = ledger or UsageLedger()
        self._tenants = {t.name for t in settings.tenants}
        self._models: set[str] = set()
        # Metric children by (tenant label, model label): labels() costs a lock and a hash each call.
        self._children: dict[tuple[str, str], tuple[Any, ...]] = {}

    def finish(self, done: Finished) -> None:
        """Log, count and note the usage of a finished request; never raises (it runs in a ``finally``)."""
        try:
            self._finish(done)
        except Exception:
            log.exception("accounting of a %s request failed", done.route)

    def _finish(self, done: Finished) -> None:
        bill = billed(done.tail, done.head) if done.tail else None
        if done.tenant is not None and done.tokens_in is not None:
            model = done.model or "unknown"
            self.ledger.note(
                done.tenant.id, model, done.tokens_in, done.tokens_forwarded or 0, bill, time.time()
            )
            self._count(done, bill)
        emit(self._line(done, bill))

    async def flush(self, store: Usage) -> None:
        await self.ledger.flush(store)


    def _count(self, done: Finished, bill: Billed | None) -> None:
        labels = (self._tenant_label(done.tenant), self._model_label(done.model or "unknown"))
        children = self._children.get(labels)
        if children is None:
            m = self.metrics
            children = self._children[labels] = (
                m.tenant_requests.labels(*labels),
                *(m.tenant_tokens.labels(*labels, kind) for kind in TOKEN_KINDS),
            )
        requests, client, forwarded, billed_prompt, billed_completion = children
        requests.inc()
        client.inc(done.tokens_in or 0)
        forwarded.inc(done.tokens_forwarded or 0)
        if bill is not None:
            billed_prompt.inc(bill.prompt_tokens)
            billed_completion.inc(bill.completion_tokens)

    def _tenant_label(self, tenant: Tenant | None) -> str:
        # Passthrough scopes are one per client key: unbounded, so they share one label.
        if tenant is None:
            return "none"
        return tenant.id if tenant.id in self._tenants else "passthrough"

    def _model_label(self, model: str) -> str:
        if model in self._models:
            return model
        if len(self._models) < MAX_MODELS:
            self._models.add(model)
            return model
        return "other"

    def _line(self, done: Finished, bill: Billed | None) -> dict[str, Any]:
        line: dict[str, Any] = {
            "tenant": done.tenant.id if done.tenant else None,
            "user": hashed_user(done.user),
            "session": done.session,
            "trace": done.trace,
            "route": done.route,
            "model": done.model,
            "status": done.status,
            "tokens_in": done.tokens_in,
            "tokens_forwarded": done.tokens_forwarded,
            "memories": done.memories,
            "added_ms": _ms(done.added_s),
            "upstream_ms": _ms(done.upstream_s),
            "total_ms": _ms(time.perf_counter() - done.started),
            "degraded": done.degraded,
            "billed_prompt_tokens": bill.prompt_tokens if bill else None,
            **done.extra,
        }
        if self.settings.server.log_content and done.content is not None:
            line["content"] = done.content
        return line


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)


USAGE_EVERY_S = 10.0


async def writing_usage(
    accounting: Accounting, store: Callable[[], Store | None], metrics: Metrics, every_s: float = USAGE_EVERY_S
) -> None:
    """Write the usage ledger every ``every_s`` once ``store()`` gives the opened store (and
    ``write_usage`` once more at shutdown); never raises."""
    while True:
        await asyncio.sleep(every_s)
        await write_usage(accounting, store(), metrics)


async def write_usage(accounting: Accounting, store: Store | None, metrics: Metrics) -> None:
    if store is None:
        return  # a proxy without a database keeps its usage in memory
    try:
        await accounting.flush(store.usage)
    except Exception:
        log.exception("writing usage failed; kept for the next flush")
        metrics.background_errors.labels("usage").inc()
