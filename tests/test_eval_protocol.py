"""The replay protocol's pieces: the two clocks, answer presence, and the stand-in that answers from facts."""

from __future__ import annotations

import datetime as dt
import itertools
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.context.compressor import render_transcript
from proxy.eval import locomo
from proxy.eval.clocks import BURST_STEP_S, at_clock, burst_times
from proxy.eval.observations import knowledge as observation_knowledge
from proxy.eval.observations import observation_item
from proxy.eval.replay import question_times, requests, schedule
from proxy.eval.scoring import answer_presence, normalise_answer
from proxy.eval.stand_in import (
    Fact,
    Knowledge,
    StandIn,
    extraction_lines,
    facts_for,
    kind_of,
    prompt_heads,
    resolve,
    summary_lines,
    summary_of,
)
from proxy.memory.extraction import extractor
from proxy.memory.extraction.item_parser import parse_items, transcript_for_extraction
from proxy.prompts import Prompts

from .test_eval import SAMPLE

# --- the clocks ------------------------------------------------------------------------


@given(st.lists(st.floats(0, 2e9), max_size=50), st.floats(1e9, 2e9))
def test_burst_keeps_the_order_and_sends_a_second_apart_from_the_start(dated: list[float], start: float) -> None:
    times = at_clock("burst", dated, start)
    assert len(times) == len(dated)
    assert all(b - a == pytest.approx(BURST_STEP_S) for a, b in itertools.pairwise(times))
    assert not times or times[0] == start
    assert at_clock("dated", dated, start) == dated  # the dated clock is the data's own times


def test_burst_times_are_evenly_spaced() -> None:
    assert burst_times(3, 100.0) == [100.0, 101.0, 102.0]
    assert burst_times(0, 100.0) == []


def test_the_dated_schedule_puts_sessions_at_their_dates_and_questions_a_day_later() -> None:
    conv = locomo.conversation(SAMPLE)
    replayed, asked = schedule(conv, "sessions", "dated", start=0.0)
    may, october = (dt.datetime(2023, 5, 8, 13, 56, tzinfo=dt.UTC), dt.datetime(2023, 10, 13, 10, 31, tzinfo=dt.UTC))
    assert replayed == [may.timestamp(), october.timestamp()]
    assert asked == question_times(conv) == [october.timestamp() + 86_400 + i for i in range(3)]
    one_chat, _ = schedule(conv, "one-chat", "dated", start=0.0)
    assert len(one_chat) == len(requests(conv, "one-chat")) == 4
    assert one_chat == sorted(one_chat) and one_chat[0] > may.timestamp()


def test_the_burst_schedule_is_the_present_whatever_the_dates() -> None:
    conv = locomo.conversation(SAMPLE)
    now = 1_900_000_000.0
    for mode in ("sessions", "one-chat"):
        replayed, asked = schedule(conv, mode, "burst", start=now)  # type: ignore[arg-type]
        assert replayed + asked == burst_times(len(replayed) + len(asked), now)
        assert len(asked) == len(conv.questions)


# --- answer presence -------------------------------------------------------------------


def test_answers_are_normalised_as_words_without_case_punctuation_or_articles() -> None:
    assert normalise_answer("The  Eiffel-Tower!") == "eiffel tower"
    assert normalise_answer("7 May, 2023") == "7 may 2023"
    assert normalise_answer("ＡＢＣ") == "abc"  # full-width letters as ASCII (NFKC)
    assert normalise_answer("北京，上海") == "北京 上海"
    assert normalise_answer("a") == ""


@given(st.text(max_size=40))
def test_normalising_an_answer_twice_changes_nothing(text: str) -> None:
    once = normalise_answer(text)
    assert normalise_answer(once) == once
    assert normalise_answer(text.upper()) == normalise_answer(text.lower()) or not text.isascii()


def test_answer_presence_reads_whole_words_of_what_was_forwarded() -> None:
    forwarded = "User: We adopted a greyhound, Pixel.\nAssistant: Lovely!"
    assert answer_presence("pixel", forwarded) == 1.0
    assert answer_presence("The greyhound", forwarded) == 1.0
    assert answer_presence("pix", forwarded) == 0.0  # part of a word is not the answer
    assert answer_presence("cat", "a category of things") == 0.0
    assert answer_presence("", forwarded) == 0.0
    assert answer_presence("!!", forwarded) == 0.0  # nothing left to look for


def test_answer_presence_ignores_the_evals_own_questions_and_replies() -> None:
    own = {"What did Ana name her dog?", "Pixel"}
    forwarded = "<paperclip-memory>\nUser: What did Ana name her dog?\nAssistant: Pixel\n</paperclip-memory>\n\n" \
                "What did Ana name her dog?"
    assert answer_presence("Pixel", forwarded) == 1.0
    assert answer_presence("Pixel", forwarded, own) == 0.0  # only an earlier reply of the eval said it
    assert answer_presence("Pixel", forwarded + "\nUser: Her name is Pixel.", own) == 1.0


# --- the observations stand-in -----------------------------------------------------------


