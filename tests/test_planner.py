"""The rolling watermark's pure decisions: properties over long random conversations, and edge cases."""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.context.assembly import SUMMARY_HEADER, assemble, turn_range
from proxy.context.planner import (
    Budgets,
    MsgInfo,
    SummaryRef,
    anchor,
    cut_points,
    describe,
    fresh_giant,
    is_cut,
    latest_user,
    next_compression,
    next_merge,
    plan_window,
    protected_start,
    split_leading,
)


def user(n: int) -> MsgInfo:
    return MsgInfo(n, "user", False)


def asst(n: int, calls: bool = False) -> MsgInfo:
    return MsgInfo(n, "assistant", calls)


def tool(n: int) -> MsgInfo:
    return MsgInfo(n, "tool", False)


B = Budgets(recent_window_tokens=1000, summary_budget_tokens=600)


# --- the simulation: a client that resends its history, with inline compression --------


@dataclass
class Session:
    budgets: Budgets
    prefix_end: int = 0
    chain: list[SummaryRef] = field(default_factory=list)
    made: int = 0
    log: list[tuple[int, tuple[SummaryRef, ...]]] = field(default_factory=list)

    def request(self, conv: list[MsgInfo]) -> None:
        """Compress and merge until the planner says stop, checking every step."""
        for _ in range(len(conv) + 1):
            step = next_compression(conv, self.prefix_end, self.budgets)
            if step is None:
                break
            self.apply(conv, step)
        else:
            raise AssertionError("next_compression kept proposing ranges")
        self.log.append((self.prefix_end, tuple(self.chain)))

    def apply(self, conv: list[MsgInfo], step: tuple[int, int]) -> None:
        start, end = step
        assert start == self.prefix_end < end <= protected_start(conv)
        assert_legal_cut(conv, end)
        assert_giants_aged(conv, start, end, self.budgets)
        source = sum(m.tokens for m in conv[start:end])
        self.chain.append(self.ref(0, math.ceil(0.15 * source), start, end))
        self.prefix_end = end
        self.merge()

    def merge(self) -> None:
        while (pick := next_merge(self.chain, self.budgets)) is not None:
            a, b = pick
            assert a == 0 and b - a >= 2
            parts = self.chain[a:b]
            tokens = (sum(p.tokens for p in parts) + 1) // 2  # the merge halves them
            level = max(p.level for p in parts) + 1
            merged = self.ref(level, tokens, parts[0].start, parts[-1].end)
            self.chain = [merged, *self.chain[b:]]

    def ref(self, level: int, tokens: int, start: int, end: int) -> SummaryRef:
        self.made += 1
        return SummaryRef(f"s{self.made}", level, tokens, start, end)


def assert_legal_cut(conv: list[MsgInfo], b: int) -> None:
    """Written independently of the planner: a tool-call group is never split."""
    assert not conv[b - 1].has_tool_calls
    assert b == len(conv) or conv[b].role != "tool"


def assert_giants_aged(conv: list[MsgInfo], start: int, end: int, budgets: Budgets) -> None:
    """A giant is summarised only once more than a whole window of conversation follows it."""
    for i in range(start, end):
        if conv[i].tokens > budgets.recent_window_tokens:
            assert sum(m.tokens for m in conv[i + 1 :]) > budgets.recent_window_tokens


def units(conv: list[MsgInfo]) -> list[tuple[int, int]]:
    cuts = cut_points(conv)
    return list(itertools.pairwise(cuts))


def giant_allowance(conv: list[MsgInfo], budgets: Budgets) -> int:
    """Tokens of every message group that holds a giant message."""
    total = 0
    for a, b in units(conv):
        if any(m.tokens > budgets.recent_window_tokens for m in conv[a:b]):
            total += sum(m.tokens for m in conv[a:b])
    return total


# --- random conversations with tool-call groups and rare giants ---------------------------


