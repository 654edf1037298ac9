"""The rolling watermark as pure decisions (SPEC §3): no I/O, no clock, no await.

A request's messages are its *leading* system/developer messages followed by
the *conversation*. Every index here is an index into the conversation; a
range ``(start, end)`` is half-open. Turns are numbered from 1 over the
conversation, so a range ``(start, end)`` covers turns ``start + 1 .. end``.

The stored state of a session is a compressed prefix ``conv[:prefix_end]`` and
the summary chain that replaces it; ``conv[prefix_end:]`` is the verbatim
window. The handler asks this module what to do and does it:

* ``plan_window`` — how big the window and chain are, and whether the window is
  over its watermark (``over_watermark``, that alone);
* ``next_compression`` — which oldest range of the window to summarise next
  (call again after applying it; it returns ``None`` when there is nothing
  useful left to do, so the loop always ends — it can run at most
  ``len(conv)`` times because every range moves ``prefix_end`` forward);
* ``next_merge`` — which oldest summaries to merge when the chain is over its
  budget;

and ``assembly.assemble`` builds the forwarded messages.

Giant messages (SPEC: "a single message larger than the whole window is never
summarised away on its own account and never triggers a loop"). A message is
*giant* when it alone holds more than ``recent_window_tokens``. The newest
giant message is *fresh* while no more than ``recent_window_tokens`` of
conversation follow it. A fresh giant

* does not count against the watermark, so it never triggers a compression by
  itself, and
* is never part of a range, so it is forwarded as the client sent it.

Once a full window of newer conversation follows it, it is an ordinary old
message and is summarised with its neighbours when it falls in the oldest half.
Only the newest giant can be fresh, so the window holds at most one giant
beyond its budget, and an agent that reads many huge files still gets its old
ones compressed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..message_text import only_client_context

LEADING_ROLES = frozenset({"system", "developer"})
# The roles of messages Paperclip reads. Any other stands for an item it carries but cannot read (the
# Responses API's ``compaction``, ``item_reference``): never summarised, since a summary of it would be
# empty and the model would lose what it held.
READ_ROLES = frozenset({*LEADING_ROLES, "user", "assistant", "tool", "function", "reasoning"})
# Legacy `function` messages answer a legacy `function_call` like `tool` messages answer `tool_calls`.
RESULT_ROLES = frozenset({"tool", "function"})
# A Responses API reasoning item belongs to the output item after it: never cut between them.
BOUND_TO_NEXT_ROLES = frozenset({"reasoning"})
# A message carrying this key (true) is bound to the message before it: a range never ends
# right before it, so no window begins with it. Anthropic's Messages API wants the forwarded
# window to begin with a user turn, so its view marks every assistant message that way
# (pipeline/anthropic_messages.py).
BINDS_PREVIOUS = "binds_previous"

@dataclass(frozen=True)
class Budgets:
    recent_window_tokens: int
    summary_budget_tokens: int


@dataclass(frozen=True)
class MsgInfo:
    """What the planner needs to know about one conversation message."""

    tokens: int
    role: str
    has_tool_calls: bool  # an assistant message whose tool_calls (or function_call) is non-empty, or reasoning
    binds_previous: bool = False  # BINDS_PREVIOUS: no range ends right before it
    carried: bool = False  # not a role it reads (``READ_ROLES``): no range holds it


@dataclass(frozen=True)
class SummaryRef:
    """A stored summary covering conversation messages ``[start, end)``."""

    id: str
    level: int
    tokens: int
    start: int
    end: int


@dataclass(frozen=True)
class WindowPlan:
    """The size of one request's context under a stored prefix and its chain."""

    window_start: int
    window_tokens: int
    chain_tokens: int
    over_watermark: bool  # the window, minus a fresh giant, exceeds recent_window_tokens

    def forwarded_tokens(self, leading_tokens: int) -> int:
        """Leading + chain + window tokens.

        A lower bound on ``TokenCounter.total(assemble(...))``: the summary
        message adds its header and framing (a few dozen tokens) and the reply
        priming adds 3. Count the assembled messages for the exact figure.
        """
        return leading_tokens + self.chain_tokens + self.window_tokens


# --- describing messages -----------------------------------------------------


def split_leading(messages: Sequence[Mapping[str, Any]]) -> int:
    """How many messages at the very start frame the conversation: role system or developer, a user
    message of a client's context alone (Codex's AGENTS.md and environment: ``only_client_context``), or
    an item it cannot read (``READ_ROLES``: a compaction that stands for the conversation before it).

    They are forwarded as sent and never summarised: the agent's project instructions must reach the
    model whole on every request, however long the task, as its system prompt does.
    """
    n = 0
    while n < len(messages) and (
        messages[n].get("role") in LEADING_ROLES
        or messages[n].get("role") not in READ_ROLES
        or (messages[n].get("role") == "user" and only_client_context(messages[n]))
    ):
        n += 1
    return n


