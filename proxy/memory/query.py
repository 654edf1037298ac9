"""Pure helpers: message text, the retrieval query, and fragment selection from a conversation."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..hashing import text_hash
from .cards import strip_injected

INDEXED_ROLES = frozenset({"user", "assistant"})
# A question this short, or one that points back ("what about that?"), says
# too little on its own: the previous assistant message joins the query.
SHORT_QUERY_WORDS = 6
_REFERS_BACK = re.compile(
    r"\b(it|that|this|those|these|them|there|the same|above|earlier|previous|you said|he|she|they)\b"
    r"|那个|这个|它|上面|刚才|之前",
    re.I,
)


def text_of(message: Mapping[str, Any]) -> str:
    """The text of a message: a string content, or its text parts joined (other parts skipped)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            str(p.get("text", ""))
            for p in content
            if isinstance(p, Mapping) and p.get("type") in ("text", "input_text", "output_text")
        ]
        return "\n".join(p for p in parts if p)
    return ""


def latest_user_index(messages: Sequence[Mapping[str, Any]]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return i
    return None


def build_query(messages: Sequence[Mapping[str, Any]]) -> str:
    """The latest user message, plus the previous assistant message when it is short or refers back."""
    i = latest_user_index(messages)
    if i is None:
        return ""
    question = strip_injected(text_of(messages[i])).strip()
    if len(question.split()) >= SHORT_QUERY_WORDS and not _REFERS_BACK.search(question):
        return question
    for j in range(i - 1, -1, -1):
        if messages[j].get("role") == "assistant":
            before = strip_injected(text_of(messages[j])).strip()
            return f"{before}\n{question}" if before else question
        if messages[j].get("role") == "user":
            break
    return question


def indexable(conv: Sequence[Mapping[str, Any]]) -> list[tuple[int, str, str]]:
    """(position, role, text) of the conversation messages that become fragments."""
    out = []
    for position, message in enumerate(conv):
        role = message.get("role")
        if role not in INDEXED_ROLES:
            continue
        text = strip_injected(text_of(message)).strip()
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
