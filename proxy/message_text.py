"""What a message says: its text, and the context a client adds to it that is not its sender's words.

Pure. Read by recall (what to index, search and extract: ``memory.recall.query.words_of``) and by
tenancy (which message names a conversation: ``tenancy.derive_session``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# Context a client puts in the user's message, not the user's words, resent with every message: Claude
# Code's ``<system-reminder>`` elements (its CLAUDE.md files, the todo list, the file open in the editor);
# Codex's AGENTS.md ("# AGENTS.md instructions for <dir>" and its ``<INSTRUCTIONS>``, or the older
# ``<user_instructions>``) and ``<environment_context>`` (its directory, shell, sandbox).
_CLIENT_CONTEXT = re.compile(
    r"(?:<system-reminder>.*?</system-reminder>|<environment_context>.*?</environment_context>"
    r"|<user_instructions>.*?</user_instructions>"
    r"|# AGENTS\.md instructions for [^\n]*\s*<INSTRUCTIONS>.*?</INSTRUCTIONS>)\s*", re.S)
# What each of those opens with: a text without any of them is left as it is, unsearched.
_CONTEXT_OPENINGS = ("<system-reminder>", "<environment_context>", "<user_instructions>", "# AGENTS.md")


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


def without_client_context(text: str) -> str:
    """``text`` without the context a client added to it (``_CLIENT_CONTEXT``), stripped."""
    if any(opening in text for opening in _CONTEXT_OPENINGS):
        text = _CLIENT_CONTEXT.sub("", text)
    return text.strip()


def only_client_context(message: Mapping[str, Any]) -> bool:
    """Whether a message's text is all context a client added (Codex's AGENTS.md message): it has text,
    and none of it is its sender's own."""
    text = text_of(message)
    return bool(text.strip()) and not without_client_context(text)
