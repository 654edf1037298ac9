"""The scenario suite: its data, its scoring, and its runner through the served app."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proxy.commands.main import main
from proxy.eval import scenarios
from proxy.eval.scenarios import Scenario, cards_outside_profile, memory_block, score
from proxy.memory.recall.cards import Card, render_block


def test_the_suite_has_forty_standing_facts_in_english_and_chinese() -> None:
    suite = scenarios.load()
    ids = [s.id for s in suite.scenarios]
    assert len(ids) >= 40 and len(set(ids)) == len(ids)
    assert {s.lang for s in suite.scenarios} == {"en", "zh"} == set(suite.unrelated)
    assert sum(s.lang == "zh" for s in suite.scenarios) >= 15
    for s in suite.scenarios:
        assert s.expect and all(alts for alts in s.expect), s.id
        # Enough messages for the extraction cadence (every 6) to run on each chat.
        assert all(len(chat) >= 3 for chat in s.chats), s.id
        assert not s.forbid or len(s.chats) >= 2, s.id  # a superseded value is said in an earlier chat
    assert sum(bool(s.forbid) for s in suite.scenarios) >= 6


def test_scoring_reads_only_the_memory_block() -> None:
    block = render_block([Card("constraint", "user said", "2026-11-02", "The user is vegetarian.", "i1")])
    forwarded = [{"role": "user", "content": [{"type": "text", "text": block}, {"type": "text", "text": "Steak?"}]}]
    assert memory_block(forwarded).startswith("<paperclip-memory>") and "vegetarian" in memory_block(forwarded)
    assert memory_block([{"role": "user", "content": "I love steak"}]) == ""
    s = Scenario("x", "en", (("a", "b", "c"),), "q", (("Vegetarian", "vegan"), ("steak",)), forbid=("steak",))
    result = score(s, memory_block(forwarded), "")
    assert (result.recalled, result.facts, result.missing, result.cards) == (1, 2, ("steak",), 1)
    assert not result.superseded_injected and result.unrelated_cards == 0
    profile = "[preference · user said · 2026-11-02] The user prefers tea."
    both = render_block([Card("preference", "user said", "2026-11-02", "The user prefers tea.", "i2"),
                         Card("fragment", "user said", "2026-11-01", "User: hi\nAssistant: hello", "f1")])
    assert cards_outside_profile(both, [profile]) == 1 and cards_outside_profile(both, []) == 2
    assert cards_outside_profile(block, [profile]) == 1


TINY_SUITE = {
    "unrelated": {"en": ["Why is the sky blue?"]},
    "scenarios": [
        {"id": "cat", "lang": "en",
         "chats": [["My cat Miso is allergic to peanuts.", "Thanks a lot.", "Bye now."]],
         "question": "Is my cat Miso allergic to peanuts?", "expect": [["peanut"]], "forbid": ["hamster"]},
        {"id": "nothing", "lang": "en", "chats": [["Hello.", "Thanks.", "Bye."]],
         "question": "What is my favourite colour?", "expect": [["purple"]]},
    ],
}


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_the_runner_replays_a_chat_and_asks_in_a_fresh_one(tmp_path: Path, api: str) -> None:
    path, out = tmp_path / "s.json", tmp_path / "out.json"
    path.write_text(json.dumps(TINY_SUITE))
    argv = ["eval", "scenarios", str(path), "--embedder", "hash", "--no-progress", "--out", str(out), "--api", api]
    assert main(argv) == 0
    result = json.loads(out.read_text())
    rows = {r["id"]: r for r in result["results"]}
    assert rows["cat"]["recalled"] == 1 and rows["cat"]["cards"] >= 1 and not rows["cat"]["superseded_injected"]
    assert rows["nothing"]["recalled"] == 0 and rows["nothing"]["missing"] == ["purple"]
    assert result["summary"]["all"]["recall"] == 0.5


def test_report_writes_a_page_with_its_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, folder = tmp_path / "s.json", tmp_path / "report"
    path.write_text(json.dumps(TINY_SUITE))
    assert main(["eval", "scenarios", str(path), "--embedder", "hash", "--no-progress", "--report", str(folder)]) == 0
    page = (folder / "index.html").read_text()
    assert f"report: {folder / 'index.html'}" in capsys.readouterr().out
    for figure in ("recall.png", "cards.png"):
        assert f'src="{figure}"' in page
        assert (folder / figure).read_bytes().startswith(b"\x89PNG")
    assert "<td>cat</td>" in page and "<td>1/1</td>" in page  # a row per scenario
    assert "<td>nothing</td>" in page and "purple" in page  # with what it missed
    assert "<td>all</td><td>2</td><td>0.5</td>" in page  # the summary
