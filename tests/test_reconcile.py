"""Reconcile: batch duplicates folded, close pairs found, the model's verdicts read strictly, rules standing in."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.memory.extraction.reconcile import (
    Batch,
    Verdict,
    close_pairs,
    decisions,
    fold_batch,
    parse_verdicts,
    pick_sources,
    render_pairs,
    settle,
    slot_family,
    verdicts_for,
)
from proxy.memory.lifecycle import Decision, ExistingItem, Vector
from proxy.memory.memory_schema import MemoryItem
from proxy.prompts import Prompts

DEDUP = 0.92


def at_cosine(cos: float) -> Vector:
    """A unit vector whose cosine with ``BASE`` is ``cos``."""
    return np.array([cos, math.sqrt(1 - cos * cos), 0.0])


BASE = at_cosine(1.0)
FAR = np.array([0.0, 0.0, 1.0])


def item(content: str, key: str, turns: tuple[int, ...] = (), importance: float = 0.6) -> MemoryItem:
    return MemoryItem(type="preference", content=content, key=key, turns=turns, importance=importance)


def stored(id: str, content: str, key: str, vector: Vector, status: str = "active") -> ExistingItem:
    return ExistingItem(id=id, key=key, content=content, vector=vector, status=status, category="plan")


SPICY = item("The user loves spicy food.", "user.preference.spicy_food", (2,))
NO_SPICY = item("The user has quit spicy food.", "user.preference.spicy_food", (9,))
VEG = item("The user has been strictly vegetarian for ten years.", "user.diet.vegetarian", (4,), 0.9)


def test_a_batch_keeps_one_item_per_fact_and_the_latest_value() -> None:
    again = item("The user loves spicy food.", "user.preference.spicy_food", (5,), 0.8)
    batch = fold_batch([SPICY, VEG, again, NO_SPICY], [BASE, FAR, BASE, BASE], DEDUP)
    assert [i.content for i in batch.items] == [VEG.content, NO_SPICY.content]
    # The repeat merged into the first (turns 2 and 5), which the newer value then replaced.
    assert batch.dropped_turns == (2, 5)
    close = item("The user loves spicy foods!", "user.taste.spicy", (7,), 0.9)
    merged = fold_batch([SPICY, close], [BASE, at_cosine(0.95)], DEDUP)
    assert len(merged.items) == 1 and merged.items[0].turns == (2, 7) and merged.items[0].importance == 0.9
    assert merged.dropped_turns == ()


def test_close_pairs_by_embedding_or_slot_family_never_for_a_matching_key() -> None:
    known = [
        stored("1", "The user eats fish on Fridays.", "user.food.fish", at_cosine(0.7)),
        stored("2", "The user lives in Lyon.", "user.location.home", FAR),
        stored("3", "The user likes jazz.", "user.preference.jazz", at_cosine(0.3)),
        stored("4", "The user eats meat.", "user.food.meat", at_cosine(0.8), status="superseded"),
    ]
    moved = item("The user moved to Berlin.", "user.location.home.city")
    batch = Batch((VEG, moved), (BASE, np.array([0.0, -1.0, 0.0])))
    pairs = close_pairs(batch, known)
    # Close by embedding (1), by slot family (2), by category and holder (the batch's first item beside its
    # second) come first; the holder's other facts fill the places left, closest first.
    assert [(p.new, p.old.id, p.earlier) for p in pairs] == [
        (0, "1", None), (0, "3", None), (0, "2", None), (1, "2", None), (1, "batch-0", 0), (1, "1", None)]
    assert [p.old.id for p in close_pairs(batch, known, per_item=1)] == ["1", "2"]
    assert slot_family("user.preference.jazz") == "user.preference.jazz"
    assert slot_family("user.name") is None
    same_key = Batch((NO_SPICY,), (BASE,))
    assert close_pairs(same_key, [stored("9", SPICY.content, SPICY.key, BASE)]) == []
    many = [stored(str(i), f"fact {i}", f"user.x{i}", at_cosine(0.9 - i / 100)) for i in range(6)]
    assert [p.old.id for p in close_pairs(Batch((VEG,), (BASE,)), many)] == ["0", "1", "2"]


def test_a_fact_of_one_category_and_holder_is_judged_beside_those_stored_under_another_key() -> None:
    """A model spells a slot differently across calls ("user.job", "user.occupation"), and Chinese cosines
    mean little: the model is shown the user's facts of the same category and holder all the same."""
    job = ExistingItem("1", "user.job", "The user works as an accountant.", FAR, category="identity")
    son = ExistingItem("2", "user.son.job", "The user's son is a nurse.", FAR, about="the user's son",
                       category="identity")
    misc = ExistingItem("3", "user.misc", "The user once met a famous chef.", FAR, category="other")
    teaches = MemoryItem(type="entity", category="identity", content="The user teaches maths.", key="user.occupation")
    pairs = close_pairs(Batch((teaches,), (BASE,)), [job, son, misc])
    assert [p.old.id for p in pairs] == ["1", "3"]  # the son's is not the user's; ``other`` comes last
    other = MemoryItem(type="entity", category="other", content="The user saw a comet.", key="user.sky")
    assert [p.old.id for p in close_pairs(Batch((other,), (BASE,)), [misc, son])] == ["3"]


