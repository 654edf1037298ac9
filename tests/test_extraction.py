"""Memory extraction: repairing the model's JSON, the rule-based fallback, transcripts."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.memory.extraction.item_parser import parse_items, transcript_for_extraction
from proxy.memory.extraction.rules import rule_extract
from proxy.memory.memory_schema import CATEGORIES, TYPES, MemoryItem

NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
ITEM = (
    '{"type": "entity", "content": "The user\'s cat is allergic to peanuts.", '
    '"key": "user.cat.allergy.peanut", "importance": 0.9, "confidence": 0.95, '
    '"source": "user-stated", "expires_at": null, "turns": [3]}'
)
EXPECTED = MemoryItem(
    type="entity",
    content="The user's cat is allergic to peanuts.",
    key="user.cat.allergy.peanut",
    importance=0.9,
    confidence=0.95,
    source="user-stated",
    expires_at=None,
    turns=(3,),
)


def user(*texts: str) -> list[tuple[int, str, str]]:
    return [(i, "user", text) for i, text in enumerate(texts, start=1)]


def keys(items: list[MemoryItem]) -> list[str]:
    return [item.key for item in items]


# ---------------------------------------------------------------- parse_items


@pytest.mark.parametrize(
    "raw",
    [
        f"[{ITEM}]",
        f"```json\n[{ITEM}]\n```",
        f"```\n[{ITEM}]\n```",
        f"Here are the memories I found:\n[{ITEM}]\nLet me know if you need more.",
        f"[{ITEM},]",
        ITEM,
        f'{{"memories": [{ITEM}]}}',
        f'Sure! {{"items": [{ITEM}]}} Done.',
    ],
)
def test_parse_items_repairs_common_damage(raw: str) -> None:
    assert parse_items(raw) == [EXPECTED]


def test_parse_items_accepts_single_quotes() -> None:
    raw = "[{'type': 'preference', 'content': 'The user likes tea.', 'key': 'user.preference.tea'}]"
    (item,) = parse_items(raw) or []
    assert (item.type, item.content, item.key) == ("preference", "The user likes tea.", "user.preference.tea")


@pytest.mark.parametrize(
    "raw", ["", "hopeless junk, no json here", "The user likes { tea", "I think [the user] is nice", "null", '"just a string"']
)
def test_parse_items_gives_none_for_junk(raw: str) -> None:
    assert parse_items(raw) is None


def test_brackets_in_the_prose_do_not_hide_the_array() -> None:
    assert parse_items(f"I found [1 item] (see [turn 3]):\n[{ITEM}]") == [EXPECTED]


def test_a_truncated_reply_keeps_its_complete_items() -> None:
    assert parse_items(f'[{ITEM}, {{"type": "task", "content": "Buy mi') == [EXPECTED]


def test_an_empty_array_means_nothing_to_remember() -> None:
    assert parse_items("[]") == []
    assert parse_items('{"memories": []}') == []


def test_parse_items_normalises_a_models_deviations_and_drops_only_what_holds_no_fact() -> None:
    raw = """[
      {"type": "mood", "content": "The user is happy."},
      {"type": "Preference", "content": "  The user   likes green tea.  ", "importance": 7,
       "confidence": "-2", "source": "user_stated", "expires_at": "next week", "turns": ["turn 4", 2, 4]},
      {"type": "task", "content": ""},
      {"type": "event", "content": "The user is in Paris this week.", "key": "User Location.Current",
       "importance": "high", "expires_at": "2026-11-09", "turns": 5},
      "stray string"
    ]"""
    happy, tea, paris = parse_items(raw) or []
    assert (happy.type, happy.category, happy.standing) == ("entity", "other", False)  # an unknown type is kept
    assert (tea.type, tea.category, tea.standing) == ("preference", "preference", True)
    assert tea.content == "The user likes green tea."
    assert (tea.importance, tea.confidence, tea.source) == (1.0, 0.0, "user-stated")
    assert tea.expires_at is None and tea.turns == (2, 4)
    assert tea.key.startswith("user.preference.auto_")
    assert (paris.key, paris.category, paris.standing) == ("user_location.current", "plan", False)
    assert (paris.importance, paris.source, paris.expires_at, paris.turns) == (0.5, "inferred", "2026-11-09", (5,))


def test_a_fact_given_an_expiry_and_no_standing_does_not_stand() -> None:
    """A moment a model files under a standing category ("a headache today": health) with its expiry but no
    ``standing`` shapes no answer past it; one it calls standing, or one without an expiry, stands."""
    entries = [
        {"type": "entity", "category": "health", "content": "The user has a pounding headache today.",
         "expires_at": "2026-11-03"},
        {"type": "entity", "category": "health", "content": "The user is allergic to penicillin."},
        {"type": "entity", "category": "health", "content": "The user is pregnant.", "standing": True,
         "expires_at": "2027-05-01"},
    ]
    assert [i.standing for i in parse_items(json.dumps(entries)) or []] == [False, True, True]


@pytest.mark.parametrize(
    ("said", "category", "source", "key"),
    [
        ({"category": "Health"}, "health", "inferred", "user.diet"),
        ({"category": "medical", "source": "user"}, "health", "user-stated", "user.diet"),
        ({"category": "dietary restrictions", "source": "User-Stated"}, "health", "user-stated", "user.diet"),
        ({"category": "mood"}, "other", "inferred", "user.diet"),
        ({"category": "HEALTH", "key": "User.Diet"}, "health", "inferred", "user.diet"),
        ({"key": "USER DIET"}, "other", "inferred", "user_diet"),
    ],
)
def test_a_models_small_deviations_keep_the_fact(said: dict[str, str], category: str, source: str, key: str) -> None:
    entry = {"type": "entity", "content": "The user is vegetarian.", "key": "user.diet", **said}
    (item,) = parse_items(json.dumps([entry])) or []
    assert (item.category, item.source, item.key, item.content) == (category, source, key, "The user is vegetarian.")


def test_a_left_out_standing_is_the_categorys_and_a_said_one_is_kept() -> None:
    raw = json.dumps([
        {"type": "entity", "category": "health", "content": "The user is vegan."},
        {"type": "event", "category": "plan", "content": "The user flies to Rome on 2026-12-01."},
        {"type": "event", "category": "health", "standing": "false", "content": "The user has a cold today."},
        {"type": "entity", "category": "identifier", "standing": 1, "content": "The user's account is 8812."},
    ])
    assert [i.standing for i in parse_items(raw) or []] == [True, False, False, True]


def test_a_structured_reply_is_read_like_a_plain_one() -> None:
    structured = json.dumps({"memories": [json.loads(ITEM)]})
    assert parse_items(structured) == [EXPECTED]


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(MemoryItem.model_fields)), st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=30),
    st.lists(st.one_of(st.integers(), st.text(max_size=5)), max_size=4))), st.text(min_size=1, max_size=80))
def test_any_entry_with_content_gives_an_item_of_the_schema(entry: dict[str, object], content: str) -> None:
    entry["content"] = content
    items = parse_items(json.dumps([entry]))
    if not content.split():
        assert items is None
        return
    (item,) = items or []
    assert item.category in CATEGORIES and item.type in TYPES and item.source in ("user-stated", "inferred")
    assert 0 <= item.importance <= 1 and 0 <= item.confidence <= 1 and item.key
    assert item.content == " ".join(content.split())


def test_a_derived_key_is_stable_and_content_specific() -> None:
    a = parse_items('[{"type": "event", "content": "The user moved to Lyon."}]') or []
    b = parse_items('[{"type": "event", "content": "the user  moved to lyon."}]') or []
    c = parse_items('[{"type": "event", "content": "The user moved to Nice."}]') or []
    assert a[0].key == b[0].key != c[0].key


def test_only_entries_without_a_fact_fall_back_to_the_rules() -> None:
    assert parse_items('[{"type": "mood", "content": ""}, {"type": "task"}]') is None


# ---------------------------------------------------------------- rule_extract, English


def test_a_pets_allergy_keeps_its_subject() -> None:
    (item,) = rule_extract(user("Hi! My cat is allergic to peanuts, so no peanut treats."), NOW)
    assert item.content == "The user's cat is allergic to peanuts."
    assert item.key == "user.cat.allergy.peanut"
    assert (item.type, item.source, item.turns, item.expires_at) == ("entity", "user-stated", (1,), None)
    assert item.importance >= 0.8


def test_the_users_own_allergy() -> None:
    items = rule_extract(user("I'm severely allergic to penicillin.", "I'm not allergic to anything else."), NOW)
    assert [(i.key, i.content) for i in items] == [
        ("user.allergy.penicillin", "The user is allergic to penicillin.")
    ]


def test_several_allergens_are_several_slots() -> None:
    items = rule_extract(user("I'm allergic to peanuts, tree nuts and shellfish.", "I have a severe egg allergy."), NOW)
    assert keys(items) == ["user.allergy.peanut", "user.allergy.tree_nut", "user.allergy.shellfish", "user.allergy.egg"]
    assert rule_extract(user("I have a severe allergy.", "I'm allergic to everything!"), NOW) == []


def test_a_clause_after_the_allergen_is_not_an_allergen() -> None:
    items = rule_extract(user("My cat Zorblax is allergic to peanuts, please remember that."), NOW)
    assert [i.content for i in items if ".allergy." in i.key] == ["The user's cat Zorblax is allergic to peanuts."]
    assert [i.content for i in items if i.key == "user.cat.name"] == ["The user's cat is called Zorblax."]


def test_questions_are_not_statements_but_reminders_still_count() -> None:
    assert rule_extract(user("Should it arrive before Friday?", "我的猫对花生过敏吗？"), NOW) == []
    (item,) = rule_extract(user("Can you remind me to call mom tomorrow?"), NOW)
    assert (item.type, item.key) == ("task", "user.task.call_mom")


@pytest.mark.parametrize(
    "said",
    [
        "Pretend I live in London and plan my day.", "Let's say I'm allergic to nuts.",
        "Suppose I'm vegetarian: what would you cook?", "Someone told me I look like I live in Brooklyn.",
        "What if I moved to Lisbon?", "Imagine I'm allergic to shellfish.", "I wish I lived in Kyoto.",
        "如果我住在上海就好了。", "要是我住在大理就好了。", "假如我对坚果过敏。", "假设我是素食者。",
    ],
)
def test_what_is_only_supposed_or_wished_is_no_fact(said: str) -> None:
    assert rule_extract(user(said), NOW) == []


def test_a_fact_beside_a_condition_on_someone_else_is_still_read() -> None:
    (item,) = rule_extract(user("I'm allergic to peanuts, so tell me if the dish has any."), NOW)
    assert item.key == "user.allergy.peanut"
    (said,) = rule_extract(user("Like I said, I'm allergic to peanuts."), NOW)
    assert said.key == "user.allergy.peanut"
    # A supposition ends with its clause: what follows the comma is said.
    (told,) = rule_extract(user("I don't know if I told you, but I'm allergic to peanuts."), NOW)
    assert told.key == "user.allergy.peanut"
    (home,) = rule_extract(user("Not sure if I mentioned it, but I live in Leeds."), NOW)
    assert home.key == "user.location.home"
    (later,) = rule_extract(user("I just learned I'm allergic to cats, so who knows if I'll ever get one."), NOW)
    assert later.key == "user.allergy.cat"
    (task,) = rule_extract(user("If I forget, remind me to call mom tomorrow."), NOW)
    assert task.type == "task"


def test_card_ending_and_order_number() -> None:
    items = rule_extract(user("Please use my Visa card ending 8865 for order #A12345."), NOW)
    assert keys(items) == ["user.card.8865", "user.order.a12345"]
    assert "8865" in items[0].content and "#A12345" in items[1].content


def test_a_masked_card_is_still_remembered_by_its_last_digits() -> None:
    (item,) = rule_extract(user("Pay with [card ****8865] please."), NOW)
    assert item.key == "user.card.8865"


def test_must_arrive_before_wednesday_or_refund() -> None:
    (item,) = rule_extract(user("It must arrive before Wednesday or refund."), NOW)
    assert (item.type, item.key) == ("constraint", "user.deadline.delivery")
    assert "must arrive before Wednesday or refund" in item.content
    assert "2026-11-02" in item.content  # "Wednesday" stays interpretable later


def test_other_deadlines() -> None:
    items = rule_extract(user("The deadline is Nov 30.", "I need to renew my passport before March."), NOW)
    assert [(i.type, i.key) for i in items] == [
        ("constraint", "user.deadline.general"),
        ("task", "user.deadline.renew_passport"),
    ]
    assert "Nov 30" in items[0].content


def test_names_of_pets_and_family_are_identity_slots() -> None:
    items = rule_extract(user("My dog is called Pepper, she is a border collie.", "My son's name is Leo.",
                              "我的狗叫豆豆，是一只柯基。", "我家猫咪叫什么好呢？", "My dog is called so cute"), NOW)
    assert [(i.key, i.content) for i in items] == [
        ("user.dog.name", "The user's dog is called Pepper."), ("user.son.name", "The user's son is called Leo."),
        ("user.dog.name", "用户的狗叫豆豆。"),
    ]


def test_the_native_language_is_an_identity_slot() -> None:
    items = rule_extract(user("I'm a native Spanish speaker, English is my second language.",
                              "My first language is German.", "我的母语是粤语。", "I speak some French."), NOW)
    assert [(i.key, i.content) for i in items] == [
        ("user.language", "The user's native language is Spanish."),
        ("user.language", "The user's native language is German."),
        ("user.language", "用户的母语是粤语。"),
        ("user.language.spoken.french", "The user speaks French."),  # spoken, not native: a slot of its own
    ]


def test_something_due_by_a_date_is_a_deadline_but_due_to_is_not() -> None:
    (item,) = rule_extract(user("My visa application is due by June 30.",
                                "The game was cancelled due to rain by Monday night."), NOW)
    assert item.key == "user.deadline.visa_application"


def test_a_remark_about_something_at_hand_is_not_a_standing_taste() -> None:
    items = rule_extract(user("I love the color and texture!", "I love all the yellow leaves.",
                              "I love creating art.", "I'm allergic to animals with fur."), NOW)
    assert keys(items) == ["user.preference.creating_art", "user.allergy.animals_with_fur"]


def test_a_daily_habit_holds_the_slot_that_quitting_it_supersedes() -> None:
    habit, = rule_extract(user("我每天都喝三杯咖啡。"), NOW)
    quit_, = rule_extract(user("医生让我戒咖啡了，我现在不喝咖啡了。"), NOW)
    assert habit.key == quit_.key == "user.preference.coffee" and habit.content == "用户每天都喝三杯咖啡。"
    (en,) = rule_extract(user("I drink three cups of coffee a day.", "I have a meeting every day."), NOW)
    assert (en.key, en.content) == ("user.preference.coffee", "The user drinks three cups of coffee a day.")


@pytest.mark.parametrize(("said", "key", "content"), [
    ("I quit smoking three months ago!", "user.preference.smoking", "The user has quit smoking."),
    ("I gave up coffee two weeks ago.", "user.preference.coffee", "The user has given up coffee."),
    ("I stopped running two years ago.", "user.preference.running", "The user has stopped running."),
    ("I gave up meat back in the summer.", "user.preference.meat", "The user has given up meat."),
])
def test_when_a_taste_ended_is_not_part_of_the_thing(said: str, key: str, content: str) -> None:
    # Said after the object, the time made a slot of its own ("smoking_three_months_ago"), which then
    # superseded nothing, and a gerund took "three" as its object ("The user has stopped smoking three").
    assert [(i.key, i.content) for i in rule_extract(user(said), NOW)] == [(key, content)]


def test_like_then_dislike_share_a_key_in_order() -> None:
    items = rule_extract(user("I love spicy food!", "I don't like spicy food anymore.", "I no longer eat spicy food."), NOW)
    assert keys(items) == ["user.preference.spicy_food"] * 3
    assert [i.content for i in items] == [
        "The user loves spicy food.",
        "The user doesn't like spicy food.",
        "The user no longer eats spicy food.",
    ]


def test_a_repeated_statement_gains_a_turn_instead_of_a_copy() -> None:
    (item,) = rule_extract(user("I love sushi.", "I love sushi."), NOW)
    assert item.turns == (1, 2)


def test_remind_me_is_a_task() -> None:
    (item,) = rule_extract(user("Remind me to call the dentist on Friday."), NOW)
    assert (item.type, item.key) == ("task", "user.task.call_dentist_on_friday")
    assert item.content == "The user asked to be reminded to call the dentist on Friday."


def test_a_reminder_is_a_request_not_a_remark() -> None:
    items = rule_extract(user("Moments like these remind me to appreciate the ones I love.",
                              "Hey, remind me to buy milk.", "Could you please remind me to pay rent?"), NOW)
    assert keys(items) == ["user.task.buy_milk", "user.task.pay_rent"]


def test_a_liked_thing_is_said_of_the_user() -> None:
    (item,) = rule_extract(user("I love running my own studio."), NOW)
    assert item.content == "The user loves running their own studio."


def test_names() -> None:
    items = rule_extract(user("My name is Alice Smith. You can call me Ali."), NOW)
    assert [(i.key, i.content) for i in items] == [
        ("user.name", "The user's name is Alice Smith."),
        ("user.nickname", "The user wants to be called Ali."),
    ]


def test_temporary_facts_expire() -> None:
    (paris,) = rule_extract(user("I'm in Paris this week.", "I'm in trouble.", "I'm in Rome."), NOW)
    assert (paris.type, paris.key) == ("event", "user.location.current")
    assert paris.expires_at == "2026-11-09T09:00:00+00:00"
    (task,) = rule_extract(user("Remind me to buy milk today."), NOW)
    assert task.expires_at == "2026-11-03T09:00:00+00:00"


def test_lasting_facts_said_today_do_not_expire() -> None:
    (item,) = rule_extract(user("I found out today that I'm allergic to shellfish."), NOW)
    assert item.key == "user.allergy.shellfish" and item.expires_at is None


@pytest.mark.parametrize(("text", "days"), [
    ("I'm vegetarian this week for a challenge.", 7), ("I'm vegetarian for now.", 7),
    ("I'm vegetarian today.", 1),
])
def test_a_fact_said_for_now_is_of_the_moment_whatever_its_kind(text: str, days: int) -> None:
    (item,) = rule_extract(user(text), NOW)
    assert item.key == "user.diet" and not item.standing
    assert item.expires_at == (NOW + timedelta(days=days)).isoformat()
    (lasting,) = rule_extract(user("I'm vegetarian these days."), NOW)  # "these days": lately, not for now
    assert lasting.standing and lasting.expires_at is None
    # How long is read from the fact's own words on, not from when the user learned it.
    (learned,) = rule_extract(user("I found out today that I'm vegetarian for now."), NOW)
    assert learned.expires_at == (NOW + timedelta(days=7)).isoformat()


@pytest.mark.parametrize(
    "text",
    [
        "Hello! How are you today?",
        "I'm so tired and a bit sad.",
        "Make it shorter and use a table.",
        "I like it. I love you. I'd like a coffee. I like the second option. I like to know more.",
        "Call me back tomorrow.",
        "In order to ship, what do I do?",
    ],
)
def test_greetings_moods_and_instructions_are_not_memories(text: str) -> None:
    assert rule_extract(user(text), NOW) == []


def test_only_user_turns_are_mined() -> None:
    turns = [(1, "assistant", "My name is Bot and I love spicy food."), (2, "system", "My name is Sys.")]
    assert rule_extract(turns, NOW) == []


# ---------------------------------------------------------------- rule_extract, Chinese


def test_chinese_name_and_pet_allergy() -> None:
    items = rule_extract(user("我叫李雷，我的猫对花生过敏。"), NOW)
    assert [(i.key, i.content) for i in items] == [
        ("user.name", "用户的名字是李雷。"),
        ("user.cat.allergy.peanut", "用户的猫对花生过敏。"),
    ]


def test_chinese_allergies_and_negation() -> None:
    items = rule_extract(user("我对海鲜过敏。", "我也对花生过敏。", "我对牛奶不过敏。", "医生说我对芒果不再过敏了。",
                              "我对虾已经不怎么过敏了。", "我对猫毛从来没过敏过。"), NOW)
    assert keys(items) == ["user.allergy.seafood", "user.allergy.peanut"]


def test_chinese_like_then_stop_share_a_key() -> None:
    items = rule_extract(user("我喜欢吃辣。", "我现在不吃辣了。", "我不再吃辣"), NOW)
    assert keys(items) == ["user.preference.spicy_food"] * 3
    assert [i.content for i in items] == ["用户喜欢吃辣。", "用户现在不吃辣。", "用户不再吃辣。"]


def test_english_and_chinese_agree_on_keys() -> None:
    english = rule_extract(user("I love spicy food.", "My cat is allergic to peanuts."), NOW)
    chinese = rule_extract(user("我不喜欢辣的。", "我的猫对花生过敏。"), NOW)
    assert keys(english) == keys(chinese)


def test_chinese_card_order_and_deadline() -> None:
    items = rule_extract(user("请用尾号8865的卡付款，订单号 12345。", "周三之前必须到货，否则退款。"), NOW)
    assert keys(items) == ["user.card.8865", "user.order.12345", "user.deadline.delivery"]
    assert items[2].type == "constraint" and "周三之前必须到货，否则退款" in items[2].content
    (deadline,) = rule_extract(user("截止日期是11月30日。"), NOW)
    assert deadline.key == "user.deadline.general" and "11月30日" in deadline.content


def test_chinese_reminder_and_temporary_trip() -> None:
    remind, trip = rule_extract(user("提醒我明天交报告。", "这周我在巴黎出差。", "你能提醒我一下吗？"), NOW)
    assert (remind.type, remind.content, remind.expires_at) == (
        "task",
        "用户要求提醒：明天交报告。",
        "2026-11-04T09:00:00+00:00",
    )
    assert (trip.key, trip.expires_at) == ("user.location.current", "2026-11-09T09:00:00+00:00")


@pytest.mark.parametrize(
    "text", ["你好！今天天气不错。", "我不喜欢这个方案。", "我爱你。", "我叫了外卖。", "我叫他明天来。", "手机尾号1234。", "我爱死这个功能了。"]
)
def test_chinese_non_memories(text: str) -> None:
    assert rule_extract(user(text), NOW) == []


# ---------------------------------------------------------------- injected blocks

BLOCK = (
    "<paperclip-memory>\nNotes recalled from earlier conversations.\n"
    "[entity · user said · 2026-10-01] My name is Bob. I'm allergic to peanuts.\n"
    "</paperclip-memory>\n\n"
)


def test_injected_blocks_are_never_extracted() -> None:
    assert rule_extract(user(BLOCK + "What should I cook tonight?"), NOW) == []
    (item,) = rule_extract(user(BLOCK + "I love spicy food."), NOW)
    assert item.key == "user.preference.spicy_food"


def test_transcript_strips_blocks_and_labels_turns() -> None:
    turns = [
        (4, "user", BLOCK + "My cat is allergic to peanuts."),
        (5, "assistant", "Noted."),
        (6, "user", BLOCK),
    ]
    assert transcript_for_extraction(turns) == (
        "[turn 4] user: My cat is allergic to peanuts.\n[turn 5] assistant: Noted."
    )


def test_an_unclosed_block_is_cut_to_the_end() -> None:
    rendered = transcript_for_extraction([(1, "user", "Hi <paperclip-memory>\nMy name is Bob.")])
    assert rendered == "[turn 1] user: Hi"


@pytest.mark.parametrize(
    ("said", "stands"),
    [
        ("I must file my tax return by April 15.", True),  # a deadline stands until it passes
        ("Remind me to call the dentist.", True),
        ("I have to submit the report by Friday this week.", True),
        ("I need to finish the slides by tonight.", False),  # today's or tomorrow's is of the moment
        ("Remind me to call mom tomorrow.", False),
        ("I'm in Paris this week.", False),
        ("我的论文必须在六月十日之前交。", True),
    ],
)
def test_a_rules_task_or_deadline_stands_unless_it_is_of_today_or_tomorrow(said: str, stands: bool) -> None:
    (item,) = rule_extract(user(said), NOW)
    assert item.standing is stands
