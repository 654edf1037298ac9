"""The compression model's call, over the app's upstream clients (handed to the memory pipeline).

``compression.api: chat`` (the default) asks an OpenAI-compatible
``/chat/completions``; ``messages`` asks Anthropic's ``/v1/messages``, for a
tenant that only has Anthropic. Either way the call goes through the
tenant's upstream connection profile (proxy, TLS, timeouts).

Structured output (``compression.structured_output``): a call that asks for a
``response_format`` (extraction, ``memory_schema.response_format``) sends it
with ``on``, never with ``off``, and with ``auto`` (the default) until the
upstream refuses it. A refusal is a 400 or 422 to the request with it that the
same request without it does not get: the upstream is remembered as one that
takes plain prompting (by URL and model, for the life of the process), and
the reply without it is the answer. A request that fails both ways fails as
it did and teaches nothing.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

from ..config import TenantSettings
from ..memory.extraction.extractor import Complete
from ..pipeline.pipeline_protocol import CompleteFor
from .clients import Upstreams
from .headers import anthropic_url, credential, join_url

# The Messages API wants both: the version of the API spoken, and a bound on the reply.
ANTHROPIC_VERSION = "2023-06-01"
SUMMARY_MAX_TOKENS = 4096

log = logging.getLogger("paperclip.compression")

# What an upstream answers a request field it does not take.
REFUSED = frozenset({400, 422})


def compression_calls(upstreams: Upstreams) -> CompleteFor:
    """Per tenant: the tenant's upstream (or Anthropic's) unless ``compression.base_url`` is set."""
    plain_only: set[tuple[str, str]] = set()  # (url, model) that refused a response_format

    def complete_for(st: TenantSettings, upstream_key: str | None) -> Complete:
        comp = st.compression
        client = upstreams.client(st.upstream)
        key = comp.api_key or upstream_key
        if comp.api == "messages":
            return _messages_call(client, st, key)
        url = join_url(comp.base_url or st.upstream.base_url, "/chat/completions")
        headers = dict([credential(st.upstream, key)]) if key else {}
        where = (str(url), comp.model)

        async def post(payload: dict[str, Any]) -> httpx.Response:
            return await client.post(url, json=payload, headers=headers, timeout=httpx.Timeout(comp.timeout_s))

        async def complete(
            messages: list[dict[str, Any]], /, *, response_format: dict[str, Any] | None = None
        ) -> str:
            payload = {"model": comp.model, "temperature": comp.temperature, "messages": messages}
            mode = comp.structured_output
            if response_format is None or mode == "off" or (mode == "auto" and where in plain_only):
                return _content(await post(payload))
            response = await post({**payload, "response_format": response_format})
            if mode == "auto" and response.status_code in REFUSED:
                plain = await post(payload)
                text = _content(plain)  # raises when the plain request fails too
                plain_only.add(where)
                log.info("%s (%s) refused response_format; extraction prompts it plainly from now on", url, comp.model)
                return text
            return _content(response)

        return complete

    return complete_for


def _messages_call(client: httpx.AsyncClient, st: TenantSettings, key: str | None) -> Complete:
    comp = st.compression
    url = anthropic_url(comp.base_url or st.anthropic.base_url, "/v1/messages")
    headers = {"anthropic-version": ANTHROPIC_VERSION, **({"x-api-key": key} if key else {})}

    async def complete(messages: list[dict[str, Any]], /, *, response_format: dict[str, Any] | None = None) -> str:
        # Anthropic's API takes no response_format: the prompt alone asks for the JSON (as with `off`).
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


def _content(response: httpx.Response) -> str:
    response.raise_for_status()
    return str(response.json()["choices"][0]["message"]["content"] or "")
