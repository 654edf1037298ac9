"""The compression model's call, over the app's upstream clients (handed to the memory pipeline)."""

from __future__ import annotations

from typing import Any

import httpx

from ..config import TenantSettings
from ..context.compressor import Complete
from ..pipeline.pipeline_protocol import CompleteFor
from .clients import Upstreams
from .headers import credential, join_url


def compression_calls(upstreams: Upstreams) -> CompleteFor:
    """Per tenant: the tenant's upstream unless ``compression.base_url`` is set."""

    def complete_for(st: TenantSettings, upstream_key: str | None) -> Complete:
        comp = st.compression
        client = upstreams.client(st.upstream)
        url = join_url(comp.base_url or st.upstream.base_url, "/chat/completions")
        key = comp.api_key or upstream_key
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
