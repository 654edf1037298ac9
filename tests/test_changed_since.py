"""Which facts a later one may have changed (``changed_since``), and how their cards say so."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.memory.lifecycle import slot_of
from proxy.memory.recall.cards import item_card, render_card
from proxy.memory.recall.changed_since import (
    change_said,
    changed_later,
    facts_changed_by_turns,
    says_change,
    turns_changed_later,
)
from proxy.memory.search.item_index import replaced_guess_turns
from proxy.store.records import Fragment, ItemRow


@dataclass(frozen=True)
class Fact:
    id: int
    key: str
    content: str
    created: float
    about: str = "user"
    type: str = "entity"
    source: str = "user-stated"
    expires_at: str | None = None
    standing: bool = True
    confidence: float = 0.5
    fragment_hashes: tuple[str, ...] = ()


def facts(*said: tuple[str, str], about: str = "user") -> list[Fact]:
    return [Fact(i, key, content, float(i), about) for i, (key, content) in enumerate(said, start=1)]


def test_a_change_of_a_slot_read_loosely_marks_the_sure_value_before_it() -> None:
    home = facts(("user.location.home", "The user lives in Oslo."),
                 ("user.said.home", "Settled at last: I bought a flat in Trondheim."))
    assert changed_later(home) == {1}


def test_a_change_of_the_same_thing_said_in_a_catch_all_slot_marks_the_earlier() -> None:
    commute = facts(("user.statements", "我每天开车上班。"), ("user.statements", "我养了一只猫。"),
                    ("user.statements", "车上个月卖了，我现在骑自行车上班。"))
    assert changed_later(commute) == {1}  # the cat shares no topic with the bike


def test_one_thing_done_instead_of_another_is_a_change() -> None:
    commute = facts(("user.activities", "I cycle to work."), ("user.activities", "I take the train to work instead."))
    assert changed_later(commute) == {1}
    assert says_change("I drink tea instead of coffee.") and says_change("我喝茶而不是咖啡。")
    assert not says_change("I swim every morning.")


def test_a_chinese_home_read_by_its_words_marks_the_home_before_it() -> None:
    home = facts(("user.location.home", "用户住在成都。"), ("user.said.home", "我们上个月搬去了杭州。"))
    assert changed_later(home) == {1}
    job = facts(("user.occupation", "用户是会计。"), ("user.said.job", "我转行做了程序员。"))
    assert changed_later(job) == {1}


def test_an_addition_marks_nothing() -> None:
    allergies = facts(("user.allergies", "I'm allergic to peanuts."),
                      ("user.allergies", "I'm now also allergic to shellfish."))
    assert changed_later(allergies) == frozenset()
    assert not says_change("我现在也对虾过敏。")


def test_words_of_a_taste_or_of_a_change_are_no_shared_topic() -> None:
    tastes = facts(("user.likes", "The user likes hiking."), ("user.likes", "I now like jazz."))
    assert changed_later(tastes) == frozenset()


def test_only_the_same_persons_facts_mark_each_other() -> None:
    mine = facts(("user.location.home", "The user lives in Oslo."))
    theirs = [Fact(2, "sister.location.home", "My sister moved to Oslo's suburbs.", 2.0, "the user's sister")]
    assert changed_later([*mine, *theirs]) == frozenset()


def test_a_kind_of_fact_under_a_slot_is_that_slot() -> None:
    assert slot_of("user.diet.facts") == "user.diet"
    assert slot_of("user.said.job") == "user.occupation"
    assert slot_of("user.medications") == "user.medications"


TEXTS = st.sampled_from([
    "I live in Leeds.", "We moved to York now.", "I'm allergic to peanuts.", "I'm also allergic to cats.",
    "我每天开车上班。", "我现在骑车上班。", "The user is vegetarian.", "I started eating fish again.",
    "I quit smoking.", "I smoke a pipe.",
])
KEYS = st.sampled_from(["user.location.home", "user.said.home", "user.allergies", "user.statements", "user.diet",
                        "user.diet.facts", "user.likes"])


@given(st.lists(st.tuples(KEYS, TEXTS, st.sampled_from(["user", "Ann"])), max_size=8), st.randoms())
def test_marks_go_to_earlier_facts_only_and_do_not_depend_on_the_order_given(
    said: list[tuple[str, str, str]], rng: object
) -> None:
    stated = [Fact(i, key, text, float(i), about) for i, (key, text, about) in enumerate(said)]
    marked = changed_later(stated)
    shuffled = list(stated)
    rng.shuffle(shuffled)  # type: ignore[attr-defined]
    assert changed_later(shuffled) == marked
    for person in {f.about for f in stated}:
        own = [f for f in stated if f.about == person]
        assert own[-1].id not in marked  # the latest fact of each person stands as said
    changes = [f for f in stated if says_change(f.content)]
    assert all(any(c.created > f.created and c.about == f.about for c in changes) for f in stated if f.id in marked)


def test_a_marked_card_says_so_in_its_header() -> None:
    (oslo,) = facts(("user.location.home", "The user lives in Oslo."))
    assert render_card(item_card(oslo, changed=True)).endswith("· may have changed since] The user lives in Oslo.")
    assert "changed" not in render_card(item_card(oslo))


def test_a_topic_is_the_same_in_its_other_forms() -> None:
    job = facts(("user.said.job", "I'm a nurse on a night shift rota."),
                ("user.said.job", "I've quit nursing, I photograph weddings now."))
    assert changed_later(job) == {1}


def test_a_fact_read_surely_marks_only_guesses_a_sure_one_it_replaces_or_speaks_of_something_else() -> None:
    # A model's facts share names and words ("Maya") and say "since" of when things began.
    maya = facts(("user.diet", "Maya has been vegetarian since 2019 and avoids all meat."),
                 ("user.pet", "Maya now walks her dog Biscuit every morning before work."))
    sure = [replace(f, confidence=0.9) for f in maya]
    assert changed_later(sure) == frozenset()
    assert changed_later([maya[0], sure[1]]) == {1}  # the earlier read as a guess
    assert changed_later(maya) == {1}  # both
    # With no model: a guess of the job, then a rule's sure reading of its end under another slot.
    job = facts(("user.said.job", "I'm a nurse on a night shift rota."), ("user.preference.nursing", "x"))
    assert changed_later([job[0], replace(job[1], content="The user has quit nursing.", confidence=0.9)]) == {1}


def test_a_fact_that_expires_changes_nothing_lasting() -> None:
    home = facts(("user.location.home", "I live in Leeds."), ("user.trip", "I'm now staying in Leeds city centre."))
    assert changed_later(home) == {1}
    assert changed_later([home[0], replace(home[1], expires_at="2026-12-11")]) == frozenset()


def test_only_standing_facts_mark_and_are_marked() -> None:
    home = facts(("user.location.home", "I live in Leeds."), ("user.said.home", "We moved to York now."))
    assert changed_later([replace(home[0], standing=False), home[1]]) == frozenset()
    assert changed_later([home[0], replace(home[1], standing=False)]) == frozenset()


def turn(fid: int, text: str, role: str = "user", session: str = "s1", position: int | None = None) -> Fragment:
    return Fragment(id=fid, session=session, hash=f"h{fid}", role=role, text=text,
                    position=fid if position is None else position, tokens=1, created=0.0)


def said(*texts: str, role: str = "user") -> list[Fragment]:
    return [turn(i, text, role) for i, text in enumerate(texts, start=1)]


def place(fragment: Fragment) -> int:
    return fragment.id


def rare(term: str) -> int:
    return 2  # in how many of the user's turns: only the two at hand


def test_a_later_turn_that_says_a_change_of_the_same_thing_marks_the_earlier_and_its_reply() -> None:
    school = [turn(1, "My son Theo goes to Elmwood Primary.", position=0),
              turn(2, "What a lovely school!", "assistant", position=1),
              turn(3, "I read a lot of thrillers.", position=0, session="s2"),
              turn(4, "We moved Theo to Hillcrest Academy after the summer.", position=0, session="s3")]
    assert turns_changed_later(school, place, rare) == {1, 2}  # the thrillers share no topic
    assert turns_changed_later(school[:3], place, rare) == frozenset()  # no change said


def test_a_turn_a_replaced_fact_was_read_from_is_marked_with_its_reply_and_nothing_else() -> None:
    chat = [turn(1, "My job is teaching maths.", position=0), turn(2, "Nice!", "assistant", position=1),
            turn(3, "I read thrillers.", position=2), turn(4, "Good taste.", "assistant", position=3)]
    assert turns_changed_later(chat, place, rare, replaced={"h1"}) == {1, 2}
    assert turns_changed_later(chat, place, rare, replaced={"h2"}) == frozenset()  # a reply is not a statement
    assert turns_changed_later(chat, place, rare) == frozenset()


def test_the_turns_of_replaced_guesses_are_those_no_live_fact_was_read_from_too() -> None:
    def row(item_id: int, status: str, confidence: float, *hashes: str) -> ItemRow:
        return ItemRow(item_id, "s1", "entity", "user.said.job", "x", 0.5, confidence, "user-stated", None, status,
                       None, [], list(hashes), 1, 0, None, 0.0, 0.0)
    live = [row(3, "active", 0.5, "h2", "h3")]
    stored = [row(1, "superseded", 0.5, "h1", "h2"), row(2, "superseded", SURE, "h4"), *live]
    assert replaced_guess_turns(live, stored) == {"h1"}  # a sure fact's turns went with it (the store hid them)


@pytest.mark.parametrize("chat", [
    ("Quick note: I'm vegan, no animal products at all.", "Quick note: the kids' school pickup moved to 4pm now."),
    ("你好！先说一下，我是素食者。", "跟你说个消息，我们搬到了成都。"),
    ("Just so you know, I use a wheelchair.", "Just so you know, I switched banks, Monzo now."),
])
def test_a_change_marks_by_the_words_of_what_changed_not_by_how_the_news_is_told(chat: tuple[str, str]) -> None:
    """Chat opens news alike ("quick note:", "跟你说"): the change's topic is the clause that says it."""
    assert turns_changed_later(said(*chat), place, rare) == frozenset()


