"""The replay eval on a tiny synthetic LoCoMo-format file: parsing, the protocol, the scoring."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

import pytest

from proxy.commands.main import main
from proxy.eval import locomo
from proxy.eval.locomo import Turn, parse_evidence
from proxy.eval.replay import requests_of, unindexed
from proxy.eval.report import forwarded_against_sent
from proxy.eval.scoring import ndcg_at, presence, recall_at

SAMPLE: dict[str, Any] = {
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "Hi Ben! I adopted a greyhound called Pixel yesterday."},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "Congrats! What a lovely name.",
             "blip_caption": "a grey dog asleep on a sofa"},
            {"speaker": "Ana", "dia_id": "D1:3", "text": "Thanks! She sleeps all day."},
            {"speaker": "Ana", "dia_id": "D1:4", "text": "Also, my sister moved to Lisbon."},
            {"speaker": "Ben", "dia_id": "D1:5", "text": "Lisbon is sunny, she will love it."},
        ],
        "session_2_date_time": "10:31 am on 13 October, 2023",
        "session_2": [
            {"speaker": "Ben", "dia_id": "D2:1", "text": "Hey Ana, I started learning the cello."},
            {"speaker": "Ana", "dia_id": "D2:2", "text": "Wow, the cello! I play the violin on weekends."},
            {"speaker": "Ben", "dia_id": "D2:3", "text": "We should play a duet together some day."},
        ],
    },
    "qa": [
        {"question": "What is the name of the greyhound Ana adopted?", "answer": "Pixel",
         "evidence": ["D1:1"], "category": 4},
        {"question": "Which instruments do Ana and Ben play?", "answer": "violin, cello",
         "evidence": ["D:2:1; D2:02"], "category": 1},
        {"question": "What was in the photo of the dog on the sofa?", "answer": "a dog",
         "evidence": ["D1:2", "D7:7"], "category": 3},
        {"question": "What did Ben paint?", "answer": "nothing", "evidence": ["D9:9"], "category": 5},
    ],
}


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-locomo.json"
    path.write_text(json.dumps([SAMPLE]), encoding="utf-8")
    return path


def test_evidence_ids_are_read_as_the_protocol_says() -> None:
    known = {"D11:26", "D30:5", "D8:6", "D9:17", "D1:1", "D1:2"}
    assert parse_evidence(["D:11:26", "D30:05"], known) == ("D11:26", "D30:5")
    assert parse_evidence(["D8:6; D9:17", "D1:1,D1:2 D"], known) == ("D8:6", "D9:17", "D1:1", "D1:2")
    assert parse_evidence(["D3:3", "D1:1", "D1:1"], known) == ("D1:1",)


def test_the_file_is_read_with_roles_captions_dates_and_skips(dataset: Path) -> None:
    (conv,) = locomo.load(dataset)
    assert [s.number for s in conv.sessions] == [1, 2]
    first = conv.sessions[0]
    assert first.date is not None and first.date.isoformat() == "2023-05-08T13:56:00+00:00"
    assert [t.role for t in first.turns] == ["user", "assistant", "user", "user", "assistant"]
    assert first.turns[1].content == "Congrats! What a lovely name. [shares a photo: a grey dog asleep on a sofa]"
    assert [q.evidence for q in conv.questions] == [("D1:1",), ("D2:1", "D2:2"), ("D1:2",)]
    assert conv.skipped == 1


def turns(roles: str) -> list[Turn]:
    return [Turn(f"D1:{i}", "user" if r == "u" else "assistant", f"turn {i}") for i, r in enumerate(roles)]


def test_requests_end_at_user_turns_even_when_speakers_do_not_alternate() -> None:
    # u u a a u : a request at each user turn; the reply is the assistant turn right after.
    every = requests_of(turns("uuaau"), every_user_turn=True)
    assert every == [(1, None), (2, "turn 2"), (5, None)]
    assert requests_of(turns("auua"), every_user_turn=False) == [(3, "turn 3")]
    assert unindexed(turns("uaaa")) == 2  # no client request carries the last two
    assert unindexed(turns("aa")) == 1


def test_scoring_functions() -> None:
    assert presence(["a  b\nc", "zzz"], "x a b c y") == 0.5
    ranked = [{"D1"}, set(), {"D2", "D3"}]
    assert recall_at(ranked, {"D2", "D9"}, 2) == 0.0
    assert recall_at(ranked, {"D2", "D9"}, 3) == 0.5
    assert ndcg_at(ranked, {"D1"}, 10) == 1.0
    assert ndcg_at([set(), {"D1"}], {"D1"}, 10) == pytest.approx(1 / 1.584962500721156)


def run_eval(dataset: Path, tmp_path: Path, *mode: str) -> dict[str, Any]:
    out, md = tmp_path / "results.json", tmp_path / "results.md"
    args = ["eval", "locomo", str(dataset), "--embedder", "hash", "--no-progress", "--out", str(out)]
    assert main([*args, "--md", str(md), *mode]) == 0
    assert "| fusion |" in md.read_text()
    result: dict[str, Any] = json.loads(out.read_text())
    assert "greyhound" not in out.read_text()  # scores only, never the data set's text
    return result


def test_sessions_mode_end_to_end(dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_eval(dataset, tmp_path)
    assert "| retriever | cats 1-4 |" in capsys.readouterr().out
    assert result["meta"]["mode"] == "sessions"
    assert result["stats"]["questions"] == 3 and result["stats"]["skipped"] == 1
    assert result["stats"]["requests"] == 2  # each session sent once, at its last user turn
    assert set(result["summary"]) == {"fusion", "bm25", "vector"}
    answers = {(a["variant"], a["index"]): a for a in result["answers"]}
    assert len(answers) == 9
    greyhound = answers[("fusion", 0)]
    assert greyhound["presence"] == 1.0 and greyhound["in_window"] == 0
    assert greyhound["recall"]["5"] == 1.0 and greyhound["tokens_memory"] > 0
    assert answers[("fusion", 2)]["presence"] == 1.0  # the turn's photo caption is part of it
    # The compression ratio, on stdout and in the file: the replayed requests' tokens, sent and forwarded.
    sent = sum(c for series in result["stats"]["timeline"].values() for c, _ in series)
    forwarded = sum(f for series in result["stats"]["timeline"].values() for _, f in series)
    assert result["compression"] == {"tokens_sent": sent, "tokens_forwarded": forwarded,
                                     "ratio": round(forwarded / sent, 3)}
    assert f"compression ratio {forwarded / sent:.3f}" in (tmp_path / "results.md").read_text()


def test_one_chat_mode_counts_the_verbatim_window(dataset: Path, tmp_path: Path) -> None:
    result = run_eval(dataset, tmp_path, "--mode", "one-chat")
    assert result["stats"]["requests"] == 4  # every user turn
    for answer in result["answers"]:
        # The whole tiny chat fits the window: everything is there verbatim, nothing to retrieve.
        assert answer["presence"] == 1.0 and answer["in_window"] == answer["evidence"]
        assert answer["recall"] is None and answer["tokens_memory"] == 0


def test_questions_are_recorded_like_a_clients_unless_told_not_to(dataset: Path, tmp_path: Path) -> None:
    recorded = run_eval(dataset, tmp_path, "--mode", "one-chat")
    bare = run_eval(dataset, tmp_path, "--mode", "one-chat", "--no-record-questions")
    assert recorded["meta"]["record_questions"] is True and bare["meta"]["record_questions"] is False
    sent = {r: {a["index"]: a["tokens_forwarded"] for a in res["answers"] if a["variant"] == "fusion"}
            for r, res in (("recorded", recorded), ("bare", bare))}
    assert sent["recorded"][0] == sent["bare"][0]  # the first question sees the same history
    # Later ones carry the earlier questions and their replies, as a client's history does.
    assert sent["recorded"][1] > sent["bare"][1] and sent["recorded"][2] > sent["recorded"][1]


def test_report_writes_a_page_with_its_plots(dataset: Path, tmp_path: Path) -> None:
    folder = tmp_path / "report"
    args = ["eval", "locomo", str(dataset), "--embedder", "hash", "--no-progress", "--report", str(folder)]
    assert main(args) == 0
    page = (folder / "index.html").read_text()
    for figure in ("tokens.png", "presence.png", "scores.png"):
        assert f'src="{figure}"' in page
        assert (folder / figure).read_bytes().startswith(b"\x89PNG")
    assert "<td>fusion</td>" in page and "<td>bm25</td>" in page and "<td>vector</td>" in page
    assert "greyhound" not in page  # scores only, never the data set's text
    assert "over the whole run, Paperclip forwarded" in page and "% of the client's tokens" not in page


def test_the_token_sentence_reads_right_whichever_way_it_went() -> None:
    assert forwarded_against_sent(1000, 161) == (
        "Paperclip forwarded 83.9% fewer tokens than the client sent (161 forwarded for 1,000 sent)"
    )
    assert forwarded_against_sent(1000, 1839) == (
        "Paperclip forwarded 83.9% more tokens than the client sent (1,839 forwarded for 1,000 sent): "
        "the memory it added outweighed what compression removed"
    )
    assert forwarded_against_sent(500, 500) == "Paperclip forwarded as many tokens as the client sent (500 forwarded for 500 sent)"
    assert forwarded_against_sent(0, 0) == "the client sent no tokens"


def test_convs_picks_a_data_split_and_names_an_unknown_id(
    dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = {**SAMPLE, "sample_id": "conv-y"}
    both = tmp_path / "two.json"
    both.write_text(json.dumps([SAMPLE, other]), encoding="utf-8")
    convs = locomo.load(both)
    assert [c.id for c in locomo.select(convs, "conv-y")] == ["conv-y"]
    assert [c.id for c in locomo.select(convs, " conv-y , conv-x")] == ["conv-x", "conv-y"]
    assert [c.id for c in locomo.select(convs, None)] == ["conv-x", "conv-y"]
    with pytest.raises(ValueError, match="conv-z"):
        locomo.select(convs, "conv-x,conv-z")
    out = tmp_path / "split.json"
    args = ["eval", "locomo", str(both), "--embedder", "hash", "--no-progress", "--out", str(out)]
    assert main([*args, "--convs", "conv-y"]) == 0
    result = json.loads(out.read_text())
    assert result["meta"]["conversations"] == 1
    assert {a["conversation"] for a in result["answers"]} == {"conv-y"}
    assert main([*args, "--convs", "conv-y,conv-z"]) == 2
    assert "no conversation conv-z" in capsys.readouterr().err


@pytest.mark.parametrize("mode", ["sessions", "one-chat"])
def test_the_same_conversations_as_messages_requests_score_as_chats(dataset: Path, tmp_path: Path, mode: str) -> None:
    chat = run_eval(dataset, tmp_path, "--mode", mode)
    messages = run_eval(dataset, tmp_path, "--mode", mode, "--api", "messages")
    assert messages["meta"]["api"] == "messages" and chat["meta"]["api"] == "chat"
    scores = [{(a["variant"], a["index"]): (a["presence"], a["cards"]) for a in r["answers"]} for r in (chat, messages)]
    assert scores[0] == scores[1]
    assert any(p > 0 for p, _ in scores[1].values())


def test_clock_and_model_are_options_of_the_command_and_answers_are_scored(dataset: Path, tmp_path: Path) -> None:
    dated = run_eval(dataset, tmp_path)
    burst = run_eval(dataset, tmp_path, "--clock", "burst", "--model", "observations")
    assert (dated["meta"]["clock"], dated["meta"]["model"]) == ("dated", "rules")
    assert (burst["meta"]["clock"], burst["meta"]["model"]) == ("burst", "observations")
    greyhound = {(a["variant"], a["index"]): a for a in dated["answers"]}[("fusion", 0)]
    assert greyhound["answer_presence"] == 1.0  # "Pixel" is in the recalled turn
    assert dated["summary"]["fusion"]["answers 1-4"] is not None
    with pytest.raises(SystemExit):
        main(["eval", "locomo", str(dataset), "--clock", "yesterday"])


async def _replayed(dataset: Path, tmp_path: Path, options: Any) -> tuple[dict[str, Any], list[str]]:
    """Replay the sample, then what the store holds of its user: the export, and the items' texts."""
    from proxy.eval.harness import TENANT, open_harness
    from proxy.eval.replay import replay, schedule

    (conv,) = locomo.load(dataset)
    h = await open_harness(options, tmp_path, [conv])
    try:
        replayed, _ = schedule(conv, options.mode, options.clock, time.time())
        await replay(h, conv, options.mode, replay_stats(), lambda n: None, replayed)
        await h.runtime.background.drain()
        export = await h.memory.store.users.export(TENANT, conv.id)
        items = [r.content for r in await h.memory.store.items.all(TENANT, conv.id)]
    finally:
        h.close()
    return export, items


