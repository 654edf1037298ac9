"""What a running proxy is made of: built once by the app factory, handed to every endpoint."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .accounting import Accounting
from .background import Background
from .config import Settings
from .metrics import Metrics
from .pipeline.layer import MemoryLayer
from .pipeline.plain import CountingPipeline
from .pipeline.protocol import Pipeline
from .store import Store
from .tenancy import KeyRing
from .upstream import Upstreams


@dataclass
class Runtime:
    """``pipeline`` serves chat requests: the starting stand-in (or a test's) until ``join``.

    ``memory`` is the loaded memory layer, or None (still loading, failed to
    load, not needed, or a test's pipeline in its place).
    """

    settings: Settings
    keys: KeyRing
    upstreams: Upstreams
    metrics: Metrics
    background: Background
    pipeline: Pipeline
    bypass: CountingPipeline = field(default_factory=CountingPipeline)
    memory: MemoryLayer | None = None
    ready: dict[str, bool] = field(default_factory=dict)
    problem: str | None = None  # why the memory layer is off, for /readyz (readiness.py)
    database_identity: Any = None  # the database file opened at start (readiness.FileIdentity)
    accounting: Accounting = field(init=False)  # each request's log line, usage and labelled metrics

    def __post_init__(self) -> None:
        self.accounting = Accounting(self.settings, self.metrics)

    def store(self) -> Store | None:
        return self.memory.store if self.memory is not None else None

    def join(self, memory: MemoryLayer) -> None:
        """The memory layer is loaded: requests use it from now on, and /readyz says 200."""
        self.memory = memory
        self.pipeline = memory.serve()
        self.ready.update(database=True, embedding=True)