def test_a_fact_filed_under_another_category_is_judged_beside_the_same_holders_facts_after_the_closer_ones() -> None:
    """A model files a fact under a category on one call and under another, or ``other``, on the next."""
    nurse = ExistingItem("1", "user.job", "The user works as a nurse.", at_cosine(0.1), category="identity")
    son = ExistingItem("2", "user.son.job", "The user's son is a nurse.", at_cosine(0.2), about="the user's son",
                       category="identity")
    near = [ExistingItem(str(i), f"user.plan{i}", f"plan {i}", at_cosine(0.7), category="plan") for i in (3, 4, 5)]
    photographer = MemoryItem(type="entity", category="other", content="The user is a freelance photographer.",
                              key="user.work.freelance")
    assert [p.old.id for p in close_pairs(Batch((photographer,), (BASE,)), [nurse, son])] == ["1"]
    # Closer by embedding fills the places first.
    assert [p.old.id for p in close_pairs(Batch((photographer,), (BASE,)), [nurse, *near])] == ["3", "4", "5"]
    offer = MemoryItem(type="event", category="plan", content="The user starts a new job at Spotify on Monday.",
                       key="user.job.next")
    assert [p.old.id for p in close_pairs(Batch((offer,), (BASE,)), [nurse, son])] == ["1"]


def test_a_later_statement_of_the_same_batch_settles_an_earlier_one() -> None:
    """A user corrects themself within a chat: the model's verdict between the two statements holds."""
    drives = MemoryItem(type="preference", content="The user drives to work.", key="user.commute", turns=(1,))
    cycles = MemoryItem(type="preference", content="The user now cycles to work.", key="user.commute.mode",
                        turns=(3,))
    again = MemoryItem(type="preference", content="The user cycles to work now.", key="user.bike", turns=(5,))
    office = stored("7", "The user's office is in Leeds.", "user.office", at_cosine(0.65))
    batch = Batch((drives, cycles, again), (BASE, at_cosine(0.5), at_cosine(0.55)),
                  replaced=(((0,), "The user walks to work.", drives.content),))
    pairs = close_pairs(batch, [office])
    assert [(p.new, p.old.id) for p in pairs] == [
        (0, "7"), (1, "7"), (1, "batch-0"), (2, "batch-1"), (2, "7"), (2, "batch-0")]
    verdicts: list[Verdict] = ["add", "add", "supersede", "merge", "add", "supersede"]
    settled, left, kept = settle(batch, pairs, verdicts)
    # The first statement is dropped, its turn never injected again; the repeat joins the second.
    assert [i.content for i in settled.items] == [cycles.content]
    assert settled.items[0].turns == (3, 5) and settled.dropped_turns == (0, 1)
    assert [(p.new, p.old.id) for p in left] == [(0, "7")] and kept == ["add"]
    # Without verdicts between them, the batch stays as it was.
    unsettled, rest, _ = settle(batch, pairs, ["add"] * len(pairs))
    assert unsettled == batch and [(p.new, p.old.id) for p in rest] == [(0, "7"), (1, "7"), (2, "7")]


def test_the_prompt_renders_the_pairs_numbered_known_first() -> None:
    known = stored("1", "The user eats fish on Fridays.", "user.food.fish", at_cosine(0.7))
    batch = Batch((VEG,), (BASE,))
    text = render_pairs(batch, close_pairs(batch, [known]))
    assert text == f"[pair 1]\nknown: {known.content}\nnew: {VEG.content}"
    prompt = Prompts.load().render("reconcile", pairs=text)
    assert text in prompt and '"supersede"' in prompt and '"merge"' in prompt