def replay_stats() -> Any:
    from proxy.eval.replay import Stats

    return Stats()


OBSERVATIONS = {
    "session_1_observation": {"Ana": [["Ana adopted a greyhound named Pixel the day before.", "D1:1"]]},
    "session_2_observation": {"Ana": [["Ana plays the violin on weekends.", "D2:2"]]},
}


@pytest.mark.parametrize("model", ["rules", "observations"])
def test_the_observations_stand_in_answers_extraction_with_the_datas_facts(
    tmp_path: Path, model: str
) -> None:
    import asyncio

    from proxy.eval.harness import Options

    path = tmp_path / "observed.json"
    # Sessions whose one request carries 6 messages: the extraction cadence.
    sample = json.loads(json.dumps(SAMPLE))
    sample["conversation"]["session_2"] += [
        {"speaker": "Ben", "dia_id": f"D2:{i}", "text": text} for i, text in ((4, "Deal."), (6, "See you."))
    ]
    sample["conversation"]["session_2"].insert(4, {"speaker": "Ana", "dia_id": "D2:5", "text": "Great."})
    sample["conversation"]["session_2"].append({"speaker": "Ana", "dia_id": "D2:7", "text": "Bye."})
    sample["conversation"]["session_1"].append({"speaker": "Ana", "dia_id": "D1:6", "text": "Bye now."})
    path.write_text(json.dumps([{**sample, "observation": OBSERVATIONS}]), encoding="utf-8")
    options = Options(embedder="hash", model=model)  # type: ignore[arg-type]
    _, items = asyncio.run(_replayed(path, tmp_path, options))
    facts = {"Ana adopted a greyhound named Pixel the day before.", "Ana plays the violin on weekends."}
    if model == "observations":
        assert facts <= set(items)
    else:
        assert not facts & set(items)  # the rules write their own items, never the data's