@st.composite
def conversations(draw: st.DrawFn) -> tuple[Budgets, list[list[MsgInfo]]]:
    """Budgets and a conversation as the list of the client's successive requests."""
    window = draw(st.integers(200, 4000))
    budgets = Budgets(window, draw(st.integers(window // 2, 2 * window)))
    small = st.integers(1, max(1, window // 3))

    def size() -> int:
        giant = draw(st.integers(0, 79)) == 0
        return draw(st.integers(window + 1, 3 * window)) if giant else draw(small)

    conv: list[MsgInfo] = []
    requests: list[list[MsgInfo]] = []
    for _ in range(draw(st.integers(1, 45))):
        conv.append(user(size()))
        requests.append(list(conv))
        for _ in range(draw(st.integers(0, 5))):  # an agent's tool loop: round after round, no new question
            conv.append(asst(draw(st.integers(10, 200)), calls=True))
            conv.extend(tool(size()) for _ in range(draw(st.integers(1, 3))))
            if draw(st.integers(0, 3)) == 0:  # words sent beside the results (Anthropic's shape)
                conv.append(MsgInfo(size(), "user", False, binds_previous=True))
            requests.append(list(conv))
        conv.append(asst(size()))
    return budgets, requests


@settings(max_examples=120, deadline=None)
@given(conversations(), st.integers(0, 500))
def test_forwarded_size_is_bounded_by_the_budgets(
    case: tuple[Budgets, list[list[MsgInfo]]], leading: int
) -> None:
    budgets, requests = case
    session = Session(budgets)
    for conv in requests:
        session.request(conv)
        plan = plan_window(conv, session.prefix_end, session.chain, budgets)
        tail = sum(m.tokens for m in conv[protected_start(conv) :])  # the latest round, in a tool loop
        latest, lead = latest_user(conv), anchor(conv, session.prefix_end)
        # and the question a window begun inside a loop serves, which leads it (when a fresh giant
        # holds compression back, past the window's budget)
        tail += sum(conv[i].tokens for i in {latest, lead} if i is not None and i < protected_start(conv))
        bound = (
            leading
            + budgets.recent_window_tokens
            + budgets.summary_budget_tokens
            + tail
            + giant_allowance(conv, budgets)
        )
        assert plan.forwarded_tokens(leading) <= bound
        assert not plan.over_watermark or next_compression(conv, plan.window_start, budgets) is None
        # The latest user message is forwarded verbatim: in the window, or leading it inside a tool loop;
        # words beside results until the loop goes on past them (they lead no window).
        beside = conv[latest].binds_previous if latest < len(conv) else False
        assert (latest >= session.prefix_end or anchor(conv, session.prefix_end) == latest
                or (beside and latest < protected_start(conv)))


@settings(max_examples=60, deadline=None)
@given(conversations())
def test_chain_is_contiguous_ordered_and_deterministic(
    case: tuple[Budgets, list[list[MsgInfo]]],
) -> None:
    budgets, requests = case
    first, second = Session(budgets), Session(budgets)
    for conv in requests:
        first.request(conv)
        second.request(conv)
        edges = [0] + [s.end for s in first.chain]
        assert [s.start for s in first.chain] == edges[:-1]
        assert edges[-1] == first.prefix_end
    assert first.log == second.log


@settings(max_examples=60, deadline=None)
@given(conversations(), st.integers(0, 3))
def test_assemble_keeps_order_and_objects(
    case: tuple[Budgets, list[list[MsgInfo]]], n_leading: int
) -> None:
    budgets, requests = case
    conv_info = requests[-1]
    session = Session(budgets)
    session.request(conv_info)
    leading = [{"role": "system", "content": f"rule {i}"} for i in range(n_leading)]
    conv = [{"role": m.role, "content": f"message {i}"} for i, m in enumerate(conv_info)]
    texts = [
        (f"Turns {a}–{b}: …", a, b) for a, b in (turn_range(s.start, s.end) for s in session.chain)
    ]
    lead = anchor(conv_info, session.prefix_end)
    verbatim = ([conv[lead]] if lead is not None else []) + conv[session.prefix_end :]
    out = assemble(leading, texts, verbatim)
    middle = 1 if texts else 0
    assert out[:n_leading] == leading and all(x is y for x, y in zip(out, leading, strict=False))
    window = out[n_leading + middle :]
    assert all(x is y for x, y in zip(window, verbatim, strict=True))
    latest = latest_user(conv_info)
    if latest < len(conv) and (not conv_info[latest].binds_previous or latest >= protected_start(conv_info)):
        assert any(m is conv[latest] for m in window)  # words beside results: until the loop goes on
    assert not window or window[0]["role"] == "user" or not conv_info[session.prefix_end].has_tool_calls
    again = assemble(leading, texts, verbatim)
    assert json.dumps(again).encode() == json.dumps(out).encode()


# --- boundaries -----------------------------------------------------------------------


def test_split_leading_counts_only_the_leading_run() -> None:
    msgs = [{"role": "system"}, {"role": "developer"}, {"role": "user"}, {"role": "system"}]
    assert split_leading(msgs) == 2
    assert split_leading([]) == 0
    assert split_leading([{"role": "system"}]) == 1
    assert split_leading([{"role": "user"}, {"role": "system"}]) == 0


def test_a_clients_context_at_the_start_leads_with_the_system_messages() -> None:
    """Codex's AGENTS.md and environment come as user messages before the first words: never summarised."""
    agents = {"role": "user", "content": [{"type": "input_text", "text":
              "# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\nNever touch vendor/.\n</INSTRUCTIONS>"}]}
    env = {"role": "user", "content": "<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>"}
    words = {"role": "user", "content": "<environment_context><cwd>/repo</cwd></environment_context> Fix the bug."}
    assert split_leading([{"role": "developer", "content": "x"}, agents, env, words, env]) == 3
    assert split_leading([words, agents]) == 0  # context after the first words is the conversation's


def test_describe_marks_tool_calls_of_assistants_only() -> None:
    msgs: list[dict[str, Any]] = [
        {"role": "assistant", "tool_calls": [{"id": "c1"}]},
        {"role": "assistant", "tool_calls": []},
        {"role": "assistant", "function_call": {"name": "f"}},
        {"role": "user", "tool_calls": [{"id": "x"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    infos = describe(msgs, [5, 6, 7, 8, 9])
    assert [i.has_tool_calls for i in infos] == [True, False, True, False, False]
    assert [i.tokens for i in infos] == [5, 6, 7, 8, 9]


def test_protected_start_is_the_latest_user_message() -> None:
    assert protected_start([user(1), asst(1), user(1), asst(1, True), tool(1)]) == 2
    assert protected_start([asst(1), asst(1)]) == 2
    assert protected_start([]) == 0


def test_inside_a_tool_loop_only_its_latest_round_is_protected_and_its_question_leads() -> None:
    loop = [user(1), asst(1), user(5), asst(1, True), tool(9), asst(1, True), tool(9), asst(1, True), tool(9)]
    assert protected_start(loop) == 7  # the latest round: its call and results
    assert [b for b in cut_points(loop) if 2 < b < 9] == [3, 5, 7]  # round boundaries are cuts
    assert anchor(loop, 5) == anchor(loop, 7) == 2  # a window begun mid-loop is led by the question
    assert anchor(loop, 3) == 2  # begun at the question's first call
    assert anchor(loop, 2) is None and anchor(loop, 1) is None  # begun at a turn of its own: nothing to lead it
    bound = MsgInfo(1, "assistant", True, binds_previous=True)  # Anthropic's: bound, yet a round starts
    assert is_cut([user(1), bound, tool(1), bound, tool(1)], 3)
    split = [user(1), asst(1, True), tool(1), MsgInfo(1, "user", False, binds_previous=True), asst(1, True), tool(1)]
    assert not is_cut(split, 3) and anchor(split, 4) == 0  # words beside results never lead nor start a window
    assert protected_start(split) == 1  # and stay in the tail, with the round they close, while the latest
    assert protected_start([*split, asst(1, True), tool(1)]) == 6  # the loop goes on: its latest round is


def test_cut_points_never_split_a_tool_call_group() -> None:
    conv = [user(1), asst(1, True), tool(1), tool(1), asst(1), user(1), asst(1, True)]
    assert cut_points(conv) == (0, 1, 4, 5, 6)
    assert not is_cut(conv, 7)  # right after a tool call whose results have not come yet
    assert not is_cut(conv, -1) and not is_cut(conv, 8)


# --- next_compression ---------------------------------------------------------------------


def test_within_the_watermark_nothing_is_compressed() -> None:
    conv = [user(300), asst(300), user(300)]
    assert next_compression(conv, 0, B) is None
    assert not plan_window(conv, 0, [], B).over_watermark


def test_the_oldest_half_is_compressed_on_message_boundaries() -> None:
    conv = [user(200), asst(200), user(200), asst(200), user(200), asst(200), user(10)]
    # 1210 tokens: the target is capped at 500; 400 and 600 are as close, the larger wins.
    assert next_compression(conv, 0, B) == (0, 3)
    assert next_compression(conv, 3, B) is None


def test_the_latest_user_message_is_never_compressed() -> None:
    conv = [user(100), asst(100), user(900)]
    assert next_compression(conv, 0, B) == (0, 2)
    assert next_compression(conv, 2, B) is None


def test_an_item_it_cannot_read_is_never_summarised() -> None:
    """A Responses API item_reference (or any role it does not read): ranges end before it, and a
    compaction that opens the input leads it."""
    reference = describe([{"role": "item_reference", "content": None}], [0])[0]
    assert reference.carried and not user(1).carried
    conv = [user(200), asst(200), reference, user(200), asst(200), user(200), asst(200), user(10)]
    assert next_compression(conv, 0, B) == (0, 2)
    assert next_compression(conv, 2, B) is None  # over the watermark, but the rest stays as sent
    assert split_leading([{"role": "compaction", "content": None}, {"role": "developer"}, {"role": "user"}]) == 2


def test_a_tool_group_travels_whole_rather_than_leave_a_scrap() -> None:
    conv = [user(100), asst(50, True), tool(400), tool(400), asst(100), user(100)]
    assert next_compression(conv, 0, B) == (0, 4)  # 950 tokens, not the 100 before the group
    assert next_compression(conv, 4, B) is None


def test_a_huge_history_is_caught_up_in_capped_steps() -> None:
    conv = [m for _ in range(250) for m in (user(150), asst(250))] + [user(20)]  # ~100k tokens
    budgets = Budgets(4000, 2500)
    prefix, steps = 0, 0
    while (step := next_compression(conv, prefix, budgets)) is not None:
        assert sum(m.tokens for m in conv[step[0] : step[1]]) < 2000 + 250  # cap + one message
        prefix, steps = step[1], steps + 1
    assert steps < len(conv)
    assert plan_window(conv, prefix, [], budgets).window_tokens <= 4000


def test_a_fresh_giant_is_forwarded_as_sent_and_triggers_nothing() -> None:
    conv = [user(100), asst(5000), user(20)]
    assert fresh_giant(conv, B) == 1
    assert not plan_window(conv, 0, [], B).over_watermark
    assert next_compression(conv, 0, B) is None


def test_a_fresh_giant_blocking_the_only_range_never_loops() -> None:
    # Over budget without the giant, but the only cut before it would split its tool group.
    conv = [asst(50, True), tool(500), tool(5000), asst(600), user(300)]
    assert fresh_giant(conv, B) == 2
    assert plan_window(conv, 0, [], B).over_watermark
    assert next_compression(conv, 0, B) is None


def test_only_the_newest_giant_can_be_fresh() -> None:
    conv = [user(10), asst(3000), user(10), asst(3000), user(10)]
    assert fresh_giant(conv, B) == 3
    assert next_compression(conv, 0, B) == (0, 2)  # the older giant goes, with its neighbour
    assert next_compression(conv, 2, B) is None


def test_a_giant_ages_out_once_a_window_follows_it() -> None:
    conv = [user(10), asst(5000)] + [user(300), asst(300)] * 2 + [user(10)]
    assert fresh_giant(conv, B) is None
    assert next_compression(conv, 0, B) == (0, 2)


def test_a_giant_protected_tail_never_loops() -> None:
    conv = [user(10), asst(10), user(3000), asst(50, True), tool(3000)]
    assert next_compression(conv, 0, B) == (0, 2)
    assert next_compression(conv, 2, B) is None


def test_zero_token_messages_make_no_progress() -> None:
    conv = [asst(0), asst(0), user(5000), asst(10)]
    assert next_compression(conv, 0, Budgets(1, 1)) is None


# --- next_merge ---------------------------------------------------------------------------


def refs(*tokens: int) -> list[SummaryRef]:
    return [SummaryRef(f"s{i}", 0, t, i, i + 1) for i, t in enumerate(tokens)]


def test_a_chain_within_budget_is_not_merged() -> None:
    assert next_merge(refs(300, 300), B) is None
    assert next_merge(refs(5000), B) is None  # a single summary cannot be merged


def test_the_fewest_oldest_summaries_that_make_the_chain_fit() -> None:
    assert next_merge(refs(200, 200, 200, 100), B) == (0, 2)  # 700 → 500
    assert next_merge(refs(100, 100, 300, 300), B) == (0, 3)  # 800 → 550
    assert next_merge(refs(900, 900), B) == (0, 2)  # cannot fit: merge everything


# --- assemble -----------------------------------------------------------------------------


def test_assemble_header_is_frozen() -> None:
    # The header is part of every cached prompt prefix: changing it invalidates them all.
    assert SUMMARY_HEADER.format(first=1, last=40) == (
        "Summary of the earlier conversation (compressed by Paperclip; turns 1–40):"
    )


def test_assemble_with_summaries_and_memory() -> None:
    lead = [{"role": "system", "content": "be brief"}]
    win = [{"role": "user", "content": [{"type": "text", "text": "hi"}], "x-extra": None}]
    out = assemble(lead, [("Turns 1–4: a.", 1, 4), ("Turns 5–9: b.", 5, 9)], win, "MEMORY")
    assert out[0] is lead[0] and out[2] is win[0]
    assert out[1] == {
        "role": "system",
        "content": "Summary of the earlier conversation (compressed by Paperclip; turns 1–9):"
        "\n\nTurns 1–4: a.\n\nTurns 5–9: b.\n\nMEMORY",
    }


def test_assemble_without_summaries() -> None:
    win = [{"role": "user", "content": "hi"}]
    assert assemble([], [], win) == win
    assert assemble([], [], win, "MEMORY") == [{"role": "system", "content": "MEMORY"}, *win]


def test_turn_range_is_one_based_and_inclusive() -> None:
    assert turn_range(0, 3) == (1, 3)
    assert turn_range(10, 11) == (11, 11)


def test_a_view_says_whether_it_is_over_its_watermark_as_the_plan_does() -> None:
    from proxy.context.watermark import View
    from proxy.store.records import PrefixState

    conv = [user(400), asst(400), user(400), asst(400), user(10)]
    messages = [{"role": m.role, "content": "x"} for m in conv]
    view = View([], messages, conv, [f"h{i}" for i in range(len(conv))], PrefixState(2, "h1", ()), B, 0)
    assert view.over_watermark() is False  # 810 tokens past the prefix
    assert view.over_watermark() is plan_window(conv, 2, [], B).over_watermark  # asked twice: the same
    # A view of the same messages over another prefix is counted again, not read from the first.
    assert view.without_summaries().over_watermark() is True  # all 1610
    assert view.over_watermark() is False
