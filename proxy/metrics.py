"""Prometheus metrics, one registry per app (no module globals)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

_LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "paperclip_requests", "Requests served", ["route", "status"], registry=r
        )
        self.added_latency = Histogram(
            "paperclip_added_latency_seconds",
            "Time Paperclip spends before the upstream request is sent",
            ["route"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.tokens_in = Counter("paperclip_tokens_in", "Prompt tokens clients sent", registry=r)
        self.tokens_forwarded = Counter(
            "paperclip_tokens_forwarded", "Prompt tokens forwarded upstream", registry=r
        )
        # A request's forwarded prompt is the client's, less what compression removed, plus the memory block:
        # it shrank (saved) or grew (added). Both are counted, so a cost is never clamped away: saved - added
        # is tokens_in - tokens_forwarded, the usage API's net tokens_saved.
        self.tokens_saved = Counter(
            "paperclip_tokens_saved",
            "Prompt tokens not forwarded, over requests whose forwarded prompt was shorter than the client's",
            registry=r,
        )
        self.tokens_added = Counter(
            "paperclip_tokens_added",
            "Prompt tokens added, over requests whose forwarded prompt was longer than the client's "
            "(a memory block larger than what compression removed)",
            registry=r,
        )
        self.compressions = Counter(
            "paperclip_compressions", "Compression attempts", ["kind", "result"], registry=r
        )
        self.memories_injected = Counter(
            "paperclip_memories_injected", "Memory cards injected", registry=r
        )
        self.memories_extracted = Counter(
            "paperclip_memories_extracted", "Memory items extracted", ["via"], registry=r
        )
        self.degraded = Counter(
            "paperclip_degraded", "Requests that fell back to plain forwarding", ["reason"], registry=r
        )
        self.background_errors = Counter(
            "paperclip_background_errors", "Failures of after-response work", ["stage"], registry=r
        )
        self.records = Gauge(
            "paperclip_records", "After-response records running or waiting (BoundedPipeline's backlog)", registry=r
        )
        self.records_covered = Counter(
            "paperclip_records_covered",
            "Waiting records that gave way to a newer request of their session, which resent their conversation",
            registry=r,
        )
        self.held_turns = Counter(
            "paperclip_held_turns",
            "Turns forwarded while the memory layer started: held to be recorded, or dropped (the queue was full)",
            ["outcome"], registry=r,
        )

        # Labelled by tenant and model, both bounded (proxy/server/accounting.py).
        self.tenant_requests = Counter(
            "paperclip_tenant_requests", "Intercepted requests per tenant and model",
            ["tenant", "model"], registry=r,
        )
        self.tenant_tokens = Counter(
            "paperclip_tenant_tokens",
            "Tokens per tenant and model: client (sent), forwarded, billed_prompt, billed_completion",
            ["tenant", "model", "kind"], registry=r,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