OBSERVED: dict[str, Any] = {
    **SAMPLE,
    "observation": {
        "session_1_observation": {
            "Ana": [["Ana adopted a greyhound called Pixel.", "D1:1"], ["Ana's sister moved to Lisbon.", "D1:4"],
                    ["Ana's dog sleeps a lot.", ["D1:3", "D1:9"]], ["A fact of no turn.", "D9:9"]],
            "Ben": [["Ben thinks Lisbon is sunny.", "D1:5"]],
        },
        "session_2_observation": {"Ben": [["Ben is learning the cello.", "D2:1"]]},
    },
    "session_summary": {
        "session_1_summary": "Ana told Ben about Pixel, her new greyhound, and her sister's move to Lisbon.",
        "session_2_summary": "Ben started the cello; Ana plays the violin.",
    },
}


def test_observations_and_session_summaries_are_read_with_the_turns_they_name() -> None:
    conv = locomo.conversation(OBSERVED)
    first, second = conv.sessions
    assert conv.user == "Ana"
    assert [(o.speaker, o.turns) for o in first.observations] == [
        ("Ana", ("D1:1",)), ("Ana", ("D1:4",)), ("Ana", ("D1:3",)), ("Ben", ("D1:5",))
    ]  # ids naming no turn dropped, a fact with none left out
    assert first.summary is not None and first.summary.startswith("Ana told Ben")
    assert second.observations[0].text == "Ben is learning the cello."
    assert locomo.conversation(SAMPLE).sessions[0].observations == ()


def test_an_observation_becomes_a_memory_item_the_parser_accepts() -> None:
    conv = locomo.conversation(OBSERVED)
    ana, _, _, ben = conv.sessions[0].observations
    mine, theirs = observation_item(ana, conv.user), observation_item(ben, conv.user)
    assert mine["content"] == ana.text and mine["source"] == "user-stated" and mine["key"].startswith("user.fact_")
    assert theirs["source"] == "inferred" and theirs["key"].startswith("user.ben.fact_")
    assert mine["key"] != observation_item(conv.sessions[0].observations[1], conv.user)["key"]
    (item,) = parse_items(json.dumps([{**mine, "turns": [1]}])) or []
    assert (item.content, item.key, item.turns) == (ana.text, mine["key"], (1,))
    # In the memory schema: what happened in a session does not stand; a fact of the other speaker is about them.
    (other,) = parse_items(json.dumps([theirs])) or []
    assert (item.about, item.standing, other.about, other.category, other.standing) == (
        "user", False, "Ben", "relationship", False)


def known() -> Knowledge:
    conv = locomo.conversation(OBSERVED)
    return observation_knowledge([conv], lambda text: text)


def extraction_prompt(turns: list[tuple[int, str, str]]) -> str:
    return extractor.extraction_prompt(Prompts.load(), turns, dt.date(2026, 12, 2))


def test_an_extraction_call_gets_the_facts_of_the_turns_its_transcript_holds_and_only_those() -> None:
    conv = locomo.conversation(OBSERVED)
    t = {turn.dia_id: turn for turn in conv.turns().values()}
    # Turns 11 and 12 of some chat: the adoption (D1:1) and a reply of no fact.
    transcript = [(11, "user", t["D1:1"].content), (12, "assistant", t["D1:2"].content)]
    reply = StandIn(known())([{"role": "user", "content": extraction_prompt(transcript)}])
    items = parse_items(reply) or []
    assert [(i.content, i.turns) for i in items] == [("Ana adopted a greyhound called Pixel.", (11,))]
    # A transcript of turns no fact came from (a question the eval asked, say): an honest empty answer.
    asked = StandIn(known())([{"role": "user", "content": extraction_prompt([(1, "user", "What did Ana adopt?")])}])
    assert json.loads(asked) == [] and parse_items(asked) == []


def test_facts_of_several_turns_are_given_once_with_the_turns_present() -> None:
    both = Fact(("a", "b"), {"type": "event", "content": "Two turns."})
    k = Knowledge.of([("a", "s1", "first"), ("b", "s1", "second"), ("c", "s2", "third")], [both])
    assert facts_for(resolve([(3, "second"), (4, "first")], k), k) == [{**both.item, "turns": [3, 4]}]
    assert facts_for(resolve([(7, "second"), (8, "third")], k), k) == [{**both.item, "turns": [7]}]
    assert facts_for(resolve([(1, "third")], k), k) == []


def test_a_text_said_in_several_turns_is_read_in_the_session_of_its_neighbours() -> None:
    k = Knowledge.of([("s1/1", "s1", "Thanks!"), ("s1/2", "s1", "I moved to Oslo."),
                      ("s2/1", "s2", "Thanks!"), ("s2/2", "s2", "I moved to Rome.")])
    assert resolve([(5, "I moved to Rome."), (6, "Thanks!")], k) == [(5, "s2/2"), (6, "s2/1")]
    assert resolve([(1, "thanks!")], k) == []  # text is compared as sent, whitespace aside
    assert resolve([(1, " Thanks!\n")], k) == [(1, "s1/1"), (1, "s2/1")]  # nothing places it: both