def test_a_turn_shares_no_topic_through_a_word_many_turns_say() -> None:
    seats = said("I always book a window seat.", "These days I take the aisle seat.")
    assert turns_changed_later(seats, place, rare) == {1}
    assert turns_changed_later(seats, place, lambda term: 9 if term == "seat" else 2) == frozenset()


@pytest.mark.parametrize("later", [
    "Any more paintings of the lake coming up?",  # a question
    "I've loved the lake since I moved here.",  # a change told as the time of something else
    "Now I also paint the lake at night.",  # an addition
    "湖边我现在还画，晚上也画。",  # 还 / 也 that add
    "I paint now and then, mostly the lake.",  # "now" inside a clause
    "I'm painting now.", "We're heading out now, the lake is calling.",  # what is under way
    "Lovely lake pics, that's all for now!", "The lake is fine by now.",  # "now" as the end of a time span
    "No lake trips until now.", "The lake is frozen right now.", "The lake, I saw it just now.",
])
def test_a_turn_that_asks_adds_or_tells_a_change_as_a_time_changes_nothing(later: str) -> None:
    assert turns_changed_later(said("I painted the lake at dawn.", later), place, rare) == frozenset()


@pytest.mark.parametrize(("earlier", "later"), [
    ("I work night shifts at the hospital.", "I'm on day shifts from this month, nine to five."),
    ("I work night shifts at the hospital.", "From now on my shifts are days."),
    ("My boyfriend Sam and I share a flat.", "Sam and I broke up, I kept the flat."),
    ("I lift weights at the gym four times a week.", "I cancelled my gym membership."),
    ("我每天开思域上班。", "上周把思域卖了。"),
    ("我每天去健身房撸铁。", "从这个月开始不去健身房了，在家练。"),
    ("My sister lives in Rome.", "My sister moved to Milan in the spring."),
    ("Dad teaches maths at my old school.", "He retired from teaching last June."),
    ("我是一名中学语文老师，教书二十年了。", "我去年退休了，不教书了。"),
    ("I ride my motorbike to the office.", "Sold the motorbike in May, lovely to walk in."),  # no subject said
    ("I ride my motorbike to the office.", "Big news — sold the motorbike!"),
    ("I keep my savings with Halifax.", "My savings are with Nationwide now — better rates."),  # "now" ends a clause
    ("我每天抽一包烟。", "我三个月前把烟戒了。"),  # 烟 by the dictionary; the search terms glue 烟戒
    # 还 / 也 in "还行", "还是", "也好" say how it goes, not that something was added
    ("医生给我开了氨氯地平，每天一片。", "医生给我换成缬沙坦了，这周吃着还行。"),
    ("我每天开车上班。", "车卖了，现在坐地铁上班，也好，能看书。"),
])
def test_a_turn_that_ends_a_state_or_starts_one_from_a_day_marks_the_earlier(earlier: str, later: str) -> None:
    assert turns_changed_later(said(earlier, later), place, rare) == {1}


