"""The pipeline layer on its own: no HTTP, a real store, the fake embedder and a fake compression call."""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from proxy import config
from proxy.config import TenantSettings
from proxy.context.compressor import Complete
from proxy.memory.extraction.item_parser import MemoryItem
from proxy.memory.extraction.remember import remember
from proxy.memory.search.embedder import HashEmbedder
from proxy.metrics import Metrics
from proxy.pipeline.chat_call import ChatCall, Reply, reply_text
from proxy.pipeline.memory_layer import MemoryLayer, assemble
from proxy.prompts import Prompts
from proxy.store import open_store, urls
from proxy.tenancy import Tenant
from tests.fake_upstream import chunk, completion, sse

ALLERGY = "The user's cat is allergic to peanuts."


def no_model(st: TenantSettings, key: str | None) -> Complete:
    async def complete(messages: list[dict[str, Any]]) -> str:
        raise AssertionError("the compression model is not called in these tests")

    return complete


def open_layer(tmp_path: Path) -> tuple[MemoryLayer, Tenant]:
    settings = config.from_dict({"storage": {"url": f"sqlite:///{tmp_path / 'p.db'}"}}, env={})
    embedder = HashEmbedder()
    store = open_store(urls.sqlite_path(settings.storage.url), embedder.dim)
    layer = assemble(store, embedder, Prompts.load(), Metrics(), no_model, trace_candidates=settings.traces.candidates)
    return layer, Tenant("acme", settings.defaults, None, passthrough=False)


def ask(tenant: Tenant, question: str) -> ChatCall:
    messages = [{"role": "user", "content": question}]
    return ChatCall(tenant, "mia", "s-new", "t-1", {"messages": messages}, messages, "gpt-4o-mini", {})


def test_prepare_only_reads_and_record_touches_what_was_recalled(tmp_path: Path) -> None:
    layer, tenant = open_layer(tmp_path)
    # Without the profile: it would show the allergy as a standing fact, not as this question's hit.
    memory = tenant.settings.memory.model_copy(update={"profile": False})
    tenant = dataclasses.replace(tenant, settings=tenant.settings.model_copy(update={"memory": memory}))

    async def scenario() -> tuple[int, int, int]:
        fact = MemoryItem("fact", ALLERGY, "cat.allergy.peanuts", source="user-stated")
        added = await remember(layer.store.items, layer.fragments.embed, "acme", "mia", None, fact, dedup_cosine=0.9)
        call = ask(tenant, "What is my cat allergic to? Peanuts?")
        prepared = await layer.pipeline.prepare(call)
        after_prepare = (await layer.store.items.get("acme", "mia", [added.item_id]))[added.item_id]
        await layer.pipeline.record(call, prepared, Reply(200, json.dumps(completion("Peanuts.")).encode()))
        after_record = (await layer.store.items.get("acme", "mia", [added.item_id]))[added.item_id]
        return prepared.memories, after_prepare.access_count, after_record.access_count

    try:
        memories, before, after = asyncio.run(scenario())
    finally:
        layer.close()
    assert memories >= 1  # the fact was recalled and injected
    assert (before, after) == (0, 1)  # ... and its access recorded only after the response


TEXT = st.text(min_size=1).filter(lambda t: t.strip() != "")


@given(TEXT)
def test_the_reply_text_is_read_from_json_gzip_and_sse(text: str) -> None:
    body = json.dumps(completion(text)).encode()
    assert reply_text(Reply(200, body)) == text
    assert reply_text(Reply(200, gzip.compress(body), content_encoding="gzip")) == text
    stream = b"".join(sse([chunk({"role": "assistant", "content": text}), chunk({}, finish="stop")]))
    assert reply_text(Reply(200, stream, streamed=True)) == text


def test_no_reply_text_from_a_failure_or_an_unreadable_body() -> None:
    body = json.dumps(completion("hi")).encode()
    assert reply_text(Reply(500, body)) is None
    assert reply_text(Reply(200, b"")) is None
    assert reply_text(Reply(200, body, content_encoding="br")) is None
    assert reply_text(Reply(200, b"not gzip", content_encoding="gzip")) is None
    assert reply_text(Reply(200, b'{"choices": []}')) is None
