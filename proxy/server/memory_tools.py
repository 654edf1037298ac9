"""``POST /mcp``: the memory tools over MCP (Streamable HTTP, the official ``mcp`` SDK), SPEC §6.

An agent that speaks MCP (Claude Desktop, Claude Code, any MCP client) reads
and writes the same memories the chat path recalls: ``search_memories``,
``add_memory``, ``list_memories``, ``forget_memory`` and ``get_profile``. Each
is the admin API's own call (``admin/memory_calls``, ``admin/user_calls``) and
returns the JSON that endpoint returns, as structured content and as its text.

Who is asking is resolved as on the chat path: the client key (``Authorization:
Bearer``, ``api-key`` or ``x-api-key``) names the tenant or, with
``passthrough_keys``, the key's own scope; the user is ``X-Paperclip-User``,
else the tool's ``user`` argument, else ``anonymous``. A key that names
nobody is refused with 401 before MCP sees the request.

The server is stateless (no session is held between requests, so any replica
answers any call) and answers in JSON rather than SSE: every tool returns at
once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.types import Receive, Scope, Send

from ..errors import PaperclipError
from ..tenancy import client_key
from ..upstream.headers import header_map
from .relay import send_error
from .runtime import Runtime


class MemoryTools:
    """The ASGI endpoint of ``/mcp``: authenticates a request, then hands it to the MCP server.

    The server (``memory_tool_server``, the SDK with it) is built and its
    session manager started on the first authenticated request, not at start:
    a proxy that no agent reaches over MCP never loads the SDK (~0.5 s, ~26 MB).
    The import runs on a worker thread, so the loop serves meanwhile; the
    session manager's task group then runs in a task of its own until the
    app's lifespan ends (``running``).
    """

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self._server: Any = None  # the MCPServer, once started
        self._starting = asyncio.Lock()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The app's lifetime: at its end, the SDK's task group (if a request started it) ends too."""
        try:
            yield
        finally:
            self._stop.set()
            if self._task is not None:
                await self._task

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            self.rt.keys.tenant_for(client_key(header_map(scope["headers"])))
        except PaperclipError as exc:
            await send_error(send, exc)
            return
        server = self._server or await self._start()
        await server.session_manager.handle_request(scope, receive, send)

    async def _start(self) -> Any:
        async with self._starting:
            if self._server is not None:
                return self._server
            server = (await asyncio.to_thread(_server_factory))(self.rt)
            ready = asyncio.Event()

            async def serve() -> None:
                async with server.session_manager.run():
                    ready.set()
                    await self._stop.wait()

            task = asyncio.ensure_future(serve())
            waiting = asyncio.ensure_future(ready.wait())
            await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
            if not ready.is_set():  # the session manager failed to start: this request fails with it
                waiting.cancel()
                task.result()
            self._task, self._server = task, server
            return server


def _server_factory() -> Callable[[Runtime], Any]:
    """``memory_tool_server.memory_server``, imported by the caller's thread (a worker's: see ``_start``)."""
    from .memory_tool_server import memory_server

    return memory_server