@given(st.lists(st.sampled_from(["one", "two", "three", "four", "five"]), max_size=8))
def test_only_facts_of_turns_in_the_transcript_are_given(shown: list[str]) -> None:
    texts = ["one", "two", "three", "four", "five"]
    facts = [Fact((t,), {"content": f"fact of {t}"}) for t in texts]
    k = Knowledge.of([(t, "s", t) for t in texts], facts)
    given_facts = facts_for(resolve(list(enumerate(shown)), k), k)
    assert {f["content"] for f in given_facts} == {f"fact of {t}" for t in shown}
    for f in given_facts:
        assert f["turns"] == [i for i, t in enumerate(shown) if f["content"] == f"fact of {t}"]


def test_transcripts_are_read_as_the_proxy_renders_them() -> None:
    turns = [(3, "user", "I adopted a dog.\nHer name is Pixel."), (4, "assistant", "Lovely!")]
    assert extraction_lines(transcript_for_extraction(turns)) == [(3, turns[0][2]), (4, "Lovely!")]
    messages = [{"role": "user", "content": "Hello there."}, {"role": "assistant", "content": "Hi!\n\nHow are you?"}]
    assert summary_lines(render_transcript(messages, 7)) == [(7, "Hello there."), (8, "Hi!\n\nHow are you?")]


def test_the_prompts_are_told_apart_by_their_opening() -> None:
    prompts = Prompts.load()
    heads = prompt_heads(prompts)
    assert {"extract", "summarize", "merge", "reconcile"} <= set(heads)
    assert kind_of(extraction_prompt([(1, "user", "hi")]), heads) == "extract"
    summary = prompts.render("summarize", first_turn=1, last_turn=2, transcript="Turn 1 (user):\nhi")
    assert kind_of(summary, heads) == "summarize"
    assert kind_of("Tell me a joke.", heads) is None


def test_a_summary_call_gets_its_sessions_summaries_cut_to_fit_and_a_merge_reads_them_back() -> None:
    conv = locomo.conversation(OBSERVED)
    stand_in = StandIn(known())
    messages = [{"role": t.role, "content": t.content} for t in conv.sessions[0].turns]
    prompts = Prompts.load()
    prompt = prompts.render("summarize", first_turn=1, last_turn=5, transcript=render_transcript(messages, 1))
    summary = stand_in([{"role": "user", "content": prompt}])
    source_words = len(render_transcript(messages, 1).split())
    assert summary.startswith("Ana told Ben about Pixel") and len(summary.split()) <= source_words // 3
    # Merged with a summary of session 2: both sessions' summaries, from the stand-in's own.
    later = [{"role": t.role, "content": t.content} for t in conv.sessions[1].turns]
    prompt2 = prompts.render("summarize", first_turn=6, last_turn=8, transcript=render_transcript(later, 6))
    second = stand_in([{"role": "user", "content": prompt2}])
    assert second.startswith("Ben started the cello")
    blocks = "\n\n".join(f'<summary turns="{a}–{b}">\nTurns {a}–{b}: {text}\n</summary>'
                         for text, a, b in ((summary, 1, 5), (second, 6, 8)))
    merged = stand_in([{"role": "user", "content": prompts.render("merge", first_turn=1, last_turn=8,
                                                                   summaries=blocks)}])
    assert "Ana" in merged and "cello" in merged
    # A summary of turns it knows nothing of: the rules stand-in's reply.
    unknown = prompts.render("summarize", first_turn=1, last_turn=1, transcript="Turn 1 (user):\nWhat is 2+2?")
    assert stand_in([{"role": "user", "content": unknown}]).startswith("Summary:")


def test_summaries_share_the_room_by_the_turns_of_each_session() -> None:
    k = Knowledge.of([], summaries={"a": " ".join(["alpha"] * 100), "b": " ".join(["beta"] * 100)})
    text = summary_of({"a": 3, "b": 1}, k, source_words=120) or ""
    assert text.split().count("alpha") == 30 and text.split().count("beta") == 10
    assert summary_of({"c": 2}, k, 100) is None


def test_masked_turns_are_recognised_and_facts_masked_as_the_proxy_masks() -> None:
    sample = json.loads(json.dumps(OBSERVED))
    sample["conversation"]["session_1"][0]["text"] = "Mail me at ana@example.com about Pixel."
    sample["observation"]["session_1_observation"]["Ana"][0][0] = "Ana's email is ana@example.com."
    from proxy.memory.redaction import redact

    k = observation_knowledge([locomo.conversation(sample)], lambda text: redact(text, "mask"))
    masked = redact("Mail me at ana@example.com about Pixel.", "mask")
    assert masked != "Mail me at ana@example.com about Pixel."
    (fact,) = facts_for(resolve([(1, masked)], k), k)
    assert "ana@example.com" not in fact["content"] and fact["turns"] == [1]


def test_the_stand_in_knows_nothing_of_the_questions() -> None:
    conv = locomo.conversation(OBSERVED)
    unasked = locomo.conversation({**OBSERVED, "qa": []})
    assert conv.questions and not unasked.questions
    assert observation_knowledge([conv], lambda t: t) == observation_knowledge([unasked], lambda t: t)