def msg_info(message: Mapping[str, Any], tokens: int) -> MsgInfo:
    role = str(message.get("role", ""))
    calls = role == "assistant" and bool(message.get("tool_calls") or message.get("function_call"))
    calls = calls or role in BOUND_TO_NEXT_ROLES
    return MsgInfo(tokens=tokens, role=role, has_tool_calls=calls, binds_previous=message.get(BINDS_PREVIOUS) is True,
                   carried=role not in READ_ROLES)


def describe(messages: Sequence[Mapping[str, Any]], counts: Sequence[int]) -> list[MsgInfo]:
    """MsgInfo for each message, given its token count (``TokenCounter.messages``)."""
    if len(messages) != len(counts):
        raise ValueError("one token count per message is required")
    return [msg_info(m, n) for m, n in zip(messages, counts, strict=True)]


# --- boundaries ----------------------------------------------------------------


def latest_user(conv: Sequence[MsgInfo]) -> int:
    """Index of the latest user message (``len(conv)`` when there is none)."""
    for i in range(len(conv) - 1, -1, -1):
        if conv[i].role == "user":
            return i
    return len(conv)


def protected_start(conv: Sequence[MsgInfo]) -> int:
    """Where the verbatim tail begins: nothing from here on is compressed.

    The latest user message; or, when an agent's tool loop follows it, the
    loop's latest round (from its last round boundary, ``is_round``): the
    rounds before it may be compressed like any turns, and the latest user
    message, once inside the compressed prefix, is still forwarded verbatim,
    first in the window (``anchor``). So a task of hundreds of tool calls
    costs a bounded number of tokens too. Words sent beside tool results
    (typed during a loop, or a client's reminder) are no exception. They
    cannot lead a window, since their results would lose their call: while
    they are the latest, the tail begins with the round they close; once the
    loop goes on past them, they are compressed with that round like the
    rounds around them, and the question the loop serves leads the window.
    """
    latest = latest_user(conv)
    for b in range(len(conv) - 1, latest + 1, -1):
        if is_round(conv, b):
            return b
    if latest < len(conv) and conv[latest].binds_previous:
        return next(b for b in range(latest, -1, -1) if is_cut(conv, b))  # the words with the round they close
    return latest


def is_round(conv: Sequence[MsgInfo], b: int) -> bool:
    """Whether boundary ``b`` starts a new round of a tool loop: a call that follows the last results."""
    return 0 < b < len(conv) and conv[b - 1].role in RESULT_ROLES and conv[b].has_tool_calls


def is_cut(conv: Sequence[MsgInfo], b: int) -> bool:
    """Whether a range may start or end at boundary ``b`` (between ``conv[b-1]`` and ``conv[b]``).

    Stricter than "not between a tool call and its results": a boundary may not
    sit right after an assistant message with tool calls either, even when no
    result follows yet. That keeps a stored cut legal in any branch that
    shares the prefix before it, since results may arrive in a later request.
    A round boundary (``is_round``) is a cut even before a message bound to the
    one before it: the window it begins is led by its ``anchor``.
    """
    if b <= 0:
        return b == 0
    if b > len(conv) or conv[b - 1].has_tool_calls:
        return False
    return b == len(conv) or is_round(conv, b) or (conv[b].role not in RESULT_ROLES and not conv[b].binds_previous)


def anchor(conv: Sequence[MsgInfo], prefix_end: int) -> int | None:
    """The user message forwarded first in a window that begins with a tool call (inside a tool loop), so
    the model sees what it was asked and the window begins with a user turn: the last user message before
    ``prefix_end`` that stands on its own (not bound to results before it). None otherwise."""
    if not 0 < prefix_end < len(conv) or not conv[prefix_end].has_tool_calls:
        return None
    for i in range(prefix_end - 1, -1, -1):
        if conv[i].role == "user" and not conv[i].binds_previous:
            return i
    return None


def cut_points(conv: Sequence[MsgInfo]) -> tuple[int, ...]:
    """Every legal boundary in ``0 .. len(conv)``, ascending."""
    return tuple(b for b in range(len(conv) + 1) if is_cut(conv, b))


# --- the window ----------------------------------------------------------------


def fresh_giant(conv: Sequence[MsgInfo], budgets: Budgets) -> int | None:
    """Index of the newest giant message while it is still fresh (see the module docstring)."""
    limit = budgets.recent_window_tokens
    after = 0
    for i in range(len(conv) - 1, -1, -1):
        if conv[i].tokens > limit:
            return i if after <= limit else None
        after += conv[i].tokens
        if after > limit:
            return None  # any giant further back already has a full window after it
    return None


