"""``POST /v1/messages``: Anthropic's Messages API, another shape of the chat path (SPEC §6).

The body's ``system`` and ``messages`` are read as the pipeline's messages
(``pipeline/anthropic_messages``); tenant, user, session, preparing, relaying
and recording are the chat endpoint's own. What is particular to this shape:
the upstream is the tenant's ``anthropic.base_url``, reached with its
``anthropic.api_key`` in ``x-api-key`` (the client's ``anthropic-version`` and
``anthropic-beta`` headers go with it); its streams end with ``message_stop``
and the end of the body, not ``[DONE]``; Paperclip's own errors go out in
Anthropic's shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
from starlette.types import Scope

from ..errors import ANTHROPIC_ERRORS
from ..pipeline.anthropic_messages import as_messages, rebuild, render
from ..tenancy import Tenant
from ..upstream.headers import anthropic_url, request_headers
from ..upstream.request import body_request
from .chat import ChatEndpoint, Shaped, deployment_or_model, new_call, user_and_session


class MessagesEndpoint(ChatEndpoint):
    route = "messages"
    stop_at_done = False  # its streams have no [DONE]: relayed to their end
    errors = ANTHROPIC_ERRORS

    async def shape(
        self, scope: Scope, headers: Mapping[str, str], tenant: Tenant, body: dict[str, Any], *, raw: bytes, bypass: bool
    ) -> Shaped:
        conv = as_messages(body)
        messages = conv.messages if conv is not None else []
        user, session = await user_and_session(headers, tenant, body, messages, len(raw))
        model = deployment_or_model(scope, body)
        call = new_call(tenant, user, session, body, messages, headers, model, api="messages")

        def write_back(out: list[dict[str, Any]]) -> bytes:
            assert conv is not None  # only a readable body is prepared
            return render(rebuild(body, conv, out))

        return Shaped(call, conv is not None, write_back)

    def upstream_request(self, scope: Scope, tenant: Tenant, body: bytes) -> httpx.Request:
        """The request to the tenant's Anthropic upstream, with its Anthropic key."""
        headers = request_headers(
            [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]],
            tenant,
            ours=self.rt.keys.is_ours,
            drop=frozenset({"content-encoding"}),  # the body goes out decoded
            anthropic=True,
        )
        headers.append(("content-length", str(len(body))))
        url = anthropic_url(tenant.settings.anthropic.base_url, scope["path"], scope.get("query_string", b""))
        return body_request("POST", url, headers, body)
