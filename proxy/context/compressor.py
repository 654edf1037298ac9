"""Summaries and merges by the compression model, validated before they replace any turn.

The compressor never decides *what* to compress (that is the planner's job)
and never stores anything: it renders the prompt, asks the model through an
injected ``Complete`` function, and accepts the reply or returns None. None
means "keep these turns verbatim": the request must not suffer because the
compression model is down or returned junk (SPEC §2, §3).

Masking personal data before it reaches the compression model is the
caller's job: pass the messages already redacted.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from ..prompts import Prompts
from ..tokens import TokenCounter

Complete = Callable[[list[dict[str, Any]]], Awaitable[str]]
"""Send chat messages to the compression model, return the reply text; may raise."""

ATTEMPTS = 2  # the first try and one retry (SPEC §3)

log = logging.getLogger("paperclip.context")

_RANGE_PREFIX = re.compile(
    r"^\**\s*turns?\s+(\d+)\s*(?:–|—|-|to)\s*(\d+)\s*\**\s*:?\s*\**\s*", re.I
)
_REFUSAL = re.compile(
    r"^(?:i'?m sorry|i am sorry|sorry,|i can(?:not|'t|’t)|i'?m (?:not able|unable)|i am (?:not able|unable)|as an ai)",
    re.I,
)
_FENCE = re.compile(r"^```[\w-]*\n(.*?)\n?```$", re.S)


class Compressor:
    """Turns a range of messages, or a run of summaries, into one summary."""

    def __init__(self, prompts: Prompts, complete: Complete, counter: TokenCounter) -> None:
        # Checked here so that a broken prompt folder fails at start, not inside a request.
        prompts.require("summarize", {"first_turn", "last_turn", "transcript"})
        prompts.require("merge", {"first_turn", "last_turn", "summaries"})
        self._prompts = prompts
        self._complete = complete
        self._counter = counter

    async def summarize(
        self, messages: Sequence[Mapping[str, Any]], first_turn: int, last_turn: int
    ) -> str | None:
        """A summary of ``messages`` (turns first_turn..last_turn), or None to keep them verbatim.

        The result starts with ``Turns <first>–<last>:`` and is shorter in tokens
        than the messages. Never raises, except ``asyncio.CancelledError``.
        """
        if not messages:
            return None
        prompt = self._prompts.render(
            "summarize",
            first_turn=first_turn,
            last_turn=last_turn,
            transcript=render_transcript(messages, first_turn),
        )
        source = sum(self._counter.messages(messages))
        return await self._ask(prompt, source, first_turn, last_turn)

    async def merge(self, summaries: Sequence[tuple[str, int, int]]) -> str | None:
        """One summary of ``(text, first_turn, last_turn)`` summaries (oldest first), or None.

        Same contract as ``summarize``; the range is the first summary's first
        turn to the last summary's last turn.
        """
        if not summaries:
            return None
        first, last = summaries[0][1], summaries[-1][2]
        block = "\n\n".join(_summary_block(*s) for s in summaries)
        prompt = self._prompts.render("merge", first_turn=first, last_turn=last, summaries=block)
        source = sum(self._counter.text(text) for text, _, _ in summaries)
        return await self._ask(prompt, source, first, last)

    async def _ask(self, prompt: str, source_tokens: int, first: int, last: int) -> str | None:
        # One user message: every OpenAI-compatible backend accepts it, even
        # local models whose chat template has no system role.
        request = [{"role": "user", "content": prompt}]
        for attempt in range(1, ATTEMPTS + 1):
            try:
                reply = await self._complete(request)
            except Exception as exc:  # an unreachable or failing model is one failed attempt
                log.warning(
                    "compression attempt %d for turns %d–%d failed: %r", attempt, first, last, exc
                )
                continue
            summary, problem = self._validate(reply, source_tokens, first, last)
            if summary is not None:
                return summary
            log.warning(
                "compression attempt %d for turns %d–%d rejected: %s", attempt, first, last, problem
            )
        return None

    def _validate(
        self, reply: object, source_tokens: int, first: int, last: int
    ) -> tuple[str | None, str]:
        """(the accepted summary, "") or (None, why it was rejected)."""
        if not isinstance(reply, str) or not reply.strip():
            return None, "empty reply"
        body = _unfence(reply.strip())
        problem = malformed(body)
        if problem:
            return None, problem
        summary = with_range(body, first, last)
        if summary == with_range("", first, last):
            return None, "only a turn range, no summary"
        size = self._counter.text(summary)
        if size >= source_tokens:
            return None, f"not shorter than its source ({size} >= {source_tokens} tokens)"
        return summary, ""


def malformed(text: str) -> str:
    """Why ``text`` is not a summary (JSON such as an error object, a refusal), or ""."""
    if text[:1] in "{[":
        try:
            json.loads(text)
        except ValueError:
            pass
        else:
            return "reply is JSON, not a summary"
    if _REFUSAL.match(text):
        return "reply is a refusal"
    return ""


def with_range(text: str, first: int, last: int) -> str:
    """``text`` starting with exactly ``Turns <first>–<last>: ``.

    A leading range naming the same turns in another spelling ("turns 3-9",
    "**Turns 3–9:**") is normalised; any other opening gets the range prepended.
    """
    prefix = f"Turns {first}–{last}: "
    match = _RANGE_PREFIX.match(text)
    if match and (int(match.group(1)), int(match.group(2))) == (first, last):
        text = text[match.end() :]
    return prefix + text.lstrip()


def _unfence(text: str) -> str:
    match = _FENCE.match(text)
    return match.group(1).strip() if match else text


def _summary_block(text: str, first: int, last: int) -> str:
    return f'<summary turns="{first}–{last}">\n{text}\n</summary>'


# --- transcript ----------------------------------------------------------------


def render_transcript(messages: Sequence[Mapping[str, Any]], first_turn: int) -> str:
    """Messages as the compression model reads them: numbered turns, readable tool calls.

    ``messages[i]`` is turn ``first_turn + i``.
    """
    return "\n\n".join(_render_message(m, first_turn + i) for i, m in enumerate(messages))


def _render_message(message: Mapping[str, Any], turn: int) -> str:
    lines = [_label(message, turn)]
    content = _render_content(message.get("content"))
    if content:
        lines.append(content)
    lines.extend(_render_calls(message))
    return "\n".join(lines)


def _label(message: Mapping[str, Any], turn: int) -> str:
    who = str(message.get("role") or "unknown")
    if message.get("name"):
        who += f" {message['name']}"
    if message.get("tool_call_id"):
        who += f", result of call {message['tool_call_id']}"
    return f"Turn {turn} ({who}):"


def _render_content(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p for p in (_render_part(part) for part in content) if p)
    return json.dumps(content, ensure_ascii=False)


_PART_LABELS = {"image_url": "[image]", "input_image": "[image]", "input_audio": "[audio]"}


def _render_part(part: Any) -> str:
    if not isinstance(part, Mapping):
        return str(part)
    kind = str(part.get("type") or "")
    if kind in ("text", "input_text", "output_text"):
        return str(part.get("text") or "")
    if kind == "refusal":
        return f"[refusal] {part.get('refusal') or ''}".rstrip()
    if kind == "file":
        file = part.get("file")
        name = file.get("filename") if isinstance(file, Mapping) else None
        return f"[file: {name}]" if name else "[file]"
    return _PART_LABELS.get(kind, f"[{kind or 'attachment'}]")


def _render_calls(message: Mapping[str, Any]) -> list[str]:
    listed = message.get("tool_calls")
    # A client may send anything here (a string, a number, an object): only a list holds calls.
    calls: list[Any] = list(listed) if isinstance(listed, list) else []
    legacy = message.get("function_call")
    if isinstance(legacy, Mapping):
        calls.append({"function": legacy})
    return [_render_call(c) for c in calls if isinstance(c, Mapping)]


def _render_call(call: Mapping[str, Any]) -> str:
    function = call.get("function")
    fn: Mapping[str, Any] = function if isinstance(function, Mapping) else {}
    name = fn.get("name") or call.get("type") or "tool"
    line = f"→ calls {name}({fn.get('arguments') or ''})"
    return f"{line} [call {call['id']}]" if call.get("id") else line
