"""A session's turns as last recorded: a resent conversation offers only its newer turns to the index."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from proxy import config
from proxy.context.watermark import View, WatermarkWindow
from proxy.memory.recall.query import fragment_hash, indexable
from proxy.metrics import Metrics
from proxy.pipeline.chat_call import ChatCall, Reply
from proxy.pipeline.pipeline_protocol import Prepared
from proxy.pipeline.recorded_turns import RecordedTurns
from proxy.store.records import EMPTY, PrefixState
from proxy.tenancy import Tenant
from proxy.tokens import TokenCounter
from tests.fake_upstream import completion
from tests.test_pipeline import open_layer

SETTINGS = config.from_dict({}, env={}).defaults


class NoPrefixes:
    """Sessions with nothing stored: every view starts from an empty prefix."""

    async def longest_prefix(self, tenant: str, session: str, chain: Sequence[str]) -> PrefixState:
        return EMPTY


def view_of(window: WatermarkWindow, conv: list[dict[str, Any]]) -> View:
    fresh = [dict(m) for m in conv]  # a new request parses new objects
    return asyncio.run(window.view("t", "s", fresh, TokenCounter("gpt-4o-mini"), SETTINGS))


def chat(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        out += [{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
    return out


def test_a_continued_conversation_offers_only_its_new_turns_and_an_edited_one_all() -> None:
    window, memo, key = WatermarkWindow(NoPrefixes(), Metrics()), RecordedTurns(), ("t", "u", "s")  # type: ignore[arg-type]
    first = view_of(window, chat(2)[:3])
    turns, fresh = asyncio.run(memo.turns(key, first, generation=1))
    assert fresh == 0 and [t[0] for t in turns] == [0, 1, 2]
    memo.recorded(key, first, turns, generation=1)
    longer = view_of(window, chat(3)[:5])
    turns, fresh = asyncio.run(memo.turns(key, longer, generation=1))
    assert fresh == 3 and [t[2] for t in turns] == ["question 0", "answer 0", "question 1", "answer 1", "question 2"]
    edited = view_of(window, [{"role": "user", "content": "question zero, edited"}, *chat(3)[1:5]])
    assert asyncio.run(memo.turns(key, edited, generation=1))[1] == 0
    # The reply the last record indexed comes back resent at its place: it is not new either.
    memo.recorded(key, first, asyncio.run(memo.turns(key, first, generation=1))[0], generation=1, answer="answer 1")
    assert asyncio.run(memo.turns(key, longer, generation=1))[1] == 4
    # A forget or a supersede moved the store's generation: everything is offered again.
    assert asyncio.run(memo.turns(key, longer, generation=2))[1] == 0
    memo.forget_user("t", "u")
    assert asyncio.run(memo.turns(key, longer, generation=1))[1] == 0


def window_hashes_of(view: View) -> frozenset[str]:
    return frozenset(fragment_hash(role, text) for _, role, text in indexable(view.window))


def test_the_kept_turns_tell_what_the_window_holds_whatever_the_prefix() -> None:
    window, memo, key = WatermarkWindow(NoPrefixes(), Metrics()), RecordedTurns(), ("t", "u", "s")  # type: ignore[arg-type]
    before = view_of(window, chat(3)[:5])
    memo.recorded(key, before, asyncio.run(memo.turns(key, before, generation=1))[0], generation=1)
    now = view_of(window, chat(4)[:7])
    for upto in range(len(now.conv) + 1):
        at = dataclasses.replace(now, state=PrefixState(upto, now.chain[upto - 1] if upto else "", ()))
        assert asyncio.run(memo.window_hashes(key, at)) == window_hashes_of(at), upto
    edited = view_of(window, [{"role": "user", "content": "another start"}, *chat(4)[1:7]])
    assert asyncio.run(memo.window_hashes(key, edited)) == window_hashes_of(edited)


def test_every_turn_of_a_growing_conversation_is_indexed_once_and_again_after_a_forget(tmp_path: Path) -> None:
    layer, tenant = open_layer(tmp_path)

    def call(conv: list[dict[str, Any]], trace: str, on: Tenant = tenant) -> ChatCall:
        return ChatCall(on, "mia", "s-1", trace, {"messages": conv}, conv, "gpt-4o-mini", {})

    async def turn(conv: list[dict[str, Any]], trace: str, answer: str) -> None:
        c = call([dict(m) for m in conv], trace)
        prepared = await layer.pipeline.prepare(c)
        await layer.pipeline.record(c, prepared, Reply(200, json.dumps(completion(answer)).encode()))

    async def scenario() -> tuple[set[str], set[str], set[str]]:
        conv: list[dict[str, Any]] = []
        for i in range(4):
            conv.append({"role": "user", "content": f"question {i}"})
            await turn(conv, f"t-{i}", f"answer {i}")
            conv.append({"role": "assistant", "content": f"answer {i}"})
        said = [fragment_hash(m["role"], m["content"]) for m in conv]
        indexed = await layer.store.fragments.known("acme", "mia", said)
        await layer.store.users.forget("acme", "mia")
        layer.forget_scope("acme", "mia")
        gone = await layer.store.fragments.known("acme", "mia", said)
        conv.append({"role": "user", "content": "question 4"})
        await turn(conv, "t-4", "answer 4")
        return set(said), indexed, (await layer.store.fragments.known("acme", "mia", said)) | gone

    try:
        said, indexed, after_forget = asyncio.run(scenario())
    finally:
        layer.close()
    assert indexed == said
    assert after_forget == said  # the resent history was indexed again, as a new one is


def test_a_views_forwarded_messages_count_as_the_counter_counts_them() -> None:
    from proxy.memory.recall.cards import inject

    window = WatermarkWindow(NoPrefixes(), Metrics())  # type: ignore[arg-type]
    counter = TokenCounter("gpt-4o-mini")
    view = view_of(window, [{"role": "system", "content": "Be brief."}, *chat(4)[:7]])
    for upto in range(len(view.conv) + 1):
        at = dataclasses.replace(view, state=PrefixState(upto, view.chain[upto - 1] if upto else "", ()))
        for out in (at.assemble(), at.assemble("a memory"), inject(at.assemble(), "<memory>notes</memory>", "last_user")):
            assert asyncio.run(at.tokens_of(out, counter)) == counter.total(out)


def test_a_covered_record_keeps_its_trace_and_its_newer_one_indexes_what_both_said(tmp_path: Path) -> None:
    layer, tenant = open_layer(tmp_path)

    def call(conv: list[dict[str, Any]], trace: str) -> ChatCall:
        fresh = [dict(m) for m in conv]
        return ChatCall(tenant, "mia", "s-1", trace, {"messages": fresh}, fresh, "gpt-4o-mini", {})

    async def scenario() -> tuple[set[str], bool, set[str], set[str]]:
        first = [{"role": "user", "content": "My sister Ada lives in Lyon."}]
        older = call(first, "t-older")
        await layer.pipeline.record(
            older, await layer.pipeline.prepare(older), Reply(200, json.dumps(completion("Lyon is lovely.")).encode()),
            covered=True,
        )
        said = [fragment_hash("user", first[0]["content"]), fragment_hash("assistant", "Lyon is lovely.")]
        after_older = await layer.store.fragments.known("acme", "mia", said)
        traced = await layer.store.traces.get("acme", "t-older") is not None
        second = [*first, {"role": "assistant", "content": "Lyon is lovely."}, {"role": "user", "content": "And Bo?"}]
        newer = call(second, "t-newer")
        await layer.pipeline.record(
            newer, await layer.pipeline.prepare(newer), Reply(200, json.dumps(completion("Bo is in Oslo.")).encode())
        )
        both = [*said, fragment_hash("user", "And Bo?"), fragment_hash("assistant", "Bo is in Oslo.")]
        return set(both), traced, after_older, await layer.store.fragments.known("acme", "mia", both)

    try:
        both, traced, after_older, after_newer = asyncio.run(scenario())
    finally:
        layer.close()
    assert traced and after_older == set()  # its own trace kept; its words left to the newer record
    assert after_newer == both


def test_a_conversation_covers_the_requests_it_continues_and_no_other(tmp_path: Path) -> None:
    layer, tenant = open_layer(tmp_path)

    async def prepared(*texts: str) -> Prepared:
        conv = [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]
        return await layer.pipeline.prepare(ChatCall(tenant, "mia", "s-1", "t", {"messages": conv}, conv, "gpt-4o-mini", {}))

    async def scenario() -> list[bool]:
        first = await prepared("hi")
        later = await prepared("hi", "Hello! How can I help?", "Plan my trip to Oslo.")
        other_tab = await prepared("hi", "Hey there.", "Fix my bike.")  # "hi" is in it, if not first's answer
        again = await prepared("hi")  # the same request, sent again
        covers = layer.pipeline.covers
        return [covers(later, first), covers(other_tab, first), covers(again, first),
                covers(first, later), covers(other_tab, later)]

    try:
        found = asyncio.run(scenario())
    finally:
        layer.close()
    assert found == [True, True, True, False, False]
