"""The MCP server behind ``POST /mcp``: the official SDK's ``MCPServer`` and Paperclip's five memory tools.

Imported on the first ``/mcp`` request (``memory_tools.MemoryTools``), not at
start: the SDK takes ~0.5 s and ~30 MB to import, which a proxy that no agent
reaches over MCP never needs. Each tool is the admin API's own call
(``admin/memory_calls``, ``admin/user_calls``) and returns the JSON that
endpoint returns, as structured content and as its text.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, TextContent

from ..errors import PaperclipError
from ..memory.curation.memory_admin import NEW_MEMORY_FIELDS, MemoryAdmin
from ..tenancy import ANONYMOUS, Tenant, client_key, header_user, user_id
from ..upstream.headers import header_map
from .admin.admin_call import memory_admin
from .admin.memory_calls import added_memory, deleted_memory, memory_page
from .admin.pagination import DEFAULT_LIMIT, page_ask
from .admin.user_calls import user_profile
from .runtime import Runtime

# One admin call, for a tenant's user, through the serving memory layer's admin view.
AdminWork = Callable[[MemoryAdmin, Tenant, str], Awaitable[dict[str, Any]]]
# Who a memory added here was written by, in its history (the admin API names its key).
CREDIT = "mcp"
INSTRUCTIONS = (
    "Long-term memory of this user, shared with their chats through Paperclip. Search it before "
    "answering questions about the user's past; add what they ask you to remember; forget what they "
    "ask you to forget."
)


def memory_server(runtime: Runtime) -> MCPServer[Any]:
    """The SDK's server with the memory tools, its Streamable HTTP session manager made (not yet run)."""
    with _root_logging_kept():
        server: MCPServer[Any] = MCPServer("paperclip", instructions=INSTRUCTIONS)
    _register(server, runtime)
    # Clients are authenticated by key; the SDK's Host/Origin check (its guard against DNS
    # rebinding for unauthenticated local servers) would refuse a proxy reached by its own name.
    server.streamable_http_app(
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_request_body_size=runtime.settings.server.max_body_bytes,
    )
    return server


def _who(rt: Runtime, ctx: Context, user: str | None) -> tuple[Tenant, str]:
    request = ctx.request_context.request
    headers: Mapping[str, str] = header_map(request.scope["headers"]) if request is not None else {}
    tenant = rt.keys.tenant_for(client_key(headers))
    named = header_user(headers) or user_id(user or "")
    return tenant, named or ANONYMOUS


async def _answer(rt: Runtime, ctx: Context, user: str | None, call: AdminWork) -> CallToolResult:
    """Run one admin call for the asking user: its JSON, as structured content and as the same text.

    Paperclip's errors (a bad argument, no such memory, the memory layer still
    loading) reach the model as the tool's error, with the admin API's message.
    """
    try:
        tenant, who = _who(rt, ctx, user)
        payload = await call(memory_admin(rt), tenant, who)
    except PaperclipError as exc:
        raise ToolError(exc.message) from exc
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=payload)


def _register(server: MCPServer[Any], rt: Runtime) -> None:
    tool = server.tool

    def answer(ctx: Context, user: str | None, call: AdminWork) -> Awaitable[CallToolResult]:
        return _answer(rt, ctx, user, call)

    @tool(description="Search the user's memories (hybrid vector + keyword search), best match first.")
    async def search_memories(
        query: str, ctx: Context, limit: int = DEFAULT_LIMIT, user: str | None = None
    ) -> CallToolResult:
        return await answer(ctx, user, lambda admin, tenant, who: memory_page(
            admin, tenant, who, page_ask({"limit": str(limit)}), query.strip()))

    @tool(description="Remember one fact about the user, as they would want it kept (one sentence).")
    async def add_memory(
        content: str, ctx: Context, category: str | None = None, user: str | None = None
    ) -> CallToolResult:
        body: dict[str, Any] = {"content": content}
        if category is not None and "category" in NEW_MEMORY_FIELDS:
            body["category"] = category
        return await answer(ctx, user, lambda admin, tenant, who: added_memory(admin, tenant, who, body, CREDIT))

    @tool(description="List the user's active memories in the order they were made, a page at a time.")
    async def list_memories(
        ctx: Context, limit: int = DEFAULT_LIMIT, after: int | str | None = None, user: str | None = None
    ) -> CallToolResult:
        cursor = "" if after is None else str(after)  # the last id of the page before (an id is a number)
        return await answer(ctx, user, lambda admin, tenant, who: memory_page(
            admin, tenant, who, page_ask({"limit": str(limit), "after": cursor})))

    @tool(description="Forget one memory of the user, by its id, with the memories and turns that say it again: "
                      "none of it is recalled again.")
    async def forget_memory(id: int, ctx: Context, user: str | None = None) -> CallToolResult:
        return await answer(ctx, user, lambda admin, tenant, who: deleted_memory(admin, tenant, who, id))

    @tool(description="The user's standing facts: what leads every answer's memory, whatever the question.")
    async def get_profile(ctx: Context, user: str | None = None) -> CallToolResult:
        return await answer(ctx, user, user_profile)


@contextlib.contextmanager
def _root_logging_kept() -> Iterator[None]:
    """The root logger as it was: the SDK's server calls ``logging.basicConfig`` (INFO, its own
    handler) when it is made, which would print every library's INFO lines in a process that
    has not configured logging yet. Paperclip's logging is its own (``requestlog``)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