def test_verdicts_are_read_strictly_and_repaired_like_extraction() -> None:
    assert parse_verdicts('[{"pair": 1, "decision": "supersede"}, {"pair": 2, "decision": "add"}]', 2) == {
        1: "supersede", 2: "add"}
    fenced = 'Here:\n```json\n[{"pair": "2", "action": "MERGE"},]\n```'
    assert parse_verdicts(fenced, 2) == {2: "merge"}
    assert parse_verdicts('{"verdicts": [{"pair": 1, "verdict": "add"}]}', 1) == {1: "add"}
    assert parse_verdicts('{"1": "merge", "2": "supersede"}', 2) == {1: "merge", 2: "supersede"}
    # Out of range, unknown verdicts, booleans and repeats are dropped; nothing usable is None.
    assert parse_verdicts('[{"pair": 3, "decision": "add"}, {"pair": 1, "decision": "delete"}]', 2) is None
    assert parse_verdicts('[{"pair": true, "decision": "add"}]', 2) is None
    assert parse_verdicts('[{"pair": 1, "decision": "add"}, {"pair": 1, "decision": "merge"}]', 1) == {1: "add"}
    assert parse_verdicts("I cannot help with that.", 3) is None


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200), st.integers(0, 5))
def test_junk_never_raises_and_never_names_an_unknown_pair(raw: str, count: int) -> None:
    found = parse_verdicts(raw, count)
    assert found is None or (found and all(1 <= n <= count for n in found))


def test_decisions_follow_the_model_and_fall_back_to_the_rules() -> None:
    fish = stored("1", "The user eats fish on Fridays.", "user.food.fish", at_cosine(0.7))
    fish_again = stored("2", "On Fridays the user eats fish.", "user.food.friday", at_cosine(0.65))
    spicy = stored("3", SPICY.content, SPICY.key, at_cosine(0.2))
    existing = [fish, fish_again, spicy]
    batch = Batch((VEG, NO_SPICY), (BASE, BASE))
    pairs = close_pairs(batch, existing)
    assert [(p.new, p.old.id) for p in pairs] == [(0, "1"), (0, "2"), (0, "3")]

    def decided(judged: dict[int, Verdict] | None) -> list[Decision]:
        return decisions(batch, existing, pairs, verdicts_for(batch, pairs, judged, DEDUP), DEDUP)

    model = decided({1: "supersede", 2: "merge"})
    assert model[0] == Decision("supersede", ("1", "2"), "reconciled: newer value")
    assert model[1].action == "supersede" and model[1].target_ids == ("3",)  # the key rule
    assert decided({1: "merge", 2: "merge"})[0].target_ids == ("1",)
    # The model failed: the rules see two different facts below the dedup cosine, so both are kept.
    assert decided(None)[0] == Decision("add", (), "reconciled: a different fact")
    alone = Batch((VEG,), (FAR,))
    assert decisions(alone, [spicy], [], [], DEDUP)[0].action == "add"


def test_a_superseded_items_turns_are_the_closest_of_its_session() -> None:
    said = [("h-hello", 0.1), ("h-spicy", 0.8), ("h-near", 0.55), ("h-weak", 0.3)]
    assert pick_sources(said) == ["h-spicy", "h-near"]
    assert pick_sources(said, limit=1) == ["h-spicy"]
    assert pick_sources([("h-weak", 0.3)]) == []


def test_the_statement_left_inherits_what_the_one_it_replaced_superseded() -> None:
    """Oslo is stored; the batch says Bergen (superseding Oslo), then Trondheim (superseding Bergen)."""
    oslo = ExistingItem("1", "user.city", "The user lives in Oslo.", BASE, category="identity")
    bergen = MemoryItem(type="entity", category="identity", content="The user lives in Bergen.", key="user.home",
                        turns=(1,))
    trondheim = MemoryItem(type="entity", category="plan", standing=False, content="The user moves to Trondheim.",
                           key="user.location.home", turns=(3,))
    batch = Batch((bergen, trondheim), (BASE, BASE))
    pairs = close_pairs(batch, [oslo])
    assert [(p.new, p.old.id) for p in pairs] == [(0, "1"), (1, "1"), (1, "batch-0")]
    settled, left, verdicts = settle(batch, pairs, ["supersede", "add", "supersede"])
    assert [i.content for i in settled.items] == [trondheim.content] and settled.dropped_turns == (1,)
    assert settled.items[0].standing  # Bergen stood (an identity fact); its new value stands in its place
    assert [(p.new, p.old.id) for p in left] == [(0, "1")] and verdicts == ["supersede"]
    assert decisions(settled, [oslo], left, verdicts, DEDUP)[0] == Decision("supersede", ("1",), "reconciled: newer value")