@pytest.mark.parametrize("said", [
    "I used to go riding with my dad when I was a kid.",  # a story of the past
    "It's definitely changed them, some friends kept supporting me.",  # not the user nor one of hers
    "I'm gonna keep on going and never quit.",
])
def test_a_story_of_the_past_or_of_no_one_of_the_users_is_no_change(said: str) -> None:
    assert change_said(said) == frozenset()


def test_only_the_users_turns_mark_and_are_marked() -> None:
    assistant_says = [turn(1, "I always book a window seat."),
                      turn(2, "These days everyone takes the aisle seat.", "assistant", "s2", 0)]
    assert turns_changed_later(assistant_says, place, rare) == frozenset()
    additions = said("I'm allergic to peanuts.", "Now I'm also allergic to peanuts' cousins, cashews.")
    assert turns_changed_later(additions, place, rare) == frozenset()


SAID = st.sampled_from(["I live in Leeds.", "We moved to York now.", "Leeds is lovely.", "I quit smoking.",
                        "I smoke a pipe.", "These days I take the aisle seat.", "I book a window seat."])


@given(st.lists(st.tuples(SAID, st.sampled_from(["user", "assistant"])), max_size=8), st.randoms())
def test_marks_go_to_earlier_turns_only_and_do_not_depend_on_the_order_given(
    texts: list[tuple[str, str]], rng: object
) -> None:
    turns = [turn(i, text, role) for i, (text, role) in enumerate(texts)]
    marked = turns_changed_later(turns, place, rare)
    shuffled = list(turns)
    rng.shuffle(shuffled)  # type: ignore[attr-defined]
    assert turns_changed_later(shuffled, place, rare) == marked
    assert turns_changed_later([*turns, *shuffled], place, rare) == marked  # a turn given twice is one
    users = [t for t in turns if t.role == "user"]
    assert not users or users[-1].id not in marked  # the user's latest turn stands as said
    for t in turns:
        if t.id in marked and t.role == "user":
            assert any(u.id > t.id and u.role == "user" and change_said(u.text) for u in turns)


