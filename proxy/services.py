"""The collaborators a running app is made of, built once by the app factory."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .background import Background
from .config import Settings
from .metrics import Metrics
from .pipeline import CountingPipeline, Pipeline
from .tenancy import KeyRing
from .upstream import Upstreams


@dataclass
class Services:
    settings: Settings
    keys: KeyRing
    upstreams: Upstreams
    metrics: Metrics
    background: Background
    pipeline: Pipeline
    bypass: CountingPipeline
    ready: dict[str, bool] = field(default_factory=dict)
    store: Any = None
    embedder: Any = None
    problem: str | None = None  # why the memory layer is off, for /readyz
    database_identity: Any = None  # the database file opened at start (readiness.FileIdentity)