@pytest.mark.parametrize("clock", ["dated", "burst"])
def test_the_burst_clock_replays_at_the_present_time(dataset: Path, tmp_path: Path, clock: str) -> None:
    import asyncio

    from proxy.eval.harness import Options

    started = time.time()
    export, _ = asyncio.run(_replayed(dataset, tmp_path, Options(embedder="hash", clock=clock)))  # type: ignore[arg-type]
    created = sorted(f["created"] for f in export["fragments"])
    assert created
    if clock == "burst":
        assert created[0] >= started - 1 and created[-1] - created[0] < 60  # all of it within a minute, now
    else:
        assert created[0] < dt.datetime(2023, 5, 9, tzinfo=dt.UTC).timestamp() < created[-1]


@pytest.mark.parametrize("mode", ["sessions", "one-chat"])
def test_conversations_replayed_together_score_as_one_after_another(tmp_path: Path, mode: str) -> None:
    """``--together`` interleaves the conversations' requests, as a busy proxy stores its users' turns;
    each user's memory is her own, so every answer scores as when they came one after another."""
    both = tmp_path / "two.json"
    both.write_text(json.dumps([SAMPLE, {**SAMPLE, "sample_id": "conv-y"}]), encoding="utf-8")
    apart = run_eval(both, tmp_path, "--mode", mode)
    together = run_eval(both, tmp_path, "--mode", mode, "--together")
    assert together["meta"]["together"] is True and apart["meta"]["together"] is False
    assert together["stats"]["requests"] == apart["stats"]["requests"]
    scores = [{(a["conversation"], a["variant"], a["index"]): (a["presence"], a["cards"], a["tokens_memory"])
               for a in r["answers"]} for r in (apart, together)]
    assert scores[0] == scores[1] and len(scores[0]) == 18
    assert any(p > 0 for p, _, _ in scores[1].values())


