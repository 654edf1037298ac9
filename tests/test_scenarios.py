"""The scenario suite: its data, its scoring, and its runner through the served app."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest

from proxy.commands.main import main
from proxy.eval import scenarios
from proxy.eval.scenarios import (
    Scenario,
    cards_outside_profile,
    memory_block,
    presented_as_current,
    score,
)
from proxy.eval.stand_in import verdicts
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


# The frozen halves' texts, pinned: they are never edited (tune on the tuning half; add new cases there).
FROZEN_SHA256 = {
    scenarios.DATA: "146fc68b8735c0708663df4ef5443a6b0309a2eecbead9b4996f628b848e9cf8",
    scenarios.SECOND_FROZEN: "6bedcda76ff145d664c3f554055cb51fabaf6c3b69977b585fda74403bb9ac60",
    scenarios.THIRD_FROZEN: "9fa07f92d2eddb8351043288ada2238309b1918b04fe8098be2b2ff48616b245",
    scenarios.FOURTH_FROZEN: "5475835847b49ea85498d90dc3eb7498a2d5cf8e6a9e5abe5da0fbe47b69dea5",
    scenarios.FIFTH_FROZEN: "21fd0084f5ac0eaba430c64a2caceee13045a7d4f29fb721287e6118dd180769",
}


@pytest.mark.parametrize("path", list(FROZEN_SHA256), ids=lambda p: p.name)
def test_the_frozen_half_is_frozen_and_well_formed(path: Path) -> None:
    raw = json.loads(path.read_text(encoding="utf-8"))
    pinned = hashlib.sha256(json.dumps(raw["frozen"], ensure_ascii=False, sort_keys=True).encode()).hexdigest()
    assert pinned == FROZEN_SHA256[path], "the frozen half was edited: never change it, nor a rule because of it"
    suite = scenarios.load(path)
    kinds = Counter((s.kind, s.lang) for s in suite.frozen)
    assert all(kinds[(k, lang)] >= 3 for k in ("standing", "changed", "moment") for lang in ("en", "zh"))
    assert not {s.id for s in suite.frozen} & {s.id for s in suite.scenarios}
    said: list[str] = []
    for s in suite.frozen:
        turns = [t for chat in s.chats for t in chat]
        assert all(text in turns for text, _ in s.extraction), s.id
        said += [text for text, items in s.extraction if items]
        latest = " ".join(str(i["content"]) for i in s.extraction[-1][1]).lower() if s.extraction else ""
        if s.kind in ("standing", "changed"):
            # A model's extraction can be recalled: it holds a phrasing of the fact.
            assert all(any(a.lower() in latest for a in alts) for alts in s.expect), s.id
        if s.kind == "changed":
            assert len(s.chats) == 2 and s.forbid
            new = (s.extraction[-1][0] + " " + latest).lower()
            assert not any(f.lower() in new for f in s.forbid), s.id  # the new value never names the old
        if s.kind == "moment":
            # A moment, maybe beside a standing fact of the same chat: what a model reads of the moment stands not.
            assert s.moment
            assert not any(i.get("standing") and any(m.lower() in str(i["content"]).lower() for m in s.moment)
                           for _, items in s.extraction for i in items), s.id
    assert len(said) == len(set(said))  # a fact's turn names one case: the stand-in finds it by its text


def test_an_old_value_counts_as_current_unless_its_card_is_marked_as_changed() -> None:
    old = Card("entity", "user said", "2026-11-02", "The user lives in Leeds.", "i1")
    new = Card("entity", "user said", "2026-11-20", "The user moved to York.", "i2")
    assert presented_as_current(render_block([new, old]), ["Leeds"])
    marked = render_block([new]).replace("</paperclip-memory>", "[earlier, since changed] The user lived in Leeds.\n"
                                          "</paperclip-memory>")
    assert not presented_as_current(marked, ["Leeds"]) and not presented_as_current(render_block([new]), ["Leeds"])


def frozen_file(tmp_path: Path) -> Path:
    item = {"type": "constraint", "category": "health", "standing": True, "key": "user.allergy.mango",
            "content": "The user is allergic to mangoes.", "importance": 0.95, "confidence": 0.95,
            "source": "user-stated", "expires_at": None}
    where = {"type": "event", "category": "plan", "standing": False, "key": "user.location.current",
             "content": "The user is at Frankfurt airport tonight.", "importance": 0.4, "confidence": 0.9,
             "source": "user-stated", "expires_in_days": 1}
    fill = ["Thanks.", "Tell me a joke.", "Bye."]
    data = {
        "unrelated": {"en": ["Why is the sky blue?"]},
        "scenarios": [],
        "frozen": [
            {"id": "mango", "lang": "en", "kind": "standing", "chats": [["Mangoes make my lips swell up.", *fill]],
             "question": "Which fruit should I put in my smoothie?", "expect": [["mango"]],
             "extraction": [{"said": "Mangoes make my lips swell up.", "items": [item]}]},
            {"id": "airport", "lang": "en", "kind": "moment", "chats": [["Stuck at Frankfurt airport tonight.", *fill]],
             "question": "What should I do this weekend?", "expect": [], "moment": ["Frankfurt"],
             "extraction": [{"said": "Stuck at Frankfurt airport tonight.", "items": [where]}]},
        ],
    }
    path = tmp_path / "frozen.json"
    path.write_text(json.dumps(data))
    return path


def test_the_frozen_half_is_replayed_with_a_model_that_follows_the_prompt_and_with_none(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    argv = ["eval", "scenarios", str(frozen_file(tmp_path)), "--embedder", "hash", "--no-progress", "--out", str(out)]
    assert main([*argv, "--part", "frozen"]) == 0
    result = json.loads(out.read_text())
    rows = {(r["id"], r["stand_in"]): r for r in result["results"]}
    assert set(rows) == {(c, s) for c in ("mango", "airport") for s in ("model", "rules")}
    # The rules were never written for "make my lips swell up"; the model's extraction says it.
    model = rows[("mango", "model")]
    assert model["recalled"] == 1 and model["half"] == "frozen" and model["kind"] == "standing"
    assert not rows[("airport", "model")]["moment_standing"]
    frozen = result["frozen"]
    assert frozen["model"]["all"]["standing_recalled"] == 1.0 and frozen["model"]["all"]["moments"] == 1
    assert set(frozen) == {"model", "rules"} and result["summary"]["all"]["scenarios"] == 0


def test_the_frozen_halfs_report_names_no_case(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Whoever reads which frozen cases missed could no longer write rules blind to them."""
    md = tmp_path / "out.md"
    argv = ["eval", "scenarios", str(frozen_file(tmp_path)), "--embedder", "hash", "--no-progress", "--md", str(md)]
    assert main([*argv, "--part", "frozen", "--report", str(tmp_path / "page")]) == 0
    shown = capsys.readouterr().out + md.read_text() + (tmp_path / "page" / "index.html").read_text()
    assert "| rules | all | 2 |" in shown and "mango" not in shown and "airport" not in shown
    assert "swell" not in shown and "not named" in shown


def test_the_stand_in_judges_reconcile_pairs_as_the_data_says() -> None:
    """Merge the same words, supersede what a case's later statement changed, add anything else."""
    case = Scenario(
        id="moved", lang="en", chats=(("I live in Leeds.",), ("I'm in Bristol now.",)), question="Walks near me?",
        expect=(("bristol",),), forbid=("leeds",),
        extraction=(("I live in Leeds.", ({"content": "The user lives in Leeds.", "key": "user.home_city"},)),
                    ("I'm in Bristol now.", ({"content": "The user lives in Bristol.", "key": "user.location.home"},))),
    )
    known = scenarios.knowledge([case], lambda text: text)
    pairs = ("[pair 1]\nknown: The user lives in Leeds.\nnew: The user lives in Bristol.\n\n"
             "[pair 2]\nknown: The user likes jazz.\nnew: The user lives in Bristol.\n\n"
             "[pair 3]\nknown: The user lives in  Bristol.\nnew: The user lives in Bristol.")
    assert [v["decision"] for v in verdicts(pairs, known)] == ["supersede", "add", "merge"]
    assert verdicts("", known) == []
