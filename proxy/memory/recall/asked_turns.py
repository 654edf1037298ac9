"""Questions are not memories (SPEC §5): telling a turn that only asks from one that tells.

A user's question, recorded like any turn, matches the next similar question
better than the turn that answers it does, and would take the budget from
it. Pure: ``asks_only`` reads one turn's text, and ranking weighs a user's
turn that only asks by ``QUESTION_WEIGHT``. Its reply keeps its own score and
inherits, like any turn, a share of its best neighbour's (``ranking``): an
asked-before question brings back the exchange, question and answer in one
card, rather than crowding the block with old questions.

Measured on LoCoMo with each question recorded (bench/results/2026-12-01-retrieval.md): cats 1–4
0.719 → 0.756 at weight 0.3 (0.758 at 0.1), the unrecorded figure unchanged
(0.798 against 0.799). Passing the question's score on to its reply instead
cost 1 point (0.746): short replies took card slots from the evidence.
"""

from __future__ import annotations

import functools
import re

# A user's turn that only asks keeps this share of its score.
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



@functools.lru_cache(maxsize=65_536)
def question_weight(role: str, text: str) -> float:
    """The share of its score a stored turn keeps: ``QUESTION_WEIGHT`` for a user turn that only asks."""
    return QUESTION_WEIGHT if role == "user" and asks_only(text) else 1.0
