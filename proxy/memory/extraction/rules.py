"""The rule-based extractor: explicit statements in English and Chinese (SPEC §5).

It stands in when the extraction model is unreachable or its output cannot be
repaired. Conservative on purpose: only patterns a user uses to state a fact
about themselves (``rule_patterns``, ``health_patterns``, ``life_patterns``, ``preference_patterns``,
``activity_patterns``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from datetime import datetime

from ..memory_schema import STANDS_BY_DEFAULT, MemoryItem
from .activity_patterns import ACTIVITY_RULES
from .asking import asking, premise
from .health_patterns import HEALTH_RULES
from .item_parser import Turn, strip_blocks
from .life_patterns import LIFE_RULES
from .preference_patterns import PREFERENCE_RULES
from .rule_patterns import (
    RULES,
    RuleHit,
    allergy,
    expiry,
    for_now,
    lasts_days,
    remind,
    speaker_unsaid,
    subject_dropped,
    supposed,
    with_subject,
)

SHORT_DAYS = 2  # a task or deadline of today or tomorrow is of the moment: it does not stand

Said = tuple[int, str]  # (turn number, one sentence of it)
# Who a Chinese sentence that names no one is said of (``rule_patterns.speaker_unsaid``): the health rules
# read it as if it began so.
IMPLIED_SPEAKER = "我"
_SAID_OF_THE_SPEAKER = frozenset({allergy, *(rule for _, rule in HEALTH_RULES)})
_CLAUSE_END = re.compile(r"\s*(?:$|[，。！？,.!?；;：:、])")

_ALL_RULES = [*RULES, *HEALTH_RULES, *LIFE_RULES, *PREFERENCE_RULES, *ACTIVITY_RULES]


def _sentences(text: str) -> Iterator[str]:
    # The end mark stays on the sentence: a question is not a statement of fact. What a question states
    # before it asks ("I'm allergic to nuts, so what can I eat?") is, and comes first as a sentence of its own.
    for part in re.split(r"(?<=[.!?])\s+|(?<=[。！？])|\n+", strip_blocks(text).replace("’", "'")):
        if part.strip():
            if (stated := premise(part)) is not None:
                yield stated
            yield part.strip()


def rule_extract(turns: Sequence[Turn], now: datetime) -> list[MemoryItem]:
    """Explicit statements in the user's turns, English and Chinese, in turn order.

    Conservative: only patterns a user uses to state a fact about themselves.
    Items come out in the order said; a later item with an item's key supersedes
    it when they are applied in order (a like, then a dislike of the same thing).
    Temporary events, tasks and constraints ("this week", "今天") get ``expires_at``.
    """
    return read_turns(turns, now)[0]


def read_turns(turns: Sequence[Turn], now: datetime) -> tuple[list[MemoryItem], list[Said]]:
    """``rule_extract``'s items, and the user's sentences no rule read (``meaning`` reads those)."""
    items: list[MemoryItem] = []
    unread: list[Said] = []
    for index, role, text in turns:
        if role == "user":
            for sentence in _sentences(text):
                hits = list(_hits(sentence, now))
                if not hits and speaker_unsaid(sentence):  # Chinese that drops its subject: the speaker's
                    hits = [(hit, max(0, start - len(IMPLIED_SPEAKER)))
                            for hit, start in _hits(IMPLIED_SPEAKER + sentence, now, implied=True)]
                elif not hits and (dropped := subject_dropped(sentence)) is not None:  # so does English chat
                    at, subject = dropped
                    hits = [(hit, at) for hit, _ in _hits(with_subject(sentence, at, subject), now, opening=True)]
                for hit, start in hits:
                    _append(items, _item(hit, index, sentence, now, start))
                if not hits:
                    unread.append((index, sentence))
    return items, unread


def _hits(
    sentence: str, now: datetime, *, implied: bool = False, opening: bool = False
) -> Iterator[tuple[RuleHit, int]]:
    """``implied``: ``sentence`` starts with the speaker its words left unsaid. Only a health fact that
    begins there and ends its clause is theirs ("乳糖不耐受，一喝牛奶就闹肚子"): a fact found later in the
    sentence, or one its clause goes on to judge ("住在杭州很舒服", "不吃早饭对身体不好": the act as
    a topic), is not. ``opening``: only a fact that begins where the sentence does (English chat's
    dropped subject, put back: ``rule_patterns.subject_dropped``)."""
    seen: set[str] = set()
    # A question or a supposition states nothing; "Can you remind me to...?" is still a request.
    question = asking(sentence)
    for pattern, rule in _ALL_RULES:
        if question and rule is not remind:
            continue
        if implied and rule not in _SAID_OF_THE_SPEAKER:
            continue
        for match in pattern.finditer(sentence):
            if (implied or opening) and match.start() != 0:
                continue
            if implied and not _CLAUSE_END.match(sentence, match.end()):
                continue
            if rule is not remind and supposed(sentence, match.start()):
                continue
            for hit in rule(match, sentence, now):
                if hit.key not in seen:  # one fact per slot per sentence
                    seen.add(hit.key)
                    yield hit, match.start()


def _item(hit: RuleHit, index: int, sentence: str, now: datetime, start: int = 0) -> MemoryItem:
    temporary = hit.type in {"event", "task", "constraint"}
    stands = STANDS_BY_DEFAULT[hit.category] if hit.standing is None else hit.standing
    # Said for now ("this week", "for now", "今天"), a fact is of the moment, whatever its kind: "I'm
    # vegetarian this week" is no diet — but the time must be said with the fact (from where the rule read it
    # on): in "I found out today that I'm allergic to shellfish" it is when the user learned it. A task or a
    # deadline is by nature for a while, and stands until its expiry — unless that is today or tomorrow.
    said = sentence if temporary else sentence[start:]
    expires = expiry(said, now) if temporary or for_now(said) else None
    days = lasts_days(said) if expires else None
    moment = days is not None and (hit.category not in ("task", "plan") or days <= SHORT_DAYS)
    return MemoryItem(type=hit.type, category=hit.category, standing=stands and not moment,
                      content=hit.content, key=hit.key, about=hit.about, importance=hit.importance,
                      confidence=0.9, source="user-stated", expires_at=expires, turns=(index,))


def _append(items: list[MemoryItem], item: MemoryItem) -> None:
    # A repeat of the slot's latest value only gains a turn; anything else is kept
    # in order, so the newest value of a slot is always the last one.
    last = next((i for i in reversed(range(len(items))) if items[i].key == item.key), None)
    if last is not None and items[last].content == item.content:
        items[last] = items[last].with_turns((*items[last].turns, *item.turns))
    else:
        items.append(item)
