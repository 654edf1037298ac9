"""What a running proxy is made of: built once by the app factory, handed to every endpoint.

The memory layer's state is a value that changes as a whole (``MemoryStatus``):

    Starting  ──▶  Ready(layer, pipeline)  ──▶  Offline(reason)
        │              ▲        │
        │              │        ▼
        │          StoreDown(ready, reason)  ──▶  Offline(reason)
        └────────────────────────────────────────▶  Offline(reason)   (it could not start)

``StoreDown``: the database stopped answering (``readiness.watch_store``
pings it); requests go out plainly until it answers again, then the same
``Ready`` serves on. A database that does not answer at start keeps the
layer ``Starting`` with the reason (``startup.start_memory`` tries it again
until it answers). ``Offline`` is for good, until a restart.

``Ready`` without a layer is a proxy that needs none (no tenant has memory
or context on) or a test's own pipeline. Nothing else of a ``Runtime``
changes after it is built.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..background import Background
from ..config import Settings
from ..errors import Degraded, MemoryNotReady, MemoryUnavailable, StoreUnavailable
from ..metrics import Metrics
from ..pipeline.held_turns import HeldTurns
from ..pipeline.memory_layer import MemoryLayer
from ..pipeline.pipeline_protocol import Pipeline
from ..pipeline.plain import CountingPipeline
from ..store import Store
from ..tenancy import KeyRing
from ..upstream.clients import Upstreams
from .accounting import Accounting

log = logging.getLogger("paperclip.readiness")


@dataclass(frozen=True)
class Starting:
    """The database and the embedding model are still loading; requests are forwarded meanwhile.
    ``reason``: why the database is not open yet, while it is tried again."""

    reason: str | None = None


@dataclass(frozen=True)
class Ready:
    """Requests go through ``pipeline``; ``layer`` is the loaded memory layer (None: none needed)."""

    pipeline: Pipeline
    layer: MemoryLayer | None = None
    database_file: object | None = None  # the SQLite file opened at start (readiness.FileIdentity)


@dataclass(frozen=True)
class StoreDown:
    """The database does not answer (``reason``): requests go out plainly until ``ready`` serves again."""

    ready: Ready
    reason: str


@dataclass(frozen=True)
class Offline:
    """The memory layer cannot work (``reason``); ``layer`` stays open until shutdown, unused."""

    reason: str
    layer: MemoryLayer | None = None


MemoryState = Starting | Ready | StoreDown | Offline


class MemoryStatus:
    """The memory layer's current state: one value, replaced whole by ``ready`` and ``offline``.

    ``held``: the turns forwarded while it starts, recorded once it is ready (``startup.record_held``).
    """

    def __init__(self, state: MemoryState | None = None, held: HeldTurns | None = None) -> None:
        self.state: MemoryState = state or Starting()
        self.held = held or HeldTurns()

    def ready(self, pipeline: Pipeline, layer: MemoryLayer | None = None, database_file: object = None) -> None:
        self.state = Ready(pipeline, layer, database_file)

    def waiting(self, reason: str) -> None:
        """Still starting: the database did not answer (``reason``), and is tried again."""
        if isinstance(self.state, Starting):
            self.state = Starting(reason)

    def offline(self, reason: str) -> None:
        """Step aside for good (until a restart); said once in the log."""
        if not isinstance(self.state, Offline):
            log.error("memory layer off, serving as a plain proxy: %s", reason)
            self.state = Offline(reason, self.layer)
            self.held.release()  # nothing will record them

    def store_down(self, reason: str) -> None:
        """The database stopped answering: requests go out plainly (``store_unavailable``) until ``store_back``."""
        state = self.state
        if isinstance(state, Ready) and state.layer is not None:
            log.error("the database does not answer, serving as a plain proxy until it does: %s", reason)
            self.state = StoreDown(state, reason)

    def store_back(self) -> None:
        state = self.state
        if isinstance(state, StoreDown):
            log.warning("the database answers again: the memory layer serves again")
            self.state = state.ready

    @property
    def layer(self) -> MemoryLayer | None:
        """The loaded memory layer, whether it serves or not (for shutdown)."""
        state = self.state
        if isinstance(state, StoreDown):
            return state.ready.layer
        return state.layer if isinstance(state, Ready | Offline) else None

    @property
    def pipeline(self) -> Pipeline | None:
        """The pipeline requests go through now; None: ``unavailable()`` says why there is none."""
        state = self.state
        return state.pipeline if isinstance(state, Ready) else None

    def serving_layer(self) -> MemoryLayer:
        """The loaded layer while it serves (the admin API's way in); else the ``Degraded`` why not."""
        state = self.state
        if isinstance(state, Ready) and state.layer is not None:
            return state.layer
        if isinstance(state, Ready):
            raise MemoryUnavailable("This proxy keeps no memory (memory and context are off for every tenant).")
        raise self.unavailable()

    def unavailable(self) -> Degraded:
        state = self.state
        if isinstance(state, Offline):
            return MemoryUnavailable(f"The memory layer is off: {state.reason}.")
        if isinstance(state, StoreDown):
            return StoreUnavailable(f"The database does not answer: {state.reason}.")
        if isinstance(state, Starting) and state.reason is not None:
            return MemoryUnavailable(f"The memory layer could not start yet: {state.reason}.")
        return MemoryNotReady("The memory layer is not ready yet; try again shortly.")

    def checks(self) -> dict[str, bool]:
        """What ``/readyz`` reports: the config (valid, or nothing runs), the database, the embedding model."""
        state = self.state
        return {
            "config": True,
            "database": isinstance(state, Ready),
            "embedding": isinstance(state, Ready | StoreDown) or (isinstance(state, Offline) and state.layer is not None)
            or (isinstance(state, Starting) and state.reason is not None),
        }


@dataclass(frozen=True)
class Runtime:
    """The typed collaborators of a running proxy; ``memory`` says whether the memory layer serves."""

    settings: Settings
    keys: KeyRing
    upstreams: Upstreams
    metrics: Metrics
    background: Background
    accounting: Accounting  # each request's log line, usage and labelled metrics
    memory: MemoryStatus
    bypass: CountingPipeline  # the proxy without memory: what a bypassed or degraded request goes through

    def store(self) -> Store | None:
        layer = self.memory.layer
        return layer.store if layer is not None else None


def build_runtime(
    settings: Settings, upstreams: Upstreams, metrics: Metrics, background: Background,
    accounting: Accounting | None = None,
) -> Runtime:
    """A runtime whose memory layer is still starting (the lifespan, or the eval, loads it)."""
    return Runtime(
        settings=settings, keys=KeyRing(settings), upstreams=upstreams, metrics=metrics, background=background,
        accounting=accounting or Accounting(settings, metrics), memory=MemoryStatus(), bypass=CountingPipeline(),
    )