SURE = 0.9


def read_from(fact_id: int, content: str, *turns: Fragment, confidence: float = SURE, standing: bool = True) -> Fact:
    return Fact(fact_id, "user.statements", content, 0.0, confidence=confidence, standing=standing,
                fragment_hashes=tuple(t.hash for t in turns))


def marks(facts: list[Fact], turns: list[Fragment]) -> frozenset[int]:
    by_hash = {t.hash: t for t in turns}
    changes = [(t.hash, t) for t in turns if change_said(t.text)]
    return facts_changed_by_turns(facts, by_hash.get, changes, place, rare)


def test_a_change_no_reader_took_marks_the_fact_of_the_earlier_turn() -> None:
    dog, chat, rename = said("My dog Biscuit loves the beach.", "Thanks, that helps.",
                             "We renamed the dog, she's Pepper now.")
    biscuit = read_from(10, "The user's dog is called Biscuit.", dog)
    assert marks([biscuit], [dog, chat, rename]) == {10}
    assert marks([biscuit], [dog, chat]) == frozenset()  # no change said


def test_a_change_a_reader_took_surely_marks_nothing_by_its_turn() -> None:
    violin, change = said("My daughter Maya plays the violin.", "Maya quit violin, she plays drums now.")
    daughter = read_from(10, "The user has a daughter, Maya.", violin)
    drums = read_from(11, "The user's daughter Maya plays drums now.", change)
    assert marks([daughter, drums], [violin, change]) == frozenset()  # a model read the change: it decides
    # Read only as a guess, or only as an event (which replaces nothing), the change still marks by its turn.
    assert marks([daughter, replace(drums, confidence=0.5)], [violin, change]) == {10}
    assert marks([daughter, replace(drums, standing=False)], [violin, change]) == {10}


def test_a_fact_said_again_after_the_change_stands() -> None:
    dog, rename, again = said("My dog Biscuit loves the beach.", "We renamed the dog, she's Pepper now.",
                              "Biscuit, I mean the dog, still loves the beach.")
    biscuit = read_from(10, "The user's dog is called Biscuit.", dog, again)
    assert marks([biscuit], [dog, rename, again]) == frozenset()  # one of its turns is not marked
    assert marks([read_from(10, "The user's dog is called Biscuit.", dog)], [dog, rename, again]) == {10}


def test_only_standing_facts_found_among_the_turns_are_marked() -> None:
    dog, rename = said("My dog Biscuit loves the beach.", "We renamed the dog, she's Pepper now.")
    assert marks([read_from(10, "The user walks Biscuit today.", dog, standing=False)], [dog, rename]) == frozenset()
    assert marks([read_from(10, "The user's dog is called Biscuit.")], [dog, rename]) == frozenset()  # no turn
