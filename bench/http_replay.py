"""The memory eval in real time over HTTP: LoCoMo chats sent to ``paperclip serve`` as fast as they come.

    python bench/http_replay.py LOCOMO.json [--convs conv-26,conv-30] [--every-turn] [--together]
        [--embedder bundled] [--out FILE.json]

``paperclip eval locomo`` drives the serving pipeline in process and lets
each recorded question's work land before the next (as a user who reads the
reply does). This replays the same data the way a client meets the proxy: a
``paperclip serve`` child process on a real port, in front of a fake
upstream that is a real HTTP server (``tests/fake_upstream.py``: it answers
each replayed turn with the conversation's next one and each question with
the data's answer, and, as the compression model, with text that is not
JSON, so the rules extract). Each session is one chat of the user, sent at
its last user turn (``--every-turn``: at every user turn, as a chat client
sends it), every request right after the one before, no waiting for the
proxy's background work; then each question in a fresh chat, recorded as
the proxy records any request. One user after another, or (``--together``)
all at once, each from a thread of her own: a busy proxy. Scored as the eval scores sessions mode
(evidence presence over categories 1–4, in what the upstream received), per
conversation, so the figures sit beside ``--mode sessions --clock burst``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import yaml
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from proxy.eval.locomo import Conversation, load, normalise, select  # noqa: E402
from proxy.eval.replay import as_message  # noqa: E402
from proxy.eval.scoring import answer_presence, presence  # noqa: E402
from tests.fake_upstream import FakeUpstream, completion, is_compression  # noqa: E402
from tests.servers import ServeProcess, ServerThread  # noqa: E402

SCORED = (1, 2, 3, 4)
KEY, MODEL = "sk-replay", "gpt-4o-mini"


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


class Replies:
    """The fake upstream's replies: to a request whose latest message ends with a text, the reply set for it
    (the memory block goes before the user's words, so the words end the message)."""

    def __init__(self) -> None:
        self.by_end: dict[str, str] = {}

    async def chat(self, request: Request, body: dict[str, Any]) -> Response:
        last = text_of(body["messages"][-1])
        for end, reply in self.by_end.items():
            if last.endswith(end):
                return JSONResponse(completion(reply))
        return JSONResponse(completion("OK."))


def config(upstream: str, db: Path, embedder: str) -> dict[str, Any]:
    return {
        "storage": {"url": f"sqlite:///{db}"},
        "embedding": {"model": embedder},
        "defaults": {
            "upstream": {"base_url": upstream + "/v1", "api_key": "sk-up", "read_timeout_s": 120},
            "compression": {"model": "fake-compressor", "timeout_s": 60},
        },
        "tenants": {"replay": {"api_keys": [KEY]}},
    }


def replay(convs: list[Conversation], every_turn: bool, together: bool, embedder: str) -> dict[str, Any]:
    fake, replies = FakeUpstream(), Replies()
    fake.chat = replies.chat
    upstream = ServerThread(fake.app()).start()
    with tempfile.TemporaryDirectory(prefix="paperclip-http-replay-") as folder:
        tmp = Path(folder)
        (tmp / "proxy.yaml").write_text(yaml.safe_dump(config(upstream.url, tmp / "replay.db", embedder)))
        proc = ServeProcess(tmp / "proxy.yaml", tmp / "serve.log").start()
        try:
            proc.wait_ready(900)
            started = time.monotonic()
            with ThreadPoolExecutor(len(convs) if together else 1) as pool:
                done = list(pool.map(lambda conv: one_user(proc.url, fake, replies, conv, every_turn), convs))
            return {"seconds": round(time.monotonic() - started, 1), "conversations": dict(done)}
        finally:
            proc.stop()
            upstream.server.should_exit = True


def one_user(
    url: str, fake: FakeUpstream, replies: Replies, conv: Conversation, every_turn: bool
) -> tuple[str, dict[str, Any]]:
    """One user's chats, then her questions, each request right after the one before."""
    with httpx.Client(base_url=url + "/v1", headers={"authorization": f"Bearer {KEY}"}, timeout=300) as http:

        def send(messages: list[dict[str, Any]], reply: str | None) -> None:
            if reply:
                replies.by_end[text_of(messages[-1])] = reply
            r = http.post("/chat/completions", json={"model": MODEL, "messages": messages},
                          headers={"X-Paperclip-User": conv.id})
            r.raise_for_status()

        requests = 0
        for session in conv.sessions:
            messages = [as_message(t) for t in session.turns]
            ends = [i + 1 for i, t in enumerate(session.turns) if t.role == "user"]
            for end in ends if every_turn else ends[-1:]:
                after = session.turns[end] if end < len(session.turns) else None
                send(messages[:end], after.content if after and after.role == "assistant" else None)
                requests += 1
        turns = conv.turns()
        evidence, answers = [], []
        own: set[str] = set()  # the replay's own words, recorded: not the memory's finding
        for q in conv.questions:
            own.add(normalise(q.text))
            seen = len(fake.requests)
            send([{"role": "user", "content": q.text}], q.answer or None)
            bodies = [r.json() for r in fake.requests[seen:]
                      if r.path.endswith("/chat/completions") and not is_compression(r)]
            body = [b for b in bodies if text_of(b["messages"][-1]).endswith(q.text)][-1]
            forwarded = "\n".join(text_of(m) for m in body["messages"])
            if q.category in SCORED:
                evidence.append(presence([turns[d].content for d in q.evidence], forwarded))
                answers.append(answer_presence(q.answer, forwarded, own))
            own.add(normalise(q.answer))
    return conv.id, {
        "requests": requests,
        "questions": len(evidence),
        "evidence_presence": round(sum(evidence) / len(evidence), 3),
        "answer_presence": round(sum(answers) / len(answers), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path")
    parser.add_argument("--convs", default=None, help="sample_ids, comma-separated")
    parser.add_argument("--every-turn", action="store_true", help="send each session at every user turn")
    parser.add_argument("--together", action="store_true",
                        help="all the users at once, each from a thread of her own (a busy proxy)")
    parser.add_argument("--embedder", default="bundled")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    result = replay(select(load(args.path), args.convs), args.every_turn, args.together, args.embedder)
    print(json.dumps(result, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
