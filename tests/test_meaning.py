"""Lasting facts read by meaning where the rules stand in (``memory/extraction/meaning.py``).

The arithmetic on unit vectors of our own making; the reading itself in the
bundled model's space, and through the extractor over a real store: with no
usable model, a fact said in words no rule reads is kept, standing; with a
model, the model's items alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.memory.extraction import meaning
from proxy.memory.extraction.extractor import Extractor, Turn
from proxy.memory.extraction.reconcile import fold_batch
from proxy.memory.extraction.rules import read_turns, rule_extract
from proxy.memory.lifecycle import LOOSELY_READ, is_slot, slot_keys
from proxy.memory.memory_schema import MemoryItem
from proxy.memory.search.embedder import Embedder, load_embedder
from proxy.metrics import Metrics
from proxy.prompts import Prompts
from proxy.store import open_store
from tests.admin_helpers import admin, ask, teach
from tests.conftest import Proxy
from tests.fake_upstream import FakeUpstream

NOW = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def bundled() -> Embedder:
    return load_embedder("bundled")


@pytest.mark.parametrize("said", [
    "I am lactose intolerant.",
    "We keep a vegetarian kitchen.",
    "Shellfish gives me hives.",
    "Rent can't go over 1,200 a month for us.",
    # the user as owner of something that is not someone else
    "Pork never goes on my plate.",
    "Our house is in Leeds, near the station.",
    "Pepper, our cat, needs her thyroid pill with breakfast.",
    "My knees are bad, so stairs are hard.",
])
def test_the_users_own_statements_are_read(said: str) -> None:
    assert meaning.statement(said)


@pytest.mark.parametrize("said", [
    "Am I allergic to anything?",  # a question
    "what car do I drive",  # a question, as chat asks it: no mark
    "Recommend a neighbourhood near my home.",  # a request to the assistant
    "how often should I water my plants",
    "My friend lives in Paris.",  # someone else's fact: no "I", "we", "me" or "us", and "my" owns a person
    "Our office moved to the fifth floor.",  # ... or a body of people
    "My younger sister is vegan.",
    "My best friend's dog is allergic to chicken.",
    "Our neighbours' kids are loud.",
    "The US has fifty states.",  # a country, not "us"
    "I'm in Rome this week for a conference.",  # for now
    "I just got back from the gym.",  # one moment past
    "If I lived abroad I would learn the language.",  # supposed
    "Sure.",
    "我对花生过敏。",  # the bundled model reads English: Chinese is the rules'
])
def test_what_is_not_the_users_lasting_statement_is_not_read(said: str) -> None:
    assert not meaning.statement(said)


def test_a_clause_of_a_long_sentence_is_a_fact_only_where_a_first_person_speaks_in_it() -> None:
    assert meaning.clauses("Biscuit, our rabbit, has to have fresh hay every single day or his gut stops working.") == []
    assert meaning.clauses("Just so you know, I have been meat-free since college, so no steak please") == [
        "I have been meat-free since college"]


@given(
    owner=st.sampled_from(["My", "my", "Our", "our"]),
    before=st.lists(st.sampled_from(["younger", "best", "new", "old", "dear"]), max_size=2),
    person=st.sampled_from(["sister", "friends", "coworker's", "boss", "office", "company", "husband", "kids",
                            "neighbour", "family", "team", "mother-in-law"]),
    rest=st.sampled_from([" is vegan.", " lives in Paris.", " is allergic to cats.", " moved to Austin.",
                          " works nights."]),
)
def test_a_possession_that_is_someone_else_never_makes_a_statement_the_users(
    owner: str, before: list[str], person: str, rest: str
) -> None:
    words = " ".join([*before, person])
    assert not meaning.speaks_of_self(f"{owner} {words}{rest}")


def unit(v: Sequence[float]) -> np.ndarray:
    a = np.asarray(v, dtype=np.float32)
    return a / np.linalg.norm(a)


def test_a_sentence_takes_the_slot_of_its_closest_examples_and_its_lead_over_none() -> None:
    examples = np.stack([unit([1, 0, 0]), unit([1, 0.1, 0]), unit([0, 1, 0]), unit([0, 0, 1])])
    labels = ["allergy", "allergy", "home", "none"]
    (slot, score, margin), (far, _, behind) = meaning.classify(
        np.stack([unit([1, 0.05, 0]), unit([0, 0, 1])]), examples, labels)
    assert slot == "allergy" and score > 0.99 and margin == pytest.approx(score - float(unit([1, 0.05, 0])[2]))
    assert far != "none" and behind < 0  # closest to none: a slot, but behind it


@given(st.lists(st.lists(st.floats(-1, 1), min_size=3, max_size=3).filter(lambda v: np.linalg.norm(v) > 0.1),
                min_size=1, max_size=6))
def test_the_slot_is_never_none_and_the_margin_is_the_lead(rows: list[list[float]]) -> None:
    examples = np.stack([unit([1, 0, 0]), unit([0, 1, 0]), unit([0, 0, 1]), unit([1, 1, 0])])
    labels = ["job", "none", "pet", "none"]
    vectors = np.stack([unit(r) for r in rows])
    for (slot, score, margin), v in zip(meaning.classify(vectors, examples, labels), vectors, strict=True):
        sims = examples @ v
        assert slot in {"job", "pet"} and score == pytest.approx(max(sims[0], sims[2]), abs=1e-5)
        assert margin == pytest.approx(score - float(np.mean(sims[[1, 3]])), abs=1e-5)


def test_the_examples_name_known_slots_and_a_slot_holds_many_values_unless_it_is_of_one() -> None:
    known = meaning.examples()
    assert set(known.labels) == {*known.slots, meaning.NONE}
    assert {s.key for s in known.slots.values() if is_slot(s.key)} == set(LOOSELY_READ)
    assert all(s.one_value == is_slot(s.key) for s in known.slots.values())


@pytest.mark.parametrize(("said", "score", "margin", "key"), [
    ("We moved, I'm in Bristol now.", 0.5, 0.15, "user.location.home"),  # a change said outright
    ("We moved, I'm in Bristol now.", 0.35, 0.15, "user.said.home"),  # not past the stricter bar
    ("I visited my parents in Ohio.", 0.5, 0.15, "user.said.home"),  # a visit is no change of home
    ("I'm looking for a job in finance.", 0.5, 0.3, "user.said.job"),
])
def test_only_a_change_said_outright_takes_a_one_value_slots_own_key(
    said: str, score: float, margin: float, key: str
) -> None:
    slot = meaning.examples().slots["job" if "job" in said else "home"]
    assert meaning.key_for(slot, said, score, margin) == key


def test_the_slots_own_value_replaces_a_loosely_read_one_and_not_the_reverse() -> None:
    assert "user.said.home" in slot_keys("user.location.home")
    assert "user.location.home" not in slot_keys("user.said.home")


def test_the_rules_leave_the_sentences_they_did_not_read() -> None:
    turns = [(0, "user", "I'm allergic to peanuts. Shellfish gives me hives too."), (1, "assistant", "Noted.")]
    items, unread = read_turns(turns, NOW)
    assert items == rule_extract(turns, NOW) and [i.key for i in items] == ["user.allergy.peanut"]
    assert unread == [(0, "Shellfish gives me hives too.")]


async def read(embedder: Embedder, sentences: Sequence[str]) -> dict[str, Any]:
    async def embed(texts: Sequence[str]) -> np.ndarray:
        return embedder.embed(list(texts))

    items = await meaning.MeaningReader(embed).read([(n, s) for n, s in enumerate(sentences)])
    return {i.content: i for i in items}


async def test_lasting_facts_in_new_words_are_read_and_small_talk_is_not(bundled: Embedder) -> None:
    facts = ["Nuts of any kind are dangerous for me, I carry adrenaline.", "I have been meat-free since college.",
             "I rely on a cane when I walk.", "I'm an electrician.", "I commute by bus."]
    talk = ["I think you're right about that.", "I'm waiting for the bus.", "I need to buy groceries.",
            "I'm confused by the instructions."]
    read_ = await read(bundled, [*facts, *talk])
    assert set(read_) == set(facts)
    assert all(i.standing and i.source == "user-stated" and i.about == "user" for i in read_.values())
    assert read_[facts[0]].category == "health" and read_[facts[3]].category == "identity"
    assert read_[facts[3]].key == "user.said.job" and read_[facts[0]].key == "user.allergies"  # no change said


async def test_a_fact_in_a_long_sentence_is_kept_as_the_clause_that_states_it(bundled: Embedder) -> None:
    said = "Just so you know before we start, I've been meat-free since college, so no steak recipes please."
    assert "I've been meat-free since college" in meaning.clauses(said)
    assert "no steak recipes please" not in meaning.clauses(said)  # no I, we or me
    (item,) = (await read(bundled, [said])).values()
    assert item.content == "I've been meat-free since college" and item.category == "health"
    story = "We had such a lovely time at the wedding last weekend, the food was amazing and everyone danced."
    assert await read(bundled, [story]) == {}


@pytest.mark.parametrize(("said", "fact", "key"), [
    ("Honestly the week has been a blur of meetings and deadlines, but I'm vegetarian, so any recipe without meat "
     "works.", "I'm vegetarian", "user.diet.facts"),
    ("The trip was long and the hotel was noisy and the food was bland, and I'm allergic to shellfish anyway.",
     "I'm allergic to shellfish anyway.", "user.allergies"),
    ("Oh, and scratch what I said: I sold the Corolla last month, I cycle to work now.", "I cycle to work now.",
     "user.activities"),
    # Short sentences too.
    ("I've got type 1 diabetes, so I need to watch carbs on the trip.", "I've got type 1 diabetes",
     "user.conditions"),
    ("I have a cat, Miso, who hates travelling.", "I have a cat", "user.pets"),
])
async def test_a_sentence_of_clauses_that_reads_as_nothing_whole_is_read_by_its_clauses(
    bundled: Embedder, said: str, fact: str, key: str
) -> None:
    # The rest of a sentence drowns its fact: the whole is near no slot's examples, a clause is.
    whole = meaning.classify(bundled.embed([said]), bundled.embed(list(meaning.examples().texts)),
                             meaning.examples().labels)
    assert not meaning.accepted(*whole[0][1:])
    (item,) = (await read(bundled, [said])).values()
    assert (item.content, item.key) == (fact, key)


@pytest.mark.parametrize("said", [
    "Sorry, I meant Tuesday, not Thursday.", "Right, I forgot about that, thanks for reminding me.",
    "My friend has a dog, a beagle, who barks all night.", "I'm at the airport, my flight is delayed.",
])
async def test_the_clauses_of_small_talk_or_of_someone_else_read_as_nothing(bundled: Embedder, said: str) -> None:
    assert await read(bundled, [said]) == {}


async def test_a_long_sentence_whose_clauses_read_another_slot_or_none_is_kept_whole(bundled: Embedder) -> None:
    said = "After fifteen years as a paramedic in the city, which I still do three nights a week, nothing surprises me."
    (item,) = (await read(bundled, [said])).values()
    assert item.content == said and item.category == "identity"  # "I still do three nights a week" is no job
    assert item.key == "user.said.job"


def test_a_change_in_a_sentence_kept_whole_takes_only_the_loose_key() -> None:
    slot = meaning.examples().slots["home"]
    said = "We moved, I'm in Bristol now, which after the chaos of the last year feels like a quiet little miracle."
    assert meaning.key_for(slot, said, 0.5, 0.15) == "user.location.home"
    assert meaning.key_for(slot, said, 0.5, 0.15, whole=True) == "user.said.home"


@pytest.mark.parametrize("said", [
    "I have tonsillitis.", "I hurt my back lifting boxes.", "I have strep throat.", "I twisted my knee.",
    "I have bronchitis.", "I have a cold.", "I need a wheelchair at the airport tomorrow.",
])
async def test_a_passing_illness_or_injury_is_no_lasting_fact(bundled: Embedder, said: str) -> None:
    assert await read(bundled, [said]) == {}


class Junk:
    """A compression model whose replies are never JSON: the rules stand in."""

    async def __call__(self, messages: list[dict[str, Any]], response_format: dict[str, Any] | None = None) -> str:
        return "Sure! Here is a summary of the chat."


class Modelled:
    """A compression model that extracts one item."""

    async def __call__(self, messages: list[dict[str, Any]], response_format: dict[str, Any] | None = None) -> str:
        return json.dumps([{"type": "constraint", "category": "health", "content": "The user avoids nuts.",
                            "key": "user.allergy.nuts", "turns": [1]}])


async def extracted(tmp_path: Path, embedder: Embedder, model: Any) -> dict[str, Any]:
    async def embed(texts: Sequence[str]) -> np.ndarray:
        return embedder.embed(list(texts))

    store = open_store(str(tmp_path / "m.db"), embedder.dim)
    extractor = Extractor(store.items, store.cursors, Prompts.load(), embed, Metrics(), store.fragments,
                          meaning=meaning.MeaningReader(embed))
    turns: list[Turn] = [(0, "user", "Nuts of any kind are dangerous for me, I carry adrenaline."),
                         (1, "assistant", "Noted."), (2, "user", "Thanks, that helps a lot.")]
    await extractor.extract("t", "u", "s", turns, model, pii="keep", dedup_cosine=0.92)
    rows = {r.content: r for r in await store.items.all("t", "u")}
    store.close()
    return rows


def test_a_guess_replaced_in_its_batch_hides_no_turn() -> None:
    def job(said: str, turn: int, confidence: float) -> MemoryItem:
        return MemoryItem(type="entity", category="identity", content=said, key="user.said.job",
                          confidence=confidence, turns=(turn,))

    vectors = [unit([1, 0, 0]), unit([0, 1, 0])]
    guessed = fold_batch([job("I run a bakery.", 1, 0.5), job("I teach maths now.", 3, 0.5)], vectors, 0.92)
    assert [i.content for i in guessed.items] == ["I teach maths now."] and guessed.dropped_turns == ()
    sure = fold_batch([job("I run a bakery.", 1, 0.9), job("I teach maths now.", 3, 0.9)], vectors, 0.92)
    assert sure.dropped_turns == (1,)  # a value read surely, replaced: its turn is hidden


async def test_with_no_usable_model_the_extractor_keeps_what_the_meaning_reads(
    tmp_path: Path, bundled: Embedder
) -> None:
    rows = await extracted(tmp_path, bundled, Junk())
    assert set(rows) == {"Nuts of any kind are dangerous for me, I carry adrenaline."}
    assert rows["Nuts of any kind are dangerous for me, I carry adrenaline."].standing


async def test_with_a_model_its_items_alone_are_kept(tmp_path: Path, bundled: Embedder) -> None:
    assert set(await extracted(tmp_path, bundled, Modelled())) == {"The user avoids nuts."}


def test_through_the_proxy_a_fact_no_rule_reads_reaches_a_fresh_chat(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    """Real sockets, the bundled model, a compression model whose replies are never JSON (the fake's)."""
    proxy = make_proxy(embedding={"model": "bundled"})
    said = "Nuts of any kind are dangerous for me, I carry adrenaline."
    teach(proxy, "noor", said)
    ask(proxy, "noor", "Pack me some snacks for a long hike.")
    forwarded = upstream.chat_requests()[-1].body.decode()
    with admin(proxy) as http:
        profile = http.get("/paperclip/v1/users/noor/profile").json()
    assert said in forwarded and said in json.dumps(profile)


async def test_a_device_the_user_uses_is_a_standing_preference_of_many_values(bundled: Embedder) -> None:
    # What the user's phone or computer is shapes a how-to answer; a phone and a laptop are both true at once.
    facts = ["I've only ever used Linux on my desktop.", "I do all my work on an iPad Pro."]
    read_ = await read(bundled, [*facts, "I can't decide which laptop to buy.", "My phone died this morning."])
    assert set(read_) == set(facts)
    assert {(i.key, i.category, i.standing) for i in read_.values()} == {("user.devices", "preference", True)}
    assert not is_slot("user.devices")


@pytest.mark.parametrize(("said", "spoken"), [
    ("Moved to Leeds in May.", "I moved to Leeds in May."),
    ("Working nights on a cardiac ward these days.", "I'm working nights on a cardiac ward these days."),
    ("Also, started as a junior vet last month.", "Also, I started as a junior vet last month."),
    ("Living in London is so expensive.", "Living in London is so expensive."),  # an act the clause judges
    ("Moving to Leeds?", "Moving to Leeds?"),  # a question
    ("I moved to Leeds in May.", "I moved to Leeds in May."),
])
def test_a_subject_chat_left_out_is_said_again_to_be_read(said: str, spoken: str) -> None:
    assert meaning.spoken(said) == spoken


def test_a_line_that_leaves_its_subject_out_can_state_a_fact_and_an_intention_never_does() -> None:
    assert meaning.statement("Moved to Leeds in May.") and meaning.statement("Working nights these days.")
    for intended in ["Thinking about getting a cat at some point.", "I might move to Leeds.",
                     "I want to learn piano.", "Planning to go vegan next year.",
                     "Researching schools, it's been a dream to have kids."]:
        assert not meaning.statement(intended)
    # said to the one spoken to, or of an act the line judges: not the speaker's
    for other in ["Wishing you the best with the move!", "Taking in rescue dogs - you're so kind.",
                  "Biking sounds like a great way to see the city."]:
        assert not meaning.statement(other)


async def test_a_fact_whose_subject_was_left_out_is_kept_in_the_users_words(bundled: Embedder) -> None:
    said = "Teaching maths at a secondary school in Hull, for ten years."
    read_ = await read(bundled, [said, "Heading out now, talk later.", "Tried restarting it, still broken."])
    assert [(i.content, i.key) for i in read_.values()] == [(said, "user.said.job")]
