"""Reconcile in extraction, over a real store: the model's verdicts, the rules when it fails, the turns it finds."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from proxy.memory.extraction.extractor import Extractor, Turn
from proxy.memory.extraction.remember import remember
from proxy.memory.memory_schema import MemoryItem
from proxy.memory.recall.query import fragment_hash
from proxy.memory.search.embedder import HashEmbedder
from proxy.metrics import Metrics
from proxy.prompts import Prompts
from proxy.store import Store, open_store
from proxy.store.records import NewFragment

EMBEDDER = HashEmbedder(64)
OLD_SAID = "I love spicy food, the hotter the better."
OLD = MemoryItem(type="preference", content="The user loves spicy food, the hotter the better.", key="user.food.spicy")
NEW = {"type": "preference", "content": "The user has quit spicy food for good.", "key": "user.food.spicy.quit",
       "importance": 0.7, "source": "user-stated", "turns": [1]}
TURNS: list[Turn] = [(0, "user", "I've quit spicy food for good."), (1, "assistant", "Noted.")]


async def embed(texts: Sequence[str]) -> np.ndarray:
    return EMBEDDER.embed(list(texts))


class Model:
    """Extraction answers ``extracted``; reconcile answers ``verdicts``; every prompt is kept."""

    def __init__(self, extracted: list[dict[str, Any]], verdicts: str) -> None:
        self.extracted, self.verdicts, self.prompts = extracted, verdicts, list[str]()

    async def __call__(self, messages: list[dict[str, Any]], response_format: dict[str, Any] | None = None) -> str:
        prompt = str(messages[-1]["content"])
        self.prompts.append(prompt)
        return self.verdicts if "<pairs>" in prompt else json.dumps(self.extracted)


async def history(store: Store) -> None:
    """An earlier chat said the old value; the item made of it kept no turn numbers."""
    said = [("user", OLD_SAID), ("assistant", "Noted!"), ("user", "Anyway, what is the weather like?")]
    news = [NewFragment(fragment_hash(r, t), r, t, t, i, 5) for i, (r, t) in enumerate(said)]
    await store.fragments.add("t", "u", "s1", news, await embed([t for _, t in said]))
    await remember(store.items, embed, "t", "u", "s1", OLD, dedup_cosine=0.92)


async def active_texts(store: Store) -> set[str]:
    """The texts of the user's fragments that may still be injected."""
    return {loaded.fragment.text for loaded in (await store.fragments.load_since("t", "u", 0, 1000))[1]}


async def run(tmp_path: Path, model: Model) -> tuple[Store, dict[str, str], set[str]]:
    store = open_store(str(tmp_path / "r.db"), 64)
    await history(store)
    extractor = Extractor(store.items, store.cursors, Prompts.load(), embed, Metrics(), store.fragments)
    await extractor.extract("t", "u", "s2", TURNS, model, pii="keep", dedup_cosine=0.92)
    status = {r.content: r.status for r in await store.items.all("t", "u", include_inactive=True)}
    return store, status, await active_texts(store)


async def test_the_model_supersedes_what_the_keys_miss_and_the_old_turn_is_found(tmp_path: Path) -> None:
    model = Model([NEW], '[{"pair": 1, "decision": "supersede"}]')
    store, status, active = await run(tmp_path, model)
    try:
        assert status == {OLD.content: "superseded", NEW["content"]: "active"}
        assert len(model.prompts) == 2 and OLD.content in model.prompts[1] and NEW["content"] in model.prompts[1]
        # The old value's own turn is never injected again; the rest of that chat stays.
        assert OLD_SAID not in active and "Anyway, what is the weather like?" in active
    finally:
        store.close()


async def test_when_the_model_fails_the_rules_keep_both(tmp_path: Path) -> None:
    store, status, active = await run(tmp_path, Model([NEW], "Sorry, I cannot help with that."))
    try:
        assert status == {OLD.content: "active", NEW["content"]: "active"}
        assert OLD_SAID in active
    finally:
        store.close()


