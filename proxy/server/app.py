"""The app factory: routes, lifespan, and the collaborators tests may replace."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import httpx
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Match, Route

from ..background import Background
from ..config import Settings
from ..errors import MethodNotAllowed, NotFound, Unauthorized
from ..memory.search.embedder import Embedder
from ..metrics import Metrics
from ..pipeline.pipeline_protocol import Pipeline
from ..store import urls
from ..tenancy import client_key
from ..tokens import encoding_for
from ..upstream.clients import Upstreams
from .accounting import Accounting, write_usage, writing_usage
from .admin.routes import admin_routes
from .chat import ChatEndpoint
from .cross_origin import CrossOrigin
from .envelope_guard import Guard, http_error
from .inspector.site import inspector_site
from .maintenance import maintain
from .memory_tools import MemoryTools
from .messages import MessagesEndpoint
from .passthrough import PassthroughEndpoint
from .readiness import FileIdentity, check_database
from .responses import ResponsesEndpoint
from .runtime import Offline, Ready, Runtime, Starting, StoreDown, build_runtime
from .startup import serve_memory, settle_heap

log = logging.getLogger("paperclip")

ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


def create_app(
    settings: Settings,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    pipeline: Pipeline | None = None,
    embedder: Embedder | None = None,
    accounting: Accounting | None = None,
    freeze_heap: bool = False,
) -> Starlette:
    """Build the ASGI app.

    ``transport``, ``pipeline``, ``embedder`` and ``accounting`` replace the real ones in tests
    and benches;
    ``freeze_heap`` is ``paperclip serve``'s (``startup.serve_memory``).
    The database and the embedding model are opened in ``lifespan``, in the
    background: the proxy listens at once (pass-through works, ``/readyz``
    says 503) and the memory layer joins when it is loaded.
    """
    metrics = Metrics()
    runtime = build_runtime(
        settings,
        Upstreams(transport, settings.server.max_record_bytes),
        metrics,
        Background(on_error=lambda stage: metrics.background_errors.labels(stage).inc()),
        accounting,
    )

    tools = MemoryTools(runtime)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        tasks: list[asyncio.Future[None]] = [
            asyncio.ensure_future(writing_usage(runtime.accounting, runtime.store, metrics))
        ]
        if pipeline is not None:
            runtime.memory.ready(pipeline)
        elif not memory_needed(settings):
            # Nothing to remember for anyone: no model, no database (a plain proxy). Counting's tables
            # load before the first request, off the loop (~0.2 s of CPU that would stall it).
            await asyncio.to_thread(encoding_for, None)
            runtime.memory.ready(runtime.bypass)
            if freeze_heap:
                settle_heap()  # nothing more to load: the collector is tuned now
        else:
            tasks.append(asyncio.ensure_future(serve_memory(runtime, embedder, freeze_heap=freeze_heap)))
            tasks.append(asyncio.ensure_future(maintain(settings, runtime.store, metrics)))
        try:
            async with tools.running():  # the MCP server's requests run in its task group
                yield
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await runtime.background.close()
            await write_usage(runtime.accounting, runtime.store(), metrics)
            await runtime.upstreams.aclose()
            if runtime.memory.layer is not None:
                await runtime.memory.layer.aclose()

    app = Starlette(
        routes=routes(runtime, tools),
        lifespan=lifespan,
        middleware=[Middleware(CrossOrigin, origins=settings.server.cors_origins), Middleware(Guard)],
        exception_handlers={HTTPException: http_error},
    )
    app.state.runtime = runtime
    return app


def memory_needed(settings: Settings) -> bool:
    everyone = [settings.defaults, *settings.tenants]
    return any(t.context.enabled or t.memory.enabled for t in everyone)


def routes(rt: Runtime, tools: MemoryTools) -> list[BaseRoute]:
    chat = ChatEndpoint(rt)
    passthrough = PassthroughEndpoint(rt)
    responses = ResponsesEndpoint(rt)
    messages = MessagesEndpoint(rt)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        # Only a SQLite file can vanish under the process; a PostgreSQL pool reconnects.
        state = rt.memory.state
        if isinstance(state, Ready) and isinstance(state.database_file, FileIdentity):
            await check_database(rt, urls.sqlite_path(rt.settings.storage.url), state.database_file)
        checks = rt.memory.checks()
        ok = all(checks.values())
        payload: dict[str, object] = {"ready": ok, "checks": checks}
        if isinstance(state := rt.memory.state, Offline | StoreDown | Starting) and state.reason is not None:
            payload["reason"] = state.reason
        return JSONResponse(payload, status_code=200 if ok else 503)

    async def metrics(request: Request) -> Response:
        # Tenant names are in the labels: with server.metrics_keys set, only those keys (and
        # operator keys) may read them (docs/decisions/0010-metrics-access.md).
        if not rt.keys.may_read_metrics(client_key(request.headers)):
            refused = Unauthorized("/metrics needs a metrics key (server.metrics_keys) or an operator key.")
            return JSONResponse(refused.envelope(), status_code=refused.status)
        return Response(rt.metrics.render(), media_type=rt.metrics.content_type)

    async def not_found(request: Request) -> Response:
        """404 for a path no route serves; 405, naming the methods, for a known path with another method."""
        allowed = sorted({m for route in served if route.matches(request.scope)[0] == Match.PARTIAL
                          for m in getattr(route, "methods", None) or ()})
        if allowed:
            refused = MethodNotAllowed(f"{request.method} is not allowed here; use {', '.join(allowed)}.")
            return JSONResponse(refused.envelope(), status_code=405, headers={"allow": ", ".join(allowed)})
        exc = NotFound(f"Unknown path {request.url.path}")
        return JSONResponse(exc.envelope(), status_code=404)

    known: list[Route] = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/health", healthz, methods=["GET"]),  # the name LiteLLM and most proxies answer on
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/chat/completions", chat, methods=["POST"]),
        Route("/v1/responses", responses, methods=["POST"]),
        Route("/responses", responses, methods=["POST"]),
        Route("/v1/messages", messages, methods=["POST"]),  # Anthropic's Messages API
        Route("/messages", messages, methods=["POST"]),
        Route("/mcp", tools, methods=["POST"]),  # the memory tools over MCP; stateless: no GET stream, no session to DELETE
        Route("/openai/deployments/{deployment}/chat/completions", chat, methods=["POST"]),  # Azure OpenAI
        Route("/v1/{path:path}", passthrough, methods=ALL_METHODS),
        Route("/openai/{path:path}", passthrough, methods=ALL_METHODS),  # Azure's other paths
    ]
    served: list[BaseRoute] = [*known, *admin_routes(rt), *inspector_site(rt)]  # a wrong method on any: 405
    return [*served, Route("/{path:path}", not_found, methods=ALL_METHODS)]
