"""``POST /v1/responses``: OpenAI's Responses API, another shape of the chat path (SPEC §6).

The input items are read as the pipeline's messages (``pipeline/response_items``);
tenant, user, preparing, relaying and recording are the chat endpoint's own.
What is particular to this shape is the session: the header, else the session
that produced ``previous_response_id``, else the one of the ``conversation``
the provider holds (the same for every request of it, each sending only its
new items), else derived as for chat. A chain's or a conversation's earlier
turns are counted before the request's own (``offset``), so recall leaves
them out: the provider sends them already.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from starlette.types import Scope

from ..pipeline.response_items import as_messages, rebuild, render
from ..store.records import ResponseSession
from ..tenancy import Tenant, conversation_session
from .chat import ChatEndpoint, Shaped, deployment_or_model, new_call, user_and_session

log = logging.getLogger("paperclip.responses")


class ResponsesEndpoint(ChatEndpoint):
    route = "responses"
    stop_at_done = False  # its streams have no [DONE]: relayed to their end

    async def shape(
        self, scope: Scope, headers: Mapping[str, str], tenant: Tenant, body: dict[str, Any], *, raw: bytes, bypass: bool
    ) -> Shaped:
        conv = as_messages(body)
        messages = conv.messages if conv is not None else []
        user, session = await user_and_session(headers, tenant, body, messages, len(raw))
        held = provider_state(body)
        offset = 0
        named = bool(headers.get("x-paperclip-session", "").strip())
        previous = body.get("previous_response_id")
        conversation = conversation_id(body)
        chain_key = conversation_key(conversation) if conversation is not None and not bypass else None
        if chain_key is not None and not named and not isinstance(previous, str):
            session = conversation_session(tenant.id, user, conversation or "")
        earlier = previous if isinstance(previous, str) else chain_key
        if not bypass and earlier is not None:
            found = await self._chain(tenant, earlier)
            if found is not None and not named:
                session = found.session
            if found is not None and found.session == session:
                offset = found.upto
        model = deployment_or_model(scope, body)
        call = new_call(
            tenant, user, session, body, messages, headers, model, api="responses", provider_state=held, offset=offset,
            chain_key=chain_key,
        )
        head_in_instructions = tenant.settings.memory.position == "system_head"

        def write_back(out: list[dict[str, Any]]) -> bytes:
            assert conv is not None  # only a readable body is prepared
            return render(rebuild(body, conv, out, head_in_instructions=head_in_instructions))

        return Shaped(call, conv is not None, write_back)

    async def _chain(self, tenant: Tenant, response_id: str) -> ResponseSession | None:
        """The session of an earlier response; None when unknown or unreadable (a session is derived)."""
        layer = self.rt.memory.layer
        if layer is None or self.rt.memory.pipeline is None:  # not serving (starting, store down, off)
            return None
        try:
            return await layer.bounded.responses.find(tenant.id, response_id)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.warning("could not read the session of response %s; deriving one", response_id, exc_info=True)
            return None


def conversation_id(body: Mapping[str, Any]) -> str | None:
    """The ``conversation`` the provider holds: its id, sent bare or as ``{"id": ...}``; None without one."""
    value = body.get("conversation")
    if isinstance(value, Mapping):
        value = value.get("id")
    return value.strip() if isinstance(value, str) and value.strip() else None


def conversation_key(conversation: str) -> str:
    """Where a conversation's session and place are kept, beside the responses' (no response id has a colon)."""
    return "conversation:" + conversation


def provider_state(body: Mapping[str, Any]) -> str | None:
    """What holds the conversation upstream, or None when the client sends all of it."""
    for key in ("previous_response_id", "conversation"):
        if body.get(key):
            return key
    return None