async def test_a_batchs_own_repeat_merges_and_its_replaced_value_is_suppressed(tmp_path: Path) -> None:
    tea = {"type": "preference", "content": "The user drinks green tea.", "key": "user.drink.morning", "turns": [1]}
    coffee = {"type": "preference", "content": "The user now drinks black coffee.", "key": "user.drink.morning",
              "turns": [3]}
    turns: list[Turn] = [(0, "user", "I drink green tea."), (1, "assistant", "Nice."),
                         (2, "user", "Actually I switched to black coffee."), (3, "assistant", "OK.")]
    store = open_store(str(tmp_path / "b.db"), 64)
    try:
        news = [NewFragment(fragment_hash(r, t), r, t, t, p, 5) for p, r, t in turns]
        await store.fragments.add("t", "u", "s", news, await embed([t for _, _, t in turns]))
        extractor = Extractor(store.items, store.cursors, Prompts.load(), embed, Metrics(), store.fragments)
        added = await extractor.extract("t", "u", "s", turns, Model([tea, tea, coffee], "[]"), pii="keep",
                                        dedup_cosine=0.92)
        rows = await store.items.all("t", "u", include_inactive=True)
        assert added == 1 and [r.content for r in rows] == [coffee["content"]]
        texts = await active_texts(store)
        assert "I drink green tea." not in texts and "Actually I switched to black coffee." in texts
    finally:
        store.close()


async def test_a_replaced_values_reply_goes_with_it_when_it_repeats_the_value(tmp_path: Path) -> None:
    """In one batch and across two: the assistant's reply that names the old value is hidden with the turn
    that said it; a reply that does not name it stays (it is what the assistant said besides)."""
    def said(content: str, turn: int) -> dict[str, Any]:
        return {"type": "preference", "content": content, "key": "user.drink.morning", "turns": [turn]}

    tea, coffee = "The user drinks green tea.", "The user now drinks black coffee."
    echo = "Green tea is a lovely way to start the day."
    first: list[Turn] = [(0, "user", "I drink green tea."), (1, "assistant", echo),
                         (2, "user", "Actually I switched to black coffee."), (3, "assistant", "Got it, enjoy.")]
    one_batch = [(first, [said(tea, 1), said(coffee, 3)])]
    two_batches = [(first[:2], [said(tea, 1)]), (first[2:], [said(coffee, 1)])]
    for name, chats in (("one", one_batch), ("two", two_batches)):
        store = open_store(str(tmp_path / f"{name}.db"), 64)
        try:
            extractor = Extractor(store.items, store.cursors, Prompts.load(), embed, Metrics(), store.fragments)
            for n, (turns, extracted) in enumerate(chats):
                turns = [(p % 2 if name == "two" else p, r, t) for p, r, t in turns]
                news = [NewFragment(fragment_hash(r, t), r, t, t, p, 5) for p, r, t in turns]
                await store.fragments.add("t", "u", f"s{n}", news, await embed([t for _, _, t in turns]))
                await extractor.extract("t", "u", f"s{n}", turns, Model(extracted, "[]"), pii="keep",
                                        dedup_cosine=0.92)
            texts = await active_texts(store)
            assert echo not in texts and "I drink green tea." not in texts, name
            assert "Got it, enjoy." in texts and "Actually I switched to black coffee." in texts, name
        finally:
            store.close()


async def test_a_correction_in_the_same_chat_under_another_key_is_the_models_to_settle(tmp_path: Path) -> None:
    """Two keys the rules cannot tie: the model is asked, and the earlier statement is never stored."""
    drives: dict[str, Any] = {"type": "preference", "content": "The user drives to work in an old Corolla.",
                              "key": "user.commute", "turns": [1]}
    cycles: dict[str, Any] = {"type": "preference", "content": "The user now cycles to work.",
                              "key": "user.commute.mode", "turns": [3]}
    turns: list[Turn] = [(0, "user", "I drive to work in my old Corolla."), (1, "assistant", "Nice."),
                         (2, "user", "Scratch that, I sold the car, I cycle now."), (3, "assistant", "OK.")]
    for verdict, stored_items in (("supersede", [cycles["content"]]), ("add", [drives["content"], cycles["content"]])):
        store = open_store(str(tmp_path / f"{verdict}.db"), 64)
        try:
            news = [NewFragment(fragment_hash(r, t), r, t, t, p, 5) for p, r, t in turns]
            await store.fragments.add("t", "u", "s", news, await embed([t for _, _, t in turns]))
            extractor = Extractor(store.items, store.cursors, Prompts.load(), embed, Metrics(), store.fragments)
            model = Model([drives, cycles], f'[{{"pair": 1, "decision": "{verdict}"}}]')
            await extractor.extract("t", "u", "s", turns, model, pii="keep", dedup_cosine=0.92)
            assert drives["content"] in model.prompts[1] and cycles["content"] in model.prompts[1]
            rows = await store.items.all("t", "u", include_inactive=True)
            assert sorted(r.content for r in rows) == sorted(stored_items)
            said = "I drive to work in my old Corolla." in await active_texts(store)
            assert said == (verdict == "add")  # a superseded statement's turn is never injected again
        finally:
            store.close()
