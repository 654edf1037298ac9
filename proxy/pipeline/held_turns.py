"""Turns forwarded while the memory layer starts, held until it can record them (SPEC §9).

While the database and the embedding model load, requests are forwarded as
they came (``X-Paperclip-Degraded: starting``); their turns wait here and
are recorded once the layer is ready, in the order they came.

A client sends its whole conversation every time, so a session's newer turn
holds everything its older one said, the older answer included: a session
keeps only its latest turn here. A conversation the provider holds
(``previous_response_id``) resends nothing, so each of its turns is kept.

Bounded: at most ``HELD_TURNS`` turns and ``HELD_BYTES`` of bodies and
replies. Past that, a new turn is not held (``hold`` says so). What its user
said is still recorded with the session's next request after the start, since
that request carries it; only the last answer of a session that never comes
back is lost.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from .chat_call import ChatCall, Reply

HELD_TURNS = 1000
HELD_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class HeldTurn:
    call: ChatCall
    reply: Reply
    size: int  # bytes of the request body and the reply, counted against HELD_BYTES


class HeldTurns:
    def __init__(self, turns: int = HELD_TURNS, size: int = HELD_BYTES) -> None:
        self.turns = turns
        self.size = size
        self.held_bytes = 0
        self.full_logged = False  # whether the log said the queue is full, once per start
        self._held: OrderedDict[tuple[str, str], HeldTurn] = OrderedDict()

    def __len__(self) -> int:
        return len(self._held)

    def hold(self, call: ChatCall, reply: Reply, body_size: int) -> bool:
        """Keep the turn (replacing its session's older one); False when there is no room for it."""
        turn = HeldTurn(call, reply, body_size + len(reply.body))
        key = (call.tenant.id, call.session if call.provider_state is None else call.trace_id)
        older = self._held.get(key)
        room = self.held_bytes - (older.size if older is not None else 0) + turn.size <= self.size
        if not room or (older is None and len(self._held) >= self.turns):
            return False
        if older is not None:
            self.held_bytes -= older.size
            del self._held[key]
        self._held[key] = turn
        self.held_bytes += turn.size
        return True

    def release(self) -> list[HeldTurn]:
        """Every turn held, in the order they came (the latest of a session at its place); the queue empties."""
        out = list(self._held.values())
        self._held.clear()
        self.held_bytes = 0
        return out
