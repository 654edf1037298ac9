"""Questions are not memories (SPEC §5): telling a turn that only asks from one that tells.

A user's question, recorded like any turn, matches the next similar question
better than the turn that answers it does, and would take the budget from
it. Pure: ``asks_only`` reads one turn's text; ranking weighs such a turn by
``QUESTION_WEIGHT`` and passes its own score on to the reply that follows it,
so an asked-before question brings back its answer rather than itself.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# A turn that only asks keeps this share of its score; its reply inherits the rest.
QUESTION_WEIGHT = 0.3

# Sentences end at . ! ? (and their full-width forms) or a line break; the mark stays with its sentence.
_SENTENCE = re.compile(r"[^.!?。！？\n]+[.!?。！？]*")
_ASKS = re.compile(r"[?？]\s*$|[吗呢么][。？?]?\s*$")
_WORD = re.compile(r"[\u3400-\u9fff]|[^\W\u3400-\u9fff]+")
# "Hey Mel!", "Wow.", "哈哈": a sentence this short says nothing worth keeping on its own.
MAX_INTERJECTION_WORDS = 3
_ZH_INTERJECTION = 4  # CJK characters


def asks_only(text: str) -> bool:
    """True when every sentence of ``text`` asks something or is a short interjection, and one asks.

    "Hey Mel! How was the concert?" asks only; "The concert was great! Have
    you been?" tells something too, so it is kept as a memory like any turn.
    Text in a code block or over 600 characters is never a mere question.
    """
    if "```" in text or len(text) > 600:
        return False
    sentences = [s.strip() for s in _SENTENCE.findall(text) if _WORD.search(s)]
    asked = False
    for sentence in sentences:
        if _ASKS.search(sentence):
            asked = True
        elif not _interjection(sentence):
            return False
    return asked


def _interjection(sentence: str) -> bool:
    words = _WORD.findall(sentence)
    cjk = sum(1 for w in words if len(w) == 1 and "\u3400" <= w <= "\u9fff")
    if cjk:
        return cjk <= _ZH_INTERJECTION and len(words) - cjk <= 1
    return len(words) <= MAX_INTERJECTION_WORDS


def weigh_questions(
    base: Sequence[float], asks: Sequence[bool], replies: Sequence[int | None]
) -> list[float]:
    """Scores with each asking turn at ``QUESTION_WEIGHT`` and the rest passed to its reply.

    ``asks[j]``: candidate j only asks; ``replies[j]``: the index of the
    candidate that followed it in the same chat, or None. A reply keeps the
    higher of its own score and what its question passes on, so an answer
    never ranks lower for having been asked about.
    """
    out = [b * QUESTION_WEIGHT if a else b for b, a in zip(base, asks, strict=True)]
    for j, (b, a) in enumerate(zip(base, asks, strict=True)):
        r = replies[j]
        if a and r is not None and not asks[r]:
            out[r] = max(out[r], b * (1 - QUESTION_WEIGHT))
    return out