def window_tokens(conv: Sequence[MsgInfo], prefix_end: int) -> int:
    """Tokens of the verbatim window: the conversation past the prefix, and its anchor."""
    lead = anchor(conv, prefix_end)
    return sum(m.tokens for m in conv[prefix_end:]) + (conv[lead].tokens if lead is not None else 0)


def window_load(conv: Sequence[MsgInfo], prefix_end: int, budgets: Budgets) -> int:
    """Tokens of the window that count against the watermark: all but a fresh giant, its anchor included."""
    total = window_tokens(conv, prefix_end)
    giant = fresh_giant(conv, budgets)
    if giant is not None and giant >= prefix_end:
        total -= conv[giant].tokens
    return total


def plan_window(
    conv: Sequence[MsgInfo], prefix_end: int, chain: Sequence[SummaryRef], budgets: Budgets
) -> WindowPlan:
    return WindowPlan(
        window_start=prefix_end,
        window_tokens=window_tokens(conv, prefix_end),
        chain_tokens=sum(s.tokens for s in chain),
        over_watermark=over_watermark(conv, prefix_end, budgets),
    )


def over_watermark(conv: Sequence[MsgInfo], prefix_end: int, budgets: Budgets) -> bool:
    """Whether the window, minus a fresh giant, exceeds ``recent_window_tokens`` (``plan_window``'s, alone)."""
    return window_load(conv, prefix_end, budgets) > budgets.recent_window_tokens


def next_compression(
    conv: Sequence[MsgInfo], prefix_end: int, budgets: Budgets
) -> tuple[int, int] | None:
    """The range ``(prefix_end, end)`` to summarise next, or None.

    None when the window (minus a fresh giant) is within the watermark, or when
    no legal range makes progress (everything compressible is protected, or
    blocked by a fresh giant). Otherwise the range holds about the oldest half
    of the window's tokens, capped at ``recent_window_tokens // 2`` so that
    catching up with a long history takes several bounded summaries. Ranges
    end on legal cut points only, so a range may pass the target by one
    message or tool-call group rather than leave a scrap of under half of it.
    """
    window = budgets.recent_window_tokens
    load = window_load(conv, prefix_end, budgets)
    if load <= window:
        return None
    target = max(1, min((load + 1) // 2, window // 2))
    limit = _range_limit(conv, prefix_end, budgets)
    end = _choose_end(_candidate_ends(conv, prefix_end, limit), target)
    return None if end is None else (prefix_end, end)


def _range_limit(conv: Sequence[MsgInfo], prefix_end: int, budgets: Budgets) -> int:
    """Ranges end at or before the verbatim tail (``protected_start``), a fresh giant in the window and the
    first item it cannot read (``carried``) after the prefix: from there on the window stays verbatim."""
    limit = protected_start(conv)
    giant = fresh_giant(conv, budgets)
    if giant is not None and giant >= prefix_end:
        limit = min(limit, giant)
    return next((i for i in range(prefix_end, limit) if conv[i].carried), limit)


def _candidate_ends(conv: Sequence[MsgInfo], start: int, limit: int) -> Iterator[tuple[int, int]]:
    """(end, tokens of conv[start:end]) for each legal end in (start, limit] that holds tokens."""
    acc = 0
    for b in range(start + 1, limit + 1):
        acc += conv[b - 1].tokens
        if acc > 0 and is_cut(conv, b):
            yield b, acc


def _choose_end(candidates: Iterator[tuple[int, int]], target: int) -> int | None:
    below: tuple[int, int] | None = None
    for end, acc in candidates:
        if acc < target:
            below = (end, acc)
            continue
        # Take the closer of the two boundaries around the target, but never a
        # scrap under half of it: a tiny source rarely yields a shorter summary.
        if below is not None and below[1] * 2 >= target and target - below[1] < acc - target:
            return below[0]
        return end
    return None if below is None else below[0]


# --- the chain -----------------------------------------------------------------


def next_merge(chain: Sequence[SummaryRef], budgets: Budgets) -> tuple[int, int] | None:
    """Chain indices ``(0, k)``, k >= 2, of the oldest summaries to merge, or None.

    None when the chain fits ``summary_budget_tokens`` or holds fewer than two
    summaries. Otherwise the smallest k such that the chain would fit if the
    merge halved those k summaries (all of them when no k is enough; the next
    compression's merge shrinks it further).
    """
    total = sum(s.tokens for s in chain)
    budget = budgets.summary_budget_tokens
    if total <= budget or len(chain) < 2:
        return None
    run = 0
    for k, ref in enumerate(chain, start=1):
        run += ref.tokens
        if k >= 2 and total - run + (run + 1) // 2 <= budget:
            return (0, k)
    return (0, len(chain))
