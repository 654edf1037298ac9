"""A request body of another API read as the pipeline's messages, and what each message came from.

The Responses API and Anthropic's Messages API both hold one leading text
apart from their turns (``instructions``, ``system``) and send the turns as a
list; each is read as one leading system message (so it is counted) and one
chat-shaped message per turn, and the body is written back from the turns
themselves (``origins``), never from the chat-shaped stand-ins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ShapedBody:
    messages: list[dict[str, Any]]  # the lead message (if any), then one per turn of the body
    origins: list[Any]  # the body's own turn behind each message after the lead
    lead: dict[str, Any] | None  # the system message standing for instructions / system

    @classmethod
    def of(cls, lead: dict[str, Any] | None, items: list[dict[str, Any]], origins: list[Any]) -> ShapedBody:
        return cls([lead, *items] if lead else items, origins, lead)

    @property
    def items(self) -> list[dict[str, Any]]:
        """The messages that stand for the body's turns (without the lead message)."""
        return self.messages[1:] if self.lead is not None else self.messages
