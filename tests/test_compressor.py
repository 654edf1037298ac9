"""The compressor with a fake compression model: plain async functions, no mocks."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from proxy.context.compressor import Compressor, malformed, render_transcript, with_range
from proxy.prompts import Prompts
from proxy.tokens import TokenCounter

COUNTER = TokenCounter()
PROMPTS = Prompts.load()

LONG = (
    "My order number is A-99812 and it was charged 149.90 EUR on 2026-03-04. "
    "I need the replacement delivered to Lyon before 2026-03-20, and I am allergic to latex. "
) * 4

MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": LONG},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "lookup_order", "arguments": '{"id": "A-99812"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": '{"status": "shipped"}'},
    {
        "role": "user",
        "name": "ana",
        "content": [
            {"type": "text", "text": "Here is the photo."},
            {"type": "image_url", "image_url": {"url": "data:..."}},
        ],
    },
]


class Model:
    """A fake compression model that replays scripted replies and records what it was sent."""

    def __init__(self, *replies: str | BaseException) -> None:
        self.replies = list(replies)
        self.calls: list[list[dict[str, Any]]] = []

    async def __call__(self, messages: list[dict[str, Any]]) -> str:
        self.calls.append(messages)
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    @property
    def prompt(self) -> str:
        return str(self.calls[0][0]["content"])


def compressor(model: Model) -> Compressor:
    return Compressor(PROMPTS, model, COUNTER)


GOOD = "Turns 3–6: The user (order A-99812, 149.90 EUR, 2026-03-04) needs delivery to Lyon by 2026-03-20."


async def test_a_good_summary_is_accepted_in_one_call() -> None:
    model = Model(GOOD)
    assert await compressor(model).summarize(MESSAGES, 3, 6) == GOOD
    assert len(model.calls) == 1


async def test_the_prompt_holds_the_transcript_and_the_turn_range() -> None:
    model = Model(GOOD)
    await compressor(model).summarize(MESSAGES, 3, 6)
    assert model.calls[0] == [{"role": "user", "content": model.prompt}]
    assert "Turns 3–6:" in model.prompt
    assert render_transcript(MESSAGES, 3) in model.prompt
    assert "Turn 3 (user):" in model.prompt and "Turn 6 (user ana):" in model.prompt


def test_the_transcript_is_readable() -> None:
    text = render_transcript(MESSAGES, 3)
    assert 'Turn 4 (assistant):\n→ calls lookup_order({"id": "A-99812"}) [call call_1]' in text
    assert 'Turn 5 (tool, result of call call_1):\n{"status": "shipped"}' in text
    assert "Here is the photo.\n[image]" in text
    assert "None" not in text


def test_other_parts_and_legacy_calls_are_named() -> None:
    message = {
        "role": "assistant",
        "content": [
            {"type": "input_audio", "input_audio": {}},
            {"type": "file", "file": {"filename": "a.pdf"}},
            {"type": "refusal", "refusal": "no"},
        ],
        "function_call": {"name": "f", "arguments": "{}"},
    }
    assert render_transcript([message], 1) == (
        "Turn 1 (assistant):\n[audio]\n[file: a.pdf]\n[refusal] no\n→ calls f({})"
    )


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "   \n ",
        LONG * 8,  # longer than its source (the image part alone counts 765 tokens)
        '{"error": {"message": "rate limited", "type": "server_error"}}',
        "I'm sorry, but I can't help with that.",
        "**Turns 3–6:**",
    ],
    ids=["empty", "whitespace", "too-long", "json-error", "refusal", "range-only"],
)
async def test_a_bad_reply_is_retried_once_then_none(bad: str) -> None:
    model = Model(bad, bad)
    assert await compressor(model).summarize(MESSAGES, 3, 6) is None
    assert len(model.calls) == 2


async def test_a_bad_reply_then_a_good_one_succeeds() -> None:
    model = Model("", GOOD)
    assert await compressor(model).summarize(MESSAGES, 3, 6) == GOOD


async def test_exceptions_count_as_failed_attempts() -> None:
    model = Model(RuntimeError("upstream down"), ConnectionError("reset"))
    assert await compressor(model).summarize(MESSAGES, 3, 6) is None
    assert len(model.calls) == 2
    assert await compressor(Model(TimeoutError(), GOOD)).summarize(MESSAGES, 3, 6) == GOOD


async def test_cancellation_propagates() -> None:
    with pytest.raises(asyncio.CancelledError):
        await compressor(Model(asyncio.CancelledError())).summarize(MESSAGES, 3, 6)


async def test_the_range_is_prepended_when_the_model_omits_it() -> None:
    body = "The user needs delivery to Lyon by 2026-03-20."
    assert await compressor(Model(body)).summarize(MESSAGES, 3, 6) == f"Turns 3–6: {body}"
    fenced = f"```\n**Turns 3-6:** {body}\n```"
    assert await compressor(Model(fenced)).summarize(MESSAGES, 3, 6) == f"Turns 3–6: {body}"


async def test_nothing_to_summarize_calls_nothing() -> None:
    model = Model()
    assert await compressor(model).summarize([], 1, 0) is None
    assert await compressor(model).merge([]) is None
    assert model.calls == []


SUMMARIES: Sequence[tuple[str, int, int]] = [
    ("Turns 1–40: " + LONG, 1, 40),
    ("Turns 41–80: The user moved the deadline to 2026-03-25. " + LONG, 41, 80),
]


async def test_merge_names_every_range_and_keeps_the_outer_one() -> None:
    reply = "Turns 1–80:\nTurns 1–40: order A-99812.\nTurns 41–80: deadline 2026-03-25."
    model = Model(reply)
    assert await compressor(model).merge(SUMMARIES) == (
        "Turns 1–80: Turns 1–40: order A-99812.\nTurns 41–80: deadline 2026-03-25."
    )
    assert '<summary turns="1–40">\nTurns 1–40: ' in model.prompt
    assert '<summary turns="41–80">' in model.prompt and "Turns 1–80:" in model.prompt


async def test_merge_rejects_junk_twice_then_none() -> None:
    model = Model(SUMMARIES[0][0] + SUMMARIES[1][0], "[]")
    assert await compressor(model).merge(SUMMARIES) is None
    assert len(model.calls) == 2


def test_malformed_and_with_range() -> None:
    assert malformed("[1, 2]") and malformed("As an AI, I cannot")
    assert malformed("{not json but prose}") == ""
    assert malformed("Turns 1–2: fine") == ""
    assert with_range("Turns 1–2: x", 1, 2) == "Turns 1–2: x"
    assert with_range("turns 1 to 2 x", 1, 2) == "Turns 1–2: x"
    assert with_range("Turns 5–9: x", 1, 2) == "Turns 1–2: Turns 5–9: x"


def test_a_broken_prompt_folder_fails_at_construction(tmp_path: Any) -> None:
    (tmp_path / "summarize.md").write_text("{transcript}", encoding="utf-8")
    with pytest.raises(Exception, match="expected variables"):
        Compressor(Prompts.load(tmp_path), Model(), COUNTER)