@pytest.mark.parametrize("clock", ["dated", "burst"])
def test_questions_that_name_a_day_are_counted_apart(tmp_path: Path, clock: str) -> None:
    sample = json.loads(json.dumps(SAMPLE))
    sample["qa"].insert(1, {"question": "What did Ana adopt on 8 May, 2023?", "answer": "a greyhound",
                            "evidence": ["D1:1"], "category": 2})
    dataset = tmp_path / "dated-question.json"
    dataset.write_text(json.dumps([sample]), encoding="utf-8")
    result = run_eval(dataset, tmp_path, "--clock", clock)
    fusion = [a for a in result["answers"] if a["variant"] == "fusion"]
    assert [a["names_date"] for a in fusion] == [False, True, False, False]
    row = result["summary"]["fusion"]
    assert row["date named"] == 1 and row["scored"] == 4
    undated = [a["presence"] for a in fusion if not a["names_date"]]
    assert row["cats 1-4, no date named"] == pytest.approx(sum(undated) / len(undated))


@pytest.mark.parametrize(
    "flags",
    [["--top-k", "3"], ["--budget", "400"], ["--mode", "one-chat"], ["--limit-convs", "1"], ["--convs", "conv-26"],
     ["--together"], ["--no-record-questions"], ["--clock", "burst"], ["--model", "observations"]],
)
def test_scenarios_refuse_the_options_only_locomo_takes_rather_than_ignore_them(
    flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``--top-k 3`` on the scenarios would run the whole suite as if it had not been given."""
    assert main(["eval", "scenarios", "--embedder", "hash", "--no-progress", *flags]) == 2
    assert f"{flags[0]} is for locomo" in capsys.readouterr().err


def test_locomo_refuses_the_part_only_scenarios_take(dataset: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "locomo", str(dataset), "--embedder", "hash", "--no-progress", "--part", "frozen"]) == 2
    assert "--part is for scenarios" in capsys.readouterr().err
