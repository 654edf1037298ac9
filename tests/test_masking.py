"""Nothing raw where masking is on: after a chat full of PII, no database file and no log line holds it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.admin_helpers import admin
from tests.conftest import Proxy
from tests.fake_upstream import FakeUpstream, is_compression

# What the user types, and the parts of it that must never be stored or logged.
EMAIL, PHONE, CARD = "ada.lovett@example.com", "+1 415 555 0199", "4111 1111 1111 1111"
CN_PHONE, CN_ID, CN_EMAIL = "13812345678", "110101199003074573", "wang.xiaoming@example.cn"
IBAN = "DE89 3704 0044 0532 0130 00"
RAW = [EMAIL, "ada.lovett", "415 555 0199", "4111 1111 1111", "4111111111111111",
       CN_PHONE, "138123", "110101199003", CN_EMAIL, "wang.xiaoming", "DE89 3704", "3704 0044 0532"]
# (Valid numbers: the card passes Luhn, the ID its checksum and the IBAN its mod-97 check,
# as the redactor requires.)

CHAT = [
    f"Hi, I'm Ada. My email is {EMAIL} and my phone is {PHONE}.",
    f"Please charge my card {CARD} for the order.",
    f"Refunds go to my account, IBAN {IBAN}.",
    f"我叫王小明，手机号是{CN_PHONE}，身份证号{CN_ID}。",
    f"我的邮箱是{CN_EMAIL}，有事发邮件给我。",
    "I'm allergic to peanuts, remember that.",
    "Thanks, that is all for now.",
]


def test_no_raw_pii_in_any_database_file_the_export_or_the_log(
    make_proxy: Callable[..., Proxy], tmp_path: Path, caplog: pytest.LogCaptureFixture, upstream: FakeUpstream
) -> None:
    caplog.set_level(logging.DEBUG)
    proxy = make_proxy(defaults={"memory": {"extract_every_messages": 2}})
    client = proxy.client()
    history: list[dict[str, Any]] = []
    for turn in CHAT:
        history.append({"role": "user", "content": turn})
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=history, user="ada")  # type: ignore[arg-type]
        history.append({"role": "assistant", "content": reply.choices[0].message.content or ""})
        proxy.drain()
    # A fresh chat whose question itself carries PII: its query and candidates go into the trace.
    question = f"Which email did I give you, {EMAIL} or {CN_EMAIL}? Call me on {CN_PHONE}."
    asked = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": question}], user="ada"
    )
    proxy.drain()
    with admin(proxy) as http:
        export = http.get("/paperclip/v1/users/ada/export")
        assert export.status_code == 200 and "peanut" in export.text
        trace = http.get(f"/paperclip/v1/traces/{asked.headers['x-paperclip-trace']}")
        assert trace.status_code == 200 and trace.json()["query"]
    stored = [p for p in tmp_path.iterdir() if p.name.endswith((".db", ".db-wal", ".db-shm"))]
    assert any(p.name.endswith(".db") for p in stored)
    to_the_model = [r.body.decode() for r in upstream.requests if is_compression(r)]
    assert to_the_model  # the extraction saw the chat
    for raw in RAW:
        assert not any(raw in body for body in to_the_model), raw
        assert raw not in export.text, raw
        assert raw not in trace.text, raw
        assert raw not in caplog.text, raw
        for path in stored:
            data = path.read_bytes()
            assert raw.encode() not in data, (raw, path.name)
            assert raw.encode("utf-16-le") not in data, (raw, path.name)
