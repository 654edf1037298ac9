"""The compression model's call, over the app's upstream clients (handed to the memory pipeline).

``compression.api: chat`` (the default) asks an OpenAI-compatible
``/chat/completions``; ``messages`` asks Anthropic's ``/v1/messages``, for a
tenant that only has Anthropic. Either way the call goes through the
tenant's upstream connection profile (proxy, TLS, timeouts).
"""

from __future__ import annotations

from typing import Any

import httpx

from ..config import TenantSettings
from ..context.compressor import Complete
from ..pipeline.pipeline_protocol import CompleteFor
from .clients import Upstreams
from .headers import anthropic_url, credential, join_url

# The Messages API wants both: the version of the API spoken, and a bound on the reply.
ANTHROPIC_VERSION = "2023-06-01"
SUMMARY_MAX_TOKENS = 4096


def compression_calls(upstreams: Upstreams) -> CompleteFor:
    """Per tenant: the tenant's upstream (or Anthropic's) unless ``compression.base_url`` is set."""

    def complete_for(st: TenantSettings, upstream_key: str | None) -> Complete:
        comp = st.compression
        client = upstreams.client(st.upstream)
        key = comp.api_key or upstream_key
        if comp.api == "messages":
            return _messages_call(client, st, key)
        url = join_url(comp.base_url or st.upstream.base_url, "/chat/completions")
        headers = dict([credential(st.upstream, key)]) if key else {}

        async def complete(messages: list[dict[str, Any]]) -> str:
            payload = {"model": comp.model, "temperature": comp.temperature, "messages": messages}
            response = await client.post(
                url, json=payload, headers=headers, timeout=httpx.Timeout(comp.timeout_s)
            )
            response.raise_for_status()
            return str(response.json()["choices"][0]["message"]["content"] or "")

        return complete

    return complete_for


def _messages_call(client: httpx.AsyncClient, st: TenantSettings, key: str | None) -> Complete:
    comp = st.compression
    url = anthropic_url(comp.base_url or st.anthropic.base_url, "/v1/messages")
    headers = {"anthropic-version": ANTHROPIC_VERSION, **({"x-api-key": key} if key else {})}

    async def complete(messages: list[dict[str, Any]]) -> str:
        # The compressor's messages are user turns; a system message, if any, is the API's own field.
        system = "\n\n".join(str(m.get("content")) for m in messages if m.get("role") == "system")
        turns = [m for m in messages if m.get("role") != "system"]
        payload: dict[str, Any] = {
            "model": comp.model, "max_tokens": SUMMARY_MAX_TOKENS, "temperature": comp.temperature, "messages": turns,
        }
        if system:
            payload["system"] = system
        response = await client.post(url, json=payload, headers=headers, timeout=httpx.Timeout(comp.timeout_s))
        response.raise_for_status()
        blocks = response.json().get("content") or []
        return "".join(str(b.get("text") or "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")

    return complete
