"""Pure helpers: message text, the retrieval query, and fragment selection from a conversation."""

from __future__ import annotations

import datetime as dt
import functools
import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...hashing import text_hash
from ...message_text import text_of, without_client_context
from ..search.bm25 import tokenize
from .cards import strip_injected

INDEXED_ROLES = frozenset({"user", "assistant"})
# A question with fewer search terms than this ("why?", "and Paris?") says too
# little on its own, and so does one that points back ("what did you mean by
# that?") with fewer than REFERS_BACK_TERMS: the previous assistant message
# joins the query. Counted in search terms, not words: Chinese has no spaces.
SHORT_QUERY_TERMS = 2
REFERS_BACK_TERMS = 5
_REFERS_BACK = re.compile(
    r"\b(it|that|this|those|these|them|there|the same|above|earlier|previous|you said|he|she|they)\b"
    r"|那个|这个|它|上面|刚才|之前",
    re.I,
)


def words_of(message: Mapping[str, Any]) -> str:
    """What a message says in its sender's own words: its text (``text_of``) without a memory block of ours
    (``strip_injected``) or the context a client added (``message_text.without_client_context``), stripped."""
    return without_client_context(strip_injected(text_of(message)))


def latest_user_index(messages: Sequence[Mapping[str, Any]]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return i
    return None


def asked_index(messages: Sequence[Mapping[str, Any]]) -> int | None:
    """The user message a request asks: the latest with words of its own (``words_of``), else the latest.

    A message that only returns tool results with a client's context beside them (Claude Code's
    reminders) asks nothing new: the question before it stands, as it does through a tool loop.
    """
    latest = None
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            if words_of(messages[i]):
                return i
            latest = i if latest is None else latest
    return latest


def build_query(messages: Sequence[Mapping[str, Any]]) -> str:
    """The question asked (``asked_index``), plus the assistant message before it when it is short or refers
    back."""
    return asked_query(messages)[1]


def asked_query(messages: Sequence[Mapping[str, Any]]) -> tuple[int | None, str]:
    """Where the question asked is (``asked_index``) and the query read from it (``build_query``), in one
    reading of the messages."""
    i = asked_index(messages)
    if i is None:
        return None, ""
    question = words_of(messages[i])
    if not _needs_context(question):
        return i, question
    for j in range(i - 1, -1, -1):
        if messages[j].get("role") == "assistant":
            before = words_of(messages[j])
            return i, f"{before}\n{question}" if before else question
        if messages[j].get("role") == "user":
            break
    return i, question


def _needs_context(question: str) -> bool:
    terms = len(tokenize(question))
    return terms < SHORT_QUERY_TERMS or (terms < REFERS_BACK_TERMS and bool(_REFERS_BACK.search(question)))


def indexable(conv: Sequence[Mapping[str, Any]], start: int = 0) -> list[tuple[int, str, str]]:
    """(position, role, text) of the conversation messages that become fragments (``conv`` begins at ``start``)."""
    out = []
    for position, message in enumerate(conv, start):
        role = message.get("role")
        if role not in INDEXED_ROLES:
            continue
        text = words_of(message)
        if text:
            out.append((position, str(role), text))
    return out


def fragment_hash(role: str, text: str) -> str:
    """A fragment's identity: its role and text, not the whole message.

    So the assistant reply recorded from the response and the same reply when
    the client resends it (with ``refusal: null`` or other extra keys) are
    one fragment. Part of every stored fragment key.
    """
    return text_hash(f"{role}\0{text}")


# --- what the query is about -------------------------------------------------------

# Punctuation around a word, and an English possessive, are not part of a name.
_EDGES = "\"'“”‘’()[]{}<>.,;:!?¿¡"
_POSSESSIVE = re.compile(r"['’]s$")


def focus(query: str, is_common: Callable[[str], bool]) -> str:
    """``query`` without the names that are everywhere in the user's history.

    A capitalised word past the first whose terms ``is_common`` (a large share
    of the user's fragments contain them) is a participant's name: it says who,
    not what. Left in, it makes a small embedding model rank every greeting
    ("Thanks, Caroline!") above the turn that holds the fact, and it adds
    nothing to BM25. Text without such names is returned unchanged.
    """
    words = query.split()
    kept = [w for i, w in enumerate(words) if i == 0 or not _is_common_name(w, is_common)]
    return " ".join(kept) if len(kept) < len(words) and kept else query


def names_in(query: str, is_common: Callable[[str], bool]) -> list[str]:
    """The participants' names in ``query`` (the first word too), each once, as search terms.

    The words ``focus`` leaves out, plus a leading one ("Caroline said what?"):
    who the question is about (``speakers.speaker_named``).
    """
    out: list[str] = []
    for word in query.split():
        if _is_common_name(word, is_common):
            out.extend(t for t in tokenize(_POSSESSIVE.sub("", word.strip(_EDGES))) if t not in out)
    return out


def names_someone(query: str, is_common: Callable[[str], bool]) -> bool:
    """Whether ``query`` names a participant of the user's history where no sentence begins.

    A question about someone all over the history ("Would Biscuit like a
    quieter flat?") is about that history, however vague its other words. A
    sentence's first word is capitalised whatever it is, and a chatty
    history is full of "Hey", "Wow" and "Great": there it says nothing.
    """
    words = query.split()
    return any(
        _is_common_name(word, is_common)
        for before, word in itertools.pairwise(words)
        if not before.rstrip(_CLOSERS).endswith(_SENTENCE_ENDS)
    )


_SENTENCE_ENDS = (".", "!", "?", "…", ":", "。", "！", "？")
_CLOSERS = "\"'”’)]"


def _is_common_name(word: str, is_common: Callable[[str], bool]) -> bool:
    terms = _name_terms(word)
    return bool(terms) and all(is_common(t) for t in terms)


@functools.lru_cache(maxsize=4096)
def _name_terms(word: str) -> tuple[str, ...]:
    """The search terms of ``word`` if it is capitalised (a name, maybe), else none. Kept: a question's
    words are read three times (``focus``, ``names_in``, ``names_someone``), and they come back."""
    core = _POSSESSIVE.sub("", word.strip(_EDGES))
    return tuple(tokenize(core)) if core[:1].isupper() else ()


# --- a verb's other forms ---------------------------------------------------------

# Search terms are words as written (plurals aside): "camped" does not meet "camping".
_INFLECTED_MIN = 5  # shorter words ("need", "ring", "bed") are left alone


def inflected(terms: Sequence[str]) -> list[str]:
    """``terms`` plus the other -ing / -ed forms of each English word, each once, in order.

    "camped" → camp, camping; "painting" → paint, painted; "research" →
    researching, researched. Over-generation ("campe") is harmless: a form no
    fragment contains matches nothing. Chinese and short words are kept as they are.
    """
    out = list(dict.fromkeys(terms))
    seen = set(out)
    for term in list(out):
        for form in sorted(_forms(term)):
            if form not in seen:
                seen.add(form)
                out.append(form)
    return out


def _forms(term: str) -> set[str]:
    if len(term) < _INFLECTED_MIN or not (term.isascii() and term.isalpha()):
        return set()
    bases = set()
    if term.endswith("ied"):
        bases.add(term[:-3] + "y")
    for suffix in ("ing", "ed"):
        stem = term[: -len(suffix)]
        if term.endswith(suffix) and len(stem) >= 3:
            bases |= {stem, stem + "e"}
            if stem[-1] == stem[-2] and stem[-1] not in "aeiouls":
                bases.add(stem[:-1])  # running → run, stopped → stop
    forms = set()
    for base in bases or {term}:
        if base.endswith("e"):
            forms |= {base, base[:-1] + "ing", base + "d"}
        elif base.endswith("y"):
            forms |= {base, base + "ing", base[:-1] + "ied"}
        else:
            forms |= {base, base + "ing", base + "ed"}
    return forms - {term}


Period = tuple[dt.date, dt.date]

_MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"),
            ("may",), ("june", "jun"), ("july", "jul"), ("august", "aug"),
            ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
_DATES = [
    ("dmy", re.compile(rf"\b{_DAY}(?: of)? {_MONTH},? {_YEAR}\b", re.I)),
    ("mdy", re.compile(rf"\b{_MONTH} {_DAY},? {_YEAR}\b", re.I)),
    ("ymd", re.compile(r"\b((?:19|20)\d\d)-(\d\d)-(\d\d)\b")),
    ("ymd", re.compile(r"((?:19|20)\d\d)年(\d{1,2})月(\d{1,2})[日号]")),
    ("my", re.compile(rf"\b{_MONTH},? {_YEAR}\b", re.I)),
    ("ym", re.compile(r"((?:19|20)\d\d)年(\d{1,2})月(?!\d)")),
]


def periods_in(text: str) -> list[Period]:
    """The calendar days or months ``text`` names with a year, as (first day, last day).

    "on 1 February, 2023", "May 23rd 2023", "2023-05-23", "2023年5月23日" name a
    day; "in October 2023", "2023年10月" a month. Dates without a year are
    ambiguous and ignored; a month already covered by a named day is skipped.
    """
    found: list[Period] = []
    taken: list[tuple[int, int]] = []
    for kind, pattern in _DATES:
        for match in pattern.finditer(text):
            if any(a <= match.start() < b for a, b in taken):
                continue
            period = _period(kind, match.groups())
            if period is not None:
                found.append(period)
                taken.append(match.span())
    return found


def _period(kind: str, groups: Sequence[str]) -> Period | None:
    try:
        if kind == "dmy":
            day = dt.date(int(groups[2]), _MONTHS[groups[1].lower()], int(groups[0]))
        elif kind == "mdy":
            day = dt.date(int(groups[2]), _MONTHS[groups[0].lower()], int(groups[1]))
        elif kind == "ymd":
            day = dt.date(int(groups[0]), int(groups[1]), int(groups[2]))
        else:
            year, month = (
                (int(groups[1]), _MONTHS[groups[0].lower()]) if kind == "my" else (int(groups[0]), int(groups[1]))
            )
            first = dt.date(year, month, 1)
            return first, (first + dt.timedelta(days=32)).replace(day=1) - dt.timedelta(days=1)
    except (ValueError, KeyError):
        return None  # "31 February", month 13
    return day, day
