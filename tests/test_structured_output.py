"""Extraction asks for the memory schema as a json_schema response_format where the upstream takes it.

Against the fake upstream (a real HTTP server): one that takes
``response_format`` answers in the schema; one that refuses it (400) is asked
again without it, and is remembered as one that takes plain prompting.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from proxy.memory.memory_schema import CATEGORIES, REPLY_FIELD, MemoryItem, response_format
from tests.admin_helpers import admin
from tests.conftest import Proxy
from tests.fake_upstream import FakeUpstream, completion, error_json

STAIRS = {
    "type": "constraint", "category": "health", "standing": True, "about": "user",
    "content": "The user cannot climb stairs since a knee operation, so places need a lift or a ground floor.",
    "key": "user.mobility.stairs", "importance": 0.8, "confidence": 0.9, "source": "user-stated",
    "expires_at": None, "turns": [1],
}


class Extraction:
    """The compression model's side: records what each extraction call asked for and answers it."""

    def __init__(self, takes_schema: bool) -> None:
        self.takes_schema = takes_schema
        self.asked: list[dict[str, Any] | None] = []

    async def __call__(self, request: Request, body: dict[str, Any]) -> Response:
        prompt = str(body["messages"][-1]["content"])
        if "extracting long-term memories" not in prompt:
            return JSONResponse(completion("Summary: the user talked."))
        asked = body.get("response_format")
        self.asked.append(asked)
        if asked is not None and not self.takes_schema:
            return error_json(400, "Unknown parameter: 'response_format'.", "invalid_request_error")
        if asked is not None:
            return JSONResponse(completion(json.dumps({REPLY_FIELD: [STAIRS]})))
        # Plain prompting: a reply as loose as models give, still read into the schema.
        loose = {**STAIRS, "category": "Medical", "source": "user", "key": "User.Mobility.Stairs"}
        return JSONResponse(completion("Here you go:\n```json\n" + json.dumps([loose]) + "\n```"))


def _proxy(make_proxy: Callable[..., Proxy], upstream: FakeUpstream, model: Extraction, mode: str) -> Proxy:
    upstream.compression = model
    return make_proxy(defaults={"compression": {"structured_output": mode}, "memory": {"extract_every_messages": 1}})


def _say(proxy: Proxy, user: str, line: str) -> None:
    with proxy.client() as client:
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": line}],
            extra_headers={"X-Paperclip-User": user},
        )
    proxy.drain()


def _profile(proxy: Proxy, user: str) -> list[str]:
    with admin(proxy) as http:
        return [d["key"] for d in http.get(f"/paperclip/v1/users/{user}/profile").json()["data"]]


def test_the_schema_sent_is_the_declaration_strict_and_closed() -> None:
    sent = response_format()
    assert sent["type"] == "json_schema" and sent["json_schema"]["strict"] is True
    items = sent["json_schema"]["schema"]["properties"][REPLY_FIELD]["items"]
    assert set(items["properties"]) == set(MemoryItem.model_fields) == set(items["required"])
    assert items["additionalProperties"] is False
    assert items["properties"]["category"]["enum"] == list(CATEGORIES)
    assert items["properties"]["standing"]["type"] == "boolean"


def test_an_upstream_that_takes_the_schema_is_asked_for_it(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    model = Extraction(takes_schema=True)
    proxy = _proxy(make_proxy, upstream, model, "auto")
    _say(proxy, "ada", "Stairs are hard for me since my knee operation.")
    _say(proxy, "ada", "Where could we have dinner tonight?")
    assert model.asked and all(a == response_format() for a in model.asked)
    assert _profile(proxy, "ada") == ["user.mobility.stairs"]  # stands by its schema, whatever its key


def test_an_upstream_that_refuses_it_is_asked_plainly_and_remembered(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    model = Extraction(takes_schema=False)
    proxy = _proxy(make_proxy, upstream, model, "auto")
    _say(proxy, "bo", "Stairs are hard for me since my knee operation.")
    assert [a is not None for a in model.asked] == [True, False]  # refused, then the same call plainly
    _say(proxy, "bo", "Where could we have dinner tonight?")
    assert [a is not None for a in model.asked[2:]] == [False] * len(model.asked[2:]) != []
    # The loose plain reply (category "Medical", source "user", a key in capitals) is kept, normalised.
    assert _profile(proxy, "bo") == ["user.mobility.stairs"]


def test_off_never_asks_and_on_always_does(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    plain = Extraction(takes_schema=True)
    proxy = _proxy(make_proxy, upstream, plain, "off")
    _say(proxy, "cy", "Stairs are hard for me since my knee operation.")
    assert plain.asked and all(a is None for a in plain.asked)
    forced = Extraction(takes_schema=False)
    proxy = _proxy(make_proxy, upstream, forced, "on")
    _say(proxy, "di", "Stairs are hard for me since my knee operation.")
    _say(proxy, "di", "I'm allergic to shellfish.")
    # Refused each time and never retried plainly: the rules stand in for the unusable reply.
    assert len(forced.asked) >= 2 and all(a is not None for a in forced.asked)
    with admin(proxy) as http:
        keys = [m["key"] for m in http.get("/paperclip/v1/users/di/memories").json()["data"]]
    assert "user.allergy.shellfish" in keys
