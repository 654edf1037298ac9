"""Whether a sentence asks rather than states, and what a question states before it asks.

A question or a request to the assistant states no fact of the speaker's
(SPEC §5: "A question the user asked is not itself a memory worth
recalling"), whatever its words: the rules and the reader by meaning read
none from it (``asking``). A question that opens on a statement still says
that much (``premise``: "I'm allergic to nuts, so what snacks can I take?").
Pure.
"""

from __future__ import annotations

import re

from .rule_patterns import HAN, chinese

# What a Chinese clause asks with: a question word, or a particle or mark that ends a question.
ZH_ASKED = re.compile(r"[？?]\s*$|[吗呢吧嘛]\s*[。！!]?\s*$|什么|怎么|为什么|哪|多少|是不是|能不能|可不可以|要不要|有没有")
# An English question opens on one of these (after a greeting or "so", "and"...), and a question asked after
# a statement begins its clause with one, after a comma or a plain "so", "and", "but": "I'm allergic to nuts,
# so what snacks can I take?", "I'm allergic to nuts so what snacks can I take?".
_EN_ASKING = (r"(?:what|what's|which|how|why|where|when|who|whom|whose|can|could|should|shall|would|will|do|does"
              r"|did|is|are|am|was|were|any|anything|anyone|is there|are there)\b")
# What chat puts before a question: "so", "and", a greeting ("ok, what...", "hey so do I...").
_LEAD_IN = r"so|and|but|ok|okay|hey|hi|well|also|oh|um"
_EN_OPENS_ASKING = re.compile(r"^(?:(?:" + _LEAD_IN + r"|quick question)[,\s]+)*"
                              r"(?:" + _EN_ASKING + r"|if\b|suppose\b|say\b|imagine\b|pretend\b|let's say\b)",
                              re.I)
_EN_ASKS_NEXT = re.compile(r"(?:(?:[,;:]|\s[-–—])\s*(?:(?:so|and|but|then|now|well|also)\s+)?|\s+(?:so|and|but)\s+)"
                           r"(?=" + _EN_ASKING + ")", re.I)
_ZH_CLAUSE = re.compile(r"[，,；;]")
# Chat asks without a question mark too: a question word that is no clause's subject ("what car do I drive";
# not "what I love most is hiking", nor an exclamation: "what a day!"), a verb put before its subject ("do I
# need a visa"), or a request to the assistant ("recommend a place near my home"). None of these states a
# fact of the speaker's.
_EN_ASKS_UNMARKED = re.compile(
    r"^(?:(?:" + _LEAD_IN + r"|please)[,\s]+)*(?:"
    r"(?:what|which|where|when|who|whose|how|why)\b(?!\s+(?:I|we|my|our|a|an)\b)"
    r"|(?:do|does|did|can|could|should|would|will|shall|is|are|am|was|were|have|has)\s+"
    r"(?:I|you|we|they|he|she|it|there|my|your|our)\b"
    r"|(?:recommend|suggest|tell (?:me|us)|find|give (?:me|us)|help (?:me|us)|show (?:me|us)|write|draft|plan"
    r"|list|explain|book|summari[sz]e|translate|compare|describe)\b)", re.I)


def asking(sentence: str) -> bool:
    """Whether ``sentence`` asks (a question or a request) rather than states: its mark (?, ？, 吗), or, in
    English, how it opens (``_EN_ASKS_UNMARKED``)."""
    text = sentence.strip()
    if text.endswith(("?", "？", "吗")):
        return True
    return not chinese(text) and not text.endswith("!") and _EN_ASKS_UNMARKED.match(text) is not None


def premise(sentence: str) -> str | None:
    """What a question states before it asks ("I'm allergic to nuts, so what snacks can I take on the
    plane?" → "I'm allergic to nuts."; "我对坚果过敏，坐飞机能带什么零食？" → "我对坚果过敏。"), as a sentence
    of its own; None for a sentence that is no question, that asks from its first clause ("Do you think
    I'm allergic to cats, or is it dust?", "我是不是对花生过敏，怎么查？") or that states too little first."""
    text = sentence.strip()
    if not text.endswith(("?", "？", "吗")):
        return None
    if chinese(text):
        marks = list(_ZH_CLAUSE.finditer(text))
        starts, ends = [0, *(m.end() for m in marks)], [*(m.start() for m in marks), len(text)]
        asks = next((i for i, (a, b) in enumerate(zip(starts, ends, strict=True)) if ZH_ASKED.search(text[a:b])), 0)
        head = text[: ends[asks - 1]].strip() if asks else ""  # the clauses before, as written
        return head + "。" if len(HAN.findall(head)) >= 3 else None
    if _EN_OPENS_ASKING.match(text):
        return None
    asked = _EN_ASKS_NEXT.search(text)
    head = text[: asked.start()].strip() if asked else ""
    return head + "." if len(head.split()) >= 3 else None
