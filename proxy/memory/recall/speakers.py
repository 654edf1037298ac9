"""Who a question is about: the side of the conversation that speaks as the participant it names.

A conversation's participants are addressed by the *other* side: the
assistant's turns address the user ("Thanks, Caroline!"), the user's turns
address the assistant, or whoever plays it. So a name that one role's turns
address far more often than the other's is the other role's name, and a
question about that person ("What did Caroline paint?") is answered by their
own turns: on the LoCoMo dev set 97% of the evidence of a question naming one
participant was said by that participant. ``query.focus`` leaves such names
out of what is searched (they say who, not what); this module keeps what they
say about *who* as a ranking signal: the other side's turns keep
``OTHER_SPEAKER_WEIGHT`` of their score.

Only a name in address position counts (``addressed``: "Hey Mel", "Thanks,
Caroline", "That's great, Caroline!"). A name merely mentioned says nothing
about who speaks: a user who tells of a sister Anna in many turns, which the
assistant answers with "your sister", must not make Anna the assistant's
name, or a question about Anna would be turned away from the user's own
turns. A name both sides address alike, and a question naming both
participants, prefer neither side. The cost: a question that names the wrong
person (LoCoMo's adversarial category) finds that person's turns first, not
the other's who did it (bench/results/2026-12-01-retrieval.md).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Literal

from ...store.records import Fragment
from ..search.bm25 import tokenize
from .asked_turns import question_weight

Role = Literal["user", "assistant"]

# A name is one side's when the other side says it at least this many times as often…
SKEW = 3.0
# …in at least this many turns (fewer say nothing reliable).
MIN_MENTIONS = 10
# The share of its score a turn keeps when the question names the other side's participant.
OTHER_SPEAKER_WEIGHT = 0.4

_OTHER: dict[str, Role] = {"user": "assistant", "assistant": "user"}

# Words that open an address: "Hey Mel", "Thanks, Caroline", "Congrats Jon!".
_OPENERS = (
    r"hey|hi|hiya|hello|yo|dear|thanks|thank you|thx|cheers|bye|goodbye|congrats|congratulations"
    r"|sorry|wow|aw+"
)
_NAME = r"[A-Z][\w'’-]*"
_ADDRESS = re.compile(
    rf"\b(?i:{_OPENERS})[,!]?\s+(?P<opened>{_NAME})"  # Hey Mel / Thanks, Caroline
    rf"|,\s*(?P<closing>{_NAME})\s*(?:[!?.…]|$)"  # That's great, Caroline!
    rf"|^[ \t]*(?P<leading>{_NAME})[ \t]*[,!]",  # Caroline, look at this!
    re.MULTILINE,
)


def addressed(text: str) -> set[str]:
    """The search terms of the names ``text`` addresses someone by (see the module's docstring)."""
    out: set[str] = set()
    for match in _ADDRESS.finditer(text):
        out.update(tokenize(match.group("opened") or match.group("closing") or match.group("leading")))
    return out


class Mentions:
    """How many of a user's turns of each role address someone by each search term, kept as turns are indexed.

    A user's turn that only asks is left out: a recorded question names
    whom it asks *about* ("What did Caroline paint?"), not whom it addresses.
    Like the index's document frequencies, counts are not taken back when a
    turn is superseded (a rebuild starts them again).
    """

    def __init__(self) -> None:
        self._by_role: dict[str, Counter[str]] = {}

    def add(self, fragment: Fragment, terms: Iterable[str]) -> None:
        if _may_ask(fragment.text) and question_weight(fragment.role, fragment.text) < 1.0:
            return
        names = addressed(fragment.text)
        if names:
            self._by_role.setdefault(fragment.role, Counter()).update(names.intersection(terms))

    def of(self, term: str) -> dict[str, int]:
        """How many turns of each role address someone as ``term``."""
        return {role: counts.get(term, 0) for role, counts in self._by_role.items()}


def _may_ask(text: str) -> bool:
    # The cheap test before ``questions.asks_only``: most turns ask nothing.
    return "?" in text or "？" in text or any(mark in text for mark in "吗呢么")


def named_role(mentions: Mapping[str, int]) -> Role | None:
    """The role a name belongs to, from how many turns of each role address someone by it; None when unclear.

    Said mostly by the assistant: the user's name (and the reverse).
    """
    by_user, by_assistant = mentions.get("user", 0), mentions.get("assistant", 0)
    if by_assistant >= MIN_MENTIONS and by_assistant >= SKEW * by_user:
        return "user"
    if by_user >= MIN_MENTIONS and by_user >= SKEW * by_assistant:
        return "assistant"
    return None


def speaker_named(names: Iterable[Mapping[str, int]]) -> Role | None:
    """The one role the question's names point to (each name's ``mentions`` by role); None for none or both."""
    roles = {named_role(m) for m in names} - {None}
    return roles.pop() if len(roles) == 1 else None


def speaker_weight(role: str, speaker: Role | None) -> float:
    """The share of its score a turn said by ``role`` keeps when the question is about ``speaker``."""
    return OTHER_SPEAKER_WEIGHT if speaker is not None and role == _OTHER[speaker] else 1.0
