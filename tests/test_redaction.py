"""PII redaction: what is masked, what is never touched, and idempotence."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.memory.redaction import redact, redact_message

VISA = "4111 1111 1114 8865"  # Luhn-valid
VISA_BAD = "4111 1111 1111 8865"  # one digit off: fails Luhn, so it is not a card
CN_ID = "11010519491231002X"  # valid checksum


def cn_id_with_checksum(first17: str) -> str:
    weights = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
    total = sum(int(ch) * w for ch, w in zip(first17, weights, strict=True))
    return first17 + "10X98765432"[total % 11]


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        (f"Charge {VISA} please", "Charge [card ****8865] please"),
        ("card 4111-1111-1114-8865.", "card [card ****8865]."),
        ("card 4111111111148865", "card [card ****8865]"),
        ("amex 3782 822463 10005", "amex [card ****0005]"),
        ("call +1 415 555 0199", "call [phone ****0199]"),
        ("call +1 415 555 0199 in 2026", "call [phone ****0199] in 2026"),
        ("+44 20 7946 0958", "[phone ****0958]"),
        ("(415) 555-0199 or 415.555.0199", "[phone ****0199] or [phone ****0199]"),
        ("mail alice@example.com now", "mail [email a***@example.com] now"),
        ("SSN 123-45-6789", "SSN [id ****6789]"),
        ("passport number is X12345678", "passport number is [id ****5678]"),
        (f"ID {CN_ID}", "ID [id ****002X]"),
        ("IBAN DE89 3704 0044 0532 0130 00, thanks", "IBAN [iban ****3000], thanks"),
        ("pay to GB82WEST12345698765432.", "pay to [iban ****5432]."),
        ("FR14 2004 1010 0505 0001 3M02 606", "[iban ****2606]"),
        ("konto NO9386011117947", "konto [iban ****7947]"),
        ("我的账户DE89370400440532013000谢谢", "我的账户[iban ****3000]谢谢"),
    ],
)
def test_mask_keeps_the_last_four(text: str, masked: str) -> None:
    assert redact(text) == masked
    assert redact(text, "mask") == masked


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("我的手机号是13800138000，谢谢", "我的手机号是[phone ****8000]，谢谢"),
        ("电话 +86 138 0013 8000", "电话 [phone ****8000]"),
        ("电话+8613800138000", "电话[phone ****8000]"),
        ("号码138-0013-8000", "号码[phone ****8000]"),
        (f"身份证号{CN_ID}。", "身份证号[id ****002X]。"),
        ("邮箱是bob.li@mail.qq.com。", "邮箱是[email b***@mail.qq.com]。"),
        ("护照号E12345678", "护照号[id ****5678]"),
        (f"卡号{VISA}", "卡号[card ****8865]"),
    ],
)
def test_chinese_text(text: str, masked: str) -> None:
    assert redact(text) == masked


def test_generated_chinese_id_is_masked_and_a_wrong_checksum_is_not() -> None:
    valid = cn_id_with_checksum("44030419900307123")
    wrong = valid[:17] + ("0" if valid[17] != "0" else "1")
    assert redact(f"id {valid}") == f"id [id ****{valid[-4:]}]"
    assert redact(f"id {wrong}") == f"id {wrong}"


def test_a_card_number_failing_luhn_is_left_alone() -> None:
    assert redact(f"ref {VISA_BAD}") == f"ref {VISA_BAD}"
    assert redact("ref 1234567890123456") == "ref 1234567890123456"
    assert redact("ref 0000 0000 0000 0000") == "ref 0000 0000 0000 0000"


def test_drop_leaves_only_the_label() -> None:
    text = f"{VISA}, +1 415 555 0199, alice@example.com, {CN_ID}"
    assert redact(text, "drop") == "[card removed], [phone removed], [email removed], [id removed]"


def test_keep_changes_nothing() -> None:
    text = f"{VISA}, +1 415 555 0199, alice@example.com"
    assert redact(text, "keep") == text


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown PII mode"):
        redact("x", "hide")


@pytest.mark.parametrize(
    "text",
    [
        "In 2026 the total was $1,250 (or $1,250,000.00 with tax).",
        "Delivery on 2026-11-02 at 10:30, or 11/02/2026 at 9:45pm.",
        "Order #A12345 and order 887766 shipped; ticket 5521.",
        "订单号 12345，金额 ¥3,200，时间 2026年11月2日 14:00。",
        "Version 1.2.3, ISBN 978-3-16-148410-0, pi is 3.14159, zip 94105, call 911.",
        "The meeting is in room 101, extension 4321, PIN 1234.",
        "Timestamp 1700000000000 and tracking 1Z999AA10123456784.",
        "Not an IBAN: DE89 3704 0044 0532 0130 01 (its check digits fail), nor AB12 CDEF GHIJ.",
    ],
)
def test_ordinary_numbers_are_untouched(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize("mode", ["mask", "drop", "keep"])
def test_redaction_is_idempotent(mode: str) -> None:
    text = (
        f"Card {VISA}, phone +1 415 555 0199 / 13800138000, mail alice@example.com, "
        f"ID {CN_ID}, SSN 123-45-6789, passport X12345678, order #A12345 on 2026-11-02, "
        "IBAN DE89 3704 0044 0532 0130 00."
    )
    once = redact(text, mode)
    assert redact(once, mode) == once


def test_redact_message_copies_and_redacts_text_parts() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://x/4111111111148865.png"}}
    msg: dict[str, Any] = {
        "role": "user",
        "content": [{"type": "text", "text": f"card {VISA}"}, image],
        "name": "alice",
    }
    out = redact_message(msg)
    assert out["content"][0] == {"type": "text", "text": "card [card ****8865]"}
    assert out["content"][1] == image
    assert out["name"] == "alice"
    assert msg["content"][0]["text"] == f"card {VISA}"  # the input is untouched


def test_redact_message_string_content_and_no_content() -> None:
    msg = {"role": "user", "content": "mail alice@example.com"}
    assert redact_message(msg, "drop") == {"role": "user", "content": "mail [email removed]"}
    assert msg["content"] == "mail alice@example.com"
    tool_call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]}
    assert redact_message(tool_call) == tool_call


def test_digits_of_any_script_are_looked_at() -> None:
    # ``\d`` matches every script's decimal digits: text is passed over unread only when it has none (nor an "@").
    assert redact("call (４１５) ５５５-０１９９ today") == "call [phone ****０１９９] today"
    assert redact("Hello! How can I help?") == "Hello! How can I help?"


@pytest.mark.parametrize("mode", ["mask", "drop"])
def test_a_text_masked_again_is_masked_alike_short_or_long(mode: str) -> None:
    short = f"Charge {VISA} and mail alice@example.com"
    long = "word " * 1000 + short  # past what is kept: masked every time
    for text in (short, long):
        first = redact(text, mode)
        assert first != text and redact(text, mode) == first
        assert redact(text, "mask" if mode == "drop" else "drop") != first  # kept by mode too
